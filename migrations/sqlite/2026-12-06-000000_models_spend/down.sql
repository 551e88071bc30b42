ALTER TABLE usage_daily DROP COLUMN cost;
ALTER TABLE run_usage DROP COLUMN cost;
ALTER TABLE api_keys DROP COLUMN monthly_spend;
ALTER TABLE tenants DROP COLUMN monthly_spend;
ALTER TABLE tenants DROP COLUMN allowed_models;
