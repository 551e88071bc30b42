//! Quotas: per-minute request and token limits and a monthly token and spend budget, decided
//! here and counted in the database so every node sharing it sees one count.
//!
//! A tenant's limits are set by platform admins; a workspace key may carry lower per-minute
//! limits of its own (checked against the tenant's when set). [`admit_run`] is the rule: it
//! runs before any upstream call, in the same trip to the database as authentication. When a
//! token limit applies it reserves the run's likely tokens (prompt and completion allowance,
//! [`reservation_size`]) in every token window of the run at once, refusing when they do not
//! fit (decision 0025); the run writer later settles them to the run's true tokens
//! ([`settle_delta`], [`settled_tokens`]). Then it takes one request from every per-minute
//! request window. Windows are fixed: the UTC minute, the UTC calendar month. It decides the
//! refusals (which limit, `Retry-After`) and the `x-ratelimit-*` headers.
//!
//! How the counts reach the store is a port, [`QuotaGate`] (decision 0046): [`ExactGate`]
//! counts each request and reservation in the store as the rule asks; the leasing gate
//! ([`LeasingGate`], in `quota/leasing.rs`, decisions 0011 and 0017) counts blocks ahead and
//! admits from them, so a busy subject's runs seldom write. Either way the shared count holds
//! everything a node admitted, so a limit holds across nodes. A process's gate and its run
//! settings live in its [`NodeQuotas`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Datelike, TimeZone, Utc};
use smallvec::SmallVec;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::policy::ai_access::RunScope;
use crate::policy::models::Catalog;
use crate::policy::prices::{Money, Price};
use crate::ports::QuotaRepo;

mod leasing;

pub use leasing::{LeasingGate, RefillClaim, MAX_LEASE, REFILL_FROM, TOKEN_LEASE_RUNS};

/// The largest limit accepted (a trillion): anything above is a typing mistake.
pub const MAX_LIMIT: u64 = 1_000_000_000_000;

/// A tenant's limits; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantLimits {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    pub monthly_tokens: Option<u64>,
    /// Money per UTC month, in nano-units ([`crate::policy::prices::Money`], decision 0038).
    pub monthly_spend: Option<Money>,
}

impl TenantLimits {
    /// No limit at all (every field `None`).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
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
    /// No limit of its own (every field `None`).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
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

/// The port admission counts through (decision 0046): what [`admit_run`] asks of the shared
/// counts. The rule — which windows, in which order, what is refused and what the headers say —
/// is [`admit_run`]'s; a gate decides only how the counting reaches the store. [`ExactGate`]
/// counts every request and reservation in the store as asked; [`LeasingGate`] counts ahead in
/// blocks and admits from them. Whatever the gate, the shared count holds every request and
/// token it admitted, so a limit holds across nodes.
pub trait QuotaGate {
    /// Counts one request in every window of `takes` (`(window, limit)`), never past a limit.
    /// `Ok` holds each window's remaining allowance as this process knows it; `Err` the index
    /// of a full window, in which case nothing is counted.
    fn take_requests<P: QuotaRepo + ?Sized>(
        &self,
        store: &P,
        takes: &[(QuotaWindow, u64)],
        now_ms: i64,
    ) -> DomainResult<Result<SmallVec<[u64; 2]>, usize>>;

    /// Reserves `tokens` in every window of `takes` (each `takes[i].tokens` is `tokens`), never
    /// past a limit. `Ok` holds each window's remaining allowance as this process knows it;
    /// `Err` the index of a full window, in which case nothing is reserved.
    fn reserve_tokens<P: QuotaRepo + ?Sized>(
        &self,
        store: &P,
        takes: &[TokenTake],
        tokens: u64,
        now_ms: i64,
    ) -> DomainResult<Result<SmallVec<[u64; 3]>, usize>>;

    /// Hands a reservation back (its run was refused afterwards). A hand-back that fails
    /// leaves the reservation counted until its window ends: on the safe side of the limit.
    fn give_back_tokens<P: QuotaRepo + ?Sized>(&self, store: &P, takes: &[TokenTake]);
}

/// The plain gate: every request is one [`QuotaRepo::take_request`] of one, every reservation
/// one [`QuotaRepo::reserve_tokens`] of exactly the run's tokens. The rule at its simplest, and
/// what [`LeasingGate`] falls back to when it hands tokens back to the store.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExactGate;

impl QuotaGate for ExactGate {
    fn take_requests<P: QuotaRepo + ?Sized>(
        &self,
        store: &P,
        takes: &[(QuotaWindow, u64)],
        _now_ms: i64,
    ) -> DomainResult<Result<SmallVec<[u64; 2]>, usize>> {
        let asks: SmallVec<[RequestTake; 2]> = takes
            .iter()
            .map(|&(window, max)| RequestTake {
                window,
                max,
                want: 1,
            })
            .collect();
        Ok(match store.take_request(&asks)? {
            Take::Taken(grants) => Ok(takes
                .iter()
                .zip(grants)
                .map(|((_, max), grant)| max.saturating_sub(grant.count))
                .collect()),
            Take::Full(i) => Err(i),
        })
    }

    fn reserve_tokens<P: QuotaRepo + ?Sized>(
        &self,
        store: &P,
        takes: &[TokenTake],
        _tokens: u64,
        _now_ms: i64,
    ) -> DomainResult<Result<SmallVec<[u64; 3]>, usize>> {
        Ok(match store.reserve_tokens(takes)? {
            Take::Taken(grants) => Ok(takes
                .iter()
                .zip(grants)
                .map(|(take, grant)| {
                    take.max
                        .map_or(u64::MAX, |max| max.saturating_sub(grant.count))
                })
                .collect()),
            Take::Full(i) => Err(i),
        })
    }

    fn give_back_tokens<P: QuotaRepo + ?Sized>(&self, store: &P, takes: &[TokenTake]) {
        let windows: SmallVec<[QuotaWindow; 3]> = takes.iter().map(|t| t.window).collect();
        if let Some(first) = takes.first() {
            let _ = store.release_tokens(&windows, first.tokens);
        }
    }
}

/// This process's quotas, one per process, kept by the run orchestration (`runs::Runs`): the
/// gate its runs are admitted through (the leasing adapter), what a run's reservation needs of
/// the deployment (the completion allowance, the models and prices) and the writer's count of
/// usage writes ([`TokenReads`]).
#[derive(Debug, Default)]
pub struct NodeQuotas {
    gate: LeasingGate,
    tokens: Arc<TokenReads>,
    /// The completion allowance a reservation assumes when a run names no `max_tokens`
    /// (`GC_RESERVE_COMPLETION_TOKENS`); 0 until set means [`DEFAULT_RESERVE_COMPLETION`].
    completion_default: AtomicU64,
    /// The deployment's models and prices, set once at start-up ([`NodeQuotas::set_catalog`]).
    catalog: OnceLock<Catalog>,
}

impl NodeQuotas {
    /// This process's leasing gate.
    pub fn gate(&self) -> &LeasingGate {
        &self.gate
    }

    /// A claim to start the gate's refiller when a lease refill is due
    /// ([`LeasingGate::refill_due`]).
    pub fn refill_due(&self) -> Option<RefillClaim> {
        self.gate.refill_due()
    }

    /// Runs the gate's refiller ([`LeasingGate::refill`]); answers the failed writes.
    pub fn refill<P: QuotaRepo + ?Sized>(
        &self,
        claim: RefillClaim,
        store: &P,
        now: impl Fn() -> DateTime<Utc>,
    ) -> usize {
        self.gate.refill(claim, store, now)
    }

    /// Sets the deployment's models and prices (once; later calls change nothing and answer
    /// false).
    pub fn set_catalog(&self, catalog: Catalog) -> bool {
        self.catalog.set(catalog).is_ok()
    }

    /// The deployment's models and prices: the shipped prices and no allow-list until set.
    pub fn catalog(&self) -> &Catalog {
        self.catalog.get_or_init(Catalog::default)
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
}

/// The completion allowance a run without `max_tokens` reserves unless configured.
pub const DEFAULT_RESERVE_COMPLETION: u64 = 1024;

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
pub fn admit<P: QuotaRepo + ?Sized, G: QuotaGate>(
    store: &P,
    quotas: &G,
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
pub fn admit_run<P: QuotaRepo + ?Sized, G: QuotaGate>(
    store: &P,
    quotas: &G,
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
        // costs no tokens (through the gate: the leasing gate puts it back into this
        // node's lease when it holds one for the window, else to the store). A hand-back that fails leaves the reservation counted until its
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
fn admit_requests<P: QuotaRepo + ?Sized, G: QuotaGate>(
    store: &P,
    quotas: &G,
    scope: &RunScope,
    now: DateTime<Utc>,
    mut state: RateLimitState,
) -> DomainResult<RateLimitState> {
    let tenant = scope.tenant();
    let t = tenant.limits;
    let key = scope.key().filter(|(_, l)| !l.is_empty());
    let minute = minute_start(now);
    let minute_reset = secs_until(now, minute + 60_000);
    // Requests: one in every window, counted by the gate in the shared count (or admitted
    // from what it already counted there), never above the limit.
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
    match quotas.take_requests(store, &takes, now.timestamp_millis())? {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fakes::Fake;
    use crate::model::workspace::KeyScope;
    use crate::model::Status;
    use crate::policy::access::tests::tenant;
    use crate::policy::access::Credential;
    use crate::policy::ai_access::tests::{key, member, session};
    use crate::policy::ai_access::AiKeyStatus;
    use crate::values::Region;

    /// Runs a rule's test body once with each gate, `$gate` bound to it: the plain
    /// [`ExactGate`] and a process's leasing gate ([`NodeQuotas::gate`]). The rule's answers
    /// must not depend on the gate.
    macro_rules! on_both_gates {
        (|$gate:ident| $body:block) => {{
            {
                let $gate = &ExactGate;
                $body
            }
            {
                let node = NodeQuotas::default();
                let $gate = node.gate();
                $body
            }
        }};
    }

    pub(crate) fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    pub(crate) fn scope(limits: TenantLimits, key_limits: Option<KeyLimits>) -> (RunScope, Fake) {
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
    fn a_node_keeps_one_gate_one_token_read_and_its_completion_default() {
        let q = NodeQuotas::default();
        assert!(
            std::ptr::eq(q.gate(), q.gate()),
            "one leasing gate per node"
        );
        assert!(Arc::ptr_eq(&q.token_reads(), &q.token_reads()));
        assert_eq!(q.completion_default(), DEFAULT_RESERVE_COMPLETION);
        q.set_completion_default(77);
        assert_eq!(q.completion_default(), 77);
        q.set_completion_default(0);
        assert_eq!(q.completion_default(), 1, "at least 1");
        q.set_completion_default(u64::MAX);
        assert_eq!(q.completion_default(), MAX_LIMIT);
    }
    #[test]
    fn no_limits_cost_no_query() {
        let (scope, store) = scope(TenantLimits::default(), Some(KeyLimits::default()));
        let state = admit(&store, &ExactGate, &scope, Utc::now()).unwrap();
        assert_eq!(state, RateLimitState::default());
        assert_eq!(*store.quota_calls.lock().unwrap(), 0);
    }

    #[test]
    fn exactly_the_limit_gets_through_per_minute() {
        let limits = rpm(3);
        let (scope, store) = scope(limits, None);
        let now = at("2026-11-21T10:00:15Z");
        for left in [2, 1, 0] {
            let s = admit(&store, &ExactGate, &scope, now).unwrap();
            let r = s.requests.unwrap();
            assert_eq!((r.limit, r.remaining, r.reset_secs), (3, left, 45));
            assert_eq!(s.tokens, None);
        }
        let e = admit(&store, &ExactGate, &scope, now).unwrap_err();
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
        assert!(admit(&store, &ExactGate, &scope, at("2026-11-21T10:01:00Z")).is_ok());
    }

    #[test]
    fn a_key_limit_below_the_tenant_refuses_first_and_counts_nothing_else() {
        let limits = rpm(10);
        let key_limits = key_rpm(1);
        let (scope, store) = scope(limits, Some(key_limits));
        let now = at("2026-11-21T10:00:00Z");
        let s = admit(&store, &ExactGate, &scope, now).unwrap();
        assert_eq!(s.requests.unwrap().remaining, 0, "the key's is the tighter");
        assert_eq!(
            admit(&store, &ExactGate, &scope, now).unwrap_err().code(),
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
        let limits = tokens(100, 1000);
        let (scope, store) = scope(limits, None);
        let now = at("2026-11-21T10:00:30Z");
        // A run of one token (the least a run reserves).
        let s = admit(&store, &ExactGate, &scope, now).unwrap();
        assert_eq!(s.tokens.unwrap().remaining, 99);
        store.add_tokens_now(token_windows(scope.tenant().id, None, now), 39);
        let s = admit(&store, &ExactGate, &scope, now).unwrap();
        assert_eq!(s.tokens.unwrap().remaining, 59);
        store.add_tokens_now(token_windows(scope.tenant().id, None, now), 59);
        let e = admit(&store, &ExactGate, &scope, now).unwrap_err();
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
        assert!(admit(&store, &ExactGate, &scope, later).is_ok());
        store.add_tokens_now(token_windows(scope.tenant().id, None, later), 900);
        let e = admit(&store, &ExactGate, &scope, at("2026-11-21T10:02:30Z")).unwrap_err();
        assert_eq!(e.code(), "budget_exhausted");
        let DomainError::QuotaExceeded {
            retry_after_secs, ..
        } = e
        else {
            panic!()
        };
        assert_eq!(retry_after_secs, 9 * 86_400 + 13 * 3600 + 57 * 60 + 30);
        // A new month.
        assert!(admit(&store, &ExactGate, &scope, at("2026-12-01T00:00:00Z")).is_ok());
    }

    pub(crate) fn token_limits() -> TenantLimits {
        tokens(100, 1000)
    }

    pub(crate) fn run_of(prompt: u64, completion: u64) -> impl FnOnce() -> RunEstimate {
        move || RunEstimate {
            prompt_tokens: prompt,
            completion_tokens: completion,
        }
    }

    pub(crate) fn tokens_in(store: &Fake, w: QuotaWindow) -> u64 {
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
        on_both_gates!(|node| {
            let (scope, store) = scope(token_limits(), None);
            let now = at("2026-11-21T10:00:30Z");
            let [minute, month] = [0, 1].map(|i| token_windows(scope.tenant().id, None, now)[i]);
            // Three runs of 30 fit a limit of 100, a fourth does not: nothing has finished yet.
            for n in 1..=3 {
                let a = admit_run(&store, node, &scope, now, None, run_of(10, 20)).unwrap();
                assert_eq!(a.reservation.unwrap().tokens, 30);
                assert_eq!(a.state.tokens.unwrap().remaining, 100 - 30 * n);
            }
            let e = admit_run(&store, node, &scope, now, None, run_of(10, 20)).unwrap_err();
            assert_eq!(e.code(), "rate_limited");
            // The refused fourth counted nothing, whatever the gate. (The leasing gate has no room
            // for a lease in the minute (100); in the month (1000) the second run reserved its 30
            // and a lease of one more run, which served the third.)
            assert_eq!(
                (tokens_in(&store, minute), tokens_in(&store, month)),
                (90, 90)
            );
            // A run of 10 still fits.
            assert!(admit_run(&store, node, &scope, now, None, run_of(4, 6)).is_ok());
            // A run larger than the limit reserves the limit: it runs alone in an empty minute.
            let later = at("2026-11-21T10:01:00Z");
            let a = admit_run(&store, node, &scope, later, None, run_of(10, 5000)).unwrap();
            assert_eq!(a.reservation.unwrap().tokens, 100);
            assert_eq!(
                admit_run(&store, node, &scope, later, None, run_of(1, 0))
                    .unwrap_err()
                    .code(),
                "rate_limited"
            );
        });
    }

    #[test]
    fn a_reservation_is_handed_back_when_the_request_limit_refuses_the_run() {
        let (scope, store, now) = refused_after_reserving(&ExactGate);
        let minute = token_windows(scope.tenant().id, None, now)[0];
        // The refused run's 30 went back to the store: only the admitted run's stay counted.
        assert_eq!(tokens_in(&store, minute), 30);
    }

    /// One run of 30 tokens admitted, the next refused by a request limit of one after its
    /// token reservation.
    pub(crate) fn refused_after_reserving<G: QuotaGate>(
        node: &G,
    ) -> (RunScope, Fake, DateTime<Utc>) {
        let limits = TenantLimits {
            requests_per_minute: Some(1),
            ..token_limits()
        };
        let (scope, store) = scope(limits, None);
        let now = at("2026-11-21T10:00:30Z");
        admit_run(&store, node, &scope, now, None, run_of(10, 20)).unwrap();
        let e = admit_run(&store, node, &scope, now, None, run_of(10, 20)).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        (scope, store, now)
    }

    /// Near a limit the leasing gate's leases shrink to exact reservations (a lease is at most
    /// an eighth of what is left): the limit is reached exactly, never passed.
    #[test]
    fn a_token_limit_is_reached_exactly_and_never_passed() {
        on_both_gates!(|node| {
            let (scope, store) = scope(
                TenantLimits {
                    tokens_per_minute: Some(3_000),
                    ..TenantLimits::default()
                },
                None,
            );
            let now = at("2026-11-21T10:00:30Z");
            let admitted = (0..200)
                .filter(|_| admit_run(&store, node, &scope, now, None, run_of(10, 20)).is_ok())
                .count();
            assert_eq!(admitted, 100);
            let minute = token_windows(scope.tenant().id, None, now)[0];
            assert_eq!(tokens_in(&store, minute), 3_000);
        });
    }

    #[test]
    fn a_key_token_limit_reserves_in_the_key_window_too_and_no_estimate_without_one() {
        on_both_gates!(|node| {
            let key_limits = KeyLimits {
                tokens_per_minute: Some(50),
                ..KeyLimits::default()
            };
            let (scope, store) = scope(TenantLimits::default(), Some(key_limits));
            let now = at("2026-11-21T10:00:30Z");
            let a = admit_run(&store, node, &scope, now, None, run_of(10, 20)).unwrap();
            assert_eq!(a.state.tokens.unwrap().limit, 50);
            let e = admit_run(&store, node, &scope, now, None, run_of(10, 20)).unwrap_err();
            assert_eq!(e.code(), "rate_limited");
            // Requests only: no reservation, the estimate is never worked out.
            let (scope, store) = scope_with_rpm();
            let a = admit_run(&store, node, &scope, now, None, || -> RunEstimate {
                panic!("no token limit applies")
            })
            .unwrap();
            assert_eq!(a.reservation, None);
        });
    }

    fn scope_with_rpm() -> (RunScope, Fake) {
        scope(rpm(10), None)
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

    pub(crate) fn key_rpm(n: u64) -> KeyLimits {
        KeyLimits {
            requests_per_minute: Some(n),
            ..KeyLimits::default()
        }
    }

    /// A tenant's monthly spend limit of `n` nano-units.
    fn spend(n: u64) -> TenantLimits {
        TenantLimits {
            monthly_spend: Some(n),
            ..TenantLimits::default()
        }
    }

    /// A price of 1 nano-unit per input token and 2 per output token.
    pub(crate) const PRICE: Price = Price {
        input_per_million: 1_000_000,
        output_per_million: 2_000_000,
    };

    #[test]
    fn a_spend_limit_reserves_the_run_s_cost_and_refuses_when_it_does_not_fit() {
        on_both_gates!(|node| {
            // 10 prompt and 20 completion tokens: 10 + 40 = 50 nano-units reserved per run.
            let (scope, store) = scope(spend(120), None);
            let now = at("2026-11-21T10:00:30Z");
            for _ in 0..2 {
                let a = admit_run(&store, node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap();
                assert_eq!(a.spend.unwrap().nanos, 50);
                assert_eq!(a.prompt_tokens, 10);
                assert!(
                    a.reservation.is_none(),
                    "no token limit: no token reservation"
                );
            }
            let e = admit_run(&store, node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap_err();
            assert_eq!(e.code(), "budget_exhausted");
            let month = spend_windows(scope.tenant().id, None, now);
            assert_eq!(
                store.window_tokens(&month).unwrap(),
                vec![100],
                "a refusal counts nothing"
            );
            // Without a price, a spend limit cannot be kept: refused before anything is counted.
            let e = admit_run(&store, node, &scope, now, None, run_of(1, 1)).unwrap_err();
            assert_eq!(e.code(), "model_not_allowed");
            // Settling hands back what the runs did not use: the next run fits again.
            store.release_tokens(&month, 60).unwrap();
            assert!(admit_run(&store, node, &scope, now, Some(PRICE), run_of(10, 20)).is_ok());
        });
    }

    #[test]
    fn a_key_s_own_spend_limit_refuses_within_the_tenant_s() {
        on_both_gates!(|node| {
            let key_limits = KeyLimits {
                requests_per_minute: None,
                tokens_per_minute: None,
                monthly_spend: Some(120),
            };
            let (scope, store) = scope(spend(10_000), Some(key_limits));
            let now = at("2026-11-21T10:00:30Z");
            for _ in 0..2 {
                let a = admit_run(&store, node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap();
                assert_eq!(a.spend.unwrap().nanos, 50);
            }
            // 100 of the key's 120 spent: the next 50 does not fit the key, though the
            // tenant has 9,900 left.
            let e = admit_run(&store, node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap_err();
            assert_eq!(e.code(), "budget_exhausted");
        });
    }

    #[test]
    fn a_request_refusal_hands_the_spend_reservation_back() {
        let (store, month) = spend_refused_by_requests(&ExactGate);
        assert_eq!(
            store.window_tokens(&month).unwrap()[0],
            50,
            "only the admitted run's cost stays counted"
        );
    }

    /// A run of 50 nano-units admitted, the next refused by a request limit of one after its
    /// spend reservation; answers the store and the spend windows.
    pub(crate) fn spend_refused_by_requests<G: QuotaGate>(node: &G) -> (Fake, Vec<QuotaWindow>) {
        let limits = TenantLimits {
            monthly_spend: Some(1_000),
            requests_per_minute: Some(1),
            ..TenantLimits::default()
        };
        let (scope, store) = scope(limits, None);
        let now = at("2026-11-21T10:00:30Z");
        admit_run(&store, node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap();
        let e = admit_run(&store, node, &scope, now, Some(PRICE), run_of(10, 20)).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        (store, spend_windows(scope.tenant().id, None, now))
    }

    /// Limits of `per_minute` tokens a minute and `monthly` a month.
    pub(crate) fn tokens(per_minute: u64, monthly: u64) -> TenantLimits {
        TenantLimits {
            tokens_per_minute: Some(per_minute),
            monthly_tokens: Some(monthly),
            ..TenantLimits::default()
        }
    }

    pub(crate) fn rpm(n: u64) -> TenantLimits {
        TenantLimits {
            requests_per_minute: Some(n),
            ..TenantLimits::default()
        }
    }

    /// A scope of the same tenant with other limits (as after `PATCH /admin/tenants/{id}`).
    pub(crate) fn relimit(scope: &RunScope, store: &Fake, limits: TenantLimits) -> RunScope {
        let mut t = scope.tenant().clone();
        t.limits = limits;
        RunScope::authorize(&member(&t, session()), store, true).unwrap()
    }

    pub(crate) fn shared_requests(store: &Fake, scope: &RunScope, now: DateTime<Utc>) -> u64 {
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(scope.tenant().id),
            start_ms: minute_start(now),
        };
        store.quota.lock().unwrap().get(&w).map_or(0, |c| c.0)
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
