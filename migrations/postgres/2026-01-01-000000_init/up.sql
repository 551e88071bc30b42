-- The initial schema (PostgreSQL). Portable column types: TEXT ids (UUID v7, lower-case and
-- hyphenated, so ORDER BY id DESC is newest first), BIGINT unix-millisecond timestamps, JSON as
-- TEXT, BOOLEAN. The SQLite migration of the same name has the same tables and meaning.
-- Identifier columns use the "C" collation so that ORDER BY id is bytewise (time order) whatever
-- the database locale.

CREATE TABLE tenants (
    id          TEXT COLLATE "C"   NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    region      TEXT    NOT NULL,
    ai_enabled  BOOLEAN NOT NULL,
    created_at  BIGINT  NOT NULL
);

CREATE TABLE users (
    id            TEXT COLLATE "C"  NOT NULL PRIMARY KEY,
    -- Stored lower-case: emails are case-insensitive and unique.
    email         TEXT   NOT NULL UNIQUE,
    name          TEXT   NOT NULL,
    role          TEXT   NOT NULL,
    status        TEXT   NOT NULL,
    tenant_id     TEXT COLLATE "C"  REFERENCES tenants (id),
    password_hash TEXT   NOT NULL,
    created_at    BIGINT NOT NULL
);
CREATE INDEX users_tenant_id_id ON users (tenant_id, id);
CREATE INDEX users_role ON users (role);

CREATE TABLE sessions (
    id               TEXT COLLATE "C"  NOT NULL PRIMARY KEY,
    user_id          TEXT COLLATE "C"  NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- SHA-256 of the session token; the token itself is never stored.
    token_hash       TEXT   NOT NULL UNIQUE,
    created_at       BIGINT NOT NULL,
    last_seen_at     BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    user_agent       TEXT   NOT NULL,
    ip               TEXT   NOT NULL,
    shadow_tenant_id TEXT COLLATE "C"  REFERENCES tenants (id),
    shadow_since     BIGINT
);
CREATE INDEX sessions_user_id ON sessions (user_id);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE INDEX sessions_last_seen_at ON sessions (last_seen_at);
CREATE INDEX sessions_shadow_tenant_id ON sessions (shadow_tenant_id);

CREATE TABLE signin_failures (
    id    TEXT COLLATE "C"  NOT NULL PRIMARY KEY,
    email TEXT   NOT NULL,
    at    BIGINT NOT NULL
);
CREATE INDEX signin_failures_email_at ON signin_failures (email, at);

CREATE TABLE records (
    id         TEXT COLLATE "C"  NOT NULL PRIMARY KEY,
    tenant_id  TEXT COLLATE "C"  NOT NULL REFERENCES tenants (id),
    kind       TEXT   NOT NULL,
    parent_id  TEXT COLLATE "C"  REFERENCES records (id) ON DELETE CASCADE,
    version    BIGINT NOT NULL,
    fields     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    created_by TEXT   NOT NULL
);
CREATE INDEX records_tenant_kind_parent_id ON records (tenant_id, kind, parent_id, id);
CREATE INDEX records_parent_id ON records (parent_id);

CREATE TABLE settings (
    tenant_id  TEXT COLLATE "C"  NOT NULL PRIMARY KEY REFERENCES tenants (id),
    fields     TEXT   NOT NULL,
    version    BIGINT NOT NULL,
    updated_at BIGINT
);

CREATE TABLE activity (
    id          TEXT COLLATE "C"  NOT NULL PRIMARY KEY,
    tenant_id   TEXT COLLATE "C"  NOT NULL REFERENCES tenants (id),
    at          BIGINT NOT NULL,
    actor_kind  TEXT   NOT NULL,
    actor_id    TEXT COLLATE "C"  NOT NULL,
    actor_label TEXT   NOT NULL,
    action      TEXT   NOT NULL,
    target_kind TEXT,
    target_id   TEXT,
    detail      TEXT   NOT NULL
);
CREATE INDEX activity_tenant_id_id ON activity (tenant_id, id);

CREATE TABLE api_keys (
    id           TEXT COLLATE "C"  NOT NULL PRIMARY KEY,
    tenant_id    TEXT COLLATE "C"  NOT NULL REFERENCES tenants (id),
    user_id      TEXT COLLATE "C"  NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         TEXT   NOT NULL,
    -- Space-separated scope names, e.g. `workspace:read run`.
    scopes       TEXT   NOT NULL,
    hint         TEXT   NOT NULL,
    -- SHA-256 of the key; the key itself is never stored.
    key_hash     TEXT   NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    expires_at   BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX api_keys_tenant_id_id ON api_keys (tenant_id, id);
CREATE INDEX api_keys_user_id ON api_keys (user_id);

CREATE TABLE tenant_ai_keys (
    id            TEXT COLLATE "C"   NOT NULL PRIMARY KEY,
    tenant_id     TEXT COLLATE "C"   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    region        TEXT    NOT NULL,
    label         TEXT    NOT NULL,
    hint          TEXT    NOT NULL,
    -- AES-256-GCM sealed upstream key; never logged, never returned.
    sealed_secret TEXT    NOT NULL,
    chat_enabled  BOOLEAN NOT NULL,
    status        TEXT    NOT NULL,
    status_reason TEXT,
    checked_at    BIGINT,
    created_at    BIGINT  NOT NULL
);
CREATE INDEX tenant_ai_keys_tenant_region ON tenant_ai_keys (tenant_id, region, id);
