//! The run writer's batch inserts on PostgreSQL: one statement per table for any number of
//! rows, the values bound as one array per column and turned back into rows by `unnest`
//! (decision 0061).
//!
//! The multi-row statements of fixed counts (`store::insert_rows!`, 32 rows at most) are one
//! round trip per 32 rows: a batch of 512 runs was 16 usage and 16 activity statements. On
//! SQLite a statement is a function call; on PostgreSQL each is a trip to the database's
//! backend and back on the writer's blocking thread, and on a busy 2-core host each trip
//! waits for the backend to be scheduled. The writer then wrote fewer runs a second than the
//! gateway admitted, the run-record queue filled, and runs were refused `busy` (issue 33's
//! bench errors). Here a batch is one statement per table, whatever its size; the text is
//! fixed (a static query id), so each connection prepares it once.

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Text};
use diesel::{PgConnection, QueryResult, RunQueryDsl};

use crate::repos::quota::RunUsageRow;
use crate::rows::ActivityRow;

/// Implements the query traits of a PostgreSQL statement of fixed text.
macro_rules! pg_statement {
    ($name:ident, |$this:ident, $out:ident| $walk:block) => {
        impl QueryId for $name {
            type QueryId = Self;
            const HAS_STATIC_QUERY_ID: bool = true;
        }

        impl QueryFragment<Pg> for $name {
            fn walk_ast<'b>(&'b self, mut $out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
                let $this = self;
                $walk
            }
        }

        impl RunQueryDsl<PgConnection> for $name {}
    };
}

/// `INSERT INTO table (c1, …) SELECT * FROM unnest($1, …)`: the opening, up to `unnest(`.
fn open_insert(out: &mut AstPass<'_, '_, Pg>, table: &str, columns: &[&str]) {
    out.push_sql("INSERT INTO ");
    out.push_sql(table);
    out.push_sql(" (");
    out.push_sql(&columns.join(", "));
    out.push_sql(") SELECT * FROM unnest(");
}

/// A batch of `run_usage` lines as columns.
#[derive(Debug, Default)]
pub(crate) struct UsageColumns {
    id: Vec<String>,
    tenant_id: Vec<String>,
    key_id: Vec<String>,
    at: Vec<i64>,
    day: Vec<String>,
    model: Vec<String>,
    failed: Vec<bool>,
    prompt_tokens: Vec<i64>,
    completion_tokens: Vec<i64>,
    total_tokens: Vec<i64>,
    cost: Vec<i64>,
}

impl UsageColumns {
    /// The lines as columns (copied: the writer keeps its rows to try the batch again).
    pub fn of(rows: &[RunUsageRow]) -> Self {
        let mut c = Self::default();
        for r in rows {
            c.id.push(r.id.clone());
            c.tenant_id.push(r.tenant_id.clone());
            c.key_id.push(r.key_id.clone());
            c.at.push(r.at);
            c.day.push(r.day.clone());
            c.model.push(r.model.clone());
            c.failed.push(r.failed);
            c.prompt_tokens.push(r.prompt_tokens);
            c.completion_tokens.push(r.completion_tokens);
            c.total_tokens.push(r.total_tokens);
            c.cost.push(r.cost);
        }
        c
    }
}

pg_statement!(UsageColumns, |this, out| {
    open_insert(
        &mut out,
        "run_usage",
        &[
            "id",
            "tenant_id",
            "key_id",
            "at",
            "day",
            "model",
            "failed",
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
            "cost",
        ],
    );
    for (i, texts) in [&this.id, &this.tenant_id, &this.key_id]
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            out.push_sql(", ");
        }
        out.push_bind_param::<Array<Text>, _>(texts)?;
    }
    out.push_sql(", ");
    out.push_bind_param::<Array<BigInt>, _>(&this.at)?;
    for texts in [&this.day, &this.model] {
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(texts)?;
    }
    out.push_sql(", ");
    out.push_bind_param::<Array<Bool>, _>(&this.failed)?;
    for numbers in [
        &this.prompt_tokens,
        &this.completion_tokens,
        &this.total_tokens,
        &this.cost,
    ] {
        out.push_sql(", ");
        out.push_bind_param::<Array<BigInt>, _>(numbers)?;
    }
    out.push_sql(")");
    Ok(())
});

/// A batch of `activity` lines as columns.
#[derive(Debug, Default)]
pub(crate) struct ActivityColumns {
    id: Vec<String>,
    tenant_id: Vec<String>,
    at: Vec<i64>,
    actor_kind: Vec<String>,
    actor_id: Vec<String>,
    actor_label: Vec<String>,
    action: Vec<String>,
    target_kind: Vec<Option<String>>,
    target_id: Vec<Option<String>>,
    detail: Vec<String>,
}

impl ActivityColumns {
    pub fn of(rows: Vec<ActivityRow>) -> Self {
        let mut c = Self::default();
        for r in rows {
            c.id.push(r.id);
            c.tenant_id.push(r.tenant_id);
            c.at.push(r.at);
            c.actor_kind.push(r.actor_kind);
            c.actor_id.push(r.actor_id);
            c.actor_label.push(r.actor_label);
            c.action.push(r.action);
            c.target_kind.push(r.target_kind);
            c.target_id.push(r.target_id);
            c.detail.push(r.detail);
        }
        c
    }
}

pg_statement!(ActivityColumns, |this, out| {
    open_insert(
        &mut out,
        "activity",
        &[
            "id",
            "tenant_id",
            "at",
            "actor_kind",
            "actor_id",
            "actor_label",
            "action",
            "target_kind",
            "target_id",
            "detail",
        ],
    );
    out.push_bind_param::<Array<Text>, _>(&this.id)?;
    out.push_sql(", ");
    out.push_bind_param::<Array<Text>, _>(&this.tenant_id)?;
    out.push_sql(", ");
    out.push_bind_param::<Array<BigInt>, _>(&this.at)?;
    for texts in [
        &this.actor_kind,
        &this.actor_id,
        &this.actor_label,
        &this.action,
    ] {
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(texts)?;
    }
    for texts in [&this.target_kind, &this.target_id] {
        out.push_sql(", ");
        out.push_bind_param::<Array<Nullable<Text>>, _>(texts)?;
    }
    out.push_sql(", ");
    out.push_bind_param::<Array<Text>, _>(&this.detail)?;
    out.push_sql(")");
    Ok(())
});

/// Issue 33: the run writer's batch must not cost PostgreSQL a round trip per 32 runs. With
/// one it fell behind a busy gateway and runs were refused `busy`.
#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use diesel::connection::{InstrumentationEvent, SimpleConnection};
    use diesel::prelude::*;
    use diesel::sql_types::{BigInt, Nullable, Text};

    use crate::error::db_error;
    use crate::repos::quota::{insert_usage, RunUsageRow};
    use crate::repos::workspace::insert_activity_rows;
    use crate::rows::ActivityRow;
    use crate::store::{on_backend, open, DbConnection, DbStore, PoolOptions};
    use crate::testing;

    /// The run writer's largest batch.
    const BATCH: usize = gc_domain::services::run_records::RUN_BATCH_MAX;

    fn usage(i: usize) -> RunUsageRow {
        RunUsageRow {
            id: format!("u{i:04}"),
            tenant_id: "t".into(),
            key_id: if i % 2 == 0 {
                "k".into()
            } else {
                String::new()
            },
            at: i as i64,
            day: "2026-11-28".into(),
            model: format!("m-{}", i % 3),
            failed: i % 5 == 0,
            prompt_tokens: 1,
            completion_tokens: i as i64,
            total_tokens: i as i64 + 1,
            cost: 7,
        }
    }

    fn line(i: usize) -> ActivityRow {
        ActivityRow {
            id: format!("a{i:04}"),
            tenant_id: "t".into(),
            at: i as i64,
            actor_kind: "key".into(),
            actor_id: "k".into(),
            actor_label: "it's \"quoted\", {braced}, \\ and ünïcode".into(),
            action: "run".into(),
            target_kind: (i % 2 == 0).then(|| "record".into()),
            target_id: (i % 2 == 0).then(|| format!("r{i}")),
            detail: r#"{"model":"m","tokens":[1,2]}"#.into(),
        }
    }

    #[derive(QueryableByName, Debug, PartialEq)]
    struct Sums {
        #[diesel(sql_type = BigInt)]
        n: i64,
        #[diesel(sql_type = BigInt)]
        tokens: i64,
        #[diesel(sql_type = BigInt)]
        failed: i64,
        #[diesel(sql_type = BigInt)]
        keyed: i64,
    }

    #[derive(QueryableByName, Debug, PartialEq)]
    struct Line {
        #[diesel(sql_type = Text)]
        actor_label: String,
        #[diesel(sql_type = Nullable<Text>)]
        target_kind: Option<String>,
        #[diesel(sql_type = Nullable<Text>)]
        target_id: Option<String>,
        #[diesel(sql_type = Text)]
        detail: String,
    }

    /// Adds the tenant `id` the lines refer to.
    fn add_tenant(store: &DbStore, id: &str) {
        let sql = format!(
            "INSERT INTO tenants (id, name, status, region, ai_enabled, created_at) \
             VALUES ('{id}', 't', 'active', 'aihk', true, 0)"
        );
        store
            .write("test", |conn| {
                on_backend!(conn, |c| c.batch_execute(&sql)).map_err(|e| db_error("test", e))
            })
            .unwrap();
    }

    /// Writes a full batch of usage and activity lines in one transaction, as the run writer
    /// does; answers what was stored.
    fn store_batch(store: &DbStore) -> (Sums, i64, Vec<Line>) {
        add_tenant(store, "t");
        let rows: Vec<RunUsageRow> = (0..BATCH).map(usage).collect();
        let lines: Vec<ActivityRow> = (0..BATCH).map(line).collect();
        store
            .write("test", |conn| {
                insert_usage(conn, &rows).map_err(|e| db_error("test", e))?;
                insert_activity_rows(conn, lines, "test")
            })
            .unwrap();
        store
            .read(|conn| {
                let sums: Sums = on_backend!(conn, |c| {
                    diesel::sql_query(
                    "SELECT COUNT(*) AS n, CAST(SUM(total_tokens + cost) AS BIGINT) AS tokens, \
                     SUM(CASE WHEN failed THEN 1 ELSE 0 END) AS failed, \
                     SUM(CASE WHEN key_id = 'k' THEN 1 ELSE 0 END) AS keyed FROM run_usage"
                )
                .get_result(c)
                })
                .map_err(|e| db_error("test", e))?;
                #[derive(QueryableByName)]
                struct N {
                    #[diesel(sql_type = BigInt)]
                    n: i64,
                }
                let n: N = on_backend!(conn, |c| diesel::sql_query(
                    "SELECT COUNT(*) AS n FROM activity"
                )
                .get_result(c))
                .map_err(|e| db_error("test", e))?;
                let some: Vec<Line> = on_backend!(conn, |c| diesel::sql_query(
                    "SELECT actor_label, target_kind, target_id, detail FROM activity \
                     WHERE id IN ('a0000', 'a0001') ORDER BY id"
                )
                .load(c))
                .map_err(|e| db_error("test", e))?;
                Ok((sums, n.n, some))
            })
            .unwrap()
    }

    fn expected() -> (Sums, i64, Vec<Line>) {
        let b = BATCH as i64;
        (
            Sums {
                n: b,
                tokens: b * (b + 1) / 2 + 7 * b,
                failed: (BATCH as i64 + 4) / 5,
                keyed: b / 2,
            },
            b,
            [line(0), line(1)]
                .into_iter()
                .map(|l| Line {
                    actor_label: l.actor_label,
                    target_kind: l.target_kind,
                    target_id: l.target_id,
                    detail: l.detail,
                })
                .collect(),
        )
    }

    #[test]
    fn a_batch_is_stored_whole_on_sqlite() {
        let (url, _dir) = testing::fresh_sqlite_url();
        let store = open(&url, PoolOptions::default()).unwrap();
        store.migrate().unwrap();
        assert_eq!(store_batch(&store), expected());
    }

    /// On PostgreSQL a full batch of usage and activity lines is one statement per table:
    /// `BEGIN`, two inserts, `COMMIT` on the connection (the rows the same as SQLite's). The
    /// fixed-count statements took one insert per 32 lines of each table.
    #[test]
    fn a_batch_is_one_statement_per_table_on_postgres() {
        let Some(db) = testing::postgres_or_skip("batch statements") else {
            return;
        };
        let store = testing::open_migrated(db.url(), 1);
        // Count the statements the one pooled connection starts.
        let started = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&started);
        {
            let mut conn = store.conn().unwrap();
            let DbConnection::Pg(pg) = &mut *conn else {
                panic!("a PostgreSQL connection")
            };
            pg.set_instrumentation(move |event: InstrumentationEvent<'_>| {
                if matches!(event, InstrumentationEvent::StartQuery { .. }) {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        add_tenant(&store, "t0");
        assert!(
            started.load(Ordering::Relaxed) >= 1,
            "the instrumented connection is the pool's one"
        );
        // The real tenant `t` is made by `store_batch` below; this batch goes to `t0`.
        let (t0, x) = (|| "t0".to_string(), |i| format!("x{i:04}"));
        let rows: Vec<RunUsageRow> = (0..BATCH)
            .map(|i| RunUsageRow {
                id: x(i),
                tenant_id: t0(),
                ..usage(i)
            })
            .collect();
        let lines: Vec<ActivityRow> = (0..BATCH)
            .map(|i| ActivityRow {
                id: x(i),
                tenant_id: t0(),
                ..line(i)
            })
            .collect();
        let before = started.load(Ordering::Relaxed);
        store
            .write("test", |conn| {
                insert_usage(conn, &rows).map_err(|e| db_error("test", e))?;
                insert_activity_rows(conn, lines, "test")
            })
            .unwrap();
        let statements = started.load(Ordering::Relaxed) - before;
        assert!(
            statements <= 4,
            "a batch of {BATCH} runs is BEGIN, one insert per table and COMMIT, not \
             {statements} statements"
        );
        // The rows are those SQLite stores (the `t0` batch is deleted first).
        store
            .write("test", |conn| {
                on_backend!(conn, |c| c
                    .batch_execute("DELETE FROM run_usage; DELETE FROM activity;"))
                .map_err(|e| db_error("test", e))
            })
            .unwrap();
        assert_eq!(store_batch(&store), expected());
    }
}
