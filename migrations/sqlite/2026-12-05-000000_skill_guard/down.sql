ALTER TABLE records DROP COLUMN guard_rules_version;
ALTER TABLE records DROP COLUMN guard;
