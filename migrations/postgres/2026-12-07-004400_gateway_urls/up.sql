-- Key status follows configuration (postgres), decision 0044. gateway_urls keeps, per region, a
-- fingerprint (SHA-256, hex) of the gateway URL its AI keys were last judged against; the URL
-- itself is not stored (it may carry credentials). At start-up a region whose URL differs has
-- the checked_at of each of its keys cleared in the same transaction, and every key without a
-- checked_at is probed again in the background. admin_token_uses gains an index on `at` for its
-- retention (rows older than 90 days are pruned). The SQLite migration of the same name has the
-- same table and meaning.

CREATE TABLE gateway_urls (
    region      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    fingerprint TEXT   NOT NULL,
    changed_at  BIGINT NOT NULL
);

CREATE INDEX admin_token_uses_at ON admin_token_uses (at);
