-- Admin API tokens (SQLite), decision 0036. A platform admin's named token for scripts: only a
-- SHA-256 of the token is stored; deleting the admin deletes their tokens. Every use is one
-- line in admin_token_uses (who, which token, which route), kept when the token is revoked.
-- The PostgreSQL migration of the same name has the same tables and meaning.

CREATE TABLE admin_tokens (
    id           TEXT   NOT NULL PRIMARY KEY,
    user_id      TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         TEXT   NOT NULL,
    -- `admin` or `admin:read`.
    scope        TEXT   NOT NULL,
    -- SHA-256 of the token; the token itself is never stored.
    token_hash   TEXT   NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT,
    last_used_at BIGINT
);
CREATE INDEX admin_tokens_user_id_id ON admin_tokens (user_id, id);

CREATE TABLE admin_token_uses (
    id         TEXT   NOT NULL PRIMARY KEY,
    at         BIGINT NOT NULL,
    admin_id   TEXT   NOT NULL,
    token_id   TEXT   NOT NULL,
    token_name TEXT   NOT NULL,
    -- `GET /api/v1/admin/tenants`: the method and the route's path (no query string).
    route      TEXT   NOT NULL
);
CREATE INDEX admin_token_uses_token_id_at ON admin_token_uses (token_id, at);
CREATE INDEX admin_token_uses_admin_id_at ON admin_token_uses (admin_id, at);
