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

/// Declares a batch of rows of `$table` as columns, each column once: its field (a `Vec` of
/// the row field's type), its copy from the rows (`of`), its name in the statement and the
/// SQL type of its array parameter. `copied from Row` makes `of(&[Row])`, which copies the
/// fields, `moved from Row` makes `of(Vec<Row>)`, which moves them. The statement is
/// `INSERT INTO table (c1, …) SELECT * FROM unnest($1, …)`, of fixed text (a static query id).
macro_rules! unnest_insert {
    (
        $(#[$doc:meta])*
        $name:ident $how:ident from $row:ty => $table:literal {
            $first:ident: $first_ty:ty as $first_sql:ty,
            $($field:ident: $ty:ty as $sql:ty),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Default)]
        pub(crate) struct $name {
            $first: Vec<$first_ty>,
            $($field: Vec<$ty>,)+
        }

        impl $name {
            unnest_insert!(@$how $row; $first $(, $field)+);
        }

        impl QueryId for $name {
            type QueryId = Self;
            const HAS_STATIC_QUERY_ID: bool = true;
        }

        impl QueryFragment<Pg> for $name {
            fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
                out.push_sql(concat!(
                    "INSERT INTO ", $table, " (", stringify!($first), $(", ", stringify!($field),)+
                    ") SELECT * FROM unnest("
                ));
                out.push_bind_param::<Array<$first_sql>, _>(&self.$first)?;
                $(
                    out.push_sql(", ");
                    out.push_bind_param::<Array<$sql>, _>(&self.$field)?;
                )+
                out.push_sql(")");
                Ok(())
            }
        }

        impl RunQueryDsl<PgConnection> for $name {}
    };
    (@copied $row:ty; $($field:ident),+) => {
        /// The rows as columns (copied: the caller keeps its rows).
        pub fn of(rows: &[$row]) -> Self {
            let mut c = Self::default();
            for r in rows {
                $(c.$field.push(Clone::clone(&r.$field));)+
            }
            c
        }
    };
    (@moved $row:ty; $($field:ident),+) => {
        /// The rows as columns.
        pub fn of(rows: Vec<$row>) -> Self {
            let mut c = Self::default();
            for r in rows {
                $(c.$field.push(r.$field);)+
            }
            c
        }
    };
}

unnest_insert! {
    /// A batch of `run_usage` lines as columns (copied: the writer keeps its rows to try the
    /// batch again).
    UsageColumns copied from RunUsageRow => "run_usage" {
        id: String as Text,
        tenant_id: String as Text,
        key_id: String as Text,
        at: i64 as BigInt,
        day: String as Text,
        model: String as Text,
        failed: bool as Bool,
        prompt_tokens: i64 as BigInt,
        completion_tokens: i64 as BigInt,
        total_tokens: i64 as BigInt,
        cost: i64 as BigInt,
    }
}

unnest_insert! {
    /// A batch of `activity` lines as columns.
    ActivityColumns moved from ActivityRow => "activity" {
        id: String as Text,
        tenant_id: String as Text,
        at: i64 as BigInt,
        actor_kind: String as Text,
        actor_id: String as Text,
        actor_label: String as Text,
        action: String as Text,
        target_kind: Option<String> as Nullable<Text>,
        target_id: Option<String> as Nullable<Text>,
        detail: String as Text,
    }
}

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

    /// The `i`th usage line of a batch of `tenant`.
    fn usage(i: usize, tenant: &str) -> RunUsageRow {
        RunUsageRow {
            id: format!("u{i:04}"),
            tenant_id: tenant.into(),
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

    /// The `i`th activity line of a batch of `tenant`.
    fn line(i: usize, tenant: &str) -> ActivityRow {
        ActivityRow {
            id: format!("a{i:04}"),
            tenant_id: tenant.into(),
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

    /// Writes a full batch of `tenant`'s usage and activity lines in one transaction, as the
    /// run writer does.
    fn write_batch(store: &DbStore, tenant: &str) {
        let rows: Vec<RunUsageRow> = (0..BATCH).map(|i| usage(i, tenant)).collect();
        let lines: Vec<ActivityRow> = (0..BATCH).map(|i| line(i, tenant)).collect();
        store
            .write("test", |conn| {
                insert_usage(conn, &rows).map_err(|e| db_error("test", e))?;
                insert_activity_rows(conn, lines, "test")
            })
            .unwrap();
    }

    /// Writes a full batch of the tenant `t` ([`write_batch`]); answers what was stored.
    fn store_batch(store: &DbStore) -> (Sums, i64, Vec<Line>) {
        add_tenant(store, "t");
        write_batch(store, "t");
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
            [line(0, "t"), line(1, "t")]
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
        let before = started.load(Ordering::Relaxed);
        write_batch(&store, "t0");
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
