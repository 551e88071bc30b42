//! Quota counters and run usage.
//!
//! Requests are counted with one conditional upsert per window (`INSERT … ON CONFLICT DO
//! UPDATE … WHERE requests + n <= max RETURNING requests`), which both SQLite and PostgreSQL
//! run atomically: concurrent callers on any number of nodes queue on the row, and no answer
//! ever exceeds the maximum. A take of `n` requests (a node's lease, see `gc_domain::policy::quota`)
//! that does not fit falls back to one. Several windows are taken in one write transaction,
//! the earlier ones handed back when a later one is full. Every statement commits before it
//! answers (`synchronous = FULL` on SQLite). Tokens are added when run lines are stored, in
//! the same transaction as the lines.

use std::cell::Cell;
use std::collections::BTreeMap;

use diesel::prelude::*;
use gc_domain::model::workspace::NewActivity;
use gc_domain::policy::access::{AdminScope, TenantScope};
use gc_domain::policy::quota::{Grant, QuotaWindow, RequestTake, Take, TokenTake};
use gc_domain::policy::runs::RunLine;
use gc_domain::policy::usage::{UsagePage, UsageQuery};
use gc_domain::ports::{QuotaRepo, UsageRepo};
use gc_domain::{DomainError, DomainResult};
use uuid::Uuid;

use super::count;
use crate::columns::UsageColumns;
use crate::error::db_error;
use crate::fixed::{GiveBack, ReserveTokens, SettleTokens, TakeRequests, MAX_WINDOW_TOKENS};
use crate::rows::text;
use crate::schema::{quota_windows, run_usage};
use crate::store::{on_backend, DbConnection, DbStore};

thread_local! {
    /// Set when a statement of this thread's current quota operation failed on a lock
    /// conflict (a PostgreSQL deadlock or serialization failure), which [`retry_conflicts`]
    /// retries.
    static CONFLICT: Cell<bool> = const { Cell::new(false) };
}

/// True for the failures a retry of the whole transaction cures: a deadlock (`40P01`) or a
/// serialization failure (`40001`). With the one lock order (decision 0024) deadlocks should
/// not happen between gc's own statements; a retry also covers rows another statement (an
/// operator's, a prune) locks in an order of its own.
fn is_conflict(e: &diesel::result::Error) -> bool {
    use diesel::result::{DatabaseErrorKind, Error};
    match e {
        Error::DatabaseError(DatabaseErrorKind::SerializationFailure, _) => true,
        Error::DatabaseError(_, info) => {
            let m = info.message();
            m.contains("deadlock detected") || m.contains("could not serialize")
        }
        _ => false,
    }
}

/// `db_error`, except that a lock conflict is marked for [`retry_conflicts`] and answers
/// `Unavailable` (503 with `Retry-After`, never a 500) should every retry meet one.
fn quota_error(op: &'static str, e: diesel::result::Error) -> DomainError {
    if is_conflict(&e) {
        CONFLICT.with(|c| c.set(true));
        tracing::warn!(operation = op, error = %e, "quota rows: lock conflict, retrying");
        return DomainError::Unavailable {
            retry_after_secs: 1,
        };
    }
    db_error(op, e)
}

/// How often a quota write that met a lock conflict is tried again.
const CONFLICT_RETRIES: u32 = 4;

/// Runs `f` (a whole transaction) again, after 2, 4, 8 and 16 ms, while it fails on a lock
/// conflict ([`quota_error`]); any other answer is final.
fn retry_conflicts<T>(op: &'static str, mut f: impl FnMut() -> DomainResult<T>) -> DomainResult<T> {
    let mut attempt = 0;
    loop {
        CONFLICT.with(|c| c.set(false));
        let out = f();
        let conflicted = CONFLICT.with(|c| c.replace(false));
        if out.is_ok() || !conflicted || attempt >= CONFLICT_RETRIES {
            if out.is_err() && conflicted {
                tracing::warn!(
                    operation = op,
                    "quota rows: lock conflicts on every attempt"
                );
            }
            return out;
        }
        attempt += 1;
        std::thread::sleep(std::time::Duration::from_millis(1 << attempt));
    }
}

fn limit(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Counts `n` requests in `w` unless that passes `max`; the new count, or `None`.
fn take_n(conn: &mut DbConnection, w: &QuotaWindow, n: u64, max: u64) -> DomainResult<Option<u64>> {
    let take = TakeRequests {
        subject: w.subject.stored(),
        window_start: w.start_ms,
        requests: limit(n),
        max: limit(max),
    };
    let found: Vec<i64> =
        on_backend!(conn, |c| take.load(c)).map_err(|e| quota_error("take_request", e))?;
    Ok(found.first().map(|r| count(*r)))
}

/// Counts `t.want` requests in its window, or one when they do not fit; `None` when full.
fn take_one(conn: &mut DbConnection, t: &RequestTake) -> DomainResult<Option<Grant>> {
    let want = t.want.clamp(1, t.max.max(1));
    if let Some(count) = take_n(conn, &t.window, want, t.max)? {
        return Ok(Some(Grant {
            granted: want,
            count,
        }));
    }
    if want == 1 {
        return Ok(None);
    }
    Ok(take_n(conn, &t.window, 1, t.max)?.map(|count| Grant { granted: 1, count }))
}

fn give_back(conn: &mut DbConnection, w: &QuotaWindow, n: u64) -> DomainResult<()> {
    let back = GiveBack {
        requests: limit(n),
        subject: w.subject.stored(),
        window_start: w.start_ms,
    };
    on_backend!(conn, |c| back.execute(c)).map_err(|e| quota_error("take_request", e))?;
    Ok(())
}

/// Changes `w`'s tokens by `change` (clamped to the stored range, never below zero).
fn settle_tokens(
    conn: &mut DbConnection,
    w: &QuotaWindow,
    change: i64,
    op: &'static str,
) -> DomainResult<()> {
    let change = change.clamp(-MAX_WINDOW_TOKENS / 2, MAX_WINDOW_TOKENS / 2);
    let add = SettleTokens {
        subject: w.subject.stored(),
        window_start: w.start_ms,
        created: change.max(0),
        change,
    };
    on_backend!(conn, |c| add.execute(c)).map_err(|e| quota_error(op, e))?;
    Ok(())
}

/// Counts `t.tokens` in its window unless that passes its maximum; the new count, or `None`.
fn reserve_one(conn: &mut DbConnection, t: &TokenTake) -> DomainResult<Option<u64>> {
    let tokens = limit(t.tokens).min(MAX_WINDOW_TOKENS / 2);
    let reserve = ReserveTokens {
        subject: t.window.subject.stored(),
        window_start: t.window.start_ms,
        tokens,
        // A window without a limit is counted all the same, up to the stored range.
        max: t.max.map_or(MAX_WINDOW_TOKENS, limit),
    };
    let found: Vec<i64> =
        on_backend!(conn, |c| reserve.load(c)).map_err(|e| quota_error("reserve_tokens", e))?;
    Ok(found.first().map(|n| count(*n)))
}

/// One window's part of a take of several windows ([`take_all`]).
trait WindowTake {
    fn window(&self) -> QuotaWindow;
    /// Counts this take in its window: what it counted, or `None` when the window is full.
    fn take(&self, conn: &mut DbConnection) -> DomainResult<Option<Grant>>;
    /// Hands back `g`, what [`WindowTake::take`] counted (the row is the transaction's
    /// already: no new lock).
    fn undo(&self, conn: &mut DbConnection, g: &Grant) -> DomainResult<()>;
}

impl WindowTake for RequestTake {
    fn window(&self) -> QuotaWindow {
        self.window
    }

    fn take(&self, conn: &mut DbConnection) -> DomainResult<Option<Grant>> {
        take_one(conn, self)
    }

    fn undo(&self, conn: &mut DbConnection, g: &Grant) -> DomainResult<()> {
        give_back(conn, &self.window, g.granted)
    }
}

impl WindowTake for TokenTake {
    fn window(&self) -> QuotaWindow {
        self.window
    }

    fn take(&self, conn: &mut DbConnection) -> DomainResult<Option<Grant>> {
        Ok(reserve_one(conn, self)?.map(|count| Grant {
            granted: self.tokens,
            count,
        }))
    }

    fn undo(&self, conn: &mut DbConnection, _: &Grant) -> DomainResult<()> {
        settle_tokens(conn, &self.window, -limit(self.tokens), "reserve_tokens")
    }
}

/// Takes every window of `takes` in one write transaction, all or nothing: in the one lock
/// order (decision 0024), whatever order the caller names them in; when one is full, what the
/// earlier ones counted is handed back and the answer names the full one. Answers in the
/// caller's order.
fn take_all<T: WindowTake>(store: &DbStore, op: &'static str, takes: &[T]) -> DomainResult<Take> {
    let mut order: Vec<usize> = (0..takes.len()).collect();
    order.sort_by_key(|i| takes.get(*i).map(T::window));
    retry_conflicts(op, || {
        store.write(op, |conn| {
            let mut grants: Vec<Option<Grant>> = vec![None; takes.len()];
            for i in &order {
                let Some(t) = takes.get(*i) else { continue };
                match t.take(conn)? {
                    Some(g) => grants[*i] = Some(g),
                    None => {
                        for (earlier, g) in takes.iter().zip(&grants) {
                            if let Some(g) = g {
                                earlier.undo(conn, g)?;
                            }
                        }
                        return Ok(Take::Full(*i));
                    }
                }
            }
            Ok(Take::Taken(grants.into_iter().flatten().collect()))
        })
    })
}

impl QuotaRepo for DbStore {
    fn may_wait(&self) -> bool {
        self.may_wait_here()
    }

    fn window_tokens(&self, windows: &[QuotaWindow]) -> DomainResult<Vec<u64>> {
        // One statement for all of a request's windows (at most three: the tenant's month and
        // minute, the key's minute), each shape a fixed query the connection keeps prepared:
        // one statement instead of one per window is what the quota check costs a run
        // (issue 10). Primary-key lookups joined by OR; a window without a row has used 0.
        let keys: Vec<(String, i64)> = windows
            .iter()
            .map(|w| (w.subject.stored(), w.start_ms))
            .collect();
        let pk = |(subject, start): &(String, i64)| {
            quota_windows::subject
                .eq(subject.clone())
                .and(quota_windows::window_start.eq(*start))
        };
        let cols = (
            quota_windows::subject,
            quota_windows::window_start,
            quota_windows::tokens,
        );
        // A request has at most three windows; more (never asked today) go three at a time.
        let found: Vec<(String, i64, i64)> = self.read(|conn| {
            keys.chunks(3)
                .try_fold(Vec::new(), |mut rows, chunk| {
                    rows.extend(match chunk {
                        [a] => on_backend!(conn, |c| quota_windows::table
                            .filter(pk(a))
                            .select(cols)
                            .load::<(String, i64, i64)>(c)),
                        [a, b] => on_backend!(conn, |c| quota_windows::table
                            .filter(pk(a).or(pk(b)))
                            .select(cols)
                            .load(c)),
                        [a, b, c3] => on_backend!(conn, |c| quota_windows::table
                            .filter(pk(a).or(pk(b)).or(pk(c3)))
                            .select(cols)
                            .load(c)),
                        _ => Ok(Vec::new()),
                    }?);
                    Ok(rows)
                })
                .map_err(|e| db_error("window_tokens", e))
        })?;
        Ok(keys
            .iter()
            .map(|(subject, start)| {
                found
                    .iter()
                    .find(|(s, w, _)| s == subject && w == start)
                    .map_or(0, |(_, _, tokens)| count(*tokens))
            })
            .collect())
    }

    fn take_request(&self, takes: &[RequestTake]) -> DomainResult<Take> {
        if let [t] = takes {
            // Each statement is atomic on its own: no transaction to pay for.
            return retry_conflicts("take_request", || {
                self.write_one(|conn| {
                    Ok(match take_one(conn, t)? {
                        Some(g) => Take::Taken(vec![g]),
                        None => Take::Full(0),
                    })
                })
            });
        }
        take_all(self, "take_request", takes)
    }

    fn reserve_tokens(&self, takes: &[TokenTake]) -> DomainResult<Take> {
        take_all(self, "reserve_tokens", takes)
    }

    fn release_tokens(&self, windows: &[QuotaWindow], tokens: u64) -> DomainResult<()> {
        let mut sorted = windows.to_vec();
        sorted.sort();
        retry_conflicts("release_tokens", || {
            self.write("release_tokens", |conn| {
                for w in &sorted {
                    settle_tokens(conn, w, -limit(tokens), "release_tokens")?;
                }
                Ok(())
            })
        })
    }

    fn prune_windows(&self, minute_before: i64, month_before: i64) -> DomainResult<u64> {
        self.write_one(|conn| {
            on_backend!(conn, |c| diesel::delete(
                quota_windows::table.filter(
                    quota_windows::subject
                        .like("m%")
                        .and(quota_windows::window_start.lt(month_before))
                        .or(quota_windows::subject
                            .not_like("m%")
                            .and(quota_windows::window_start.lt(minute_before))),
                )
            )
            .execute(c))
            .map(super::affected)
            .map_err(|e| db_error("prune_windows", e))
        })
    }
}

/// A run's usage line. No field is defaultable (`treat_none_as_default_value = false`), so a
/// batch of them is one multi-row statement on SQLite too, not one statement per row.
#[derive(Insertable)]
#[diesel(table_name = run_usage, treat_none_as_default_value = false)]
pub(crate) struct RunUsageRow {
    pub id: String,
    pub tenant_id: String,
    pub key_id: String,
    pub at: i64,
    pub day: String,
    pub model: String,
    pub failed: bool,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub total_tokens: i64,
    pub cost: i64,
}

impl UsageRepo for DbStore {
    fn record_runs(&self, runs: &[RunLine], activities: &[NewActivity]) -> DomainResult<()> {
        self.store_runs(runs, activities, false)
    }

    fn record_runs_again(&self, runs: &[RunLine], activities: &[NewActivity]) -> DomainResult<()> {
        self.store_runs(runs, activities, true)
    }

    fn tenant_usage(&self, scope: &TenantScope, query: &UsageQuery) -> DomainResult<UsagePage> {
        self.tenant_usage_report(scope, query)
    }

    fn all_usage(
        &self,
        scope: &AdminScope,
        tenant_id: Option<Uuid>,
        query: &UsageQuery,
    ) -> DomainResult<UsagePage> {
        self.all_usage_report(scope, tenant_id, query)
    }
}

impl DbStore {
    /// The run writer's batch in one transaction. `again`: an earlier attempt of this batch
    /// failed, so first look for its first line (a usage line, else an activity line): found,
    /// that attempt was committed (the batch is all or nothing) and nothing is written.
    fn store_runs(
        &self,
        runs: &[RunLine],
        activities: &[NewActivity],
        again: bool,
    ) -> DomainResult<()> {
        if runs.is_empty() && activities.is_empty() {
            return Ok(());
        }
        let rows: Vec<RunUsageRow> = runs
            .iter()
            .map(|r| {
                let u = r.usage();
                RunUsageRow {
                    id: text(r.id()),
                    tenant_id: text(r.tenant_id()),
                    key_id: r.key_id().map(text).unwrap_or_default(),
                    at: r.at().timestamp_millis(),
                    day: r.day(),
                    model: r.model().chars().take(200).collect(),
                    failed: r.failed(),
                    prompt_tokens: limit(u.prompt_tokens),
                    completion_tokens: limit(u.completion_tokens),
                    total_tokens: limit(u.total_tokens),
                    cost: limit(r.cost()),
                }
            })
            .collect();
        // One upsert per window of the batch, not per run, in the one lock order (decision
        // 0024: the same order as a take of several windows, so the writer and a take never
        // wait on each other's rows in opposite orders). A run reserved at admission settles
        // the windows of its admission to its true tokens; any other adds its tokens to the
        // windows of its end (decision 0025).
        let mut tokens: BTreeMap<QuotaWindow, i64> = BTreeMap::new();
        for r in runs {
            // Spend windows (decision 0038) are counted in the same way, in nano-units.
            for (windows, change) in [r.token_changes(), r.spend_changes()] {
                if change != 0 {
                    for w in windows {
                        let sum = tokens.entry(w).or_default();
                        *sum = sum.saturating_add(change);
                    }
                }
            }
        }
        let first_run = rows.first().map(|r| r.id.clone());
        let first_activity = activities.first().map(|a| text(a.id()));
        retry_conflicts("record_runs", || {
            self.write("record_runs", |conn| {
                if again && batch_stored(conn, first_run.as_ref(), first_activity.as_ref())? {
                    tracing::info!("a run batch retried after a failed commit was stored already");
                    return Ok(());
                }
                insert_usage(conn, &rows).map_err(|e| quota_error("record_runs", e))?;
                // The usage reports' daily rollup, rows in sorted order (decision 0027).
                super::usage::add_daily(conn, runs, |e| quota_error("record_runs", e))?;
                for (w, change) in &tokens {
                    if *change != 0 {
                        settle_tokens(conn, w, *change, "record_runs")?;
                    }
                }
                // The batch's activity lines in the same commit: one `fsync` per batch, not two.
                crate::repos::workspace::insert_activities(conn, activities, "record_runs")
            })
        })
    }
}

/// The batch's usage lines: on PostgreSQL one statement of columns for any number of lines
/// (`columns::UsageColumns`, decision 0061), on SQLite statements of several lines each; kept
/// prepared either way (issue 14).
pub(crate) fn insert_usage(
    conn: &mut DbConnection,
    rows: &[RunUsageRow],
) -> diesel::QueryResult<()> {
    match conn {
        DbConnection::Pg(c) if !rows.is_empty() => UsageColumns::of(rows).execute(c).map(|_| ()),
        _ => crate::store::insert_rows!(conn, run_usage::table, rows),
    }
}

/// Whether the batch whose first usage line (else first activity line) has this id is stored.
fn batch_stored(
    conn: &mut DbConnection,
    first_run: Option<&String>,
    first_activity: Option<&String>,
) -> DomainResult<bool> {
    use crate::schema::activity;
    let found = match (first_run, first_activity) {
        (Some(id), _) => on_backend!(conn, |c| run_usage::table
            .filter(run_usage::id.eq(id))
            .count()
            .get_result::<i64>(c)),
        (None, Some(id)) => on_backend!(conn, |c| activity::table
            .filter(activity::id.eq(id))
            .count()
            .get_result::<i64>(c)),
        (None, None) => Ok(0),
    }
    .map_err(|e| quota_error("record_runs", e))?;
    Ok(found > 0)
}
