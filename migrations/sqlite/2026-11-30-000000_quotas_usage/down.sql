DROP TABLE run_usage;
DROP TABLE quota_windows;
ALTER TABLE api_keys DROP COLUMN tokens_per_minute;
ALTER TABLE api_keys DROP COLUMN requests_per_minute;
ALTER TABLE tenants DROP COLUMN monthly_tokens;
ALTER TABLE tenants DROP COLUMN tokens_per_minute;
ALTER TABLE tenants DROP COLUMN requests_per_minute;
