//! Usage reports (issue 28, decision 0027): the plan each report statement gets on both
//! databases, with a table of many tenants, and sums that saturate instead of failing.
//!
//! The plan of one tenant's report must search the rollup's primary key from `tenant_id`
//! (SQLite: `SEARCH usage_daily USING PRIMARY KEY (tenant_id=?`; PostgreSQL: the index
//! `usage_daily_pkey`), never scan the table nor read `run_usage`. The statement before this
//! issue (`(? = '' OR tenant_id = ?)` on `run_usage`) gave `SCAN run_usage` on SQLite.

// Test bodies are plain functions run by the harness, outside `#[test]`: unwrap is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use chrono::NaiveDate;
use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, SqliteConnection};
use gc_domain::policy::usage::{UsageGroup, UsageLine, UsageQuery, UsageRange};
use support::*;
use uuid::Uuid;

on_both_backends!(
    one_tenants_report_searches_its_index,
    sums_saturate_and_stay_in_their_tenant,
);

const OTHER_TENANTS: u32 = 150;
const DAYS: u32 = 100;

/// Runs `sql` on a connection of its own.
fn exec(db: &Db, sql: &str) {
    if db.store.backend() == "sqlite" {
        let path = db.url.strip_prefix("sqlite://").unwrap();
        let mut c = SqliteConnection::establish(path).unwrap();
        c.batch_execute("PRAGMA foreign_keys = ON").unwrap();
        c.batch_execute(sql).unwrap();
    } else {
        let mut c = PgConnection::establish(&db.url).unwrap();
        c.batch_execute(sql).unwrap();
    }
}

/// `OTHER_TENANTS` more tenants, and one rollup row per tenant (those and every tenant
/// already there) and day of `DAYS` from 2026-01-01; then the planner's statistics.
fn fill(db: &Db) {
    if db.store.backend() == "sqlite" {
        exec(
            db,
            &format!(
                "INSERT INTO tenants (id, name, status, region, ai_enabled, created_at) \
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {OTHER_TENANTS}) \
                 SELECT printf('00000000-0000-0000-0000-%012d', i), 'other', 'active', 'aihk', 1, 0 FROM n; \
                 INSERT INTO usage_daily (tenant_id, day, model, key_id, requests, errors, \
                   prompt_tokens, completion_tokens, total_tokens) \
                 WITH RECURSIVE d(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM d WHERE j < {last}) \
                 SELECT t.id, date('2026-01-01', '+' || j || ' days'), 'gpt', '', 3, 1, 10, 20, 30 \
                 FROM tenants t, d; \
                 ANALYZE;",
                last = DAYS - 1
            ),
        );
    } else {
        exec(
            db,
            &format!(
                "INSERT INTO tenants (id, name, status, region, ai_enabled, created_at) \
                 SELECT '00000000-0000-0000-0000-' || lpad(i::text, 12, '0'), 'other', 'active', \
                 'aihk', true, 0 FROM generate_series(1, {OTHER_TENANTS}) i; \
                 INSERT INTO usage_daily (tenant_id, day, model, key_id, requests, errors, \
                   prompt_tokens, completion_tokens, total_tokens) \
                 SELECT t.id, to_char(date '2026-01-01' + j, 'YYYY-MM-DD'), 'gpt', '', 3, 1, 10, 20, 30 \
                 FROM tenants t, generate_series(0, {last}) j; \
                 ANALYZE;",
                last = DAYS - 1
            ),
        );
    }
}

fn query(from: &str, to: &str, group: UsageGroup, before: Option<&str>) -> UsageQuery {
    let today = NaiveDate::from_ymd_opt(2026, 6, 1).unwrap();
    let range = UsageRange::parse(Some(from), Some(to), today).unwrap();
    UsageQuery::new(range, group, Some(50), before.map(str::to_owned)).unwrap()
}

fn assert_searches_index(db: &Db, tenant: Uuid, q: &UsageQuery) {
    let plan = db.store.usage_report_plan(Some(tenant), q).unwrap();
    let text = plan.join("\n");
    assert!(
        !text.contains("run_usage"),
        "{q:?}: reads run_usage:\n{text}"
    );
    if db.store.backend() == "sqlite" {
        assert!(
            plan.iter()
                .any(|l| l.contains("SEARCH usage_daily USING PRIMARY KEY (tenant_id=?")),
            "{q:?}: no search of the primary key by tenant:\n{text}"
        );
        assert!(
            !plan.iter().any(|l| l.starts_with("SCAN")),
            "{q:?}: scans a table:\n{text}"
        );
    } else {
        assert!(
            text.contains("usage_daily_pkey"),
            "{q:?}: the primary key is not used:\n{text}"
        );
        assert!(
            !text.contains("Seq Scan"),
            "{q:?}: scans the table:\n{text}"
        );
    }
}

fn one_tenants_report_searches_its_index(db: &Db) {
    let t = tenant(&db.store, "reported");
    fill(db);
    for group in [UsageGroup::Day, UsageGroup::Model, UsageGroup::Key] {
        for before in [None, Some("2026-03-01")] {
            assert_searches_index(db, t.id, &query("2026-01-01", "2026-04-10", group, before));
        }
    }
    // An admin's report of one tenant.
    for before in [None, Some("ffffffff")] {
        assert_searches_index(
            db,
            t.id,
            &query("2026-01-01", "2026-04-10", UsageGroup::Tenant, before),
        );
    }
    // Every tenant's (admins): the rollup, never the run lines.
    let all = db
        .store
        .usage_report_plan(
            None,
            &query("2026-01-01", "2026-04-10", UsageGroup::Tenant, None),
        )
        .unwrap()
        .join("\n");
    assert!(
        all.contains("usage_daily") && !all.contains("run_usage"),
        "{all}"
    );

    // And the answers: 100 days of 3 requests, newest first.
    use gc_domain::ports::UsageRepo;
    let page = db
        .store
        .all_usage(
            db.admin(),
            Some(t.id),
            &query("2026-01-01", "2026-04-10", UsageGroup::Tenant, None),
        )
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].requests, 3 * u64::from(DAYS));
    assert_eq!(page.items[0].total_tokens, 30 * u64::from(DAYS));
}

fn sums_saturate_and_stay_in_their_tenant(db: &Db) {
    use gc_domain::ports::UsageRepo;
    let m = member(&db.store, "sat@gc.test");
    let other = tenant(&db.store, "other");
    let max = i64::MAX;
    // Two models on one day at the largest stored count each, a third row of the same day
    // with small counts, and another tenant's row on that day.
    exec(
        db,
        &format!(
            "INSERT INTO usage_daily (tenant_id, day, model, key_id, requests, errors, \
               prompt_tokens, completion_tokens, total_tokens) VALUES \
             ('{t}', '2026-02-03', 'a', '', 1, 0, {max}, {max}, {max}), \
             ('{t}', '2026-02-03', 'b', '', 1, 1, {max}, 5, {max}), \
             ('{t}', '2026-02-04', 'b', '', 2, 0, 7, 8, 15), \
             ('{o}', '2026-02-03', 'a', '', 9, 9, 9, 9, 9);",
            t = m.tenant.id,
            o = other.id
        ),
    );
    // February's lines of the member's tenant, grouped by `group`: every count of each.
    let february = |group| {
        let usage = db
            .store
            .tenant_usage(&m.read, &query("2026-02-01", "2026-02-28", group, None))
            .unwrap();
        let line = |l: &UsageLine| {
            let counts = (
                l.errors,
                l.prompt_tokens,
                l.completion_tokens,
                l.total_tokens,
            );
            (l.group.clone(), l.requests, counts)
        };
        usage.items.iter().map(line).collect::<Vec<_>>()
    };
    let top = i64::MAX.unsigned_abs();
    assert_eq!(
        february(UsageGroup::Day),
        vec![
            ("2026-02-04".to_owned(), 2, (0, 7, 8, 15)),
            ("2026-02-03".to_owned(), 2, (1, top, top, top)),
        ]
    );
    // Grouped by model: b sums a saturated value and a small one.
    assert_eq!(
        february(UsageGroup::Model),
        vec![
            ("b".to_owned(), 3, (1, top, 13, top)),
            ("a".to_owned(), 1, (0, top, top, top)),
        ]
    );
    // Every tenant's (admins), grouped by tenant: each sum stays apart and saturates.
    let all = db
        .store
        .all_usage(
            db.admin(),
            None,
            &query("2026-02-01", "2026-02-28", UsageGroup::Tenant, None),
        )
        .unwrap();
    let mut all: Vec<_> = all
        .items
        .iter()
        .map(|l| (l.group.clone(), l.requests, l.total_tokens))
        .collect();
    all.sort();
    let mut want = vec![
        (m.tenant.id.to_string(), 4, top),
        (other.id.to_string(), 9, 9),
    ];
    want.sort();
    assert_eq!(all, want);
}
