-- Usage reports (sqlite), decision 0027. usage_daily sums run_usage per tenant, day, model and
-- key; the run writer adds each batch to it in the transaction that stores the batch's lines,
-- and the reports read only this table, along its primary key: a report of one tenant reads
-- at most (days x models x keys) rows, however many runs they stand for. Sums saturate at
-- 2^63 - 1 (a stored token count is already clamped there). The other backend's migration of
-- the same name has the same table and meaning.

CREATE TABLE usage_daily (
    tenant_id         TEXT   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The UTC day, YYYY-MM-DD.
    day               TEXT   NOT NULL,
    model             TEXT   NOT NULL,
    -- The workspace key; empty for runs made with a session.
    key_id            TEXT   NOT NULL,
    requests          BIGINT NOT NULL,
    errors            BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    total_tokens      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, day, model, key_id)
) WITHOUT ROWID;

-- The lines stored so far. Each sum is taken in two halves (the high and the low 32 bits of
-- every value), which cannot overflow, and saturates when the whole would.
INSERT INTO usage_daily (tenant_id, day, model, key_id, requests, errors, prompt_tokens,
                         completion_tokens, total_tokens)
SELECT tenant_id, day, model, key_id, COUNT(*), SUM(CASE WHEN failed THEN 1 ELSE 0 END),
    CASE WHEN SUM(prompt_tokens / 4294967296) + SUM(prompt_tokens % 4294967296) / 4294967296 >= 2147483648
         THEN 9223372036854775807
         ELSE SUM(prompt_tokens / 4294967296) * 4294967296 + SUM(prompt_tokens % 4294967296) END,
    CASE WHEN SUM(completion_tokens / 4294967296) + SUM(completion_tokens % 4294967296) / 4294967296 >= 2147483648
         THEN 9223372036854775807
         ELSE SUM(completion_tokens / 4294967296) * 4294967296 + SUM(completion_tokens % 4294967296) END,
    CASE WHEN SUM(total_tokens / 4294967296) + SUM(total_tokens % 4294967296) / 4294967296 >= 2147483648
         THEN 9223372036854775807
         ELSE SUM(total_tokens / 4294967296) * 4294967296 + SUM(total_tokens % 4294967296) END
FROM run_usage
GROUP BY tenant_id, day, model, key_id;
