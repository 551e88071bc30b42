//! The run-record writer and the quota windows' retention (decisions 0003, 0024 and 0033):
//! [`write_runs`] drains the run-record queue into the store, in batches, until every sender is
//! gone. The binary only starts it, over its adapters: the queue's receiving end
//! ([`RunQueue`]), the blocking pool ([`Storage`]) and a timer ([`Timer`]).
//!
//! Run records are never dropped for a passing failure: a batch is written again until it is
//! stored. While the writer is behind, the queue fills and new runs are refused `busy` before
//! admission (each run holds its place from before admission, decision 0033), so no run's
//! record is lost; only best-effort entries (key verdicts, Guard activity lines) are dropped
//! by the sender, counted.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::NewActivity;
use crate::policy::ai_access::KeyVerdict;
use crate::policy::quota::TokenReads;
use crate::policy::runs::{RunEvent, RunLine};
use crate::ports::{AiKeyRepo, QuotaRepo, UsageRepo};
use crate::services::Storage;

/// The receiving end of the bounded run-record queue (a tokio channel in the server).
pub trait RunQueue {
    /// The next entry, waiting for one; `None` once every sender is gone and the queue is empty.
    fn recv(&mut self) -> impl Future<Output = Option<RunEvent>>;
    /// The next entry if one is queued now, without waiting.
    fn try_recv(&mut self) -> Option<RunEvent>;
    /// True once every sender is gone (the server is stopping).
    fn is_closed(&self) -> bool;
}

/// Waits (the runtime's timer in the server).
pub trait Timer {
    fn sleep(&self, wait: Duration) -> impl Future<Output = ()>;
}

/// What the writer needs of the store: key verdicts, run usage and activity lines, and the
/// quota windows' retention.
pub trait RunRecordStore {
    fn set_ai_key_status(&self, verdict: &KeyVerdict) -> DomainResult<()>;
    fn record_runs(&self, runs: &[RunLine], activities: &[NewActivity]) -> DomainResult<()>;
    fn record_runs_again(&self, runs: &[RunLine], activities: &[NewActivity]) -> DomainResult<()>;
    fn prune_windows(&self, minute_before: i64, month_before: i64) -> DomainResult<u64>;
}

impl<S: AiKeyRepo + UsageRepo + QuotaRepo + ?Sized> RunRecordStore for S {
    fn set_ai_key_status(&self, verdict: &KeyVerdict) -> DomainResult<()> {
        AiKeyRepo::set_ai_key_status(self, verdict)
    }
    fn record_runs(&self, runs: &[RunLine], activities: &[NewActivity]) -> DomainResult<()> {
        UsageRepo::record_runs(self, runs, activities)
    }
    fn record_runs_again(&self, runs: &[RunLine], activities: &[NewActivity]) -> DomainResult<()> {
        UsageRepo::record_runs_again(self, runs, activities)
    }
    fn prune_windows(&self, minute_before: i64, month_before: i64) -> DomainResult<u64> {
        QuotaRepo::prune_windows(self, minute_before, month_before)
    }
}

/// How long the writer gathers records into one transaction.
pub const RUN_BATCH_WINDOW: Duration = Duration::from_millis(50);
/// The most records in one transaction. Only a backlog fills it (a busy gateway gathers a few
/// hundred runs in [`RUN_BATCH_WINDOW`]); a writer that fell behind (a slow commit, a busy
/// database host) then catches up in a few large transactions instead of many small ones,
/// since a batch's cost is mostly its round trips and its commit (decision 0061: PostgreSQL
/// stores a batch in one statement per table). An eighth of the run-record queue.
pub const RUN_BATCH_MAX: usize = 2048;
/// How often the writer forgets quota windows that can no longer matter.
pub const PRUNE_EVERY: Duration = Duration::from_secs(300);
/// Attempts after which a batch the database refuses for a reason other than being busy or
/// gone (a lock conflict counts as busy) is cut in halves, down to single records.
pub const SPLIT_AFTER: u32 = 4;
/// The longest wait between two attempts.
pub const RETRY_MAX_WAIT: Duration = Duration::from_secs(5);
/// Once the server is stopping (every sender gone), how long a batch is still retried while
/// the database stays down, so a stop does not wait for ever.
pub const STOPPING_GRACE: Duration = Duration::from_secs(30);

/// Writes run records in batches, one transaction each, through `storage` until every
/// sender is gone, so the queue is flushed when the server stops. After the first record of a
/// batch it sleeps [`RUN_BATCH_WINDOW`] and then takes whatever queued meanwhile (up to
/// [`RUN_BATCH_MAX`]), so a busy gateway costs a few commits a second rather than one per run,
/// and a run costs its worker no wake-up of this task: a receiver that waits on the queue is
/// woken by every record sent, one thread hand-off per run (issue 14). A batch that fails is
/// written again until it is stored ([`write_batch`]), never dropped for a passing failure.
/// While it is behind, the queue fills and new runs are refused `busy` (they never lose their
/// record: each holds its place from before admission, decision 0033). Every [`PRUNE_EVERY`]
/// it forgets old quota windows ([`prune_quota_windows`]). `test_hold` (zero but in tests) is
/// waited before each batch, to make a writer that is behind.
pub async fn write_runs<S, Q, T>(
    storage: S,
    mut runs: Q,
    token_reads: Arc<TokenReads>,
    timer: T,
    test_hold: Duration,
) where
    S: Storage,
    S::Store: RunRecordStore,
    Q: RunQueue,
    T: Timer,
{
    let mut last_prune = Instant::now();
    while let Some(first) = runs.recv().await {
        if last_prune.elapsed() >= PRUNE_EVERY {
            last_prune = Instant::now();
            prune_quota_windows(&storage).await;
        }
        let mut batch = vec![first];
        take_queued(&mut runs, &mut batch);
        // A full batch (a backlog) is written at once; otherwise the window gathers more.
        if batch.len() < RUN_BATCH_MAX {
            timer.sleep(RUN_BATCH_WINDOW).await;
            take_queued(&mut runs, &mut batch);
        }
        if !test_hold.is_zero() {
            timer.sleep(test_hold).await;
        }
        write_batch(&storage, &token_reads, &runs, &timer, RunBatch::of(batch)).await;
    }
}

/// One batch of the writer, sorted by kind.
#[derive(Default)]
struct RunBatch {
    verdicts: Vec<KeyVerdict>,
    usage: Vec<RunLine>,
    lines: Vec<NewActivity>,
}

impl RunBatch {
    fn of(events: Vec<RunEvent>) -> Self {
        let mut b = Self::default();
        for event in events {
            match event {
                RunEvent::Activity(line) => b.lines.push(line),
                RunEvent::Run(line, run) => {
                    b.lines.push(line);
                    b.usage.push(*run);
                }
                RunEvent::KeyVerdict(v) => b.verdicts.push(v),
            }
        }
        b
    }

    fn len(&self) -> usize {
        self.verdicts.len() + self.usage.len() + self.lines.len()
    }

    /// Two halves (each list cut in two), to find the record a database refuses.
    fn halves(self) -> (Self, Self) {
        fn cut<T>(mut v: Vec<T>) -> (Vec<T>, Vec<T>) {
            let back = v.split_off(v.len() / 2);
            (v, back)
        }
        let (v1, v2) = cut(self.verdicts);
        let (u1, u2) = cut(self.usage);
        let (l1, l2) = cut(self.lines);
        (
            Self {
                verdicts: v1,
                usage: u1,
                lines: l1,
            },
            Self {
                verdicts: v2,
                usage: u2,
                lines: l2,
            },
        )
    }
}

/// Writes `batch` until it is stored (decision 0024): key verdicts first (idempotent), then
/// usage, tokens and activity lines in one transaction (one commit per batch); the tokens count
/// toward the quotas from the next request on. A failed attempt is retried after 50 ms,
/// doubling up to [`RETRY_MAX_WAIT`]; a retry first checks whether the failed attempt was
/// committed after all ([`UsageRepo::record_runs_again`]), so no batch is applied twice.
///
/// While the database is busy or down (`Unavailable`, lock conflicts and a blocking pool that
/// is gone included) the batch is retried for as long as it takes: the writer waits, the queue
/// fills, and new runs are then refused 503 `busy` before admission (decision 0033). A batch
/// the database refuses outright, [`SPLIT_AFTER`] times, is cut in halves and each retried,
/// down to one record: only a single record the database keeps refusing is given up, logged
/// at error level with its id. When the server stops, a database that stays down is waited
/// for [`STOPPING_GRACE`], then what is left is logged as lost.
async fn write_batch<S, Q, T>(
    storage: &S,
    token_reads: &Arc<TokenReads>,
    runs: &Q,
    timer: &T,
    batch: RunBatch,
) where
    S: Storage,
    S::Store: RunRecordStore,
    Q: RunQueue,
    T: Timer,
{
    let mut pending = vec![(batch, false)];
    while let Some((batch, again)) = pending.pop() {
        let batch = Arc::new(batch);
        let mut attempt: u32 = 0;
        let mut stopping_since: Option<Instant> = None;
        loop {
            let (reads, b) = (Arc::clone(token_reads), Arc::clone(&batch));
            let again = again || attempt > 0;
            let written = storage
                .run(move |st: &S::Store| {
                    for v in &b.verdicts {
                        st.set_ai_key_status(v)?;
                    }
                    reads.around_write(|| {
                        if again {
                            st.record_runs_again(&b.usage, &b.lines)
                        } else {
                            st.record_runs(&b.usage, &b.lines)
                        }
                    })
                })
                .await;
            let busy = match &written {
                Ok(()) => {
                    if attempt > 0 {
                        tracing::info!(attempts = attempt + 1, "run records stored after retries");
                    }
                    break;
                }
                Err(DomainError::Unavailable { .. }) => true,
                Err(_) => false,
            };
            attempt = attempt.saturating_add(1);
            let count = batch.len();
            if let Err(e) = &written {
                tracing::warn!(error = %e, count, attempt, "could not write run records; retrying");
            }
            if runs.is_closed() {
                let since = *stopping_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= STOPPING_GRACE {
                    tracing::error!(
                        count,
                        "server stopping with the database down: run records lost"
                    );
                    break;
                }
            }
            if !busy && attempt >= SPLIT_AFTER {
                let Ok(whole) = Arc::try_unwrap(batch) else {
                    tracing::error!(count, "run records lost: the batch is still in use");
                    break;
                };
                if whole.len() > 1 {
                    let (first, second) = whole.halves();
                    pending.push((second, true));
                    pending.push((first, true));
                } else {
                    let ids: Vec<String> = whole
                        .usage
                        .iter()
                        .map(|r| r.id().to_string())
                        .chain(whole.lines.iter().map(|a| a.id().to_string()))
                        .collect();
                    tracing::error!(?ids, "a run record the database keeps refusing is given up");
                }
                break;
            }
            timer.sleep(retry_wait(attempt)).await;
        }
    }
}

/// The wait after `attempt` failed attempts: 50 ms doubling, at most [`RETRY_MAX_WAIT`].
fn retry_wait(attempt: u32) -> Duration {
    Duration::from_millis(50)
        .saturating_mul(1 << attempt.min(7))
        .min(RETRY_MAX_WAIT)
}

/// Moves queued events into `batch` until it holds [`RUN_BATCH_MAX`] or the queue is empty,
/// without waiting.
fn take_queued<Q: RunQueue>(runs: &mut Q, batch: &mut Vec<RunEvent>) {
    while batch.len() < RUN_BATCH_MAX {
        match runs.try_recv() {
            Some(event) => batch.push(event),
            None => break,
        }
    }
}

/// The retention policy of the quota windows: deletes per-minute windows older than ten
/// minutes and monthly windows older than two months. A failure is logged and left for the
/// next round.
pub async fn prune_quota_windows<S>(storage: &S)
where
    S: Storage,
    S::Store: RunRecordStore,
{
    let now = Utc::now();
    let minute_before = now.timestamp_millis() - 10 * 60_000;
    let month_before = (now - chrono::Duration::days(62)).timestamp_millis();
    match storage
        .run(move |st: &S::Store| st.prune_windows(minute_before, month_before))
        .await
    {
        Ok(n) if n > 0 => tracing::debug!(windows = n, "pruned quota windows"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "could not prune quota windows"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::fakes::ready;
    use crate::model::workspace::KeyScope;
    use crate::policy::access::tests::active_member;

    /// A store that refuses the next `refuse` writes (`Unavailable` when `busy`, else a
    /// conflict), refuses any batch holding the line `poison` outright, and keeps the lines of
    /// every write it accepted.
    #[derive(Default)]
    struct Store {
        refuse: Mutex<u32>,
        busy: bool,
        poison: Option<uuid::Uuid>,
        written: Mutex<Vec<(bool, Vec<uuid::Uuid>)>>,
        attempts: Mutex<u32>,
        pruned: Mutex<u32>,
    }

    impl RunRecordStore for Store {
        fn set_ai_key_status(&self, _: &KeyVerdict) -> DomainResult<()> {
            Ok(())
        }
        fn record_runs(&self, _: &[RunLine], lines: &[NewActivity]) -> DomainResult<()> {
            self.write(false, lines)
        }
        fn record_runs_again(&self, _: &[RunLine], lines: &[NewActivity]) -> DomainResult<()> {
            self.write(true, lines)
        }
        fn prune_windows(&self, _: i64, _: i64) -> DomainResult<u64> {
            *self.pruned.lock().unwrap() += 1;
            Ok(0)
        }
    }

    impl Store {
        fn write(&self, again: bool, lines: &[NewActivity]) -> DomainResult<()> {
            *self.attempts.lock().unwrap() += 1;
            let mut refuse = self.refuse.lock().unwrap();
            if *refuse > 0 {
                *refuse -= 1;
                return Err(if self.busy {
                    DomainError::Unavailable {
                        retry_after_secs: 1,
                    }
                } else {
                    DomainError::Internal("refused".into())
                });
            }
            if self
                .poison
                .is_some_and(|p| lines.iter().any(|l| l.id() == p))
            {
                return Err(DomainError::Internal("refused".into()));
            }
            let ids = lines.iter().map(NewActivity::id).collect();
            self.written.lock().unwrap().push((again, ids));
            Ok(())
        }
    }

    impl Storage for &Store {
        type Store = Store;
        fn run<T, F>(&self, work: F) -> impl Future<Output = DomainResult<T>>
        where
            T: Send + 'static,
            F: FnOnce(&Store) -> DomainResult<T> + Send + 'static,
        {
            std::future::ready(work(self))
        }
    }

    /// A queue of what was sent before the writer started, closed (every sender gone).
    struct Queue(VecDeque<RunEvent>);

    impl RunQueue for Queue {
        async fn recv(&mut self) -> Option<RunEvent> {
            self.0.pop_front()
        }
        fn try_recv(&mut self) -> Option<RunEvent> {
            self.0.pop_front()
        }
        fn is_closed(&self) -> bool {
            false
        }
    }

    /// A timer that records its waits and returns at once.
    #[derive(Default)]
    struct Clock(Mutex<Vec<Duration>>);

    impl Timer for &Clock {
        async fn sleep(&self, wait: Duration) {
            self.0.lock().unwrap().push(wait);
        }
    }

    fn lines(n: usize) -> Vec<NewActivity> {
        let (_, p) = active_member();
        let scope = p.read_scope(KeyScope::GuardScan).unwrap();
        (0..n)
            .map(|_| NewActivity::read(&scope, Utc::now(), "guard.scan", serde_json::json!({})))
            .collect()
    }

    fn write(store: &Store, clock: &Clock, lines: &[NewActivity]) {
        let queue = Queue(
            lines
                .iter()
                .cloned()
                .map(RunEvent::Activity)
                .collect::<VecDeque<_>>(),
        );
        ready(write_runs(
            store,
            queue,
            Arc::default(),
            clock,
            Duration::ZERO,
        ));
    }

    #[test]
    fn queued_records_are_written_in_one_batch_after_the_window() {
        let (store, clock) = (Store::default(), Clock::default());
        let l = lines(3);
        write(&store, &clock, &l);
        let ids: Vec<_> = l.iter().map(NewActivity::id).collect();
        assert_eq!(*store.written.lock().unwrap(), vec![(false, ids)]);
        assert_eq!(*clock.0.lock().unwrap(), vec![RUN_BATCH_WINDOW]);
    }

    #[test]
    fn a_backlog_is_written_in_full_batches_without_waiting_for_the_window() {
        let (store, clock) = (Store::default(), Clock::default());
        let l = lines(RUN_BATCH_MAX + 1);
        write(&store, &clock, &l);
        let ids: Vec<_> = l.iter().map(NewActivity::id).collect();
        let (full, rest) = ids.split_at(RUN_BATCH_MAX);
        assert_eq!(
            *store.written.lock().unwrap(),
            vec![(false, full.to_vec()), (false, rest.to_vec())]
        );
        // Only the last, partial batch waited for more records.
        assert_eq!(*clock.0.lock().unwrap(), vec![RUN_BATCH_WINDOW]);
    }

    #[test]
    fn a_batch_the_database_cannot_take_now_is_retried_until_stored_never_dropped() {
        let store = Store {
            refuse: Mutex::new(9),
            busy: true,
            ..Store::default()
        };
        let clock = Clock::default();
        let l = lines(2);
        write(&store, &clock, &l);
        // Busy is never split: the whole batch, retried as a retry, once stored.
        let ids: Vec<_> = l.iter().map(NewActivity::id).collect();
        assert_eq!(*store.written.lock().unwrap(), vec![(true, ids)]);
        assert_eq!(*store.attempts.lock().unwrap(), 10);
        let waits = clock.0.lock().unwrap().clone();
        assert_eq!(waits[1], Duration::from_millis(100));
        assert_eq!(*waits.last().unwrap(), RETRY_MAX_WAIT);
    }

    #[test]
    fn a_refused_batch_is_halved_until_only_the_refused_record_is_given_up() {
        let l = lines(4);
        let store = Store {
            poison: Some(l[2].id()),
            ..Store::default()
        };
        let clock = Clock::default();
        write(&store, &clock, &l);
        let written = store.written.lock().unwrap().clone();
        let stored: Vec<_> = written.iter().flat_map(|(_, ids)| ids.clone()).collect();
        assert_eq!(stored, vec![l[0].id(), l[1].id(), l[3].id()]);
        assert!(written.iter().all(|(again, _)| *again));
    }

    #[test]
    fn old_quota_windows_are_pruned() {
        let store = Store::default();
        ready(prune_quota_windows(&&store));
        assert_eq!(*store.pruned.lock().unwrap(), 1);
    }
}
