DROP TRIGGER records_version_delete;
DROP TRIGGER records_version_update;
DROP TRIGGER records_version_insert;
DROP TABLE record_versions;
