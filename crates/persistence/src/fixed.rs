//! Statements of fixed text that each connection prepares once.
//!
//! Diesel keeps a statement prepared only when its text cannot depend on its values. It
//! never keeps `sql_query` text, an `UPDATE` or an `ON CONFLICT … DO UPDATE` built with the
//! query builder (a changeset may skip a column whose value is `None`): each call parses
//! and plans it again, tens of thousands of instructions on SQLite. The run writer adds
//! tokens to every window of every batch, and a lease take counts requests, so those
//! statements are written here as types: a type names its one text (a static query id), and
//! diesel's per-connection cache finds it prepared from the second call on (issue 14).
//! Binds are pushed by diesel, so one text serves both backends (`?` or `$n`).

use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, HasSqlType, Text};
use diesel::{QueryResult, RunQueryDsl};

/// The backends these statements are written for: both bind text and 64-bit integers.
pub(crate) trait FixedBackend: Backend + HasSqlType<Text> + HasSqlType<BigInt>
where
    String: ToSql<Text, Self>,
    i64: ToSql<BigInt, Self>,
{
}

impl<DB> FixedBackend for DB
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt>,
    String: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
}

/// Implements the query traits of a statement type: `|this, out| { … }` writes its fixed text
/// (`this` is the statement, `out` diesel's `AstPass`).
macro_rules! fixed_statement {
    ($name:ident, |$this:ident, $out:ident| $walk:block) => {
        impl QueryId for $name {
            type QueryId = Self;
            const HAS_STATIC_QUERY_ID: bool = true;
        }

        impl<DB> QueryFragment<DB> for $name
        where
            DB: FixedBackend,
            String: ToSql<Text, DB>,
            i64: ToSql<BigInt, DB>,
        {
            fn walk_ast<'b>(&'b self, mut $out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
                let $this = self;
                $walk
            }
        }

        impl<Conn> RunQueryDsl<Conn> for $name {}
    };
}

/// The opening both upserts share: `INSERT INTO quota_windows (subject, window_start,
/// requests, tokens) VALUES (…) ON CONFLICT (subject, window_start) DO UPDATE SET `, with
/// `requests` and `tokens` bound, or a literal 0 where `None`.
fn upsert_window<'b, DB>(
    out: &mut AstPass<'_, 'b, DB>,
    subject: &'b String,
    window_start: &'b i64,
    requests: Option<&'b i64>,
    tokens: Option<&'b i64>,
) -> QueryResult<()>
where
    DB: FixedBackend,
    String: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
    out.push_sql("INSERT INTO quota_windows (subject, window_start, requests, tokens) VALUES (");
    out.push_bind_param::<Text, _>(subject)?;
    out.push_sql(", ");
    out.push_bind_param::<BigInt, _>(window_start)?;
    for count in [requests, tokens] {
        out.push_sql(", ");
        match count {
            Some(n) => out.push_bind_param::<BigInt, _>(n)?,
            None => out.push_sql("0"),
        }
    }
    out.push_sql(") ON CONFLICT (subject, window_start) DO UPDATE SET ");
    Ok(())
}

/// The largest count a window's tokens are kept at (2^62): each change is at most
/// `gc_domain::policy::quota::MAX_RUN_TOKENS` times a batch, so `tokens + change` never leaves the
/// 64-bit range on either database.
pub(crate) const MAX_WINDOW_TOKENS: i64 = 1 << 62;

/// Changes a window's token count by `change` (a run writer's settlement, decision 0025:
/// positive or negative), never below zero nor above [`MAX_WINDOW_TOKENS`]; a window without
/// a row is created at `max(change, 0)` tokens and zero requests.
#[derive(Debug)]
pub(crate) struct SettleTokens {
    pub subject: String,
    pub window_start: i64,
    /// `max(change, 0)`: the count of a new row.
    pub created: i64,
    pub change: i64,
}

fixed_statement!(SettleTokens, |this, out| {
    upsert_window(
        &mut out,
        &this.subject,
        &this.window_start,
        None,
        Some(&this.created),
    )?;
    out.push_sql("tokens = CASE WHEN quota_windows.tokens + ");
    out.push_bind_param::<BigInt, _>(&this.change)?;
    out.push_sql(" < 0 THEN 0 WHEN quota_windows.tokens + ");
    out.push_bind_param::<BigInt, _>(&this.change)?;
    out.push_sql(&format!(
        " > {MAX_WINDOW_TOKENS} THEN {MAX_WINDOW_TOKENS} ELSE quota_windows.tokens + "
    ));
    out.push_bind_param::<BigInt, _>(&this.change)?;
    out.push_sql(" END");
    Ok(())
});

/// Declares a statement type that counts `$count` more (the column of that name) in a window
/// unless that passes `max`, in one atomic upsert, returning the new count, or no row when it
/// would pass; a new row counts `$count` (and 0 of the other column). One type per column:
/// each names its own fixed text.
macro_rules! count_within_max {
    ($(#[$doc:meta])* $name:ident, $count:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub(crate) struct $name {
            pub subject: String,
            pub window_start: i64,
            pub $count: i64,
            pub max: i64,
        }

        fixed_statement!($name, |this, out| {
            let counted = Some(&this.$count);
            let (requests, tokens) = match stringify!($count) {
                "requests" => (counted, None),
                _ => (None, counted),
            };
            upsert_window(&mut out, &this.subject, &this.window_start, requests, tokens)?;
            out.push_sql(concat!(
                stringify!($count), " = quota_windows.", stringify!($count), " + excluded.",
                stringify!($count), " WHERE quota_windows.", stringify!($count), " + excluded.",
                stringify!($count), " <= "
            ));
            out.push_bind_param::<BigInt, _>(&this.max)?;
            out.push_sql(concat!(" RETURNING ", stringify!($count)));
            Ok(())
        });

        impl Query for $name {
            type SqlType = BigInt;
        }
    };
}

count_within_max!(
    /// Counts `tokens` more in a window unless that passes `max` (a token reservation,
    /// decision 0025). The caller never reserves more than `max` in one take, so a new row is
    /// always within it.
    ReserveTokens,
    tokens
);

count_within_max!(
    /// Counts `requests` more in a window unless that passes `max` (a lease take).
    TakeRequests,
    requests
);

/// Takes `requests` back off a window's count (a refused take of several windows hands back
/// what the earlier ones counted).
#[derive(Debug)]
pub(crate) struct GiveBack {
    pub requests: i64,
    pub subject: String,
    pub window_start: i64,
}

fixed_statement!(GiveBack, |this, out| {
    out.push_sql("UPDATE quota_windows SET requests = requests - ");
    out.push_bind_param::<BigInt, _>(&this.requests)?;
    out.push_sql(" WHERE subject = ");
    out.push_bind_param::<Text, _>(&this.subject)?;
    out.push_sql(" AND window_start = ");
    out.push_bind_param::<BigInt, _>(&this.window_start)?;
    Ok(())
});

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use diesel::connection::{Instrumentation, InstrumentationEvent};
    use diesel::prelude::*;
    use diesel_migrations::MigrationHarness;

    use super::*;

    /// The statements each connection prepared for its cache, and every statement it ran.
    #[derive(Default)]
    struct Seen {
        prepared: Vec<String>,
        ran: usize,
    }

    fn connection() -> (SqliteConnection, Arc<Mutex<Seen>>) {
        let mut c = SqliteConnection::establish(":memory:").unwrap();
        c.run_pending_migrations(crate::store::SQLITE_MIGRATIONS)
            .unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let log = Arc::clone(&seen);
        let watch = move |event: InstrumentationEvent<'_>| {
            let mut s = log.lock().unwrap();
            match event {
                InstrumentationEvent::CacheQuery { sql, .. } => s.prepared.push(sql.to_owned()),
                InstrumentationEvent::StartQuery { .. } => s.ran += 1,
                _ => {}
            }
        };
        c.set_instrumentation(Box::new(watch) as Box<dyn Instrumentation>);
        (c, seen)
    }

    #[test]
    fn each_statement_is_prepared_once_per_connection_and_counts_right() {
        let (mut c, seen) = connection();
        let subject = || "t:one".to_owned();
        for change in [5, 7, 11, -4, 4] {
            let add = SettleTokens {
                subject: subject(),
                window_start: 60_000,
                created: change.max(0),
                change,
            };
            assert_eq!(add.execute(&mut c).unwrap(), 1);
        }
        let mut counts = Vec::new();
        for requests in [4, 4, 4] {
            let take = TakeRequests {
                subject: subject(),
                window_start: 60_000,
                requests,
                max: 10,
            };
            counts.push(take.load::<i64>(&mut c).unwrap());
        }
        // The third take would pass the maximum: no row, nothing counted.
        assert_eq!(counts, vec![vec![4], vec![8], vec![]]);
        for _ in 0..2 {
            let back = GiveBack {
                requests: 3,
                subject: subject(),
                window_start: 60_000,
            };
            assert_eq!(back.execute(&mut c).unwrap(), 1);
        }
        let (requests, tokens): (i64, i64) = crate::schema::quota_windows::table
            .select((
                crate::schema::quota_windows::requests,
                crate::schema::quota_windows::tokens,
            ))
            .first(&mut c)
            .unwrap();
        assert_eq!((requests, tokens), (2, 23));

        let seen = seen.lock().unwrap();
        let fixed: Vec<&String> = seen
            .prepared
            .iter()
            .filter(|sql| sql.contains("quota_windows ("))
            .chain(
                seen.prepared
                    .iter()
                    .filter(|sql| sql.starts_with("UPDATE quota_windows")),
            )
            .collect();
        // Eight runs of three statements, three preparations: one per statement, each with
        // its whole text.
        let expected = [
            "INSERT INTO quota_windows (subject, window_start, requests, tokens) \
             VALUES (?, ?, 0, ?) ON CONFLICT (subject, window_start) DO UPDATE \
             SET tokens = CASE WHEN quota_windows.tokens + ? < 0 THEN 0 \
             WHEN quota_windows.tokens + ? > 4611686018427387904 THEN 4611686018427387904 \
             ELSE quota_windows.tokens + ? END",
            "INSERT INTO quota_windows (subject, window_start, requests, tokens) \
             VALUES (?, ?, ?, 0) ON CONFLICT (subject, window_start) DO UPDATE \
             SET requests = quota_windows.requests + excluded.requests \
             WHERE quota_windows.requests + excluded.requests <= ? RETURNING requests",
            "UPDATE quota_windows SET requests = requests - ? \
             WHERE subject = ? AND window_start = ?",
        ];
        assert_eq!(fixed, expected, "{:?}", seen.prepared);
        assert!(seen.ran >= 8, "{}", seen.ran);
    }
}
