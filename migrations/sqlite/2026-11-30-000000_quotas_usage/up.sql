-- Quotas and usage (sqlite). Limits are nullable integers (null: no limit). quota_windows holds
-- the shared per-minute and monthly counters every node increments; run_usage holds one line
-- per finished run for the usage reports. The other backend's migration of the same name has
-- the same tables and meaning.

ALTER TABLE tenants ADD COLUMN requests_per_minute BIGINT;
ALTER TABLE tenants ADD COLUMN tokens_per_minute BIGINT;
ALTER TABLE tenants ADD COLUMN monthly_tokens BIGINT;
ALTER TABLE api_keys ADD COLUMN requests_per_minute BIGINT;
ALTER TABLE api_keys ADD COLUMN tokens_per_minute BIGINT;

CREATE TABLE quota_windows (
    -- `t:<tenant id>` and `k:<key id>` per minute, `m:<tenant id>` per month.
    subject      TEXT   NOT NULL,
    -- Unix milliseconds of the window's start (a UTC minute or month).
    window_start BIGINT NOT NULL,
    requests     BIGINT NOT NULL,
    tokens       BIGINT NOT NULL,
    PRIMARY KEY (subject, window_start)
);

CREATE TABLE run_usage (
    id                TEXT    NOT NULL PRIMARY KEY,
    tenant_id         TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The workspace key the run was made with; empty for a session.
    key_id            TEXT    NOT NULL,
    at                BIGINT  NOT NULL,
    -- The UTC day, YYYY-MM-DD.
    day               TEXT    NOT NULL,
    model             TEXT    NOT NULL,
    failed            BOOLEAN NOT NULL,
    prompt_tokens     BIGINT  NOT NULL,
    completion_tokens BIGINT  NOT NULL,
    total_tokens      BIGINT  NOT NULL
);
CREATE INDEX run_usage_tenant_day ON run_usage (tenant_id, day);
CREATE INDEX run_usage_day ON run_usage (day);
