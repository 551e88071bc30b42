DROP TRIGGER records_version ON records;
DROP FUNCTION records_version_bump();
DROP TABLE record_versions;
