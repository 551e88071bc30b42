//! Quotas: per-minute request and token limits and a monthly token budget, decided here and
//! counted in the database so every node sharing it sees one count.
//!
//! A tenant's limits are set by platform admins; a workspace key may carry lower per-minute
//! limits of its own (checked against the tenant's when set). [`admit_run`] runs before any
//! upstream call, in the same trip to the database as authentication. When a token limit
//! applies it reserves the run's likely tokens (prompt and completion allowance,
//! [`reservation_size`]) in every token window of the run at once, refusing when they do not
//! fit (decision 0025); the run writer later settles them to the run's true tokens
//! ([`settle_delta`], [`settled_tokens`]). Then it takes one request from every per-minute
//! request window. Windows are fixed: the UTC minute, the UTC calendar month.
//!
//! Requests are counted in the database ahead of use, in leases ([`NodeQuotas`], decision
//! 0011): a node counts a block of requests in the shared window in one write
//! ([`QuotaRepo::take_request`], atomic across nodes, never past the limit) and admits from
//! that block without writing again until it is used up. The shared count therefore always
//! holds every request any node admitted (and some it may still admit), so the limit holds
//! across nodes; a block left unused when the minute ends is lost, never given to anyone.
//! Leases grow while a subject's requests keep coming and shrink to single requests near the
//! limit, so small limits are counted one request at a time, exactly as before. A lease of
//! [`REFILL_FROM`] or more that falls to a quarter of its size is refilled ahead, off the
//! request path ([`NodeQuotas::refill`], decision 0017), so a busy subject's requests do not
//! wait for the write.
//! While one request takes a lease for a subject, the others of this node that find none
//! count a single request each, so a burst does not count a lease per request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Datelike, TimeZone, Utc};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::gateway::RunScope;
use crate::ports::QuotaRepo;
use crate::prices::{Money, Price};

/// The largest limit accepted (a trillion): anything above is a typing mistake.
pub const MAX_LIMIT: u64 = 1_000_000_000_000;

/// A tenant's limits; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantLimits {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    pub monthly_tokens: Option<u64>,
    /// Money per UTC month, in nano-units ([`crate::prices::Money`], decision 0038).
    pub monthly_spend: Option<Money>,
}

impl TenantLimits {
    pub fn is_empty(&self) -> bool {
        self.requests_per_minute.is_none()
            && self.tokens_per_minute.is_none()
            && self.monthly_tokens.is_none()
            && self.monthly_spend.is_none()
    }
}

/// A workspace key's own per-minute limits; `None` is no limit of its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyLimits {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    /// Money per UTC month, in nano-units (decision 0038).
    pub monthly_spend: Option<Money>,
}

impl KeyLimits {
    pub fn is_empty(&self) -> bool {
        self.requests_per_minute.is_none()
            && self.tokens_per_minute.is_none()
            && self.monthly_spend.is_none()
    }

    /// Refuses (422, naming the field) a key limit above the tenant's.
    pub fn check_within(&self, tenant: &TenantLimits) -> DomainResult<()> {
        for (field, mine, theirs) in [
            (
                "limits.requests_per_minute",
                self.requests_per_minute,
                tenant.requests_per_minute,
            ),
            (
                "limits.tokens_per_minute",
                self.tokens_per_minute,
                tenant.tokens_per_minute,
            ),
            (
                "limits.monthly_spend",
                self.monthly_spend,
                tenant.monthly_spend,
            ),
        ] {
            if let (Some(mine), Some(theirs)) = (mine, theirs) {
                if mine > theirs {
                    return Err(DomainError::invalid(
                        field,
                        format!("must be at most the tenant's limit ({theirs})"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Checks one limit value: a positive integer up to [`MAX_LIMIT`], or null for none.
pub fn limit_value(field: &str, raw: Option<i64>) -> DomainResult<Option<u64>> {
    match raw {
        None => Ok(None),
        Some(n) if n >= 1 && n.unsigned_abs() <= MAX_LIMIT => Ok(Some(n.unsigned_abs())),
        Some(_) => Err(DomainError::invalid(
            field,
            "must be a positive integer (at most 10^12) or null",
        )),
    }
}

/// Checks one limit of a change: left out (`None`) stays left out, otherwise as
/// [`limit_value`] (`Some(None)` removes the limit).
pub fn limit_change(field: &str, raw: Option<Option<i64>>) -> DomainResult<Option<Option<u64>>> {
    raw.map(|v| limit_value(field, v)).transpose()
}

/// What a counter belongs to.
///
/// The order (derived: tenant minutes, then key minutes, then tenant months, each by id) is
/// the one lock order of the quota rows (decision 0024): every transaction that writes more
/// than one `quota_windows` row — a take of several windows, a token reservation, the run
/// writer's batch — writes them sorted by [`QuotaWindow`]'s order, so two of them never wait
/// on each other's rows in opposite orders (a PostgreSQL deadlock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaSubject {
    /// A tenant's per-minute requests and tokens.
    TenantMinute(Uuid),
    /// A workspace key's per-minute requests and tokens.
    KeyMinute(Uuid),
    /// A tenant's monthly tokens.
    TenantMonth(Uuid),
    /// A tenant's monthly spend, in nano-units (counted in the `tokens` column).
    TenantSpend(Uuid),
    /// A workspace key's monthly spend, in nano-units.
    KeySpend(Uuid),
}

impl QuotaSubject {
    /// The stored name: `t:`, `k:` or `m:` and the id.
    pub fn stored(&self) -> String {
        match self {
            Self::TenantMinute(id) => format!("t:{id}"),
            Self::KeyMinute(id) => format!("k:{id}"),
            Self::TenantMonth(id) => format!("m:{id}"),
            // Monthly windows all start with `m`: pruned a month after they end.
            Self::TenantSpend(id) => format!("ms:{id}"),
            Self::KeySpend(id) => format!("mk:{id}"),
        }
    }
}

/// One counter: a subject in a window that starts at `start` (unix milliseconds). Ordered by
/// subject, then start: the lock order of the rows (see [`QuotaSubject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaWindow {
    pub subject: QuotaSubject,
    pub start_ms: i64,
}

/// The start of the UTC minute of `at`, in unix milliseconds.
pub fn minute_start(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis().div_euclid(60_000) * 60_000
}

/// The start of the UTC month of `at`.
pub fn month_start(at: DateTime<Utc>) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(at.year(), at.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(at)
}

/// The start of the UTC month after the one of `at`.
pub fn next_month_start(at: DateTime<Utc>) -> DateTime<Utc> {
    let (y, m) = if at.month() == 12 {
        (at.year() + 1, 1)
    } else {
        (at.year(), at.month() + 1)
    };
    Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0)
        .single()
        .unwrap_or(at)
}

/// Whole seconds (at least 1) from `now` to `until_ms`.
fn secs_until(now: DateTime<Utc>, until_ms: i64) -> u64 {
    let ms = until_ms.saturating_sub(now.timestamp_millis()).max(0);
    u64::try_from(ms.div_euclid(1000) + i64::from(ms % 1000 != 0))
        .unwrap_or(1)
        .max(1)
}

/// The windows a finished run's tokens are added to.
pub fn token_windows(tenant_id: Uuid, key_id: Option<Uuid>, at: DateTime<Utc>) -> Vec<QuotaWindow> {
    let minute = minute_start(at);
    let mut out = vec![
        QuotaWindow {
            subject: QuotaSubject::TenantMinute(tenant_id),
            start_ms: minute,
        },
        QuotaWindow {
            subject: QuotaSubject::TenantMonth(tenant_id),
            start_ms: month_start(at).timestamp_millis(),
        },
    ];
    if let Some(key) = key_id {
        out.push(QuotaWindow {
            subject: QuotaSubject::KeyMinute(key),
            start_ms: minute,
        });
    }
    out
}

/// The windows a run's cost is counted in: its tenant's month and its key's month.
pub fn spend_windows(tenant_id: Uuid, key_id: Option<Uuid>, at: DateTime<Utc>) -> Vec<QuotaWindow> {
    let month = month_start(at).timestamp_millis();
    let mut out = vec![QuotaWindow {
        subject: QuotaSubject::TenantSpend(tenant_id),
        start_ms: month,
    }];
    if let Some(key) = key_id {
        out.push(QuotaWindow {
            subject: QuotaSubject::KeySpend(key),
            start_ms: month,
        });
    }
    out
}

/// A run's money reservation (decision 0038): the cost of its reserved tokens at its model's
/// price, counted at admission in its spend windows of the instant `at`, settled by the run
/// writer to its true cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpendReservation {
    pub nanos: Money,
    pub at: DateTime<Utc>,
}

/// What a run costs, carried from admission to its usage line: its model's price (`None`
/// when no price is known: the run costs 0), its spend reservation (a spend limit applied),
/// and its prompt's counted tokens then (what a run without a reported usage is counted from).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCost {
    pub price: Option<Price>,
    pub spend: Option<SpendReservation>,
    pub prompt_tokens: u64,
}

/// One limit as the `x-ratelimit-*` headers show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    pub limit: u64,
    pub remaining: u64,
    /// Seconds until the window resets.
    pub reset_secs: u64,
}

impl Allowance {
    /// The tighter of two allowances: the one with less left (then the lower limit).
    fn tighter(a: Option<Self>, b: Self) -> Self {
        match a {
            Some(a) if (a.remaining, a.limit) <= (b.remaining, b.limit) => a,
            _ => b,
        }
    }
}

/// The limits that apply to a run, for its response headers. Empty when none applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimitState {
    pub requests: Option<Allowance>,
    pub tokens: Option<Allowance>,
}

/// Which quota refused a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaReason {
    RequestsPerMinute,
    TokensPerMinute,
    MonthlyTokens,
    MonthlySpend,
}

impl std::fmt::Display for QuotaReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::RequestsPerMinute => "the requests-per-minute limit is reached",
            Self::TokensPerMinute => "the tokens-per-minute limit is reached",
            Self::MonthlyTokens => "the monthly token budget is used up",
            Self::MonthlySpend => "the monthly spend limit is reached",
        })
    }
}

/// One window of a [`QuotaRepo::take_request`]: count `want` requests (at least 1, at most
/// `max`) in `window` unless that would pass `max`, in which case count one if one is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTake {
    pub window: QuotaWindow,
    pub max: u64,
    pub want: u64,
}

/// What one window of a take counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Requests counted now: `want`, or 1 when `want` would have passed the limit.
    pub granted: u64,
    /// The window's count after them (every node's requests and leases).
    pub count: u64,
}

/// What [`QuotaRepo::take_request`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Every window counted at least one request; what each counted, in order.
    Taken(Vec<Grant>),
    /// The window at this index is full; nothing was counted.
    Full(usize),
}

/// The largest lease: requests counted in one write. At 28,000 runs a second (one node of
/// this machine kind at concurrency 16) a busy tenant writes its counter about 7 times a
/// second, and the quarter left when a refill is queued lasts about 35 ms: longer than a
/// refill waits behind the run writer's batch for the write lock. (256, the size until the
/// eighth session, lasted 2 ms there: refills came late and requests took leases on the
/// request path.) Leases only grow this large when used up within a second, so a node holds
/// at most about a second of a subject's traffic, and never more than an eighth of what is
/// left.
pub const MAX_LEASE: u64 = 4_096;

/// A lease is at most this fraction of what is left in the window (`left / 8`), so the last
/// requests of a window are counted one at a time and a node that stops receiving a
/// subject's requests strands little of its limit.
const LEASE_SHARE: u64 = 8;

/// A lease used up within this many milliseconds of being taken makes the next one twice
/// as large; a slower one makes it half as large for every such period since the take, so a
/// subject back after a short pause resumes near its rate and a slow one soon takes single
/// requests. The size carries over into the next minute's window.
const LEASE_GROWTH_MS: i64 = 1_000;

/// This process's unused share of a window's counted requests.
#[derive(Debug, Clone, Copy)]
struct Lease {
    start_ms: i64,
    max: u64,
    /// Counted in the shared window and not yet admitted here.
    left: u64,
    /// The shared count after this process's last take.
    shared: u64,
    /// The size of the last take and when it was made.
    size: u64,
    taken_ms: i64,
    /// A refill of this lease is waiting or running ([`NodeQuotas::refill`]).
    refilling: bool,
}

impl Lease {
    fn serves(&self, start_ms: i64, max: u64) -> bool {
        self.start_ms == start_ms && self.max == max
    }

    /// Whether the lease should be refilled ahead now: it is large (small leases, near the
    /// limit or at low rates, stay exact and are taken when used up), down to a quarter of
    /// its last take, and no refill of it is already waiting.
    fn wants_refill(&self) -> bool {
        self.size >= REFILL_FROM && self.left <= self.size / REFILL_AT_SHARE && !self.refilling
    }

    /// What the `x-ratelimit-remaining-*` header shows: what no node has counted yet, plus
    /// this process's unused lease.
    fn remaining(&self) -> u64 {
        self.max
            .saturating_sub(self.shared)
            .saturating_add(self.left)
            .min(self.max)
    }
}

/// What this process holds of the shared quota counts (one per process, kept by the run
/// orchestration): the requests it has counted in the shared windows and not yet admitted, by
/// subject, and the token counts it read in the last few milliseconds ([`TokenReads`]). Only
/// requests already counted in the database are admitted from here, so it never admits more
/// than the shared count holds.
#[derive(Debug, Default)]
pub struct NodeQuotas {
    /// Keyed by server-made ids, so hashed with the fast hasher (no client chooses a key).
    leases: Mutex<FxHashMap<QuotaSubject, Lease>>,
    tokens: Arc<TokenReads>,
    /// Leases to refill ahead; never locked while `leases` is wanted.
    refills: Arc<Mutex<Refills>>,
    /// Set when a refill is queued, so requests of a node with nothing to refill (and of
    /// tenants without limits) skip the lock in [`NodeQuotas::refill_due`].
    due: AtomicBool,
    /// Takes on the request path in flight, by subject ([`Taking`]): while one is, the others
    /// of the same subject count a single request each instead of a lease, so requests that
    /// find a lease used up at once (a new minute, a changed limit, a burst) do not each
    /// count a lease of their own. Holds only subjects with a take in flight (at most one
    /// entry per request being served); locked before `leases` when both are.
    taking: Mutex<FxHashMap<QuotaSubject, u32>>,
    /// Signalled whenever a request-path take ends ([`Taking`]'s drop), for the requests
    /// that wait for it instead of counting a request of their own.
    taken: std::sync::Condvar,
    /// How long a follower waits for a take in flight, in ms; 0 is [`FOLLOW_WAIT`] (tests set
    /// more, so that a slow machine cannot turn a wait into a take of its own).
    follow_wait_ms: AtomicU64,
    /// The completion allowance a reservation assumes when a run names no `max_tokens`
    /// (`GC_RESERVE_COMPLETION_TOKENS`); 0 until set means [`DEFAULT_RESERVE_COMPLETION`].
    completion_default: AtomicU64,
    /// Tokens this process has reserved in the shared windows and not yet given to a run, by
    /// subject ([`TokenLease`], decision 0025): busy subjects far from their limits reserve
    /// for several runs in one write.
    token_leases: Mutex<FxHashMap<QuotaSubject, TokenLease>>,
    /// The deployment's models and prices, set once at start-up ([`NodeQuotas::set_catalog`]).
    catalog: std::sync::OnceLock<crate::models::Catalog>,
}

/// This process's unused share of a token window's count: reserved in the shared window by
/// one of its reservations beyond that run's own tokens, and handed to its next runs of the
/// window without a write. Unused tokens of a minute are lost with it; those of a month wait
/// for the process's next runs (lost if it stops). A lease is for twice as many runs as the
/// last one when that was taken less than [`LEASE_GROWTH_MS`] ago (else none: a quiet subject
/// reserves exactly), at most [`TOKEN_LEASE_RUNS`] runs and an eighth of what the window had
/// left, so small limits stay exact.
#[derive(Debug, Clone, Copy)]
struct TokenLease {
    start_ms: i64,
    max: Option<u64>,
    left: u64,
    /// The shared count after this process's last reservation in the window.
    shared: u64,
    /// When this process last reserved in the window from the store.
    taken_ms: i64,
    /// The runs the last lease was for (0: an exact reservation).
    runs: u64,
}

impl TokenLease {
    fn serves(&self, t: &TokenTake) -> bool {
        self.start_ms == t.window.start_ms && self.max == t.max
    }
}

/// The most runs one token lease is for (as [`MAX_LEASE`] for requests): at thousands of runs a
/// second, a write every second or so.
pub const TOKEN_LEASE_RUNS: u64 = MAX_LEASE;

/// The completion allowance a run without `max_tokens` reserves unless configured.
pub const DEFAULT_RESERVE_COMPLETION: u64 = 1024;

/// The request-path takes of one request, registered in [`NodeQuotas::taking`] until it drops
/// (also when the store panics).
struct Taking<'a> {
    quotas: &'a NodeQuotas,
    subjects: SmallVec<[QuotaSubject; 2]>,
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        let mut taking = self.quotas.taking_lock();
        for subject in &self.subjects {
            if let Some(n) = taking.get_mut(subject) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    taking.remove(subject);
                }
            }
        }
        drop(taking);
        self.quotas.taken.notify_all();
    }
}

/// How long a request that finds no lease waits for another request's take of it before it
/// counts a request of its own.
const FOLLOW_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// The refills queued and whether a refiller has been started for them.
#[derive(Debug, Default)]
struct Refills {
    waiting: Vec<(QuotaWindow, u64)>,
    running: bool,
}

/// Leases of at least this many requests are refilled ahead, when a quarter is left; smaller
/// ones are taken on the request path when used up (decision 0017).
pub const REFILL_FROM: u64 = 16;

/// A lease is refilled ahead when what is left of it is at most its size over this.
const REFILL_AT_SHARE: u64 = 4;

/// The most refills waiting at once. When full, a lease is not refilled ahead and is taken on
/// the request path when used up, as a small one is.
const REFILLS_MAX: usize = 64;

fn lock_refills(refills: &Mutex<Refills>) -> std::sync::MutexGuard<'_, Refills> {
    refills.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The right to run this process's refiller, from [`NodeQuotas::refill_due`]; hand it to
/// [`NodeQuotas::refill`]. Dropped without a refill that ran to its end (the task meant to run
/// it never ran, or the store panicked), it lets the next queued refill start another.
#[must_use = "a claim does nothing until given to NodeQuotas::refill"]
#[derive(Debug)]
pub struct RefillClaim {
    refills: Arc<Mutex<Refills>>,
    ended: bool,
}

impl Drop for RefillClaim {
    fn drop(&mut self) {
        if !self.ended {
            lock_refills(&self.refills).running = false;
        }
    }
}

impl NodeQuotas {
    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<QuotaSubject, Lease>> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn follow_wait(&self) -> std::time::Duration {
        match self.follow_wait_ms.load(Ordering::Relaxed) {
            0 => FOLLOW_WAIT,
            ms => std::time::Duration::from_millis(ms),
        }
    }

    fn taking_lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<QuotaSubject, u32>> {
        self.taking.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refills_lock(&self) -> std::sync::MutexGuard<'_, Refills> {
        lock_refills(&self.refills)
    }

    /// Queues a refill of `window`'s lease; false (and nothing queued) when the queue is full.
    fn queue_refill(&self, window: QuotaWindow, max: u64) -> bool {
        let mut refills = self.refills_lock();
        if refills.waiting.len() >= REFILLS_MAX {
            return false;
        }
        refills.waiting.push((window, max));
        self.due.store(true, Ordering::Release);
        true
    }

    /// A claim to start a refiller now ([`NodeQuotas::refill`], on a thread that may write):
    /// given at most once until that refiller has ended (or its claim was dropped), and only
    /// when a refill is queued. Cheap when none is.
    pub fn refill_due(&self) -> Option<RefillClaim> {
        if !self.due.load(Ordering::Acquire) {
            return None;
        }
        let mut refills = self.refills_lock();
        if refills.running || refills.waiting.is_empty() {
            return None;
        }
        refills.running = true;
        Some(RefillClaim {
            refills: Arc::clone(&self.refills),
            ended: false,
        })
    }

    /// The refiller: takes the next block of every queued lease from the shared count (one
    /// write each) until none is queued, and adds what it counted to the lease. A lease whose
    /// minute has passed or whose limit changed is left alone; a full window or a failed
    /// write leaves the lease as it was, to be taken on the request path when used up. Only
    /// what the store has durably counted is added, so the shared count still holds every
    /// request this node admits. Returns the number of failed writes. A claim of another
    /// process's quotas is dropped unused.
    pub fn refill<P: QuotaRepo + ?Sized>(
        &self,
        mut claim: RefillClaim,
        store: &P,
        now: impl Fn() -> DateTime<Utc>,
    ) -> usize {
        if !Arc::ptr_eq(&claim.refills, &self.refills) {
            return 0;
        }
        let mut failed = 0;
        loop {
            let waiting = {
                let mut refills = self.refills_lock();
                if refills.waiting.is_empty() {
                    refills.running = false;
                    self.due.store(false, Ordering::Release);
                    claim.ended = true;
                    return failed;
                }
                std::mem::take(&mut refills.waiting)
            };
            for (w, max) in waiting {
                let now_ms = now().timestamp_millis();
                let current = w.start_ms == now_ms.div_euclid(60_000) * 60_000
                    && self
                        .lock()
                        .get(&w.subject)
                        .is_some_and(|l| l.serves(w.start_ms, max));
                let answer = current.then(|| {
                    let want = self.want(&w, max, now_ms).min(max);
                    let take = RequestTake {
                        window: w,
                        max,
                        want,
                    };
                    store.take_request(&[take])
                });
                let mut held = self.lock();
                let Some(l) = held
                    .get_mut(&w.subject)
                    .filter(|l| l.serves(w.start_ms, max))
                else {
                    continue;
                };
                l.refilling = false;
                match answer {
                    Some(Ok(Take::Taken(grants))) => {
                        if let Some(grant) = grants.first() {
                            l.left += grant.granted;
                            l.shared = l.shared.max(grant.count);
                            l.size = grant.granted;
                            l.taken_ms = now_ms;
                        }
                    }
                    Some(Err(_)) => failed += 1,
                    Some(Ok(Take::Full(_))) | None => {}
                }
            }
        }
    }

    fn token_lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<QuotaSubject, TokenLease>> {
        self.token_leases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves `tokens` in every window of `takes` (each `takes[i].tokens` is `tokens`): from
    /// this process's token leases where each holds enough, else from the store for the
    /// windows that do not — with a lease for later runs when the subject reserved less than
    /// [`LEASE_GROWTH_MS`] ago and its window has room for at least one more such run in an
    /// eighth of what is left; exactly `tokens` otherwise, or when the lease does not fit. `Ok`
    /// holds each window's remaining allowance as this process knows it; `Err` the index of a
    /// window that is full, in which case nothing is reserved.
    fn reserve_tokens<P: QuotaRepo + ?Sized>(
        &self,
        store: &P,
        takes: &[TokenTake],
        tokens: u64,
        now_ms: i64,
    ) -> DomainResult<Result<SmallVec<[u64; 3]>, usize>> {
        let remaining_of = |l: &TokenLease, max: Option<u64>| {
            max.map_or(u64::MAX, |m| {
                m.saturating_sub(l.shared).saturating_add(l.left).min(m)
            })
        };
        let mut local: SmallVec<[bool; 3]> = smallvec::smallvec![false; takes.len()];
        let mut asks: SmallVec<[TokenTake; 3]> = SmallVec::new();
        {
            let mut held = self.token_lock();
            if held.len() > 4_096 {
                held.retain(|_, l| l.start_ms >= now_ms.div_euclid(60_000) * 60_000);
            }
            for (i, t) in takes.iter().enumerate() {
                match held
                    .get_mut(&t.window.subject)
                    .filter(|l| l.serves(t) && l.left >= tokens)
                {
                    Some(l) => {
                        l.left -= tokens;
                        local[i] = true;
                    }
                    None => {
                        let extra = held
                            .get(&t.window.subject)
                            .filter(|l| {
                                l.start_ms == t.window.start_ms
                                    && l.max == t.max
                                    && (0..LEASE_GROWTH_MS)
                                        .contains(&now_ms.saturating_sub(l.taken_ms))
                            })
                            .map_or(0, |l| {
                                let room = t.max.unwrap_or(MAX_LIMIT).saturating_sub(l.shared)
                                    / LEASE_SHARE;
                                // Whole runs of this size: a lease leaves no piece too
                                // small for the next run stranded on this node.
                                let fit = room.checked_div(tokens).unwrap_or(0);
                                let grown = l.runs.saturating_mul(2).clamp(1, TOKEN_LEASE_RUNS);
                                fit.min(grown).saturating_mul(tokens)
                            });
                        asks.push(TokenTake {
                            tokens: tokens.saturating_add(extra),
                            ..*t
                        });
                    }
                }
            }
        }
        let mut answer = if asks.is_empty() {
            Ok(Take::Taken(Vec::new()))
        } else {
            store.reserve_tokens(&asks)
        };
        // A lease that does not fit: exactly this run's tokens instead.
        if matches!(answer, Ok(Take::Full(_))) && asks.iter().any(|a| a.tokens > tokens) {
            for a in &mut asks {
                a.tokens = tokens;
            }
            answer = store.reserve_tokens(&asks);
        }
        let mut held = self.token_lock();
        let grants = match answer {
            Ok(Take::Taken(grants)) => grants,
            other => {
                // Put back what this run took from local leases.
                for (t, from_lease) in takes.iter().zip(&local) {
                    if *from_lease {
                        if let Some(l) = held.get_mut(&t.window.subject).filter(|l| l.serves(t)) {
                            l.left = l.left.saturating_add(tokens);
                        }
                    }
                }
                return match other {
                    Ok(Take::Full(j)) => {
                        let missing: SmallVec<[usize; 3]> =
                            (0..takes.len()).filter(|i| !local[*i]).collect();
                        Ok(Err(missing.get(j).copied().unwrap_or(0)))
                    }
                    Ok(Take::Taken(_)) => Ok(Err(0)),
                    Err(e) => Err(e),
                };
            }
        };
        let mut grants = asks.iter().zip(grants);
        let mut remaining: SmallVec<[u64; 3]> = SmallVec::new();
        for (t, from_lease) in takes.iter().zip(&local) {
            if !*from_lease {
                if let Some((ask, grant)) = grants.next() {
                    let spare = ask.tokens.saturating_sub(tokens);
                    let runs = spare.checked_div(tokens).unwrap_or(0);
                    let fresh = TokenLease {
                        start_ms: t.window.start_ms,
                        max: t.max,
                        left: spare,
                        shared: grant.count,
                        taken_ms: now_ms,
                        runs,
                    };
                    held.entry(t.window.subject)
                        .and_modify(|l| {
                            if l.serves(t) {
                                l.left = l.left.saturating_add(spare);
                                l.shared = l.shared.max(grant.count);
                                l.taken_ms = now_ms;
                                l.runs = runs;
                            } else {
                                *l = fresh;
                            }
                        })
                        .or_insert(fresh);
                }
            }
            remaining.push(
                held.get(&t.window.subject)
                    .filter(|l| l.serves(t))
                    .map_or(0, |l| remaining_of(l, t.max)),
            );
        }
        Ok(Ok(remaining))
    }

    /// Hands a reservation back (its run was refused afterwards): into this process's lease
    /// of each window it still holds, else to the store.
    fn give_back_tokens<P: QuotaRepo + ?Sized>(&self, store: &P, takes: &[TokenTake]) {
        let mut back: SmallVec<[QuotaWindow; 3]> = SmallVec::new();
        let mut tokens = 0;
        {
            let mut held = self.token_lock();
            for t in takes {
                match held.get_mut(&t.window.subject).filter(|l| l.serves(t)) {
                    Some(l) => l.left = l.left.saturating_add(t.tokens),
                    None => {
                        back.push(t.window);
                        tokens = t.tokens;
                    }
                }
            }
        }
        if !back.is_empty() {
            let _ = store.release_tokens(&back, tokens);
        }
    }

    /// Sets the deployment's models and prices (once; later calls change nothing and answer
    /// false).
    pub fn set_catalog(&self, catalog: crate::models::Catalog) -> bool {
        self.catalog.set(catalog).is_ok()
    }

    /// The deployment's models and prices: the shipped prices and no allow-list until set.
    pub fn catalog(&self) -> &crate::models::Catalog {
        self.catalog.get_or_init(crate::models::Catalog::default)
    }

    /// Sets the completion allowance of runs that name no `max_tokens` (at least 1).
    pub fn set_completion_default(&self, tokens: u64) {
        self.completion_default
            .store(tokens.clamp(1, MAX_LIMIT), Ordering::Relaxed);
    }

    /// The completion allowance of runs that name no `max_tokens`.
    pub fn completion_default(&self) -> u64 {
        match self.completion_default.load(Ordering::Relaxed) {
            0 => DEFAULT_RESERVE_COMPLETION,
            n => n,
        }
    }

    /// The token counts this process reads, for the writer that adds to them
    /// ([`TokenReads::around_write`]).
    pub fn token_reads(&self) -> Arc<TokenReads> {
        Arc::clone(&self.tokens)
    }

    /// How many requests the next take of `window` asks for: the last take's size, doubled
    /// when it was taken less than [`LEASE_GROWTH_MS`] ago, else halved per such period (a
    /// lease of a past minute counts: a busy subject keeps its size across minutes); one when
    /// the limit changed within the window or the clock went back. Never more than
    /// [`MAX_LEASE`], nor than an eighth of what this process knows is left in the window.
    fn want(&self, window: &QuotaWindow, max: u64, now_ms: i64) -> u64 {
        let leases = self.lock();
        let Some(l) = leases.get(&window.subject) else {
            return 1;
        };
        let same_window = l.start_ms == window.start_ms;
        let idle = now_ms.saturating_sub(l.taken_ms);
        if (same_window && l.max != max) || l.start_ms > window.start_ms || idle < 0 {
            return 1;
        }
        let size = if idle < LEASE_GROWTH_MS {
            l.size.saturating_mul(2)
        } else {
            l.size
                .checked_shr(u32::try_from(idle / LEASE_GROWTH_MS).unwrap_or(u32::MAX))
                .unwrap_or(0)
        };
        let shared = if same_window { l.shared } else { 0 };
        size.min(MAX_LEASE)
            .min(max.saturating_sub(shared) / LEASE_SHARE)
            .max(1)
    }
}

/// Marks this process's writes of run usage (decision 0016). Token limits are checked by
/// reservation since issue 28 (decision 0025): admission no longer reads token counts, so no
/// count can be stale; the writer still runs its writes through [`TokenReads::around_write`],
/// which counts them.
#[derive(Debug, Default)]
pub struct TokenReads {
    epoch: AtomicU64,
}

/// Ends a usage write on drop, so a write that fails or panics ends too.
struct WriteEnds<'a>(&'a AtomicU64);

impl Drop for WriteEnds<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl TokenReads {
    /// Runs `write`, this process's write of run usage.
    pub fn around_write<T>(&self, write: impl FnOnce() -> T) -> T {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let _ends = WriteEnds(&self.epoch);
        write()
    }

    /// Usage writes begun, twice, plus one while one runs.
    pub fn writes(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }
}

/// What a run is expected to cost, for its token reservation: the prompt's tokens (counted
/// with the model family's tokenizer, OpenAI's per-message overhead included) and the
/// completion allowance (`max_completion_tokens` or `max_tokens`, else the configured
/// default, `GC_RESERVE_COMPLETION_TOKENS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunEstimate {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// The most tokens one run counts in a window (2^50, about 10^15: a thousand times the largest
/// limit): an upstream's usage above it (a hostile or broken answer) is counted as this, so
/// sums of many runs stay far from the 64-bit range of the stored counts.
pub const MAX_RUN_TOKENS: u64 = 1 << 50;

/// The tokens a run reserves in each of its token windows (decision 0025): its prompt plus its
/// completion allowance (saturating), at least 1 (a run is never free), at most `smallest`,
/// the smallest token limit that applies (so a run always fits a window nobody has used: a
/// limit below a run's allowance admits such runs one at a time rather than never).
pub fn reservation_size(estimate: RunEstimate, smallest: u64) -> u64 {
    estimate
        .prompt_tokens
        .saturating_add(estimate.completion_tokens)
        .clamp(1, smallest.max(1))
}

/// What settling a run changes each of its windows by: its true tokens (capped at
/// [`MAX_RUN_TOKENS`]) less what it reserved; negative when it used less.
pub fn settle_delta(reserved: u64, actual: u64) -> i64 {
    let actual = i64::try_from(actual.min(MAX_RUN_TOKENS)).unwrap_or(i64::MAX);
    let reserved = i64::try_from(reserved.min(MAX_RUN_TOKENS)).unwrap_or(i64::MAX);
    actual - reserved
}

/// The tokens a finished run is settled to: the upstream's usage when it reported one (the
/// larger of its total and its parts), else what was sent and relayed — the prompt's tokens as
/// counted at admission and the output tokens passed on to the client — never zero for a run
/// that reached the upstream.
pub fn settled_tokens(
    reported: Option<(u64, u64, u64)>,
    prompt_estimate: u64,
    relayed: Option<u64>,
) -> u64 {
    match reported {
        Some((prompt, completion, total)) => total.max(prompt.saturating_add(completion)),
        None => prompt_estimate.saturating_add(relayed.unwrap_or(0)).max(1),
    }
    .min(MAX_RUN_TOKENS)
}

/// A run's token reservation: `tokens` counted at admission in each of its token windows (the
/// tenant's minute and month, its key's minute) of the instant `at`. The run writer settles
/// the same windows to the run's true tokens ([`settle_delta`]), in the transaction that
/// stores its usage line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenReservation {
    pub tokens: u64,
    pub at: DateTime<Utc>,
}

/// One window of a [`QuotaRepo::reserve_tokens`]: add `tokens` to `window` unless that passes
/// `max` (`None`: no limit on this window, counted all the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenTake {
    pub window: QuotaWindow,
    pub tokens: u64,
    pub max: Option<u64>,
}

/// What [`admit`] lets through: the state for the response headers and the run's token
/// reservation (when a token limit applies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admission {
    pub state: RateLimitState,
    pub reservation: Option<TokenReservation>,
    /// The run's money reservation, when a spend limit applies.
    pub spend: Option<SpendReservation>,
    /// The prompt's counted tokens, when a token or spend limit applies (else 0).
    pub prompt_tokens: u64,
}

/// [`admit_run`] for a run of one token (tests of the request and token rules).
#[cfg(test)]
pub fn admit<P: QuotaRepo + ?Sized>(
    store: &P,
    quotas: &NodeQuotas,
    scope: &RunScope,
    now: DateTime<Utc>,
) -> DomainResult<RateLimitState> {
    admit_run(store, quotas, scope, now, None, RunEstimate::default).map(|a| a.state)
}

/// Applies the caller's tenant and key limits before the upstream call. Token limits first
/// (decision 0025): when one applies, the run's likely tokens (`estimate`, only worked out
/// then) are reserved in every token window of the run at once, on every node's shared
/// count, never past a limit: `budget_exhausted` when the month's would pass, `rate_limited`
/// when a minute's would. Then one request is counted in each per-minute request window
/// (`rate_limited` when full; the reservation is handed back). Returns the state for the
/// response headers and the reservation. No limit set: no query at all.
///
/// A spend limit (tenant or key `monthly_spend`, decision 0038) reserves the cost of the run's
/// likely tokens at `price` (prompt at the input price, completion allowance at the output
/// price) in the tenant's and key's spend windows of the month, after the tokens and in the
/// same way (`budget_exhausted` when it does not fit; everything handed back on a later
/// refusal). A spend limit and no known price refuses the run (403 `model_not_allowed`):
/// a cost gc cannot count cannot be kept within a limit.
pub fn admit_run<P: QuotaRepo + ?Sized>(
    store: &P,
    quotas: &NodeQuotas,
    scope: &RunScope,
    now: DateTime<Utc>,
    price: Option<Price>,
    estimate: impl FnOnce() -> RunEstimate,
) -> DomainResult<Admission> {
    let tenant = scope.tenant();
    let t = tenant.limits;
    let key = scope.key().filter(|(_, l)| !l.is_empty());
    if t.is_empty() && key.is_none() {
        return Ok(Admission::default());
    }
    let minute = minute_start(now);
    let minute_reset = secs_until(now, minute + 60_000);
    let key_tpm = key.and_then(|(_, l)| l.tokens_per_minute);
    let key_spend = key.and_then(|(_, l)| l.monthly_spend);
    let token_limited =
        t.tokens_per_minute.is_some() || t.monthly_tokens.is_some() || key_tpm.is_some();
    let spend_price = if t.monthly_spend.is_some() || key_spend.is_some() {
        Some(price.ok_or_else(|| {
            DomainError::ModelNotAllowed(
                "no price is known for this model, and a spend limit applies".into(),
            )
        })?)
    } else {
        None
    };
    // Worked out once, only when a token or spend limit applies.
    let estimate = (token_limited || spend_price.is_some()).then(estimate);
    let mut state = RateLimitState::default();
    let mut reservation = None;
    let mut reserved_windows: SmallVec<[(QuotaWindow, Option<u64>); 3]> = SmallVec::new();
    if token_limited {
        // Every token window of the run, limited or not (the writer counts tokens in all of
        // them), in the one lock order (decision 0024).
        let month = month_start(now).timestamp_millis();
        let mut takes: SmallVec<[(TokenTake, QuotaReason); 3]> = SmallVec::new();
        let mut window = |subject, start_ms, max, reason| {
            let window = QuotaWindow { subject, start_ms };
            let take = TokenTake {
                window,
                tokens: 0,
                max,
            };
            takes.push((take, reason));
        };
        window(
            QuotaSubject::TenantMinute(tenant.id),
            minute,
            t.tokens_per_minute,
            QuotaReason::TokensPerMinute,
        );
        if let Some((key_id, _)) = scope.key() {
            window(
                QuotaSubject::KeyMinute(key_id),
                minute,
                key_tpm,
                QuotaReason::TokensPerMinute,
            );
        }
        window(
            QuotaSubject::TenantMonth(tenant.id),
            month,
            t.monthly_tokens,
            QuotaReason::MonthlyTokens,
        );
        takes.sort_by_key(|(take, _)| take.window);
        let smallest = takes
            .iter()
            .filter_map(|(take, _)| take.max)
            .min()
            .unwrap_or(MAX_LIMIT);
        let tokens = reservation_size(estimate.unwrap_or_default(), smallest);
        for (take, _) in &mut takes {
            take.tokens = tokens;
        }
        let asks: SmallVec<[TokenTake; 3]> = takes.iter().map(|(take, _)| *take).collect();
        reserved_windows = asks.iter().map(|a| (a.window, a.max)).collect();
        let reset = |reason: QuotaReason| {
            if reason == QuotaReason::MonthlyTokens {
                secs_until(now, next_month_start(now).timestamp_millis())
            } else {
                minute_reset
            }
        };
        match quotas.reserve_tokens(store, &asks, tokens, now.timestamp_millis())? {
            Ok(remaining) => {
                for ((take, reason), remaining) in takes.iter().zip(remaining) {
                    if let (Some(max), QuotaReason::TokensPerMinute) = (take.max, reason) {
                        let here = Allowance {
                            limit: max,
                            remaining,
                            reset_secs: minute_reset,
                        };
                        state.tokens = Some(Allowance::tighter(state.tokens, here));
                    }
                }
                reservation = Some(TokenReservation { tokens, at: now });
            }
            Err(i) => {
                let (take, reason) = takes
                    .get(i)
                    .copied()
                    .unwrap_or((asks[0], QuotaReason::TokensPerMinute));
                let retry_after_secs = reset(reason);
                return Err(DomainError::QuotaExceeded {
                    reason,
                    retry_after_secs,
                    state: RateLimitState {
                        tokens: Some(Allowance {
                            limit: take.max.unwrap_or(0),
                            remaining: 0,
                            reset_secs: retry_after_secs,
                        }),
                        ..state
                    },
                });
            }
        }
    }
    let give_back_tokens = |reservation: &Option<TokenReservation>| {
        // Refused (or failed) after the reservation: hand it back, so a refused run
        // costs no tokens (into this node's lease when it holds one for the window, else
        // to the store). A hand-back that fails leaves the reservation counted until its
        // window ends: a run counted that never ran, on the safe side of the limit.
        if let Some(r) = reservation {
            let asks: SmallVec<[TokenTake; 3]> = takes_of(&reserved_windows, r.tokens);
            quotas.give_back_tokens(store, &asks);
        }
    };
    let mut spend = None;
    let mut spend_windows_taken: SmallVec<[(QuotaWindow, Option<u64>); 3]> = SmallVec::new();
    if let Some(price) = spend_price {
        let e = estimate.unwrap_or_default();
        let mut takes: SmallVec<[TokenTake; 3]> = SmallVec::new();
        for w in spend_windows(tenant.id, scope.key().map(|(id, _)| id), now) {
            let max = match w.subject {
                QuotaSubject::KeySpend(_) => key_spend,
                _ => t.monthly_spend,
            };
            takes.push(TokenTake {
                window: w,
                tokens: 0,
                max,
            });
        }
        takes.sort_by_key(|take| take.window);
        let smallest = takes.iter().filter_map(|t| t.max).min().unwrap_or(u64::MAX);
        // Like a token reservation: at least 1, at most the smallest limit, so a run always
        // fits a month nobody has spent in.
        let nanos = price
            .cost(e.prompt_tokens, e.completion_tokens)
            .clamp(1, smallest.max(1));
        for take in &mut takes {
            take.tokens = nanos;
        }
        match quotas.reserve_tokens(store, &takes, nanos, now.timestamp_millis()) {
            Ok(Ok(_)) => {
                spend = Some(SpendReservation { nanos, at: now });
                spend_windows_taken = takes.iter().map(|t| (t.window, t.max)).collect();
            }
            Ok(Err(_)) => {
                give_back_tokens(&reservation);
                let retry_after_secs = secs_until(now, next_month_start(now).timestamp_millis());
                return Err(DomainError::QuotaExceeded {
                    reason: QuotaReason::MonthlySpend,
                    retry_after_secs,
                    state,
                });
            }
            Err(e) => {
                give_back_tokens(&reservation);
                return Err(e);
            }
        }
    }
    match admit_requests(store, quotas, scope, now, state) {
        Ok(state) => Ok(Admission {
            state,
            reservation,
            spend,
            prompt_tokens: estimate.map_or(0, |e| e.prompt_tokens),
        }),
        Err(e) => {
            give_back_tokens(&reservation);
            if let Some(s) = &spend {
                let asks: SmallVec<[TokenTake; 3]> = takes_of(&spend_windows_taken, s.nanos);
                quotas.give_back_tokens(store, &asks);
            }
            Err(e)
        }
    }
}

fn takes_of(windows: &[(QuotaWindow, Option<u64>)], tokens: u64) -> SmallVec<[TokenTake; 3]> {
    windows
        .iter()
        .map(|(window, max)| TokenTake {
            window: *window,
            tokens,
            max: *max,
        })
        .collect()
}

/// The request part of [`admit_run`]: one request in every per-minute request window.
fn admit_requests<P: QuotaRepo + ?Sized>(
    store: &P,
    quotas: &NodeQuotas,
    scope: &RunScope,
    now: DateTime<Utc>,
    mut state: RateLimitState,
) -> DomainResult<RateLimitState> {
    let tenant = scope.tenant();
    let t = tenant.limits;
    let key = scope.key().filter(|(_, l)| !l.is_empty());
    let minute = minute_start(now);
    let minute_reset = secs_until(now, minute + 60_000);
    // Requests: admitted from this process's leases, which the shared count already holds;
    // a window without one is taken from the shared count now, never above the limit.
    let mut takes: SmallVec<[(QuotaWindow, u64); 2]> = SmallVec::new();
    if let Some(max) = t.requests_per_minute {
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(tenant.id),
            start_ms: minute,
        };
        takes.push((w, max));
    }
    if let Some((key_id, Some(max))) = key.map(|(id, l)| (id, l.requests_per_minute)) {
        let w = QuotaWindow {
            subject: QuotaSubject::KeyMinute(key_id),
            start_ms: minute,
        };
        takes.push((w, max));
    }
    if takes.is_empty() {
        return Ok(state);
    }
    match take_requests(store, quotas, &takes, now.timestamp_millis())? {
        Ok(remaining) => {
            for ((_, max), remaining) in takes.iter().zip(remaining) {
                let here = Allowance {
                    limit: *max,
                    remaining,
                    reset_secs: minute_reset,
                };
                state.requests = Some(Allowance::tighter(state.requests, here));
            }
            Ok(state)
        }
        Err(i) => {
            let limit = takes.get(i).map_or(0, |(_, max)| *max);
            Err(DomainError::QuotaExceeded {
                reason: QuotaReason::RequestsPerMinute,
                retry_after_secs: minute_reset,
                state: RateLimitState {
                    requests: Some(Allowance {
                        limit,
                        remaining: 0,
                        reset_secs: minute_reset,
                    }),
                    ..state
                },
            })
        }
    }
}

/// Admits one request in every window of `takes`: from this process's lease where it holds
/// one, else from a new lease taken from the shared count (all such windows in one
/// [`QuotaRepo::take_request`]). `Ok` holds the remaining allowance of each window; `Err`
/// the index of a full window, in which case nothing is admitted (units taken from local
/// leases are put back; the store counts nothing for a refused take).
fn take_requests<P: QuotaRepo + ?Sized>(
    store: &P,
    quotas: &NodeQuotas,
    takes: &[(QuotaWindow, u64)],
    now_ms: i64,
) -> DomainResult<Result<SmallVec<[u64; 2]>, usize>> {
    let mut waited = false;
    let (mut remaining, from_lease, missing) = loop {
        let mut remaining: SmallVec<[u64; 2]> = smallvec::smallvec![0; takes.len()];
        let mut from_lease: SmallVec<[bool; 2]> = smallvec::smallvec![false; takes.len()];
        let mut missing: SmallVec<[usize; 2]> = SmallVec::new();
        {
            let mut held = quotas.lock();
            if held.len() > 4_096 {
                // Forget leases of minutes gone by (their units are lost with the minute).
                held.retain(|_, l| l.start_ms >= now_ms.div_euclid(60_000) * 60_000);
            }
            for (i, (w, max)) in takes.iter().enumerate() {
                match held
                    .get_mut(&w.subject)
                    .filter(|l| l.serves(w.start_ms, *max) && l.left > 0)
                {
                    Some(l) => {
                        l.left -= 1;
                        remaining[i] = l.remaining();
                        from_lease[i] = true;
                        if l.wants_refill() && quotas.queue_refill(*w, *max) {
                            l.refilling = true;
                        }
                    }
                    None => missing.push(i),
                }
            }
        }
        if missing.is_empty() {
            return Ok(Ok(remaining));
        }
        // Another request of this node is taking a lease for a subject this one lacks: wait for
        // that take (once, at most FOLLOW_WAIT) and look again, rather than count a request of
        // our own in the shared window. Followers that each wrote one request queued a write
        // each behind the leader's, so a busy subject's lease grew one doubling per queue of
        // writes (issue 28: a limited tenant's first second at 0.2 of an unlimited one's rate).
        // Never on a thread that serves connections (`QuotaRepo::may_wait`).
        if !waited && store.may_wait() {
            let taking = quotas.taking_lock();
            let lacks = |t: &FxHashMap<QuotaSubject, u32>| {
                missing
                    .iter()
                    .filter_map(|i| takes.get(*i))
                    .any(|(w, _)| t.contains_key(&w.subject))
            };
            if lacks(&taking) {
                {
                    // Put back what this attempt took from local leases; the next looks again.
                    let mut held = quotas.lock();
                    for (i, (w, max)) in takes.iter().enumerate() {
                        if from_lease[i] {
                            if let Some(l) = held
                                .get_mut(&w.subject)
                                .filter(|l| l.serves(w.start_ms, *max))
                            {
                                l.left += 1;
                            }
                        }
                    }
                }
                let _ = quotas
                    .taken
                    .wait_timeout_while(taking, quotas.follow_wait(), |t| lacks(t))
                    .unwrap_or_else(PoisonError::into_inner);
                waited = true;
                continue;
            }
        }
        break (remaining, from_lease, missing);
    };
    // A lease's worth unless another request of this node is taking one for the subject
    // right now: then one request (the lease being taken serves what follows).
    let (asks, follows, _taking) = {
        let mut taking = quotas.taking_lock();
        let mut subjects = SmallVec::new();
        let mut follows: SmallVec<[bool; 2]> = SmallVec::new();
        let asks: SmallVec<[RequestTake; 2]> = missing
            .iter()
            .filter_map(|i| takes.get(*i))
            .map(|(w, max)| {
                let in_flight = taking.entry(w.subject).or_insert(0);
                follows.push(*in_flight > 0);
                let want = if *in_flight > 0 {
                    1
                } else {
                    quotas.want(w, *max, now_ms).min(*max)
                };
                *in_flight += 1;
                subjects.push(w.subject);
                RequestTake {
                    window: *w,
                    max: *max,
                    want,
                }
            })
            .collect();
        (asks, follows, Taking { quotas, subjects })
    };
    let answer = store.take_request(&asks);
    let mut held = quotas.lock();
    let grants = match answer {
        Ok(Take::Taken(grants)) => grants,
        other => {
            // Put back what this request took from local leases.
            for (i, (w, max)) in takes.iter().enumerate() {
                if from_lease[i] {
                    if let Some(l) = held
                        .get_mut(&w.subject)
                        .filter(|l| l.serves(w.start_ms, *max))
                    {
                        l.left += 1;
                    }
                }
            }
            return match other {
                Ok(Take::Full(j)) => Ok(Err(missing.get(j).copied().unwrap_or(0))),
                Ok(Take::Taken(_)) => Ok(Err(0)),
                Err(e) => Err(e),
            };
        }
    };
    for (((i, ask), grant), follows) in missing.iter().zip(&asks).zip(grants).zip(follows) {
        let (w, max) = (ask.window, ask.max);
        // This request uses one of the granted requests; the rest wait here.
        let spare = grant.granted.saturating_sub(1);
        let l = held
            .entry(w.subject)
            .and_modify(|l| {
                if l.serves(w.start_ms, max) {
                    l.left += spare;
                    l.shared = l.shared.max(grant.count);
                } else {
                    l.start_ms = w.start_ms;
                    l.max = max;
                    l.left = spare;
                    l.shared = grant.count;
                    l.refilling = false;
                }
                // A single request counted behind another's take is not a lease: the size
                // and time the next lease grows from are the leader's.
                if !follows {
                    l.size = grant.granted;
                    l.taken_ms = now_ms;
                }
            })
            .or_insert(Lease {
                start_ms: w.start_ms,
                max,
                left: spare,
                shared: grant.count,
                size: grant.granted,
                taken_ms: now_ms,
                refilling: false,
            });
        remaining[*i] = l.remaining();
    }
    Ok(Ok(remaining))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::tests::tenant;
    use crate::access::Credential;
    use crate::fakes::Fake;
    use crate::gateway::tests::{key, member, session};
    use crate::gateway::AiKeyStatus;
    use crate::model::Status;
    use crate::values::Region;
    use crate::workspace::KeyScope;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn scope(limits: TenantLimits, key_limits: Option<KeyLimits>) -> (RunScope, Fake) {
        let mut t = tenant(Status::Active);
        t.limits = limits;
        let store = Fake::with_keys(vec![key(&t, Region::Aihk, true, AiKeyStatus::Ready)]);
        let credential = match key_limits {
            Some(limits) => Credential::ApiKey {
                key_id: Uuid::now_v7(),
                name: "k".into(),
                scopes: vec![KeyScope::Run],
                limits,
            },
            None => session(),
        };
        let scope = RunScope::authorize(&member(&t, credential), &store, true).unwrap();
        (scope, store)
    }

    #[test]
    fn no_limits_cost_no_query() {
        let (scope, store) = scope(TenantLimits::default(), Some(KeyLimits::default()));
        let state = admit(&store, &NodeQuotas::default(), &scope, Utc::now()).unwrap();
        assert_eq!(state, RateLimitState::default());
        assert_eq!(*store.quota_calls.lock().unwrap(), 0);
    }

    #[test]
    fn exactly_the_limit_gets_through_per_minute() {
        let limits = TenantLimits {
            requests_per_minute: Some(3),
            ..TenantLimits::default()
        };
        let (scope, store) = scope(limits, None);
        let now = at("2026-11-21T10:00:15Z");
        for left in [2, 1, 0] {
            let s = admit(&store, &NodeQuotas::default(), &scope, now).unwrap();
            let r = s.requests.unwrap();
            assert_eq!((r.limit, r.remaining, r.reset_secs), (3, left, 45));
            assert_eq!(s.tokens, None);
        }
        let e = admit(&store, &NodeQuotas::default(), &scope, now).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        let DomainError::QuotaExceeded {
            retry_after_secs,
            state,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(*retry_after_secs, 45);
        let spent = Allowance {
            limit: 3,
            remaining: 0,
            reset_secs: 45,
        };
        assert_eq!(state.requests, Some(spent), "the refusal's headers");
        // The next minute is a new window.
        assert!(admit(
            &store,
            &NodeQuotas::default(),
            &scope,
            at("2026-11-21T10:01:00Z")
        )
        .is_ok());
    }

    #[test]
    fn a_key_limit_below_the_tenant_refuses_first_and_counts_nothing_else() {
        let limits = TenantLimits {
            requests_per_minute: Some(10),
            ..TenantLimits::default()
        };
        let key_limits = key_rpm(1);
        let (scope, store) = scope(limits, Some(key_limits));
        let now = at("2026-11-21T10:00:00Z");
        let s = admit(&store, &NodeQuotas::default(), &scope, now).unwrap();
        assert_eq!(s.requests.unwrap().remaining, 0, "the key's is the tighter");
        assert_eq!(
            admit(&store, &NodeQuotas::default(), &scope, now)
                .unwrap_err()
                .code(),
            "rate_limited"
        );
        let tenant_window = QuotaWindow {
            subject: QuotaSubject::TenantMinute(scope.tenant().id),
            start_ms: minute_start(now),
        };
        let counts = store.quota.lock().unwrap();
        assert_eq!(counts.get(&tenant_window).map(|c| c.0), Some(1));
    }

    #[test]
    fn used_tokens_refuse_the_next_request() {
        let limits = TenantLimits {
            tokens_per_minute: Some(100),
            monthly_tokens: Some(1000),
            ..TenantLimits::default()
        };
        let (scope, store) = scope(limits, None);
        let now = at("2026-11-21T10:00:30Z");
        // A run of one token (the least a run reserves).
        let s = admit(&store, &NodeQuotas::default(), &scope, now).unwrap();
        assert_eq!(s.tokens.unwrap().remaining, 99);
        store.add_tokens_now(token_windows(scope.tenant().id, None, now), 39);
        let s = admit(&store, &NodeQuotas::default(), &scope, now).unwrap();
        assert_eq!(s.tokens.unwrap().remaining, 59);
        store.add_tokens_now(token_windows(scope.tenant().id, None, now), 59);
        let e = admit(&store, &NodeQuotas::default(), &scope, now).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        let DomainError::QuotaExceeded { state, .. } = &e else {
            panic!("{e:?}")
        };
        let spent = Allowance {
            limit: 100,
            remaining: 0,
            reset_secs: 30,
        };
        assert_eq!(state.tokens, Some(spent), "the refusal's headers");
        // The next minute the per-minute count is fresh, the month's is not.
        let later = at("2026-11-21T10:01:30Z");
        assert!(admit(&store, &NodeQuotas::default(), &scope, later).is_ok());
        store.add_tokens_now(token_windows(scope.tenant().id, None, later), 900);
        let e = admit(
            &store,
            &NodeQuotas::default(),
            &scope,
            at("2026-11-21T10:02:30Z"),
        )
        .unwrap_err();
        assert_eq!(e.code(), "budget_exhausted");
        let DomainError::QuotaExceeded {
            retry_after_secs, ..
        } = e
        else {
            panic!()
        };
        assert_eq!(retry_after_secs, 9 * 86_400 + 13 * 3600 + 57 * 60 + 30);
        // A new month.
        assert!(admit(
            &store,
            &NodeQuotas::default(),
            &scope,
            at("2026-12-01T00:00:00Z")
        )
        .is_ok());
    }

    fn token_limits() -> TenantLimits {
        TenantLimits {
            tokens_per_minute: Some(100),
            monthly_tokens: Some(1000),
            ..TenantLimits::default()
        }
    }

    fn run_of(prompt: u64, completion: u64) -> impl FnOnce() -> RunEstimate {
        move || RunEstimate {
            prompt_tokens: prompt,
            completion_tokens: completion,
        }
    }

    fn tokens_in(store: &Fake, w: QuotaWindow) -> u64 {
        store.quota.lock().unwrap().get(&w).map_or(0, |c| c.1)
    }

    #[test]
    fn reservation_arithmetic() {
        let e = |p, c| RunEstimate {
            prompt_tokens: p,
            completion_tokens: c,
        };
        // Prompt plus allowance, at least 1, at most the smallest limit.
        assert_eq!(reservation_size(e(10, 16), 100), 26);
        assert_eq!(reservation_size(e(0, 0), 100), 1);
        assert_eq!(reservation_size(e(10, 1024), 100), 100);
        // Hostile sizes saturate instead of overflowing.
        assert_eq!(
            reservation_size(e(u64::MAX, u64::MAX), MAX_LIMIT),
            MAX_LIMIT
        );
        assert_eq!(reservation_size(e(5, 1 << 63), 0), 1);
        // Settling: true less reserved, either sign, hostile usage capped.
        assert_eq!(settle_delta(26, 12), -14);
        assert_eq!(settle_delta(26, 40), 14);
        assert_eq!(settle_delta(0, u64::MAX), 1 << 50);
        assert_eq!(settle_delta(u64::MAX, 0), -(1 << 50));
        // A run without usage counts what was sent and relayed, never zero.
        assert_eq!(settled_tokens(None, 9, Some(30)), 39);
        assert_eq!(settled_tokens(None, 9, None), 9);
        assert_eq!(settled_tokens(None, 0, None), 1);
        assert_eq!(settled_tokens(Some((5, 7, 12)), 9, Some(3)), 12);
        assert_eq!(settled_tokens(Some((5, 7, 0)), 9, None), 12);
        assert_eq!(
            settled_tokens(Some((u64::MAX, 1, 0)), 0, None),
            MAX_RUN_TOKENS
        );
    }

    #[test]
    fn a_reservation_is_refused_when_it_does_not_fit_and_counts_in_every_window() {
        let (scope, store) = scope(token_limits(), None);
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:30Z");
        let [minute, month] = [0, 1].map(|i| token_windows(scope.tenant().id, None, now)[i]);
        // Three runs of 30 fit a limit of 100, a fourth does not: nothing has finished yet.
        for n in 1..=3 {
            let a = admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap();
            assert_eq!(a.reservation.unwrap().tokens, 30);
            assert_eq!(a.state.tokens.unwrap().remaining, 100 - 30 * n);
        }
        let e = admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        // The minute (100) has no room for a lease: exact. The month (1000) has: the second
        // run reserved its 30 and a lease of one more run (leases start at one run and
        // double), which served the third; the refused fourth counted nothing.
        assert_eq!(
            (tokens_in(&store, minute), tokens_in(&store, month)),
            (90, 90)
        );
        // A run of 10 still fits.
        assert!(admit_run(&store, &node, &scope, now, None, run_of(4, 6)).is_ok());
        // A run larger than the limit reserves the limit: it runs alone in an empty minute.
        let later = at("2026-11-21T10:01:00Z");
        let a = admit_run(&store, &node, &scope, later, None, run_of(10, 5000)).unwrap();
        assert_eq!(a.reservation.unwrap().tokens, 100);
        assert_eq!(
            admit_run(&store, &node, &scope, later, None, run_of(1, 0))
                .unwrap_err()
                .code(),
            "rate_limited"
        );
    }

    #[test]
    fn a_reservation_is_handed_back_when_the_request_limit_refuses_the_run() {
        let limits = TenantLimits {
            requests_per_minute: Some(1),
            ..token_limits()
        };
        let (scope, store) = scope(limits, None);
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:30Z");
        let minute = token_windows(scope.tenant().id, None, now)[0];
        admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap();
        let e = admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        // The refused run's 30 went back to this node's lease of the window, not to a run:
        // the node's next run takes them without a write.
        assert_eq!(tokens_in(&store, minute), 60);
        let calls = *store.quota_calls.lock().unwrap();
        let later = now + chrono::Duration::milliseconds(1);
        let e = admit_run(&store, &node, &scope, later, None, run_of(10, 20)).unwrap_err();
        assert_eq!(e.code(), "rate_limited", "requests are still used up");
        assert_eq!(tokens_in(&store, minute), 60);
        // Only the request take wrote: the tokens came from the lease and went back to it.
        assert_eq!(*store.quota_calls.lock().unwrap(), calls + 1);
    }

    #[test]
    fn a_busy_subject_far_from_its_limits_reserves_in_few_writes_and_never_past_them() {
        let limits = TenantLimits {
            tokens_per_minute: Some(1_000_000),
            monthly_tokens: Some(100_000_000),
            ..TenantLimits::default()
        };
        let (scope, store) = scope(limits, None);
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:30Z");
        for _ in 0..640 {
            admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap();
        }
        // One exact reservation, then leases of 1, 2, 4, ... runs: about log2(640) writes.
        let writes = *store.quota_calls.lock().unwrap();
        assert!((2..=14).contains(&writes), "{writes}");
        let [minute, month] = [0, 1].map(|i| token_windows(scope.tenant().id, None, now)[i]);
        for w in [minute, month] {
            // What the last lease has left is under its size, which is under what was used.
            let n = tokens_in(&store, w);
            assert!((640 * 30..2 * 640 * 30).contains(&n), "{n}");
        }
        // Near a limit leases shrink to exact reservations (a lease is at most an eighth of
        // what is left): the limit is reached exactly, never passed.
        let (scope, store) = super::tests::scope(
            TenantLimits {
                tokens_per_minute: Some(3_000),
                ..TenantLimits::default()
            },
            None,
        );
        let node = NodeQuotas::default();
        let admitted = (0..200)
            .filter(|_| admit_run(&store, &node, &scope, now, None, run_of(10, 20)).is_ok())
            .count();
        assert_eq!(admitted, 100);
        let minute = token_windows(scope.tenant().id, None, now)[0];
        assert_eq!(tokens_in(&store, minute), 3_000);
    }

    #[test]
    fn a_key_token_limit_reserves_in_the_key_window_too_and_no_estimate_without_one() {
        let key_limits = KeyLimits {
            tokens_per_minute: Some(50),
            ..KeyLimits::default()
        };
        let (scope, store) = scope(TenantLimits::default(), Some(key_limits));
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:30Z");
        let a = admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap();
        assert_eq!(a.state.tokens.unwrap().limit, 50);
        let e = admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        // Requests only: no reservation, the estimate is never worked out.
        let (scope, store) = scope_with_rpm();
        let a = admit_run(&store, &node, &scope, now, None, || -> RunEstimate {
            panic!("no token limit applies")
        })
        .unwrap();
        assert_eq!(a.reservation, None);
    }

    fn scope_with_rpm() -> (RunScope, Fake) {
        scope(
            TenantLimits {
                requests_per_minute: Some(10),
                ..TenantLimits::default()
            },
            None,
        )
    }

    #[test]
    fn usage_writes_are_counted() {
        let reads = TokenReads::default();
        assert_eq!(reads.around_write(|| reads.writes()), 1);
        assert_eq!(reads.writes(), 2);
    }

    #[test]
    fn limits_are_empty_only_without_any_limit() {
        // `admit` skips all of its work for a caller with no limit at all.
        assert!(TenantLimits::default().is_empty());
        assert!(KeyLimits::default().is_empty());
        let monthly = TenantLimits {
            monthly_tokens: Some(1),
            ..TenantLimits::default()
        };
        assert!(!monthly.is_empty());
        let tokens = KeyLimits {
            tokens_per_minute: Some(1),
            ..KeyLimits::default()
        };
        assert!(!tokens.is_empty());
    }

    #[test]
    fn stored_subject_names_keep_their_prefixes() {
        // `prune_windows` tells monthly windows from per-minute ones by the `m:` prefix.
        let id = Uuid::from_u128(7);
        assert_eq!(QuotaSubject::TenantMinute(id).stored(), format!("t:{id}"));
        assert_eq!(QuotaSubject::KeyMinute(id).stored(), format!("k:{id}"));
        assert_eq!(QuotaSubject::TenantMonth(id).stored(), format!("m:{id}"));
    }

    #[test]
    fn refusals_say_which_limit_and_resets_round_up() {
        assert_eq!(
            QuotaReason::MonthlyTokens.to_string(),
            "the monthly token budget is used up"
        );
        assert_eq!(
            QuotaReason::RequestsPerMinute.to_string(),
            "the requests-per-minute limit is reached"
        );
        let now = at("2026-11-21T10:00:15.500Z");
        assert_eq!(secs_until(now, minute_start(now) + 60_000), 45);
        assert_eq!(secs_until(now, now.timestamp_millis()), 1, "at least one");
    }

    #[test]
    fn the_tighter_allowance_has_less_left() {
        let a = Allowance {
            limit: 10,
            remaining: 5,
            reset_secs: 1,
        };
        let b = Allowance {
            limit: 20,
            remaining: 7,
            reset_secs: 2,
        };
        assert_eq!(Allowance::tighter(Some(a), b), a);
        assert_eq!(Allowance::tighter(Some(b), a), a);
        assert_eq!(Allowance::tighter(None, b), b);
    }

    #[test]
    fn leases_double_within_a_second_and_stay_an_eighth_of_what_is_left() {
        let node = NodeQuotas::default();
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(Uuid::from_u128(1)),
            start_ms: 0,
        };
        node.lock().insert(
            w.subject,
            Lease {
                start_ms: 0,
                max: 1_000_000,
                left: 0,
                shared: 100,
                size: 8,
                taken_ms: 0,
                refilling: false,
            },
        );
        assert_eq!(node.want(&w, 1_000_000, LEASE_GROWTH_MS - 1), 16);
        // Slower: halved for every second since the take.
        assert_eq!(node.want(&w, 1_000_000, LEASE_GROWTH_MS), 4);
        assert_eq!(node.want(&w, 1_000_000, 2 * LEASE_GROWTH_MS + 999), 2);
        assert_eq!(node.want(&w, 1_000_000, 3 * LEASE_GROWTH_MS), 1);
        assert_eq!(node.want(&w, 1_000_000, 100 * LEASE_GROWTH_MS), 1);
        assert_eq!(node.want(&w, 1_000_000, i64::MAX), 1);
        // The clock went back; the limit changed within the window: one.
        assert_eq!(node.want(&w, 1_000_000, -1), 1);
        assert_eq!(node.want(&w, 999_999, 10), 1);
        // The next minute: the size carries over, the eighth is of the whole new window.
        let next = QuotaWindow {
            start_ms: 60_000,
            ..w
        };
        assert_eq!(node.want(&next, 1_000_000, 10), 16);
        assert_eq!(node.want(&next, 1_000_000, LEASE_GROWTH_MS), 4);
        assert_eq!(
            node.want(&next, 999_999, 10),
            16,
            "another limit in a new window"
        );
        assert_eq!(node.want(&next, 80, 10), 10);
        // A lease of a later minute than asked for (the clock went back): one.
        let before = QuotaWindow {
            start_ms: -60_000,
            ..w
        };
        assert_eq!(node.want(&before, 1_000_000, 10), 1);
        // 40 left of 1,000: at most 5 at once.
        node.lock().insert(
            w.subject,
            Lease {
                start_ms: 0,
                max: 1_000,
                left: 0,
                shared: 960,
                size: 8,
                taken_ms: 0,
                refilling: false,
            },
        );
        assert_eq!(node.want(&w, 1_000, 10), 5);
    }

    #[test]
    fn leases_of_past_minutes_are_forgotten_when_many_are_held() {
        let (scope, store) = scope(rpm(1_000), None);
        let now = at("2026-11-21T10:00:30Z");
        let last_minute = minute_start(now) - 60_000;
        let fill = |node: &NodeQuotas, n: u128| {
            let mut held = node.lock();
            for i in 0..n {
                held.insert(
                    QuotaSubject::KeyMinute(Uuid::from_u128(i + 1)),
                    Lease {
                        start_ms: last_minute,
                        max: 10,
                        left: 1,
                        shared: 1,
                        size: 1,
                        taken_ms: 0,
                        refilling: false,
                    },
                );
            }
        };
        // Up to 4,096 are kept.
        let node = NodeQuotas::default();
        fill(&node, 4_096);
        admit(&store, &node, &scope, now).unwrap();
        assert_eq!(node.lock().len(), 4_097);
        // Above that, last minute's go and this minute's stay.
        admit(&store, &node, &scope, now).unwrap();
        let held = node.lock();
        assert_eq!(held.len(), 1, "only this minute's lease is left");
        assert!(held.contains_key(&QuotaSubject::TenantMinute(scope.tenant().id)));
    }

    #[test]
    fn a_refused_take_puts_back_what_the_other_window_s_lease_gave() {
        let key_limits = key_rpm(1);
        let (keyed, store) = scope(rpm(1_000), Some(key_limits));
        // The same tenant through a session: no key window, and a tenant lease that grows.
        let session = relimit(&keyed, &store, rpm(1_000));
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:00Z");
        for _ in 0..10 {
            admit(&store, &node, &session, now).unwrap();
        }
        admit(&store, &node, &keyed, now).unwrap();
        let remaining = |s: RateLimitState| s.requests.unwrap().remaining;
        let before = remaining(admit(&store, &node, &session, now).unwrap());
        for _ in 0..3 {
            assert_eq!(
                admit(&store, &node, &keyed, now).unwrap_err().code(),
                "rate_limited"
            );
        }
        let after = remaining(admit(&store, &node, &session, now).unwrap());
        assert_eq!(
            after,
            before - 1,
            "the refusals took nothing from the lease"
        );
    }

    #[test]
    fn key_limits_must_stay_within_the_tenants() {
        let tenant = TenantLimits {
            requests_per_minute: Some(10),
            tokens_per_minute: None,
            monthly_tokens: None,
            monthly_spend: Some(1_000),
        };
        let ok = KeyLimits {
            requests_per_minute: Some(10),
            tokens_per_minute: Some(5000),
            monthly_spend: Some(1_000),
        };
        assert!(ok.check_within(&tenant).is_ok());
        let spends_more = KeyLimits {
            monthly_spend: Some(1_001),
            ..ok
        };
        let e = spends_more.check_within(&tenant).unwrap_err();
        assert!(e.to_string().starts_with("limits.monthly_spend"), "{e}");
        let over = KeyLimits {
            requests_per_minute: Some(11),
            tokens_per_minute: None,
            monthly_spend: None,
        };
        let e = over.check_within(&tenant).unwrap_err();
        assert!(
            e.to_string().starts_with("limits.requests_per_minute"),
            "{e}"
        );
        assert!(limit_value("x", Some(0)).is_err());
        assert!(limit_value("x", Some(-1)).is_err());
        assert_eq!(limit_value("x", Some(5)).unwrap(), Some(5));
        assert_eq!(limit_value("x", None).unwrap(), None);
        // A change: left out, removed, set, refused.
        assert_eq!(limit_change("x", None).unwrap(), None);
        assert_eq!(limit_change("x", Some(None)).unwrap(), Some(None));
        assert_eq!(limit_change("x", Some(Some(5))).unwrap(), Some(Some(5)));
        assert!(limit_change("x", Some(Some(0))).is_err());
    }

    fn key_rpm(n: u64) -> KeyLimits {
        KeyLimits {
            requests_per_minute: Some(n),
            tokens_per_minute: None,
            monthly_spend: None,
        }
    }

    /// A price of 1 nano-unit per input token and 2 per output token.
    const PRICE: Price = Price {
        input_per_million: 1_000_000,
        output_per_million: 2_000_000,
    };

    #[test]
    fn a_spend_limit_reserves_the_run_s_cost_and_refuses_when_it_does_not_fit() {
        // 10 prompt and 20 completion tokens: 10 + 40 = 50 nano-units reserved per run.
        let limits = TenantLimits {
            monthly_spend: Some(120),
            ..TenantLimits::default()
        };
        let (scope, store) = scope(limits, None);
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:30Z");
        for _ in 0..2 {
            let a = admit_run(&store, &node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap();
            assert_eq!(a.spend.unwrap().nanos, 50);
            assert_eq!(a.prompt_tokens, 10);
            assert!(
                a.reservation.is_none(),
                "no token limit: no token reservation"
            );
        }
        let e = admit_run(&store, &node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap_err();
        assert_eq!(e.code(), "budget_exhausted");
        let month = spend_windows(scope.tenant().id, None, now);
        assert_eq!(
            store.window_tokens(&month).unwrap(),
            vec![100],
            "a refusal counts nothing"
        );
        // Without a price, a spend limit cannot be kept: refused before anything is counted.
        let e = admit_run(&store, &node, &scope, now, None, run_of(1, 1)).unwrap_err();
        assert_eq!(e.code(), "model_not_allowed");
        // Settling hands back what the runs did not use: the next run fits again.
        store.release_tokens(&month, 60).unwrap();
        assert!(admit_run(&store, &node, &scope, now, Some(PRICE), run_of(10, 20)).is_ok());
    }

    #[test]
    fn a_request_refusal_hands_the_spend_reservation_back() {
        let limits = TenantLimits {
            monthly_spend: Some(1_000),
            requests_per_minute: Some(1),
            ..TenantLimits::default()
        };
        let (scope, store) = scope(limits, None);
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:30Z");
        admit_run(&store, &node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap();
        let e = admit_run(&store, &node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        let month = spend_windows(scope.tenant().id, None, now);
        let counted = store.window_tokens(&month).unwrap()[0];
        let lease = node
            .token_lock()
            .get(&month[0].subject)
            .map_or(0, |l| l.left);
        assert_eq!(
            counted - lease,
            50,
            "only the admitted run's cost stays counted"
        );
    }

    fn rpm(n: u64) -> TenantLimits {
        TenantLimits {
            requests_per_minute: Some(n),
            ..TenantLimits::default()
        }
    }

    /// A scope of the same tenant with other limits (as after `PATCH /admin/tenants/{id}`).
    fn relimit(scope: &RunScope, store: &Fake, limits: TenantLimits) -> RunScope {
        let mut t = scope.tenant().clone();
        t.limits = limits;
        RunScope::authorize(&member(&t, session()), store, true).unwrap()
    }

    fn shared_requests(store: &Fake, scope: &RunScope, now: DateTime<Utc>) -> u64 {
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(scope.tenant().id),
            start_ms: minute_start(now),
        };
        store.quota.lock().unwrap().get(&w).map_or(0, |c| c.0)
    }

    #[test]
    fn leases_count_ahead_in_few_writes_and_the_headers_stay_exact() {
        let (scope, store) = scope(rpm(1_000_000), None);
        let leases = NodeQuotas::default();
        let now = at("2026-11-21T10:00:00Z");
        for n in 1..=2_000u64 {
            let s = admit(&store, &leases, &scope, now).unwrap();
            assert_eq!(
                s.requests.unwrap().remaining,
                1_000_000 - n,
                "one node: exact"
            );
            // The shared count always holds every request admitted here.
            assert!(shared_requests(&store, &scope, now) >= n);
        }
        let writes = *store.quota_calls.lock().unwrap();
        assert!(writes <= 20, "{writes} writes for 2,000 requests");
        assert!(shared_requests(&store, &scope, now) < 2_000 + MAX_LEASE);
    }

    #[test]
    fn two_nodes_with_leases_admit_exactly_the_limit_and_never_more() {
        for limit in [5u64, 100, 1_000, 20_000] {
            let (scope, store) = scope(rpm(limit), None);
            let nodes = [NodeQuotas::default(), NodeQuotas::default()];
            let now = at("2026-11-21T10:00:10Z");
            let mut admitted = 0;
            for i in 0..(limit * 2) {
                // Uneven traffic: two of every three requests reach the first node.
                let node = &nodes[usize::from(i % 3 == 2)];
                match admit(&store, node, &scope, now) {
                    Ok(_) => admitted += 1,
                    Err(e) => assert_eq!(e.code(), "rate_limited"),
                }
                // Refillers run now and then, between requests.
                if i % 7 == 0 {
                    for node in &nodes {
                        if let Some(claim) = node.refill_due() {
                            node.refill(claim, &store, || now);
                        }
                    }
                }
                assert!(admitted <= shared_requests(&store, &scope, now));
                assert!(shared_requests(&store, &scope, now) <= limit);
            }
            assert_eq!(admitted, limit, "limit {limit}");
        }
    }

    /// Admits `n` requests on `node`, running the refiller whenever one is due (as the HTTP
    /// layer does after each request); answers how many admissions wrote to the store.
    fn admit_with_refills(
        store: &Fake,
        node: &NodeQuotas,
        scope: &RunScope,
        now: DateTime<Utc>,
        n: u64,
    ) -> u32 {
        let mut writes = 0;
        for _ in 0..n {
            let before = *store.quota_calls.lock().unwrap();
            admit(store, node, scope, now).unwrap();
            writes += *store.quota_calls.lock().unwrap() - before;
            if let Some(claim) = node.refill_due() {
                assert_eq!(node.refill(claim, store, || now), 0);
            }
        }
        writes
    }

    #[test]
    fn a_large_lease_is_refilled_ahead_and_requests_stop_writing() {
        let (scope, store) = scope(rpm(1_000_000), None);
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:00Z");
        // Leases of 1, 2, 4, 8 and 16 are taken by requests; from 16 on the refiller takes them.
        let warm = admit_with_refills(&store, &node, &scope, now, 40);
        assert_eq!(warm, 5, "leases 1..16 taken on the request path");
        let writes = admit_with_refills(&store, &node, &scope, now, 5_000);
        assert_eq!(writes, 0, "no request waited for a take");
        let s = admit(&store, &node, &scope, now).unwrap();
        assert_eq!(
            s.requests.unwrap().remaining,
            1_000_000 - 5_041,
            "one node: the header stays exact"
        );
        let shared = shared_requests(&store, &scope, now);
        assert!(shared >= 5_041);
        assert!(
            shared <= 5_041 + MAX_LEASE + MAX_LEASE / REFILL_AT_SHARE,
            "at most a fresh lease and a quarter of one ahead: {shared}"
        );
    }

    #[test]
    fn a_lease_is_queued_at_a_quarter_and_one_refiller_runs_at_a_time() {
        let (scope, store) = scope(rpm(1_000_000), None);
        let node = NodeQuotas::default();
        let now = at("2026-11-21T10:00:00Z");
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(scope.tenant().id),
            start_ms: minute_start(now),
        };
        let lease = |left| Lease {
            start_ms: w.start_ms,
            max: 1_000_000,
            left,
            shared: 100,
            size: 16,
            taken_ms: now.timestamp_millis(),
            refilling: false,
        };
        node.lock().insert(w.subject, lease(6));
        store.quota.lock().unwrap().insert(w, (100, 0));
        admit(&store, &node, &scope, now).unwrap();
        assert!(
            node.refill_due().is_none(),
            "5 of 16 left: more than a quarter"
        );
        admit(&store, &node, &scope, now).unwrap();
        assert!(node.lock()[&w.subject].refilling, "4 of 16 left: queued");
        admit(&store, &node, &scope, now).unwrap();
        assert_eq!(node.refills_lock().waiting.len(), 1, "queued once");
        let claim = node.refill_due().unwrap();
        assert!(node.refill_due().is_none(), "one refiller at a time");
        assert_eq!(node.refill(claim, &store, || now), 0);
        let l = node.lock()[&w.subject];
        assert_eq!((l.left, l.size, l.refilling), (3 + 32, 32, false));
        assert_eq!(l.shared, 132, "the store's count after the take");
        assert!(node.refill_due().is_none(), "nothing queued");
        // Small leases are not refilled ahead.
        node.lock().insert(
            w.subject,
            Lease {
                size: 15,
                ..lease(1)
            },
        );
        admit(&store, &node, &scope, now).unwrap();
        assert!(node.refill_due().is_none());
        assert!(!node.lock()[&w.subject].refilling);
    }

    #[test]
    fn a_refill_that_cannot_count_leaves_the_lease_for_the_request_path() {
        let (scope, store) = scope(rpm(1_000), None);
        let now = at("2026-11-21T10:00:30Z");
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(scope.tenant().id),
            start_ms: minute_start(now),
        };
        let queued = |max| {
            let node = NodeQuotas::default();
            node.lock().insert(
                w.subject,
                Lease {
                    start_ms: w.start_ms,
                    max,
                    left: 2,
                    shared: 500,
                    size: 16,
                    taken_ms: now.timestamp_millis(),
                    refilling: true,
                },
            );
            assert!(node.queue_refill(w, max));
            let claim = node.refill_due().unwrap();
            (node, claim)
        };
        let unchanged = |node: &NodeQuotas| {
            let l = node.lock()[&w.subject];
            assert_eq!((l.left, l.shared, l.size), (2, 500, 16));
            l.refilling
        };
        // A failed write: counted as failed, the lease as it was and free to queue again.
        let (node, claim) = queued(1_000);
        *store.refuse_takes.lock().unwrap() = 1;
        assert_eq!(node.refill(claim, &store, || now), 1);
        assert!(!unchanged(&node));
        assert!(node.refill_due().is_none(), "nothing queued");
        assert!(node.queue_refill(w, 1_000));
        assert!(node.refill_due().is_some(), "the refiller ended");
        // A full window: nothing added.
        store.quota.lock().unwrap().insert(w, (1_000, 0));
        let (node, claim) = queued(1_000);
        assert_eq!(node.refill(claim, &store, || now), 0);
        assert!(!unchanged(&node));
        store.quota.lock().unwrap().remove(&w);
        // The minute has passed: no write at all.
        let (node, claim) = queued(1_000);
        let calls = *store.quota_calls.lock().unwrap();
        assert_eq!(
            node.refill(claim, &store, || now + chrono::Duration::seconds(30)),
            0
        );
        assert_eq!(*store.quota_calls.lock().unwrap(), calls);
        assert!(!unchanged(&node));
        // The limit changed since the lease was queued: its refill is dropped.
        let (node, claim) = queued(1_000);
        node.lock().get_mut(&w.subject).unwrap().max = 2_000;
        node.refill(claim, &store, || now);
        assert_eq!(node.lock()[&w.subject].max, 2_000);
        assert!(
            unchanged(&node),
            "a lease under another limit is not touched"
        );
        assert_eq!(shared_requests(&store, &scope, now), 0, "nothing counted");
    }

    #[test]
    fn waiting_refills_are_bounded() {
        let node = NodeQuotas::default();
        let window = |i| QuotaWindow {
            subject: QuotaSubject::KeyMinute(Uuid::from_u128(i)),
            start_ms: 0,
        };
        for i in 0..REFILLS_MAX {
            assert!(node.queue_refill(window(i as u128), 100));
        }
        assert!(!node.queue_refill(window(1_000), 100), "full");
        assert_eq!(node.refills_lock().waiting.len(), REFILLS_MAX);
    }

    #[test]
    fn a_refiller_that_panics_lets_the_next_one_start() {
        struct Panics;
        impl QuotaRepo for Panics {
            fn window_tokens(&self, _: &[QuotaWindow]) -> DomainResult<Vec<u64>> {
                Ok(Vec::new())
            }
            fn take_request(&self, _: &[RequestTake]) -> DomainResult<Take> {
                panic!("the store panicked")
            }
            fn reserve_tokens(&self, _: &[TokenTake]) -> DomainResult<Take> {
                unreachable!("no token limit here")
            }
            fn release_tokens(&self, _: &[QuotaWindow], _: u64) -> DomainResult<()> {
                unreachable!("no token limit here")
            }
            fn prune_windows(&self, _: i64, _: i64) -> DomainResult<u64> {
                Ok(0)
            }
        }
        let now = at("2026-11-21T10:00:30Z");
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(Uuid::from_u128(1)),
            start_ms: minute_start(now),
        };
        let node = NodeQuotas::default();
        node.lock().insert(
            w.subject,
            Lease {
                start_ms: w.start_ms,
                max: 100,
                left: 4,
                shared: 20,
                size: 16,
                taken_ms: now.timestamp_millis(),
                refilling: true,
            },
        );
        assert!(node.queue_refill(w, 100));
        let claim = node.refill_due().unwrap();
        let node = std::panic::AssertUnwindSafe(node);
        assert!(std::panic::catch_unwind(|| node.refill(claim, &Panics, || now)).is_err());
        assert!(node.queue_refill(w, 100));
        assert!(node.refill_due().is_some(), "the panicked refiller ended");
    }

    /// A store that holds every request take until released (in the order they came), and
    /// records what each asked.
    struct Held {
        inner: Fake,
        wants: Mutex<Vec<u64>>,
        entered: Mutex<std::sync::mpsc::Sender<()>>,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl QuotaRepo for Held {
        fn window_tokens(&self, w: &[QuotaWindow]) -> DomainResult<Vec<u64>> {
            self.inner.window_tokens(w)
        }
        fn take_request(&self, takes: &[RequestTake]) -> DomainResult<Take> {
            self.wants
                .lock()
                .unwrap()
                .extend(takes.iter().map(|t| t.want));
            self.entered.lock().unwrap().send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
            self.inner.take_request(takes)
        }
        fn reserve_tokens(&self, _: &[TokenTake]) -> DomainResult<Take> {
            unreachable!("no token limit here")
        }
        fn release_tokens(&self, _: &[QuotaWindow], _: u64) -> DomainResult<()> {
            unreachable!("no token limit here")
        }
        fn prune_windows(&self, a: i64, b: i64) -> DomainResult<u64> {
            self.inner.prune_windows(a, b)
        }
    }

    impl Held {
        /// A held store over `inner`, the receiver told each time a take enters it, and the
        /// sender that releases one take.
        fn over(
            inner: Fake,
        ) -> (
            Self,
            std::sync::mpsc::Receiver<()>,
            std::sync::mpsc::Sender<()>,
        ) {
            let (entered_tx, entered) = std::sync::mpsc::channel();
            let (release, release_rx) = std::sync::mpsc::channel();
            let store = Held {
                inner,
                wants: Mutex::default(),
                entered: Mutex::new(entered_tx),
                release: Mutex::new(release_rx),
            };
            (store, entered, release)
        }
    }

    /// A lease of 64 of a 10^6 limit, taken at `now` and just used up: the next take asks for
    /// twice as many.
    fn used_up_lease(node: &NodeQuotas, subject: QuotaSubject, now: DateTime<Utc>) {
        node.lock().insert(
            subject,
            Lease {
                start_ms: minute_start(now),
                max: 1_000_000,
                left: 0,
                shared: 64,
                size: 64,
                taken_ms: now.timestamp_millis(),
                refilling: false,
            },
        );
    }

    #[test]
    fn a_request_that_finds_a_take_in_flight_waits_for_it_instead_of_writing() {
        let (scope, inner) = scope(rpm(1_000_000), None);
        let subject = QuotaSubject::TenantMinute(scope.tenant().id);
        let now = at("2026-11-21T10:00:30Z");
        let (store, entered, release) = Held::over(inner);
        let node = NodeQuotas::default();
        node.follow_wait_ms.store(10_000, Ordering::Relaxed);
        used_up_lease(&node, subject, now);
        let wait = std::time::Duration::from_secs(10);
        let (second_took, wants) = std::thread::scope(|threads| {
            let first = threads.spawn(|| admit(&store, &node, &scope, now));
            let entered_first = entered.recv_timeout(wait);
            // While that take is in flight, another request finds the lease used up: it waits
            // for the take, so no second take reaches the store.
            let second = threads.spawn(|| admit(&store, &node, &scope, now));
            let second_took = entered
                .recv_timeout(std::time::Duration::from_millis(300))
                .is_ok();
            // Released twice, so that a second take (the failure) cannot hang the test.
            release.send(()).unwrap();
            release.send(()).unwrap();
            let (first, second) = (first.join(), second.join());
            entered_first.unwrap();
            first.unwrap().unwrap();
            second.unwrap().unwrap();
            (second_took, store.wants.lock().unwrap().clone())
        });
        assert!(!second_took, "the second request wrote a take of its own");
        assert_eq!(wants, vec![128]);
        let lease = node.lock()[&subject];
        // The lease of 128 served both requests.
        assert_eq!((lease.left, lease.size, lease.shared), (126, 128, 128));
    }

    #[test]
    fn a_take_in_flight_makes_the_others_of_its_subject_count_one_request() {
        let (scope, inner) = scope(rpm(1_000_000), None);
        let subject = QuotaSubject::TenantMinute(scope.tenant().id);
        let now = at("2026-11-21T10:00:30Z");
        let (store, entered, release) = Held::over(inner);
        // A lease of 64 just used up: the next take asks for twice as many.
        let node = NodeQuotas::default();
        used_up_lease(&node, subject, now);
        let wait = std::time::Duration::from_secs(10);
        let held_wants = std::thread::scope(|threads| {
            let first = threads.spawn(|| admit(&store, &node, &scope, now));
            let entered_first = entered.recv_timeout(wait);
            // While that take is in flight, another request finds the lease used up.
            let second = threads.spawn(|| admit(&store, &node, &scope, now));
            let entered_second = entered.recv_timeout(wait);
            let held_wants = store.wants.lock().unwrap().clone();
            // The lease lands first, the single request after it; both are released before
            // anything is checked, so a failure here fails the test instead of hanging it.
            release.send(()).unwrap();
            let first = first.join();
            release.send(()).unwrap();
            let second = second.join();
            entered_first.unwrap();
            entered_second.unwrap();
            first.unwrap().unwrap();
            second.unwrap().unwrap();
            held_wants
        });
        assert_eq!(held_wants, vec![128, 1]);
        // Nothing is left registered; the single request did not shrink the lease, which
        // serves what follows and grows as before.
        assert!(node.taking_lock().is_empty());
        let lease = node.lock()[&subject];
        assert_eq!((lease.left, lease.size, lease.shared), (127, 128, 129));
        assert_eq!(
            node.want(
                &QuotaWindow {
                    subject,
                    start_ms: minute_start(now)
                },
                1_000_000,
                now.timestamp_millis()
            ),
            256
        );
    }

    #[test]
    fn a_take_that_fails_or_panics_leaves_no_take_in_flight() {
        // A store that fails, then panics: neither may leave the subject marked as taking,
        // or every later take of it would count single requests only.
        struct Broken;
        impl QuotaRepo for Broken {
            fn window_tokens(&self, _: &[QuotaWindow]) -> DomainResult<Vec<u64>> {
                Ok(Vec::new())
            }
            fn take_request(&self, takes: &[RequestTake]) -> DomainResult<Take> {
                if takes.iter().any(|t| t.want > 100) {
                    panic!("the store panicked")
                }
                Err(DomainError::Unavailable {
                    retry_after_secs: 1,
                })
            }
            fn reserve_tokens(&self, _: &[TokenTake]) -> DomainResult<Take> {
                unreachable!("no token limit here")
            }
            fn release_tokens(&self, _: &[QuotaWindow], _: u64) -> DomainResult<()> {
                unreachable!("no token limit here")
            }
            fn prune_windows(&self, _: i64, _: i64) -> DomainResult<u64> {
                Ok(0)
            }
        }
        let (scope, store) = scope(rpm(1_000_000), None);
        let subject = QuotaSubject::TenantMinute(scope.tenant().id);
        let now = at("2026-11-21T10:00:30Z");
        let node = NodeQuotas::default();
        let used_up = |size| Lease {
            start_ms: minute_start(now),
            max: 1_000_000,
            left: 0,
            shared: size,
            size,
            taken_ms: now.timestamp_millis(),
            refilling: false,
        };
        node.lock().insert(subject, used_up(8));
        assert!(admit(&Broken, &node, &scope, now).is_err());
        assert!(node.taking_lock().is_empty(), "after a failed take");
        node.lock().insert(subject, used_up(64));
        let node = std::panic::AssertUnwindSafe(node);
        assert!(std::panic::catch_unwind(|| admit(&Broken, &node, &scope, now)).is_err());
        assert!(node.taking_lock().is_empty(), "after a panicked take");
        // The next take is a lease again (twice the last size), not a single request.
        admit(&store, &node, &scope, now).unwrap();
        assert_eq!(shared_requests(&store, &scope, now), 128);
    }

    #[test]
    fn a_claim_dropped_unused_lets_the_next_refiller_start() {
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(Uuid::from_u128(1)),
            start_ms: 0,
        };
        let node = NodeQuotas::default();
        assert!(node.queue_refill(w, 100));
        let claim = node.refill_due().unwrap();
        assert!(node.refill_due().is_none(), "claimed");
        // The task that was to run it never ran.
        drop(claim);
        assert!(node.refill_due().is_some());
        // A claim of another process's quotas refills nothing here and ends nothing here.
        let other = NodeQuotas::default();
        assert!(other.queue_refill(w, 100));
        let foreign = other.refill_due().unwrap();
        let (store, calls) = (Fake::default(), 0);
        assert_eq!(node.refill(foreign, &store, Utc::now), 0);
        assert_eq!(*store.quota_calls.lock().unwrap(), calls);
        assert_eq!(node.refills_lock().waiting.len(), 1, "still queued here");
        assert!(other.refill_due().is_some(), "the foreign claim was let go");
    }

    #[test]
    fn a_lowered_limit_holds_at_once_and_a_slow_lease_starts_small() {
        let (scope, store) = scope(rpm(10_000), None);
        let leases = NodeQuotas::default();
        let now = at("2026-11-21T10:00:00Z");
        for _ in 0..40 {
            admit(&store, &leases, &scope, now).unwrap();
        }
        let counted = shared_requests(&store, &scope, now);
        assert!(counted > 40, "a lease is held: {counted}");
        // The limit drops to what is counted: the lease taken under the old limit is not used.
        let lowered = relimit(&scope, &store, rpm(counted));
        let e = admit(&store, &leases, &lowered, now).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        // A new minute, slow traffic: one request per lease, nothing stranded.
        let raised = relimit(&scope, &store, rpm(10_000));
        for s in 0..5 {
            let later = at("2026-11-21T10:01:00Z") + chrono::Duration::seconds(2 * s);
            admit(&store, &leases, &raised, later).unwrap();
            assert_eq!(
                shared_requests(&store, &raised, later),
                u64::try_from(s).unwrap() + 1
            );
        }
    }

    #[test]
    fn a_refused_key_take_leaves_the_tenant_lease_unspent() {
        let key_limits = key_rpm(1);
        let (scope, store) = scope(rpm(1_000), Some(key_limits));
        let leases = NodeQuotas::default();
        let now = at("2026-11-21T10:00:00Z");
        assert!(admit(&store, &leases, &scope, now).is_ok());
        for _ in 0..5 {
            assert_eq!(
                admit(&store, &leases, &scope, now).unwrap_err().code(),
                "rate_limited"
            );
        }
        assert_eq!(
            shared_requests(&store, &scope, now),
            1,
            "nothing counted for refusals"
        );
    }

    #[test]
    fn months_roll_over() {
        assert_eq!(
            next_month_start(at("2026-12-31T23:59:59Z")),
            at("2027-01-01T00:00:00Z")
        );
        assert_eq!(
            month_start(at("2026-02-14T08:00:00Z")),
            at("2026-02-01T00:00:00Z")
        );
    }
}
