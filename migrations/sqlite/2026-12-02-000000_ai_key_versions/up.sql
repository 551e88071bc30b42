-- AI-key versions (sqlite): a counter on each tenant that every insert, change or delete of one
-- of its AI keys raises, in the same transaction, by trigger, so no write path can forget it.
-- It is read with the tenant on every request (authentication reads the tenant's row), and a
-- node may answer a run's key lookup from memory while the counter is the one it read the keys
-- under (decision 0022). Only these triggers write it; it only grows. The other backend's
-- migration of the same name has the same column and meaning.

ALTER TABLE tenants ADD COLUMN ai_keys_version BIGINT NOT NULL DEFAULT 0;

CREATE TRIGGER tenant_ai_keys_version_insert AFTER INSERT ON tenant_ai_keys
BEGIN
    UPDATE tenants SET ai_keys_version = ai_keys_version + 1 WHERE id = NEW.tenant_id;
END;

CREATE TRIGGER tenant_ai_keys_version_update AFTER UPDATE ON tenant_ai_keys
BEGIN
    UPDATE tenants SET ai_keys_version = ai_keys_version + 1
        WHERE id = NEW.tenant_id OR id = OLD.tenant_id;
END;

CREATE TRIGGER tenant_ai_keys_version_delete AFTER DELETE ON tenant_ai_keys
BEGIN
    UPDATE tenants SET ai_keys_version = ai_keys_version + 1 WHERE id = OLD.tenant_id;
END;
