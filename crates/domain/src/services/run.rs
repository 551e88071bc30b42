//! Runs (`/run`, `/chat/completions`, `/responses`, `/embeddings`): one async entry, [`run`],
//! that authenticates the caller, decides and admits the run ([`crate::policy::runs::prepare_for`]:
//! every refusal in the contract's order, the run writer's place, the quotas), calls the
//! upstream port ([`RunUpstream::execute`]: key rotation, failover, the run's record) and
//! measures it. The HTTP layer extracts the request, makes this one call and maps the answer.
//!
//! # Ports
//!
//! - [`RunStorage`]: the one trip to the store, made where it answers soonest (on the serving
//!   thread when the store can answer at once, decisions 0014, 0016 and 0017), and background
//!   storage work (the quota lease refills);
//! - [`RunUpstream`]: the run orchestration over the region gateways, dyn-compatible, with the
//!   adapter's answer types turned into the ones the caller serves ([`Served`]);
//! - [`RunMetrics`]: the quota refusals and the run latency (upstream and added);
//! - [`UpstreamChecks`]: the region gateways' key and reachability checks, dyn-compatible
//!   ([`super::ai_keys::KeyProbe`] behind a pointer), for the AI-key services.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::Value;

use super::ai_keys::{GatewayCheck, KeyProbe, KeyProbeAnswer};
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::policy::access::Principal;
use crate::policy::quota::{NodeQuotas, RateLimitState};
use crate::policy::runs::{prepare_for, ChatUpstream, RunPlan, RunSink, Runs};
use crate::ports::AdminTokenRepo;
use crate::ports::{AiKeyRepo, ApiKeyRepo, KeySealer, QuotaRepo, SessionRepo};
use crate::secret::SecretString;
use crate::services::accounts::{self, AccountPolicy, CheckedCredential};
use crate::values::Region;

pub use crate::policy::runs::{ChatAnswer, RunError, RunKind, UpstreamFailure};

/// A boxed future that may move between threads.
pub type SendFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A boxed future polled where it was made.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Where the run's storage work runs. The HTTP layer runs [`RunStorage::read`] on the serving
/// thread when the store can answer at once (an idle local SQLite connection), else on its
/// blocking pool, and [`RunStorage::detach`] on the blocking pool without waiting.
pub trait RunStorage {
    /// The store the work is handed (`dyn Store` in the server).
    type Store: ?Sized;
    /// Runs read `work` (it may run more than once: a write it asks for, or any store
    /// failure, on the serving thread makes it run again on the pool); a store that cannot
    /// run it answers `Unavailable`.
    fn read<T, F>(&self, work: F) -> impl Future<Output = DomainResult<T>>
    where
        T: Send + 'static,
        F: Fn(&Self::Store) -> DomainResult<T> + Send + 'static;
    /// Starts `work` in the background; nobody waits for it. When it cannot run, `what` is
    /// logged as not run (`"{what} did not run"`).
    fn detach<F>(&self, what: &'static str, work: F)
    where
        F: FnOnce(&Self::Store) + Send + 'static;
}

/// The run figures the service reports.
pub trait RunMetrics {
    /// A run refused by a quota (`rate_limited` or `budget_exhausted`).
    fn quota_refused(&self, reason: &'static str);
    /// A run the upstream answered: its time to the response, split.
    fn run_latency(&self, latency: RunLatency);
}

/// An answered run's time to its response, split into the time spent waiting for the upstream
/// (by region) and the time the service added around it (by route).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLatency {
    pub region: &'static str,
    pub route: &'static str,
    pub upstream: Duration,
    pub added: Duration,
}

/// The run orchestration ([`Runs`]) over an upstream as the HTTP layer holds it: one object,
/// dyn-compatible, whose answers are `ChatAnswer<B, S>` in the types the caller serves
/// (`Bytes` and a boxed byte stream in the server), whatever the adapter's own types are.
pub trait RunUpstream<B, S>: Send + Sync + 'static {
    /// True when the region has a gateway URL configured.
    fn configured(&self, region: Region) -> bool;
    /// The tokens of `text` in `model`'s encoding.
    fn count_tokens(&self, model: &str, text: &str) -> u64;
    /// The models configured for the region (its default first), without `auto`.
    fn models(&self, region: Region) -> Vec<String>;
    /// This process's share of the quota counts (the quota gate: leases, token reads).
    fn quotas(&self) -> &NodeQuotas;
    /// Where run records and key verdicts go.
    fn sink(&self) -> &dyn RunSink;
    /// Sends the planned run ([`Runs::execute`]).
    fn execute(
        &self,
        plan: RunPlan,
        route: &'static str,
    ) -> SendFuture<'_, Result<ChatAnswer<B, S>, RunError>>;
}

/// [`Runs`] over the adapter `U`, its streams turned into `S` once the run's record is hooked
/// to them (so the adapter's own stream type stays with the adapter).
pub struct Served<U: ChatUpstream, S> {
    runs: Runs<U>,
    stream: fn(U::Stream) -> S,
}

impl<U: ChatUpstream, S> Served<U, S> {
    pub fn new(runs: Runs<U>, stream: fn(U::Stream) -> S) -> Self {
        Self { runs, stream }
    }
}

impl<U: ChatUpstream, S: Send + 'static> RunUpstream<U::Body, S> for Served<U, S> {
    fn configured(&self, region: Region) -> bool {
        self.runs.upstream().configured(region)
    }

    fn count_tokens(&self, model: &str, text: &str) -> u64 {
        self.runs.upstream().count_tokens(model, text)
    }

    fn models(&self, region: Region) -> Vec<String> {
        self.runs.upstream().models(region)
    }

    fn quotas(&self) -> &NodeQuotas {
        self.runs.quotas()
    }

    fn sink(&self) -> &dyn RunSink {
        self.runs.sink()
    }

    fn execute(
        &self,
        plan: RunPlan,
        route: &'static str,
    ) -> SendFuture<'_, Result<ChatAnswer<U::Body, S>, RunError>> {
        let stream = self.stream;
        let run = self.runs.execute(plan, route);
        Box::pin(async move {
            Ok(match run.await? {
                ChatAnswer::Complete { body, report } => ChatAnswer::Complete { body, report },
                ChatAnswer::Stream(s) => ChatAnswer::Stream(stream(s)),
            })
        })
    }
}

/// The region gateways' checks as the HTTP layer holds them (dyn-compatible): any
/// [`KeyProbe`] is one.
pub trait UpstreamChecks: Send + Sync {
    fn probe_key<'a>(
        &'a self,
        region: Region,
        secret: &'a SecretString,
    ) -> LocalFuture<'a, Option<KeyProbeAnswer>>;
    fn check_gateway(&self, region: Region) -> LocalFuture<'_, Option<GatewayCheck>>;
}

impl<K: KeyProbe + Send + Sync> UpstreamChecks for K {
    fn probe_key<'a>(
        &'a self,
        region: Region,
        secret: &'a SecretString,
    ) -> LocalFuture<'a, Option<KeyProbeAnswer>> {
        Box::pin(KeyProbe::probe_key(self, region, secret))
    }

    fn check_gateway(&self, region: Region) -> LocalFuture<'_, Option<GatewayCheck>> {
        Box::pin(KeyProbe::check_gateway(self, region))
    }
}

/// The ports and settings a run uses, borrowed from the caller's state.
pub struct RunPorts<'a, St, B, S> {
    pub storage: &'a St,
    pub upstream: &'a Arc<dyn RunUpstream<B, S>>,
    pub sealer: &'a Arc<dyn KeySealer>,
    pub metrics: &'a dyn RunMetrics,
    pub policy: AccountPolicy,
}

/// One run as the caller asked for it. `body` is the HTTP layer's parse result, held back
/// until its turn among the refusals (a caller who may not run hears 401/403 first).
pub struct RunRequest<E> {
    pub kind: RunKind,
    /// The route, for the run's record and the latency figures (`/run`, ...).
    pub route: &'static str,
    pub credential: CheckedCredential,
    pub body: Result<Value, E>,
}

/// A run on its way to the client, and the quotas that applied (for its headers).
pub struct RunAnswer<B, S> {
    pub answer: ChatAnswer<B, S>,
    pub limits: RateLimitState,
}

/// Why a run did not reach the client.
pub enum RunFailure<E> {
    /// Authentication, a refusal of the caller, the body's rules, AI access, the run writer's
    /// queue (`busy`), a quota, or the store.
    Refused(DomainError),
    /// The body did not parse (the HTTP layer's own error, returned as it was given).
    Body(E),
    /// The upstream failed before anything reached the client; `limits` are the quotas that
    /// applied.
    Upstream {
        error: RunError,
        limits: RateLimitState,
    },
}

/// What [`run`] answers: the authenticated caller (for the Shadow view's marks; `None` when
/// authentication failed) and the run's outcome.
pub struct Ran<B, S, E> {
    pub principal: Option<Principal>,
    pub outcome: Result<RunAnswer<B, S>, RunFailure<E>>,
}

/// Authenticates the caller, decides and admits the run in one storage trip
/// ([`RunStorage::read`]), starts the quota lease refills when due (decision 0017), then
/// calls the upstream. A quota refusal is counted ([`RunMetrics::quota_refused`]); a run the
/// upstream answered has its latency reported ([`RunMetrics::run_latency`]).
pub async fn run<St, B, S, E>(
    ports: &RunPorts<'_, St, B, S>,
    request: RunRequest<E>,
) -> Ran<B, S, E>
where
    St: RunStorage,
    St::Store: SessionRepo + ApiKeyRepo + AdminTokenRepo + AiKeyRepo + QuotaRepo,
    B: 'static,
    S: 'static,
    E: Send + 'static,
{
    let started = Instant::now();
    let RunRequest {
        kind,
        route,
        credential,
        body,
    } = request;
    let upstream = Arc::clone(ports.upstream);
    let sealer = Arc::clone(ports.sealer);
    let policy = ports.policy;
    // The body stays in its slot until `prepare_for` no longer needs the store, so a second
    // attempt (on the blocking pool) still has it.
    let body = Mutex::new(Some(body));
    let prepared = ports
        .storage
        .read(move |store| {
            let principal = accounts::authenticate(store, &policy, &credential, Utc::now())?;
            let mut body = body.lock().unwrap_or_else(PoisonError::into_inner);
            let plan = prepare_for(
                kind,
                store,
                sealer.as_ref(),
                upstream.quotas(),
                upstream.sink(),
                &principal,
                &mut body,
                |r| upstream.configured(r),
                |model, text| upstream.count_tokens(model, text),
            );
            Ok((principal, plan))
        })
        .await;
    refill_leases(ports.storage, ports.upstream);
    let refused = |e: DomainError| {
        if matches!(
            e.code(),
            ErrorCode::RateLimited | ErrorCode::BudgetExhausted
        ) {
            ports.metrics.quota_refused(e.code().as_str());
        }
        RunFailure::Refused(e)
    };
    let (principal, plan) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            return Ran {
                principal: None,
                outcome: Err(refused(e)),
            }
        }
    };
    let plan = match plan {
        Ok(Ok(plan)) => plan,
        Ok(Err(e)) => {
            return Ran {
                principal: Some(principal),
                outcome: Err(RunFailure::Body(e)),
            }
        }
        Err(e) => {
            return Ran {
                principal: Some(principal),
                outcome: Err(refused(e)),
            }
        }
    };
    let limits = plan.limits();
    let region = plan.scope().region().as_str();
    let upstream_started = Instant::now();
    let answer = ports.upstream.execute(plan, route).await;
    let waited = upstream_started.elapsed();
    let outcome = match answer {
        Ok(answer) => {
            ports.metrics.run_latency(RunLatency {
                region,
                route,
                upstream: waited,
                added: started.elapsed().saturating_sub(waited),
            });
            Ok(RunAnswer { answer, limits })
        }
        Err(error) => Err(RunFailure::Upstream { error, limits }),
    };
    Ran {
        principal: Some(principal),
        outcome,
    }
}

/// Starts the quota refiller in the background when a run left a lease to refill (decision
/// 0017): at most one per process at a time; the run does not wait for it. The claim travels
/// with the work: if the work never runs, dropping it lets the next run start another refiller.
fn refill_leases<St, B, S>(storage: &St, upstream: &Arc<dyn RunUpstream<B, S>>)
where
    St: RunStorage,
    St::Store: QuotaRepo,
    B: 'static,
    S: 'static,
{
    let Some(claim) = upstream.quotas().refill_due() else {
        return;
    };
    let upstream = Arc::clone(upstream);
    storage.detach("the quota refiller", move |store| {
        let failed = upstream.quotas().refill(claim, store, Utc::now);
        if failed > 0 {
            tracing::warn!(
                failed,
                "quota leases not refilled ahead; requests take them when used up"
            );
        }
    });
}

/// The models a caller may name on a run: `auto` first, then its region's configured ones,
/// narrowed to the tenant's allowed models (decision 0038). The same caller rules as a run.
pub fn models<B: 'static, S: 'static>(
    upstream: &dyn RunUpstream<B, S>,
    principal: &Principal,
) -> DomainResult<Vec<String>> {
    let all = crate::policy::runs::models(|region| upstream.models(region), principal)?;
    Ok(match principal.tenant() {
        Some(t) => upstream
            .quotas()
            .catalog()
            .listed(t, all.into_iter().skip(1).collect()),
        None => all,
    })
}
#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
