//! The leasing quota gate (decisions 0011, 0017 and 0025): the adapter behind
//! [`QuotaGate`] that makes admission fast. The rule — which windows a run counts in, what is
//! refused and what the headers say — is [`super::admit_run`]'s, and [`ExactGate`] counts it
//! in the store request by request; this gate counts the same in blocks.
//!
//! Requests are counted in the database ahead of use, in leases: a node counts a block of
//! requests in the shared window in one write ([`QuotaRepo::take_request`], atomic across
//! nodes, never past the limit) and admits from that block without writing again until it is
//! used up. The shared count therefore always holds every request any node admitted (and some
//! it may still admit), so the limit holds across nodes; a block left unused when the minute
//! ends is lost, never given to anyone. Leases grow while a subject's requests keep coming and
//! shrink to single requests near the limit, so small limits are counted one request at a
//! time, exactly as the exact gate counts them. A lease of [`REFILL_FROM`] or more that falls
//! to a quarter of its size is refilled ahead, off the request path ([`LeasingGate::refill`],
//! decision 0017), so a busy subject's requests do not wait for the write. While one request
//! takes a lease for a subject, the others of this node that find none count a single request
//! each, so a burst does not count a lease per request. Token reservations are leased the same
//! way ([`TokenLease`], decision 0025).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::{
    ExactGate, QuotaGate, QuotaSubject, QuotaWindow, RequestTake, Take, TokenTake, MAX_LIMIT,
};
use crate::error::DomainResult;
use crate::ports::QuotaRepo;

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
    /// A refill of this lease is waiting or running ([`LeasingGate::refill`]).
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

/// The leasing gate: what this process holds of the shared quota counts (one per process, in
/// its [`super::NodeQuotas`]): the requests and tokens it has counted in the shared windows
/// and not yet admitted, by subject. Only what is already counted in the database is admitted
/// from here, so it never admits more than the shared count holds.
#[derive(Debug, Default)]
pub struct LeasingGate {
    /// Keyed by server-made ids, so hashed with the fast hasher (no client chooses a key).
    leases: Mutex<FxHashMap<QuotaSubject, Lease>>,
    /// Leases to refill ahead; never locked while `leases` is wanted.
    refills: Arc<Mutex<Refills>>,
    /// Set when a refill is queued, so requests of a node with nothing to refill (and of
    /// tenants without limits) skip the lock in [`LeasingGate::refill_due`].
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
    /// Tokens this process has reserved in the shared windows and not yet given to a run, by
    /// subject ([`TokenLease`], decision 0025): busy subjects far from their limits reserve
    /// for several runs in one write.
    token_leases: Mutex<FxHashMap<QuotaSubject, TokenLease>>,
    /// Token reservations on the request path in flight, by subject, as `taking` is for
    /// requests: while one is, the others of the same subject wait for it (once, at most
    /// [`FOLLOW_WAIT`], where they may wait) and then reserve exactly their run's tokens if
    /// its lease does not serve them, so a lease used up under concurrent runs is reserved
    /// again in one write, not one per run (decision 0057). Locked before `token_leases`
    /// when both are.
    token_taking: Mutex<FxHashMap<QuotaSubject, u32>>,
    /// Signalled whenever a token reservation in flight ends.
    token_taken: std::sync::Condvar,
}

/// This process's unused share of a token window's count: reserved in the shared window by
/// one of its reservations beyond that run's own tokens, and handed to its next runs of the
/// window without a write. Unused tokens of a minute are lost with it; those of a month wait
/// for the process's next runs (lost if it stops). A lease is for twice as many runs as the
/// last one when that was taken less than [`LEASE_GROWTH_MS`] ago, else for half as many for
/// every such period since (as request leases shrink, decision 0057: a lease that lasted a
/// little over a second is not followed by exact reservations that grow again from one run;
/// a quiet subject soon reserves exactly), at most [`TOKEN_LEASE_RUNS`] runs and an eighth of
/// what the window had left, so small limits stay exact.
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

    /// The runs the next lease of `t`'s window is for, before the window's room is counted:
    /// none in another window or under another limit (or when the clock went back), twice the
    /// last lease's when that was reserved less than [`LEASE_GROWTH_MS`] ago (at least one,
    /// at most [`TOKEN_LEASE_RUNS`]), else half as many for every such period since.
    fn next_runs(&self, t: &TokenTake, now_ms: i64) -> u64 {
        let idle = now_ms.saturating_sub(self.taken_ms);
        if !self.serves(t) || idle < 0 {
            return 0;
        }
        if idle < LEASE_GROWTH_MS {
            return self.runs.saturating_mul(2).clamp(1, TOKEN_LEASE_RUNS);
        }
        self.runs
            .checked_shr(u32::try_from(idle / LEASE_GROWTH_MS).unwrap_or(u32::MAX))
            .unwrap_or(0)
    }
}

/// The most runs one token lease is for (as [`MAX_LEASE`] for requests): at thousands of runs a
/// second, a write every second or so.
pub const TOKEN_LEASE_RUNS: u64 = MAX_LEASE;

/// The request-path takes (or token reservations) of one request, registered in
/// [`LeasingGate::taking`] (or [`LeasingGate::token_taking`]) until it drops (also when the
/// store panics), which wakes the requests waiting for them.
struct Taking<'a> {
    map: &'a Mutex<FxHashMap<QuotaSubject, u32>>,
    ended: &'a std::sync::Condvar,
    subjects: SmallVec<[QuotaSubject; 3]>,
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        let mut taking = lock_taking(self.map);
        for subject in &self.subjects {
            if let Some(n) = taking.get_mut(subject) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    taking.remove(subject);
                }
            }
        }
        drop(taking);
        self.ended.notify_all();
    }
}

fn lock_taking(
    map: &Mutex<FxHashMap<QuotaSubject, u32>>,
) -> std::sync::MutexGuard<'_, FxHashMap<QuotaSubject, u32>> {
    map.lock().unwrap_or_else(PoisonError::into_inner)
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

/// Puts back into this process's leases the request each `takes[i]` with `from_lease[i]` took
/// from one (a lease that no longer serves its window keeps nothing).
fn put_back(
    held: &mut FxHashMap<QuotaSubject, Lease>,
    takes: &[(QuotaWindow, u64)],
    from_lease: &[bool],
) {
    for ((w, max), _) in takes.iter().zip(from_lease).filter(|(_, taken)| **taken) {
        if let Some(l) = held
            .get_mut(&w.subject)
            .filter(|l| l.serves(w.start_ms, *max))
        {
            l.left += 1;
        }
    }
}

fn lock_refills(refills: &Mutex<Refills>) -> std::sync::MutexGuard<'_, Refills> {
    refills.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The right to run this process's refiller, from [`LeasingGate::refill_due`]; hand it to
/// [`LeasingGate::refill`]. Dropped without a refill that ran to its end (the task meant to run
/// it never ran, or the store panicked), it lets the next queued refill start another.
#[must_use = "a claim does nothing until given to LeasingGate::refill"]
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

impl LeasingGate {
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
        lock_taking(&self.taking)
    }

    /// Waits, at most [`LeasingGate::follow_wait`], while `busy` holds of the takes in flight
    /// (`taking`, locked; `ended` is signalled whenever one of them ends).
    fn wait_while(
        &self,
        ended: &std::sync::Condvar,
        taking: std::sync::MutexGuard<'_, FxHashMap<QuotaSubject, u32>>,
        busy: impl Fn(&FxHashMap<QuotaSubject, u32>) -> bool,
    ) {
        let _ = ended
            .wait_timeout_while(taking, self.follow_wait(), |t| busy(t))
            .unwrap_or_else(PoisonError::into_inner);
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

    /// A claim to start a refiller now ([`LeasingGate::refill`], on a thread that may write):
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

impl QuotaGate for LeasingGate {
    /// Admits one request in every window of `takes`: from this process's lease where it holds
    /// one, else from a new lease taken from the shared count (all such windows in one
    /// [`QuotaRepo::take_request`]). `Ok` holds the remaining allowance of each window; `Err`
    /// the index of a full window, in which case nothing is admitted (units taken from local
    /// leases are put back; the store counts nothing for a refused take).
    fn take_requests<P: QuotaRepo + ?Sized>(
        &self,
        store: &P,
        takes: &[(QuotaWindow, u64)],
        now_ms: i64,
    ) -> DomainResult<Result<SmallVec<[u64; 2]>, usize>> {
        let mut waited = false;
        let (mut remaining, from_lease, missing) = loop {
            let mut remaining: SmallVec<[u64; 2]> = smallvec::smallvec![0; takes.len()];
            let mut from_lease: SmallVec<[bool; 2]> = smallvec::smallvec![false; takes.len()];
            let mut missing: SmallVec<[usize; 2]> = SmallVec::new();
            {
                let mut held = self.lock();
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
                            if l.wants_refill() && self.queue_refill(*w, *max) {
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
                let taking = self.taking_lock();
                let lacks = |t: &FxHashMap<QuotaSubject, u32>| {
                    missing
                        .iter()
                        .filter_map(|i| takes.get(*i))
                        .any(|(w, _)| t.contains_key(&w.subject))
                };
                if lacks(&taking) {
                    // Put back what this attempt took from local leases; the next looks again.
                    put_back(&mut self.lock(), takes, &from_lease);
                    self.wait_while(&self.taken, taking, lacks);
                    waited = true;
                    continue;
                }
            }
            break (remaining, from_lease, missing);
        };
        // A lease's worth unless another request of this node is taking one for the subject
        // right now: then one request (the lease being taken serves what follows).
        let (asks, follows, _taking) = {
            let mut taking = self.taking_lock();
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
                        self.want(w, *max, now_ms).min(*max)
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
            (
                asks,
                follows,
                Taking {
                    map: &self.taking,
                    ended: &self.taken,
                    subjects,
                },
            )
        };
        let answer = store.take_request(&asks);
        let mut held = self.lock();
        let grants = match answer {
            Ok(Take::Taken(grants)) => grants,
            other => {
                // Put back what this request took from local leases.
                put_back(&mut held, takes, &from_lease);
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

    /// Reserves `tokens` in every window of `takes` (each `takes[i].tokens` is `tokens`): from
    /// this process's token leases where each holds enough, else from the store for the
    /// windows that do not — with a lease for later runs ([`TokenLease::next_runs`]) when its
    /// window has room for at least one more such run in an eighth of what is left; exactly
    /// `tokens` otherwise, when the lease does not fit, or when another run of this process
    /// is reserving in that window right now (a run that finds one waits for it first, where
    /// it may wait: [`QuotaRepo::may_wait`]). `Ok` holds each window's remaining allowance as
    /// this process knows it; `Err` the index of a window that is full, in which case nothing
    /// is reserved.
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
        let return_local = |held: &mut FxHashMap<QuotaSubject, TokenLease>, local: &[bool]| {
            for (t, from_lease) in takes.iter().zip(local) {
                if *from_lease {
                    if let Some(l) = held.get_mut(&t.window.subject).filter(|l| l.serves(t)) {
                        l.left = l.left.saturating_add(tokens);
                    }
                }
            }
        };
        let mut waited = false;
        let (local, mut asks, follows, _taking) = loop {
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
                            let extra = held.get(&t.window.subject).map_or(0, |l| {
                                let room = t.max.unwrap_or(MAX_LIMIT).saturating_sub(l.shared)
                                    / LEASE_SHARE;
                                // Whole runs of this size: a lease leaves no piece too
                                // small for the next run stranded on this node.
                                let fit = room.checked_div(tokens).unwrap_or(0);
                                fit.min(l.next_runs(t, now_ms)).saturating_mul(tokens)
                            });
                            asks.push(TokenTake {
                                tokens: tokens.saturating_add(extra),
                                ..*t
                            });
                        }
                    }
                }
            }
            if asks.is_empty() {
                break (local, asks, SmallVec::new(), None);
            }
            let mut taking = lock_taking(&self.token_taking);
            let in_flight = |t: &FxHashMap<QuotaSubject, u32>| {
                asks.iter().any(|a| t.contains_key(&a.window.subject))
            };
            // Another run of this process is reserving in a window this one lacks: wait for it
            // (once, at most FOLLOW_WAIT) and look again; its lease may serve this run. Never
            // on a thread that serves connections.
            if !waited && in_flight(&taking) && store.may_wait() {
                return_local(&mut self.token_lock(), &local);
                self.wait_while(&self.token_taken, taking, in_flight);
                waited = true;
                continue;
            }
            // Behind a reservation in flight: exactly this run's tokens (that one's lease
            // serves what follows).
            let mut follows: SmallVec<[bool; 3]> = SmallVec::new();
            let mut subjects = SmallVec::new();
            for a in &mut asks {
                let n = taking.entry(a.window.subject).or_insert(0);
                follows.push(*n > 0);
                if *n > 0 {
                    a.tokens = tokens;
                }
                *n += 1;
                subjects.push(a.window.subject);
            }
            let registered = Taking {
                map: &self.token_taking,
                ended: &self.token_taken,
                subjects,
            };
            break (local, asks, follows, Some(registered));
        };
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
                return_local(&mut held, &local);
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
        let mut grants = asks.iter().zip(&follows).zip(grants);
        let mut remaining: SmallVec<[u64; 3]> = SmallVec::new();
        for (t, from_lease) in takes.iter().zip(&local) {
            if !*from_lease {
                if let Some(((ask, follows), grant)) = grants.next() {
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
                                // A run reserved behind another's reservation is not a lease:
                                // the size and time the next lease grows from are that one's.
                                if !*follows {
                                    l.taken_ms = now_ms;
                                    l.runs = runs;
                                }
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
            let back: SmallVec<[TokenTake; 3]> = back
                .into_iter()
                .map(|window| TokenTake {
                    window,
                    tokens,
                    max: None,
                })
                .collect();
            ExactGate.give_back_tokens(store, &back);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use chrono::{DateTime, Utc};
    use uuid::Uuid;

    use super::*;
    use crate::error::DomainError;
    use crate::fakes::Fake;
    use crate::policy::ai_access::RunScope;
    use crate::policy::quota::tests::{
        at, key_rpm, refused_after_reserving, relimit, rpm, run_of, scope, shared_requests,
        spend_refused_by_requests, tokens, tokens_in,
    };
    use crate::policy::quota::{admit, admit_run, minute_start, token_windows, RateLimitState};

    /// A tenant limited to `per_minute` requests, a fresh gate and the instant `when`.
    fn limited(per_minute: u64, when: &str) -> (RunScope, Fake, LeasingGate, DateTime<Utc>) {
        let (scope, store) = scope(rpm(per_minute), None);
        (scope, store, LeasingGate::default(), at(when))
    }

    #[test]
    fn a_reservation_refused_afterwards_goes_back_to_this_node_s_lease() {
        let node = LeasingGate::default();
        let (scope, store, now) = refused_after_reserving(&node);
        let minute = token_windows(scope.tenant().id, None, now)[0];
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

    /// A tenant's token minute at `now` and a take of `tokens` from it under a limit of 1,000.
    fn token_take(now: DateTime<Utc>, tokens: u64) -> TokenTake {
        TokenTake {
            window: token_windows(Uuid::now_v7(), None, now)[0],
            tokens,
            max: Some(1_000),
        }
    }

    /// A used-up token lease of `take`'s subject and limit in the minute of `start`, last
    /// reserved at `taken`.
    fn used_up_token_lease(
        take: &TokenTake,
        start: DateTime<Utc>,
        taken: DateTime<Utc>,
    ) -> TokenLease {
        TokenLease {
            start_ms: minute_start(start),
            max: take.max,
            left: 0,
            shared: 30,
            taken_ms: taken.timestamp_millis(),
            runs: 0,
        }
    }

    #[test]
    fn more_than_4096_token_leases_drop_those_of_past_minutes() {
        let now = at("2026-11-21T10:01:30Z");
        let past = at("2026-11-21T10:00:30Z");
        let take = token_take(now, 30);
        for (held, past_kept) in [(4_096, 4_095), (4_097, 0)] {
            let (gate, store) = (LeasingGate::default(), Fake::default());
            {
                let mut leases = gate.token_lock();
                let current = token_take(now, 30);
                leases.insert(
                    current.window.subject,
                    used_up_token_lease(&current, now, now),
                );
                for _ in 1..held {
                    let old = token_take(past, 30);
                    leases.insert(old.window.subject, used_up_token_lease(&old, past, past));
                }
            }
            let at_ms = now.timestamp_millis();
            gate.reserve_tokens(&store, &[take], 30, at_ms)
                .unwrap()
                .unwrap();
            let leases = gate.token_lock();
            let of_past = leases
                .values()
                .filter(|l| l.start_ms < minute_start(now))
                .count();
            assert_eq!((held, of_past), (held, past_kept));
            assert_eq!(leases.len(), past_kept + 2, "this minute's leases are kept");
        }
    }

    #[test]
    fn a_token_lease_grows_only_in_its_own_window_right_after_its_last_reservation() {
        let now = at("2026-11-21T10:01:00.200Z");
        for (start, taken, asked) in [
            // Used up 300 ms ago in this window: twice the run (a lease of one more run).
            (now, at("2026-11-21T10:00:59.900Z"), 60),
            // The previous minute's lease, even one used up 300 ms ago: the run alone.
            (
                at("2026-11-21T10:00:59.900Z"),
                at("2026-11-21T10:00:59.900Z"),
                30,
            ),
            // Used up 1.2 s ago: the run alone.
            (now, at("2026-11-21T10:00:59Z"), 30),
        ] {
            let (gate, store) = (LeasingGate::default(), Fake::default());
            let take = token_take(now, 30);
            let lease = used_up_token_lease(&take, start, taken);
            gate.token_lock().insert(take.window.subject, lease);
            let at_ms = now.timestamp_millis();
            gate.reserve_tokens(&store, &[take], 30, at_ms)
                .unwrap()
                .unwrap();
            assert_eq!(tokens_in(&store, take.window), asked, "{start} {taken}");
        }
    }

    #[test]
    fn a_lease_that_does_not_fit_is_asked_again_as_the_run_alone_and_only_then() {
        let now = at("2026-11-21T10:01:00.200Z");
        let take = token_take(now, 30);
        let (gate, store) = (LeasingGate::default(), Fake::default());
        // 950 of 1,000 counted: a lease of two runs (60) does not fit, the run (30) does.
        let counted = TokenTake {
            tokens: 950,
            ..take
        };
        assert!(matches!(
            store.reserve_tokens(&[counted]),
            Ok(Take::Taken(_))
        ));
        let lease = used_up_token_lease(&take, now, at("2026-11-21T10:01:00Z"));
        gate.token_lock().insert(take.window.subject, lease);
        let at_ms = now.timestamp_millis();
        let calls = *store.quota_calls.lock().unwrap();
        let admitted = gate.reserve_tokens(&store, &[take], 30, at_ms).unwrap();
        assert!(admitted.is_ok(), "{admitted:?}");
        assert_eq!(tokens_in(&store, take.window), 980);
        assert_eq!(*store.quota_calls.lock().unwrap(), calls + 2);
        // The run alone not fitting (980 + 30) is refused after one take, not asked again.
        let refused = gate.reserve_tokens(&store, &[take], 30, at_ms).unwrap();
        assert_eq!(refused, Err(0));
        assert_eq!(*store.quota_calls.lock().unwrap(), calls + 3);
        assert_eq!(tokens_in(&store, take.window), 980);
    }

    #[test]
    fn a_reservation_no_lease_holds_goes_back_to_the_store() {
        let now = at("2026-11-21T10:01:30Z");
        let take = token_take(now, 30);
        let store = Fake::default();
        assert!(matches!(store.reserve_tokens(&[take]), Ok(Take::Taken(_))));
        assert_eq!(tokens_in(&store, take.window), 30);
        LeasingGate::default().give_back_tokens(&store, &[take]);
        assert_eq!(tokens_in(&store, take.window), 0);
    }

    #[test]
    fn a_token_lease_serves_only_the_window_it_was_taken_for() {
        let (scope, store) = scope(tokens(1_000_000, 100_000_000), None);
        let node = LeasingGate::default();
        let now = at("2026-11-21T10:00:30Z");
        for _ in 0..64 {
            admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap();
        }
        // The node holds a lease of 10:00's minute; 10:01's run must reserve in 10:01's.
        let next = at("2026-11-21T10:01:30Z");
        let minute = token_windows(scope.tenant().id, None, next)[0];
        assert_eq!(tokens_in(&store, minute), 0);
        admit_run(&store, &node, &scope, next, None, run_of(10, 20)).unwrap();
        assert!(
            tokens_in(&store, minute) >= 30,
            "{}",
            tokens_in(&store, minute)
        );
    }

    #[test]
    fn a_busy_subject_far_from_its_limits_reserves_in_few_writes() {
        let limits = tokens(1_000_000, 100_000_000);
        let (scope, store) = scope(limits, None);
        let node = LeasingGate::default();
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
    }

    #[test]
    fn a_request_refusal_hands_the_spend_reservation_back_to_this_node_s_lease() {
        let node = LeasingGate::default();
        let (store, month) = spend_refused_by_requests(&node);
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

    #[test]
    fn leases_double_within_a_second_and_stay_an_eighth_of_what_is_left() {
        let node = LeasingGate::default();
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
        let fill = |node: &LeasingGate, n: u128| {
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
        let node = LeasingGate::default();
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
        let node = LeasingGate::default();
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
    fn leases_count_ahead_in_few_writes_and_the_headers_stay_exact() {
        let (scope, store, leases, now) = limited(1_000_000, "2026-11-21T10:00:00Z");
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
            let nodes = [LeasingGate::default(), LeasingGate::default()];
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
        node: &LeasingGate,
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
        let (scope, store, node, now) = limited(1_000_000, "2026-11-21T10:00:00Z");
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
        let (scope, store, node, now) = limited(1_000_000, "2026-11-21T10:00:00Z");
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
            let node = LeasingGate::default();
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
        let unchanged = |node: &LeasingGate| {
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
        let node = LeasingGate::default();
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
        let panics = RequestsOnly(|_: &[RequestTake]| -> DomainResult<Take> {
            panic!("the store panicked")
        });
        let now = at("2026-11-21T10:00:30Z");
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(Uuid::from_u128(1)),
            start_ms: minute_start(now),
        };
        let node = LeasingGate::default();
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
        assert!(std::panic::catch_unwind(|| node.refill(claim, &panics, || now)).is_err());
        assert!(node.queue_refill(w, 100));
        assert!(node.refill_due().is_some(), "the panicked refiller ended");
    }

    /// A store whose request takes its function answers, for tests without a token limit: it
    /// has counted no tokens and prunes nothing.
    struct RequestsOnly<F>(F);

    impl<F: Fn(&[RequestTake]) -> DomainResult<Take>> QuotaRepo for RequestsOnly<F> {
        fn window_tokens(&self, _: &[QuotaWindow]) -> DomainResult<Vec<u64>> {
            Ok(Vec::new())
        }
        fn take_request(&self, takes: &[RequestTake]) -> DomainResult<Take> {
            (self.0)(takes)
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

    /// A store that holds every request take and token reservation until released (in the
    /// order they came), and records what each asked (requests or tokens).
    struct Held {
        inner: Fake,
        /// What [`QuotaRepo::may_wait`] answers (a thread that serves connections: `false`).
        may_wait: bool,
        wants: Mutex<Vec<u64>>,
        entered: Mutex<std::sync::mpsc::Sender<()>>,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Held {
        /// Records what a take asked, tells `entered`, and waits for `release`.
        fn hold(&self, asked: impl Iterator<Item = u64>) {
            self.wants.lock().unwrap().extend(asked);
            self.entered.lock().unwrap().send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
        }
    }

    impl QuotaRepo for Held {
        fn may_wait(&self) -> bool {
            self.may_wait
        }
        fn window_tokens(&self, w: &[QuotaWindow]) -> DomainResult<Vec<u64>> {
            self.inner.window_tokens(w)
        }
        fn take_request(&self, takes: &[RequestTake]) -> DomainResult<Take> {
            self.hold(takes.iter().map(|t| t.want));
            self.inner.take_request(takes)
        }
        fn reserve_tokens(&self, takes: &[TokenTake]) -> DomainResult<Take> {
            self.hold(takes.iter().map(|t| t.tokens));
            self.inner.reserve_tokens(takes)
        }
        fn release_tokens(&self, _: &[QuotaWindow], _: u64) -> DomainResult<()> {
            unreachable!("no refusal here")
        }
        fn prune_windows(&self, a: i64, b: i64) -> DomainResult<u64> {
            self.inner.prune_windows(a, b)
        }
    }

    /// `inner` behind a [`Held`] store; the receiver told each time a take enters, and the
    /// sender that lets one go.
    fn held(
        inner: Fake,
    ) -> (
        Held,
        std::sync::mpsc::Receiver<()>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (entered_tx, entered) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel();
        let store = Held {
            inner,
            may_wait: true,
            wants: Mutex::default(),
            entered: Mutex::new(entered_tx),
            release: Mutex::new(release_rx),
        };
        (store, entered, release)
    }

    /// Runs `run` on two threads over a [`held`] store, the second once the first is held
    /// there; releases both (one after the other) and checks that both succeeded before
    /// anything else is checked, so a failure fails the test instead of hanging it. Answers
    /// whether the second reached the store within `second_within`, and what the store was
    /// asked by then.
    fn both_held<R: Send>(
        (store, entered, release): (
            &Held,
            &std::sync::mpsc::Receiver<()>,
            &std::sync::mpsc::Sender<()>,
        ),
        second_within: std::time::Duration,
        run: impl Fn() -> DomainResult<R> + Sync,
    ) -> (bool, Vec<u64>) {
        let wait = std::time::Duration::from_secs(10);
        std::thread::scope(|threads| {
            let first = threads.spawn(&run);
            let entered_first = entered.recv_timeout(wait);
            let second = threads.spawn(&run);
            let second_took = entered.recv_timeout(second_within).is_ok();
            let wants = store.wants.lock().unwrap().clone();
            release.send(()).unwrap();
            let first = first.join();
            release.send(()).unwrap();
            let second = second.join();
            entered_first.unwrap();
            first.unwrap().unwrap();
            second.unwrap().unwrap();
            (second_took, wants)
        })
    }

    /// A tenant of 10^6 requests a minute at 10:00:30 and its minute; a store over it whose
    /// takes are held (`entered` is told each time a take enters, `release` lets one go); a
    /// gate whose lease of 64 of that minute, taken at that instant, was just used up: the
    /// next take asks for twice as many.
    type InFlight = (
        RunScope,
        QuotaSubject,
        DateTime<Utc>,
        Held,
        std::sync::mpsc::Receiver<()>,
        std::sync::mpsc::Sender<()>,
        LeasingGate,
    );

    fn in_flight() -> InFlight {
        let (scope, inner) = scope(rpm(1_000_000), None);
        let (store, entered, release) = held(inner);
        let subject = QuotaSubject::TenantMinute(scope.tenant().id);
        let now = at("2026-11-21T10:00:30Z");
        let node = LeasingGate::default();
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
        (scope, subject, now, store, entered, release, node)
    }

    #[test]
    fn a_request_that_finds_a_take_in_flight_waits_for_it_instead_of_writing() {
        let (scope, subject, now, store, entered, release, node) = in_flight();
        node.follow_wait_ms.store(10_000, Ordering::Relaxed);
        // While the first take is in flight, another request finds the lease used up: it
        // waits for the take, so no second take reaches the store.
        let (second_took, wants) = both_held(
            (&store, &entered, &release),
            std::time::Duration::from_millis(300),
            || admit(&store, &node, &scope, now),
        );
        assert!(!second_took, "the second request wrote a take of its own");
        assert_eq!(wants, vec![128]);
        let lease = node.lock()[&subject];
        // The lease of 128 served both requests.
        assert_eq!((lease.left, lease.size, lease.shared), (126, 128, 128));
    }

    #[test]
    fn a_take_in_flight_makes_the_others_of_its_subject_count_one_request() {
        // A lease of 64 just used up: the next take asks for twice as many.
        let (scope, subject, now, store, entered, release, node) = in_flight();
        // While that take is in flight, another request finds the lease used up; the lease
        // lands first, the single request after it.
        let (_, held_wants) = both_held(
            (&store, &entered, &release),
            std::time::Duration::from_secs(10),
            || admit(&store, &node, &scope, now),
        );
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

    /// A gate holding a used-up lease of `runs` runs of 30 tokens in a fresh tenant's token
    /// minute at 10:00:30 (limit 10^12), reserved `since_ms` before; the take of one more such
    /// run, and the instant.
    fn used_up_lease_of(runs: u64, since_ms: i64) -> (LeasingGate, TokenTake, DateTime<Utc>) {
        let now = at("2026-11-21T10:00:30Z");
        let take = TokenTake {
            max: Some(1_000_000_000_000),
            ..token_take(now, 30)
        };
        let taken = now - chrono::Duration::milliseconds(since_ms);
        let lease = TokenLease {
            runs,
            ..used_up_token_lease(&take, now, taken)
        };
        let gate = LeasingGate::default();
        gate.token_lock().insert(take.window.subject, lease);
        (gate, take, now)
    }

    #[test]
    fn a_token_lease_halves_for_every_second_since_its_last_reservation() {
        // A second to the millisecond is the first halving (999 ms still grows: the lease is at
        // its largest already).
        for (since_ms, runs) in [
            (500, 4_096),
            (999, 4_096),
            (1_000, 2_048),
            (1_500, 2_048),
            (2_500, 1_024),
            (13_000, 0),
        ] {
            let (gate, take, now) = used_up_lease_of(4_096, since_ms);
            let store = Fake::default();
            let at_ms = now.timestamp_millis();
            gate.reserve_tokens(&store, &[take], 30, at_ms)
                .unwrap()
                .unwrap();
            assert_eq!(
                tokens_in(&store, take.window),
                30 * (1 + runs),
                "{since_ms}"
            );
            assert_eq!(gate.token_lock()[&take.window.subject].runs, runs);
        }
    }

    #[test]
    fn a_subject_whose_largest_lease_lasts_over_a_second_keeps_reserving_in_few_writes() {
        // 3,000 runs a second for 10 s: a lease of 4,096 runs lasts 1.4 s. Until decision
        // 0057 the next reservation was then exact and leases grew again from one run (about
        // 13 writes every 8,000 runs: 60 here); now the next lease is half as large.
        let (scope, store) = scope(tokens(MAX_LIMIT, MAX_LIMIT), None);
        let node = LeasingGate::default();
        let start = at("2026-11-21T10:00:30Z");
        for i in 0..30_000 {
            let now = start + chrono::Duration::microseconds(i * 1_000 / 3);
            admit_run(&store, &node, &scope, now, None, run_of(10, 20)).unwrap();
        }
        let writes = *store.quota_calls.lock().unwrap();
        assert!((13..=30).contains(&writes), "{writes}");
    }

    /// Two runs' reservations of one more run of 30 tokens, in a gate whose lease of 64 runs
    /// was just used up ([`used_up_lease_of`]) and whose followers wait at most
    /// `follow_wait_ms`, over a [`held`] store: the second starts once the first is held there.
    /// Answers what [`both_held`] does, the gate, the take and the store behind.
    fn two_reservations(
        follow_wait_ms: u64,
        second_within: std::time::Duration,
        may_wait: bool,
    ) -> (bool, Vec<u64>, LeasingGate, TokenTake, Fake) {
        let (gate, take, now) = used_up_lease_of(64, 0);
        gate.follow_wait_ms.store(follow_wait_ms, Ordering::Relaxed);
        let (mut store, entered, release) = held(Fake::default());
        store.may_wait = may_wait;
        let at_ms = now.timestamp_millis();
        let (second_took, wants) = both_held((&store, &entered, &release), second_within, || {
            gate.reserve_tokens(&store, &[take], 30, at_ms)
                .map(|admitted| admitted.unwrap())
        });
        assert!(lock_taking(&gate.token_taking).is_empty());
        (second_took, wants, gate, take, store.inner)
    }

    #[test]
    fn a_run_that_finds_a_token_reservation_in_flight_waits_for_it_instead_of_writing() {
        // While the first reservation is in flight, the second run finds the lease used up: it
        // waits for that reservation, so no second one reaches the store.
        let (second_took, _, gate, take, store) =
            two_reservations(10_000, std::time::Duration::from_millis(300), true);
        assert!(!second_took, "the second run reserved on its own");
        assert_eq!(*store.quota_calls.lock().unwrap(), 1);
        // The lease of 128 more runs served the second run.
        let lease = gate.token_lock()[&take.window.subject];
        assert_eq!((lease.left, lease.runs), (30 * 127, 128));
        assert_eq!(tokens_in(&store, take.window), 30 * 129);
    }

    #[test]
    fn a_run_on_a_thread_that_may_not_wait_reserves_at_once_behind_one_in_flight() {
        // A thread that serves connections never waits for another run's reservation, however
        // long the follow wait: it reserves its own tokens while the first is still held.
        let (second_took, wants, _, take, store) =
            two_reservations(10_000, std::time::Duration::from_secs(5), false);
        assert!(
            second_took,
            "the second run waited on a thread that may not wait"
        );
        assert_eq!(wants, vec![30 * 129, 30]);
        assert_eq!(tokens_in(&store, take.window), 30 * 130);
    }

    #[test]
    fn a_run_behind_a_token_reservation_in_flight_reserves_its_own_tokens_only() {
        // The second run's wait ends while the first reservation is still held.
        let (second_took, wants, gate, take, store) =
            two_reservations(1, std::time::Duration::from_secs(10), true);
        assert!(second_took);
        assert_eq!(wants, vec![30 * 129, 30]);
        // The run's own reservation neither shrank the lease nor reset its growth.
        let lease = gate.token_lock()[&take.window.subject];
        assert_eq!((lease.left, lease.runs), (30 * 128, 128));
        assert_eq!(tokens_in(&store, take.window), 30 * 130);
    }

    #[test]
    fn a_take_that_fails_or_panics_leaves_no_take_in_flight() {
        // A store that fails, then panics: neither may leave the subject marked as taking,
        // or every later take of it would count single requests only.
        let broken = RequestsOnly(|takes: &[RequestTake]| -> DomainResult<Take> {
            if takes.iter().any(|t| t.want > 100) {
                panic!("the store panicked")
            }
            Err(DomainError::Unavailable {
                retry_after_secs: 1,
            })
        });
        let (scope, store) = scope(rpm(1_000_000), None);
        let subject = QuotaSubject::TenantMinute(scope.tenant().id);
        let now = at("2026-11-21T10:00:30Z");
        let node = LeasingGate::default();
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
        assert!(admit(&broken, &node, &scope, now).is_err());
        assert!(node.taking_lock().is_empty(), "after a failed take");
        node.lock().insert(subject, used_up(64));
        let node = std::panic::AssertUnwindSafe(node);
        assert!(std::panic::catch_unwind(|| admit(&broken, &*node, &scope, now)).is_err());
        assert!(node.taking_lock().is_empty(), "after a panicked take");
        // The next take is a lease again (twice the last size), not a single request.
        admit(&store, &*node, &scope, now).unwrap();
        assert_eq!(shared_requests(&store, &scope, now), 128);
    }

    #[test]
    fn a_claim_dropped_unused_lets_the_next_refiller_start() {
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(Uuid::from_u128(1)),
            start_ms: 0,
        };
        let node = LeasingGate::default();
        assert!(node.queue_refill(w, 100));
        let claim = node.refill_due().unwrap();
        assert!(node.refill_due().is_none(), "claimed");
        // The task that was to run it never ran.
        drop(claim);
        assert!(node.refill_due().is_some());
        // A claim of another process's quotas refills nothing here and ends nothing here.
        let other = LeasingGate::default();
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
        let (scope, store, leases, now) = limited(10_000, "2026-11-21T10:00:00Z");
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
        let leases = LeasingGate::default();
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
}
