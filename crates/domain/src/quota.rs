//! Quotas: per-minute request and token limits and a monthly token budget, decided here and
//! counted in the database so every node sharing it sees one count.
//!
//! A tenant's limits are set by platform admins; a workspace key may carry lower per-minute
//! limits of its own (checked against the tenant's when set). [`admit`] runs before any
//! upstream call, in the same trip to the database as authentication: it reads the token
//! counts of the current minute and month (tokens are counted when a run ends, from its
//! usage), refuses when one is used up, then takes one request from every per-minute request
//! window through [`QuotaRepo::take_request`], which counts atomically across nodes and never
//! admits more than the limit. Windows are fixed: the UTC minute, the UTC calendar month.

use chrono::{DateTime, Datelike, TimeZone, Utc};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::gateway::RunScope;
use crate::ports::QuotaRepo;

/// The largest limit accepted (a trillion): anything above is a typing mistake.
pub const MAX_LIMIT: u64 = 1_000_000_000_000;

/// A tenant's limits; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantLimits {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    pub monthly_tokens: Option<u64>,
}

impl TenantLimits {
    pub fn is_empty(&self) -> bool {
        self.requests_per_minute.is_none()
            && self.tokens_per_minute.is_none()
            && self.monthly_tokens.is_none()
    }
}

/// A workspace key's own per-minute limits; `None` is no limit of its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyLimits {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
}

impl KeyLimits {
    pub fn is_empty(&self) -> bool {
        self.requests_per_minute.is_none() && self.tokens_per_minute.is_none()
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

/// What a counter belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaSubject {
    /// A tenant's per-minute requests and tokens.
    TenantMinute(Uuid),
    /// A workspace key's per-minute requests and tokens.
    KeyMinute(Uuid),
    /// A tenant's monthly tokens.
    TenantMonth(Uuid),
}

impl QuotaSubject {
    /// The stored name: `t:`, `k:` or `m:` and the id.
    pub fn stored(&self) -> String {
        match self {
            Self::TenantMinute(id) => format!("t:{id}"),
            Self::KeyMinute(id) => format!("k:{id}"),
            Self::TenantMonth(id) => format!("m:{id}"),
        }
    }
}

/// One counter: a subject in a window that starts at `start` (unix milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
}

impl std::fmt::Display for QuotaReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::RequestsPerMinute => "the requests-per-minute limit is reached",
            Self::TokensPerMinute => "the tokens-per-minute limit is reached",
            Self::MonthlyTokens => "the monthly token budget is used up",
        })
    }
}

/// What [`QuotaRepo::take_request`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// One request was counted in every window; the new counts, in order.
    Taken(Vec<u64>),
    /// The window at this index is full; nothing was counted.
    Full(usize),
}

/// Applies the caller's tenant and key limits before the upstream call: `budget_exhausted`
/// when the month's tokens are used up, `rate_limited` when this minute's tokens or requests
/// are; else one request is counted (on every node's shared count) and the state for the
/// response headers is returned. No limit set: no query at all.
pub fn admit<P: QuotaRepo + ?Sized>(
    store: &P,
    scope: &RunScope,
    now: DateTime<Utc>,
) -> DomainResult<RateLimitState> {
    let tenant = scope.tenant();
    let t = tenant.limits;
    let key = scope.key().filter(|(_, l)| !l.is_empty());
    if t.is_empty() && key.is_none() {
        return Ok(RateLimitState::default());
    }
    let minute = minute_start(now);
    let minute_reset = secs_until(now, minute + 60_000);
    let month = month_start(now).timestamp_millis();
    let month_reset = secs_until(now, next_month_start(now).timestamp_millis());

    // Tokens: counted when runs end, read here.
    let mut reads: Vec<(QuotaWindow, u64, QuotaReason)> = Vec::new();
    if let Some(max) = t.monthly_tokens {
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMonth(tenant.id),
            start_ms: month,
        };
        reads.push((w, max, QuotaReason::MonthlyTokens));
    }
    if let Some(max) = t.tokens_per_minute {
        let w = QuotaWindow {
            subject: QuotaSubject::TenantMinute(tenant.id),
            start_ms: minute,
        };
        reads.push((w, max, QuotaReason::TokensPerMinute));
    }
    if let Some((key_id, Some(max))) = key.map(|(id, l)| (id, l.tokens_per_minute)) {
        let w = QuotaWindow {
            subject: QuotaSubject::KeyMinute(key_id),
            start_ms: minute,
        };
        reads.push((w, max, QuotaReason::TokensPerMinute));
    }
    let mut state = RateLimitState::default();
    if !reads.is_empty() {
        let windows: Vec<QuotaWindow> = reads.iter().map(|(w, _, _)| *w).collect();
        let used = store.window_tokens(&windows)?;
        for ((_, max, reason), used) in reads.iter().zip(used) {
            let retry_after_secs = if *reason == QuotaReason::MonthlyTokens {
                month_reset
            } else {
                minute_reset
            };
            if used >= *max {
                return Err(DomainError::QuotaExceeded {
                    reason: *reason,
                    retry_after_secs,
                    state: RateLimitState {
                        tokens: Some(Allowance {
                            limit: *max,
                            remaining: 0,
                            reset_secs: retry_after_secs,
                        }),
                        ..state
                    },
                });
            }
            if *reason == QuotaReason::TokensPerMinute {
                let here = Allowance {
                    limit: *max,
                    remaining: max - used,
                    reset_secs: minute_reset,
                };
                state.tokens = Some(Allowance::tighter(state.tokens, here));
            }
        }
    }

    // Requests: counted now, atomically, never above the limit on any node.
    let mut takes: Vec<(QuotaWindow, u64)> = Vec::new();
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
    if !takes.is_empty() {
        match store.take_request(&takes)? {
            Take::Taken(counts) => {
                for ((_, max), count) in takes.iter().zip(counts) {
                    let here = Allowance {
                        limit: *max,
                        remaining: max.saturating_sub(count),
                        reset_secs: minute_reset,
                    };
                    state.requests = Some(Allowance::tighter(state.requests, here));
                }
            }
            Take::Full(i) => {
                let limit = takes.get(i).map_or(0, |(_, max)| *max);
                return Err(DomainError::QuotaExceeded {
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
                });
            }
        }
    }
    Ok(state)
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
        let state = admit(&store, &scope, Utc::now()).unwrap();
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
            let s = admit(&store, &scope, now).unwrap();
            let r = s.requests.unwrap();
            assert_eq!((r.limit, r.remaining, r.reset_secs), (3, left, 45));
            assert_eq!(s.tokens, None);
        }
        let e = admit(&store, &scope, now).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        assert!(matches!(
            e,
            DomainError::QuotaExceeded {
                retry_after_secs: 45,
                ..
            }
        ));
        // The next minute is a new window.
        assert!(admit(&store, &scope, at("2026-11-21T10:01:00Z")).is_ok());
    }

    #[test]
    fn a_key_limit_below_the_tenant_refuses_first_and_counts_nothing_else() {
        let limits = TenantLimits {
            requests_per_minute: Some(10),
            ..TenantLimits::default()
        };
        let key_limits = KeyLimits {
            requests_per_minute: Some(1),
            tokens_per_minute: None,
        };
        let (scope, store) = scope(limits, Some(key_limits));
        let now = at("2026-11-21T10:00:00Z");
        let s = admit(&store, &scope, now).unwrap();
        assert_eq!(s.requests.unwrap().remaining, 0, "the key's is the tighter");
        assert_eq!(
            admit(&store, &scope, now).unwrap_err().code(),
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
        let s = admit(&store, &scope, now).unwrap();
        assert_eq!(s.tokens.unwrap().remaining, 100);
        store.add_tokens_now(token_windows(scope.tenant().id, None, now), 100);
        let e = admit(&store, &scope, now).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        // The next minute the per-minute count is fresh, the month's is not.
        let later = at("2026-11-21T10:01:30Z");
        assert!(admit(&store, &scope, later).is_ok());
        store.add_tokens_now(token_windows(scope.tenant().id, None, later), 900);
        let e = admit(&store, &scope, at("2026-11-21T10:02:30Z")).unwrap_err();
        assert_eq!(e.code(), "budget_exhausted");
        let DomainError::QuotaExceeded {
            retry_after_secs, ..
        } = e
        else {
            panic!()
        };
        assert_eq!(retry_after_secs, 9 * 86_400 + 13 * 3600 + 57 * 60 + 30);
        // A new month.
        assert!(admit(&store, &scope, at("2026-12-01T00:00:00Z")).is_ok());
    }

    #[test]
    fn key_limits_must_stay_within_the_tenants() {
        let tenant = TenantLimits {
            requests_per_minute: Some(10),
            tokens_per_minute: None,
            monthly_tokens: None,
        };
        let ok = KeyLimits {
            requests_per_minute: Some(10),
            tokens_per_minute: Some(5000),
        };
        assert!(ok.check_within(&tenant).is_ok());
        let over = KeyLimits {
            requests_per_minute: Some(11),
            tokens_per_minute: None,
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
