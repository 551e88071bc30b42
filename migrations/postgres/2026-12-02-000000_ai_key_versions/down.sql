DROP TRIGGER tenant_ai_keys_version ON tenant_ai_keys;
DROP FUNCTION tenant_ai_keys_version_bump();
ALTER TABLE tenants DROP COLUMN ai_keys_version;
