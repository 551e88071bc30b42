-- AI-key versions (postgres): a counter on each tenant that every insert, change or delete of
-- one of its AI keys raises, in the same transaction, by trigger, so no write path can forget
-- it. It is read with the tenant on every request (authentication reads the tenant's row), and
-- a node may answer a run's key lookup from memory while the counter is the one it read the
-- keys under (decision 0022). Only this trigger writes it; it only grows. The other backend's
-- migration of the same name has the same column and meaning.

ALTER TABLE tenants ADD COLUMN ai_keys_version BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION tenant_ai_keys_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE tenants SET ai_keys_version = ai_keys_version + 1 WHERE id = OLD.tenant_id;
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.tenant_id <> OLD.tenant_id) THEN
        UPDATE tenants SET ai_keys_version = ai_keys_version + 1 WHERE id = NEW.tenant_id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER tenant_ai_keys_version AFTER INSERT OR UPDATE OR DELETE ON tenant_ai_keys
    FOR EACH ROW EXECUTE FUNCTION tenant_ai_keys_version_bump();
