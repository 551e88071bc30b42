-- Usage reports (postgres), decision 0027. usage_daily sums run_usage per tenant, day, model
-- and key; the run writer adds each batch to it in the transaction that stores the batch's
-- lines (rows upserted in the order tenant_id, day, model, key_id, so concurrent writers on
-- several nodes lock them in one order), and the reports read only this table, along its
-- primary key: a report of one tenant reads at most (days x models x keys) rows, however many
-- runs they stand for. Sums saturate at 2^63 - 1 (a stored token count is already clamped
-- there). The other backend's migration of the same name has the same table and meaning.

CREATE TABLE usage_daily (
    tenant_id         TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The UTC day, YYYY-MM-DD.
    day               TEXT COLLATE "C" NOT NULL,
    model             TEXT COLLATE "C" NOT NULL,
    -- The workspace key; empty for runs made with a session.
    key_id            TEXT COLLATE "C" NOT NULL,
    requests          BIGINT NOT NULL,
    errors            BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    total_tokens      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, day, model, key_id)
);

-- The lines stored so far. SUM(bigint) is NUMERIC here: it cannot overflow, LEAST saturates it
-- before the cast.
INSERT INTO usage_daily (tenant_id, day, model, key_id, requests, errors, prompt_tokens,
                         completion_tokens, total_tokens)
SELECT tenant_id, day, model, key_id, COUNT(*), SUM(CASE WHEN failed THEN 1 ELSE 0 END),
    CAST(LEAST(SUM(prompt_tokens), 9223372036854775807) AS BIGINT),
    CAST(LEAST(SUM(completion_tokens), 9223372036854775807) AS BIGINT),
    CAST(LEAST(SUM(total_tokens), 9223372036854775807) AS BIGINT)
FROM run_usage
GROUP BY tenant_id, day, model, key_id;
