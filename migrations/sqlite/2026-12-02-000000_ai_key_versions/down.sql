DROP TRIGGER tenant_ai_keys_version_delete;
DROP TRIGGER tenant_ai_keys_version_update;
DROP TRIGGER tenant_ai_keys_version_insert;
ALTER TABLE tenants DROP COLUMN ai_keys_version;
