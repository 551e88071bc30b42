-- Record versions (sqlite): one counter per tenant that every insert, change or delete of one
-- of its records raises, in the same transaction, by trigger, so no write path can forget it.
-- A node may keep a list's answer and serve it again while the counter it read with it is
-- still the counter in the database (decision 0019). No foreign key: a counter outlives
-- nothing it could point at, and a tenant's counter must only ever grow. The other backend's
-- migration of the same name has the same table and meaning.

CREATE TABLE record_versions (
    tenant_id TEXT   NOT NULL PRIMARY KEY,
    version   BIGINT NOT NULL
);

-- Tenants that already have records start at 1.
INSERT INTO record_versions (tenant_id, version) SELECT DISTINCT tenant_id, 1 FROM records;

CREATE TRIGGER records_version_insert AFTER INSERT ON records
BEGIN
    INSERT INTO record_versions (tenant_id, version) VALUES (NEW.tenant_id, 1)
        ON CONFLICT (tenant_id) DO UPDATE SET version = version + 1;
END;

CREATE TRIGGER records_version_update AFTER UPDATE ON records
BEGIN
    INSERT INTO record_versions (tenant_id, version) VALUES (NEW.tenant_id, 1)
        ON CONFLICT (tenant_id) DO UPDATE SET version = version + 1;
    INSERT INTO record_versions (tenant_id, version) VALUES (OLD.tenant_id, 1)
        ON CONFLICT (tenant_id) DO UPDATE SET version = version + 1;
END;

CREATE TRIGGER records_version_delete AFTER DELETE ON records
BEGIN
    INSERT INTO record_versions (tenant_id, version) VALUES (OLD.tenant_id, 1)
        ON CONFLICT (tenant_id) DO UPDATE SET version = version + 1;
END;
