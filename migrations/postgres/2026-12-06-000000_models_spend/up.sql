-- Model allow-lists and spend in money (postgres), decision 0038. A tenant's allowed_models is a
-- JSON array of model names (null: the region's list). Money is an integer count of
-- nano-units (10^-9 of the deployment's one currency): monthly_spend limits (null: none), and
-- each run's cost in run_usage and its daily sums in usage_daily (runs stored before this
-- migration cost 0). Spend is counted in quota_windows under the subjects ms:<tenant> and
-- mk:<key>, in the tokens column, per UTC month. The other backend's migration of the same
-- name has the same columns and meaning.

ALTER TABLE tenants ADD COLUMN allowed_models TEXT;
ALTER TABLE tenants ADD COLUMN monthly_spend BIGINT;
ALTER TABLE api_keys ADD COLUMN monthly_spend BIGINT;
ALTER TABLE run_usage ADD COLUMN cost BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN cost BIGINT NOT NULL DEFAULT 0;
