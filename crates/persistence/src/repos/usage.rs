//! Usage reports: run lines summed per day, model, key or tenant (decision 0027).
//!
//! The reports never read `run_usage` (one row per run, unbounded): they read `usage_daily`,
//! one row per tenant, day, model and key, which the run writer keeps with [`add_daily`] in
//! the transaction that stores a batch's lines. A report of one tenant is one range of the
//! primary key `(tenant_id, day, model, key_id)`: at most days × models × keys rows, however
//! many runs they count. Each shape (one tenant or every tenant, first page or later) is its
//! own statement, so the planner never has to choose a plan that serves both (an
//! `(? = '' OR tenant_id = ?)` condition kept SQLite off the index, issue 28); the plans are
//! checked by `tests/usage_plans.rs`.
//!
//! Every count saturates at `i64::MAX` instead of failing: the rollup's upsert adds with a
//! `CASE`, the reports sum in NUMERIC on PostgreSQL (`LEAST` before the cast) and in two
//! 32-bit halves on SQLite, whose `SUM` raises "integer overflow".

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment, QueryId, SqlQuery};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, Text};
use gc_domain::policy::access::{AdminScope, TenantScope};
use gc_domain::policy::runs::RunLine;
use gc_domain::policy::usage::{UsageGroup, UsageLine, UsagePage, UsageQuery};
use gc_domain::{DomainError, DomainResult};
use uuid::Uuid;

use super::count;
use crate::error::db_error;
use crate::fixed::FixedBackend;
use crate::rows::text;
use crate::store::{on_backend, DbConnection, DbStore};

/// `n` as a stored count: values past `i64::MAX` are stored as `i64::MAX`.
fn stored(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The rollup key of a run line, in the order rows are upserted.
type DailyKey = (String, String, String, String);

/// Adds `n` to one `usage_daily` row (created at `n`), every count saturating at `i64::MAX`.
/// A fixed text, so each connection prepares it once (see `fixed.rs`).
#[derive(Debug)]
struct DailyAdd {
    tenant_id: String,
    day: String,
    model: String,
    key_id: String,
    counts: [i64; 6],
}

/// The count columns of `usage_daily`, in the order `DailyAdd::counts` holds them and the
/// reports sum them.
const DAILY_COUNTS: [&str; 6] = [
    "requests",
    "errors",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cost",
];

impl QueryId for DailyAdd {
    type QueryId = Self;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<DB> QueryFragment<DB> for DailyAdd
where
    DB: FixedBackend,
    String: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO usage_daily (tenant_id, day, model, key_id, requests, errors, \
             prompt_tokens, completion_tokens, total_tokens, cost) VALUES (",
        );
        for (i, key) in [&self.tenant_id, &self.day, &self.model, &self.key_id]
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                out.push_sql(", ");
            }
            out.push_bind_param::<Text, _>(key)?;
        }
        for n in &self.counts {
            out.push_sql(", ");
            out.push_bind_param::<BigInt, _>(n)?;
        }
        out.push_sql(") ON CONFLICT (tenant_id, day, model, key_id) DO UPDATE SET ");
        for (i, c) in DAILY_COUNTS.iter().enumerate() {
            if i > 0 {
                out.push_sql(", ");
            }
            // `a + b` overflows (an error on PostgreSQL, a REAL on SQLite) exactly when
            // `a > MAX - b`; both are never negative.
            out.push_sql(&format!(
                "{c} = CASE WHEN usage_daily.{c} > 9223372036854775807 - excluded.{c} \
                 THEN 9223372036854775807 ELSE usage_daily.{c} + excluded.{c} END"
            ));
        }
        Ok(())
    }
}

impl<Conn> RunQueryDsl<Conn> for DailyAdd {}

/// Adds a batch of run lines to the daily rollup (`usage_daily`), on the connection of the
/// writer's transaction. The batch is summed per row first (saturating), then upserted one
/// row at a time in ascending `(tenant_id, day, model, key_id)` order: two writers (two
/// nodes on one PostgreSQL) that touch the same rows lock them in the same order, so they
/// queue instead of deadlocking. Called once per batch by `record_runs`, right after the
/// batch's `run_usage` lines and before its quota windows (so every writer takes rollup rows,
/// then window rows, each in sorted order); the model is cut to 200 characters as there.
/// `error` maps a failed statement as the writer's other statements are mapped (its lock
/// conflicts are retried with the whole transaction).
pub(crate) fn add_daily(
    conn: &mut DbConnection,
    runs: &[RunLine],
    error: impl Fn(diesel::result::Error) -> DomainError,
) -> DomainResult<()> {
    let mut sums: BTreeMap<DailyKey, [u64; 6]> = BTreeMap::new();
    for r in runs {
        let u = r.usage();
        let key = (
            text(r.tenant_id()),
            r.day(),
            r.model().chars().take(200).collect(),
            r.key_id().map(text).unwrap_or_default(),
        );
        let sum = sums.entry(key).or_default();
        let add = [
            1,
            u64::from(r.failed()),
            u.prompt_tokens,
            u.completion_tokens,
            u.total_tokens,
            r.cost(),
        ];
        for (s, n) in sum.iter_mut().zip(add) {
            *s = s.saturating_add(n);
        }
    }
    for ((tenant_id, day, model, key_id), sum) in sums {
        let add = DailyAdd {
            tenant_id,
            day,
            model,
            key_id,
            counts: sum.map(stored),
        };
        on_backend!(conn, |c| add.execute(c)).map_err(&error)?;
    }
    Ok(())
}

#[derive(QueryableByName)]
struct UsageRow {
    #[diesel(sql_type = Text)]
    grp: String,
    #[diesel(sql_type = BigInt)]
    requests: i64,
    #[diesel(sql_type = BigInt)]
    errors: i64,
    #[diesel(sql_type = BigInt)]
    prompt: i64,
    #[diesel(sql_type = BigInt)]
    completion: i64,
    #[diesel(sql_type = BigInt)]
    total: i64,
    #[diesel(sql_type = BigInt)]
    cost: i64,
}

/// `SUM(column)` saturating at `i64::MAX`, as a BIGINT. PostgreSQL sums BIGINT in NUMERIC
/// (no overflow) and `LEAST` caps it before the cast. SQLite's `SUM` fails on overflow and
/// `TOTAL` is a REAL (inexact past 2^53), so the high and low 32 bits of the (never negative)
/// values are summed apart — neither sum can overflow before 2^32 rows — and the whole is
/// rebuilt only when it fits: `hi * 2^32 + lo >= 2^63` exactly when `hi + lo / 2^32 >= 2^31`.
fn saturating_sum(column: &str, pg: bool) -> String {
    if pg {
        format!("CAST(LEAST(SUM({column}), 9223372036854775807) AS BIGINT)")
    } else {
        format!(
            "CASE WHEN SUM({column} / 4294967296) + SUM({column} % 4294967296) / 4294967296 \
             >= 2147483648 THEN 9223372036854775807 \
             ELSE SUM({column} / 4294967296) * 4294967296 + SUM({column} % 4294967296) END"
        )
    }
}

/// Which report statement: the grouping column, whether it is one tenant's
/// (`tenant_id = ?`) and whether it continues a page (`column < ?`).
#[derive(Debug, Clone, Copy)]
struct Shape {
    column: &'static str,
    one_tenant: bool,
    after_page: bool,
}

impl Shape {
    fn new(group: UsageGroup, one_tenant: bool, after_page: bool) -> Self {
        let column = match group {
            UsageGroup::Day => "day",
            UsageGroup::Model => "model",
            UsageGroup::Key => "key_id",
            UsageGroup::Tenant => "tenant_id",
        };
        Self {
            column,
            one_tenant,
            after_page,
        }
    }

    /// The statement. Binds, in order: the tenant (when one), from, to, the page's bound
    /// (when continuing), the row limit.
    fn sql(self, pg: bool) -> String {
        let column = self.column;
        let mut n = 0;
        let mut p = || {
            n += 1;
            if pg {
                format!("${n}")
            } else {
                "?".to_owned()
            }
        };
        let mut filter = Vec::with_capacity(4);
        if self.one_tenant {
            filter.push(format!("tenant_id = {}", p()));
        }
        filter.push(format!("day >= {}", p()));
        filter.push(format!("day <= {}", p()));
        if self.after_page {
            filter.push(format!("{column} < {}", p()));
        }
        let limit = p();
        let sums = DAILY_COUNTS.map(|c| saturating_sum(c, pg));
        format!(
            "SELECT {column} AS grp, {} AS requests, {} AS errors, {} AS prompt, \
             {} AS completion, {} AS total, {} AS cost FROM usage_daily WHERE {} \
             GROUP BY {column} ORDER BY {column} DESC LIMIT {limit}",
            sums[0],
            sums[1],
            sums[2],
            sums[3],
            sums[4],
            sums[5],
            filter.join(" AND ")
        )
    }
}

/// A report statement with its binds.
struct Report {
    shape: Shape,
    texts: Vec<String>,
    limit: i64,
}

impl Report {
    fn new(tenant_id: Option<Uuid>, query: &UsageQuery) -> Self {
        let before = query.before.clone().filter(|b| !b.is_empty());
        let shape = Shape::new(query.group, tenant_id.is_some(), before.is_some());
        let mut texts = Vec::with_capacity(4);
        texts.extend(tenant_id.map(text));
        texts.push(query.range.from_day());
        texts.push(query.range.to_day());
        texts.extend(before);
        Self {
            shape,
            texts,
            limit: i64::from(query.limit) + 1,
        }
    }

    /// `sql` (the report statement, or a statement about it) with the report's binds.
    fn bound<DB>(&self, sql: String) -> diesel::query_builder::BoxedSqlQuery<'_, DB, SqlQuery>
    where
        DB: diesel::backend::Backend
            + diesel::sql_types::HasSqlType<Text>
            + diesel::sql_types::HasSqlType<BigInt>,
        String: ToSql<Text, DB>,
        i64: ToSql<BigInt, DB>,
    {
        let mut q = diesel::sql_query(sql).into_boxed();
        for t in &self.texts {
            q = q.bind::<Text, _>(t.clone());
        }
        q.bind::<BigInt, _>(self.limit)
    }

    fn load(&self, conn: &mut DbConnection) -> QueryResult<Vec<UsageRow>> {
        let sql = self.shape.sql(matches!(conn, DbConnection::Pg(_)));
        on_backend!(conn, |c| self.bound(sql).load(c))
    }
}

fn usage(store: &DbStore, tenant_id: Option<Uuid>, query: &UsageQuery) -> DomainResult<UsagePage> {
    let report = Report::new(tenant_id, query);
    let rows = store.read(|conn| report.load(conn).map_err(|e| db_error("usage", e)))?;
    let lines = rows
        .into_iter()
        .map(|r| UsageLine {
            group: r.grp,
            requests: count(r.requests),
            errors: count(r.errors),
            prompt_tokens: count(r.prompt),
            completion_tokens: count(r.completion),
            total_tokens: count(r.total),
            cost: count(r.cost),
        })
        .collect();
    Ok(UsagePage::finish(query, lines))
}

#[derive(QueryableByName)]
struct SqlitePlanRow {
    #[diesel(sql_type = Text)]
    detail: String,
}

#[derive(QueryableByName)]
struct PgPlanRow {
    #[diesel(sql_type = Text)]
    #[diesel(column_name = "QUERY PLAN")]
    plan: String,
}

/// The usage reports (the run-line writer is `UsageRepo::record_runs` in `quota.rs`).
impl DbStore {
    pub(crate) fn tenant_usage_report(
        &self,
        scope: &TenantScope,
        query: &UsageQuery,
    ) -> DomainResult<UsagePage> {
        usage(self, Some(scope.tenant_id()), query)
    }

    pub(crate) fn all_usage_report(
        &self,
        _scope: &AdminScope,
        tenant_id: Option<Uuid>,
        query: &UsageQuery,
    ) -> DomainResult<UsagePage> {
        usage(self, tenant_id, query)
    }

    /// The plan the database makes for the report statement of `query` (one tenant's when
    /// `tenant_id` is given, with the same binds): `EXPLAIN QUERY PLAN` lines on SQLite,
    /// `EXPLAIN` lines on PostgreSQL. For the plan tests (`tests/usage_plans.rs`).
    #[doc(hidden)]
    pub fn usage_report_plan(
        &self,
        tenant_id: Option<Uuid>,
        query: &UsageQuery,
    ) -> DomainResult<Vec<String>> {
        let report = Report::new(tenant_id, query);
        self.read(|conn| {
            let pg = matches!(conn, DbConnection::Pg(_));
            let sql = report.shape.sql(pg);
            let lines = match conn {
                DbConnection::Sqlite(c) => report
                    .bound(format!("EXPLAIN QUERY PLAN {sql}"))
                    .load::<SqlitePlanRow>(c)
                    .map(|rows| rows.into_iter().map(|r| r.detail).collect()),
                DbConnection::Pg(c) => report
                    .bound(format!("EXPLAIN {sql}"))
                    .load::<PgPlanRow>(c)
                    .map(|rows| rows.into_iter().map(|r| r.plan).collect()),
            };
            lines.map_err(|e| db_error("usage_plan", e))
        })
    }
}

#[cfg(test)]
mod tests {
    use diesel::connection::SimpleConnection;

    use super::*;
    use crate::store::{open, PoolOptions};
    use crate::testing;

    #[derive(QueryableByName)]
    struct Counts {
        #[diesel(sql_type = BigInt)]
        requests: i64,
        #[diesel(sql_type = BigInt)]
        errors: i64,
        #[diesel(sql_type = BigInt)]
        prompt_tokens: i64,
        #[diesel(sql_type = BigInt)]
        completion_tokens: i64,
        #[diesel(sql_type = BigInt)]
        total_tokens: i64,
        #[diesel(sql_type = BigInt)]
        cost: i64,
    }

    /// Two adds to one row: counts add up, and saturate at `i64::MAX` instead of failing.
    fn adds_saturate(store: &DbStore) {
        let add = |counts: [i64; 6]| DailyAdd {
            tenant_id: "t".into(),
            day: "2026-02-03".into(),
            model: "m".into(),
            key_id: String::new(),
            counts,
        };
        let row = store
            .write("test", |conn| {
                on_backend!(conn, |c| c.batch_execute(
                    "INSERT INTO tenants (id, name, status, region, ai_enabled, created_at) \
                     VALUES ('t', 't', 'active', 'aihk', true, 0)"
                ))
                .map_err(|e| db_error("test", e))?;
                for counts in [
                    [1, 0, i64::MAX, i64::MAX - 1, 5, 7],
                    [2, 1, 1, 1, i64::MAX, i64::MAX],
                    [1, 1, 1, 1, 1, 1],
                ] {
                    let add = add(counts);
                    on_backend!(conn, |c| add.execute(c)).map_err(|e| db_error("test", e))?;
                }
                let rows: Vec<Counts> = on_backend!(conn, |c| diesel::sql_query(
                    "SELECT requests, errors, prompt_tokens, completion_tokens, total_tokens, \
                     cost FROM usage_daily"
                )
                .load(c))
                .map_err(|e| db_error("test", e))?;
                Ok(rows)
            })
            .unwrap();
        let [r] = row.as_slice() else {
            panic!("one row expected")
        };
        assert_eq!(
            [
                r.requests,
                r.errors,
                r.prompt_tokens,
                r.completion_tokens,
                r.total_tokens,
                r.cost
            ],
            [4, 2, i64::MAX, i64::MAX, i64::MAX, i64::MAX]
        );
    }

    /// The migration fills the rollup from the lines stored before it, sums saturating.
    #[test]
    fn the_migration_fills_the_rollup_from_stored_lines() {
        use diesel::migration::MigrationSource;
        use diesel::sqlite::Sqlite;

        let mut c = SqliteConnection::establish(":memory:").unwrap();
        let all: Vec<_> =
            MigrationSource::<Sqlite>::migrations(&crate::store::SQLITE_MIGRATIONS).unwrap();
        let (before, rest): (Vec<_>, Vec<_>) = all
            .into_iter()
            .partition(|m| m.name().to_string().as_str() < "2026-12-03-000000_usage_reports");
        for m in &before {
            m.run(&mut c).unwrap();
        }
        let max = i64::MAX;
        c.batch_execute(&format!(
            "INSERT INTO tenants (id, name, status, region, ai_enabled, created_at) \
             VALUES ('t', 't', 'active', 'aihk', 1, 0); \
             INSERT INTO run_usage (id, tenant_id, key_id, at, day, model, failed, \
               prompt_tokens, completion_tokens, total_tokens) VALUES \
             ('1', 't', '', 0, '2026-02-03', 'm', 0, {max}, 3, {max}), \
             ('2', 't', '', 0, '2026-02-03', 'm', 1, 1, 4294967297, {max}), \
             ('3', 't', 'k', 0, '2026-02-03', 'm', 1, 2, 4294967295, 7);"
        ))
        .unwrap();
        for m in &rest {
            m.run(&mut c).unwrap();
        }
        let rows: Vec<Counts> = diesel::sql_query(
            "SELECT requests, errors, prompt_tokens, completion_tokens, total_tokens, cost \
             FROM usage_daily ORDER BY key_id",
        )
        .load(&mut c)
        .unwrap();
        let got: Vec<[i64; 5]> = rows
            .iter()
            .map(|r| {
                [
                    r.requests,
                    r.errors,
                    r.prompt_tokens,
                    r.completion_tokens,
                    r.total_tokens,
                ]
            })
            .collect();
        assert_eq!(
            got,
            vec![[2, 1, max, 4294967300, max], [1, 1, 2, 4294967295, 7]]
        );
    }

    #[test]
    fn daily_adds_saturate_on_sqlite() {
        let (url, _dir) = testing::fresh_sqlite_url();
        let store = open(&url, PoolOptions::default()).unwrap();
        store.migrate().unwrap();
        adds_saturate(&store);
    }

    #[test]
    fn daily_adds_saturate_on_postgres() {
        let Some(db) = testing::postgres_or_skip("daily_adds_saturate") else {
            return;
        };
        let store = open(db.url(), PoolOptions::default()).unwrap();
        store.migrate().unwrap();
        adds_saturate(&store);
    }
}
