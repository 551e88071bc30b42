-- Skill verdicts (postgres, issue 29): a skill record carries the Guard's result on its content,
-- written with the record in the same statement. `guard` is the stored JSON object
-- {verdict, findings, findings_omitted, rules_version, scanned_at} (`stale` is computed when
-- it is shown); `guard_rules_version` is the rules version it was made under (NULL when the
-- skill could not be scanned), apart so that showing `stale` needs no parsing. NULL `guard`:
-- stored before skill verdicts, or not a skill; such a skill is shown as not scanned (verdict
-- warn, stale). Writing either column is an UPDATE of `records`, so the record-version
-- trigger of 2026-12-01 raises the tenant's version and kept lists are not served again.

ALTER TABLE records ADD COLUMN guard TEXT;
ALTER TABLE records ADD COLUMN guard_rules_version TEXT;
