//! What every handler shares: the ports the domain's services run on, the run orchestration
//! and the HTTP settings. Handlers reach storage only through domain functions that take the
//! ports (`AppState::db` hands them over), never by calling a port themselves.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::cookie::Cookie;
use actix_web::HttpRequest;
use gc_domain::policy::runs::{ChatUpstream, Runs};
use gc_domain::ports::{CredentialCodec, KeySealer, Store};
use gc_domain::services::accounts::{AccountPolicy, ClientMeta, PasswordHasher};
use gc_domain::services::run::{RunPorts, RunUpstream, Served, UpstreamChecks};
use gc_domain::{DomainError, DomainResult, ErrorCode};
use ipnet::IpNet;
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::extract::{client_ip, session_cookie, user_agent};
use crate::gateway::RunRecorder;
use crate::guard::GuardService;
use crate::metrics::Metrics;
use crate::throttle::{CheckSlot, HashShare, IpThrottle};
use crate::workspace::list_cache::ListCache;

/// The run sink of the orchestration: counts finished runs, then queues them for the writer.
struct MeteredSink {
    recorder: RunRecorder,
    metrics: Arc<Metrics>,
}

impl MeteredSink {
    fn count(metrics: &Metrics, event: &gc_domain::policy::runs::RunEvent) {
        if let gc_domain::policy::runs::RunEvent::Run(_, line) = event {
            let usage = line.usage();
            metrics.run_finished(
                line.region().as_str(),
                line.outcome(),
                usage.prompt_tokens,
                usage.completion_tokens,
            );
        }
    }
}

impl gc_domain::policy::runs::RunSink for MeteredSink {
    fn send(&self, event: gc_domain::policy::runs::RunEvent) {
        Self::count(&self.metrics, &event);
        self.recorder.try_send(event);
    }

    /// A run's place in the writer's queue (decision 0033); none free is counted as a run
    /// refused `busy`.
    fn reserve(&self, stream: bool) -> Option<gc_domain::policy::runs::RunSlot> {
        let Some(slot) = self.recorder.reserve(stream) else {
            self.metrics.run_refused_busy();
            return None;
        };
        let metrics = Arc::clone(&self.metrics);
        Some(gc_domain::policy::runs::RunSlot::new(move |event| {
            Self::count(&metrics, &event);
            slot.send(event);
        }))
    }
}

/// HTTP-facing settings, built once from configuration by the binary.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `scheme://host[:port]` of the service as browsers see it; cookie writes must carry it
    /// as `Origin`.
    pub public_origin: String,
    pub signup_open: bool,
    pub chat_completions: bool,
    /// Proxies whose `X-Forwarded-For` is believed for the client IP.
    pub trusted_proxies: Vec<IpNet>,
    /// Largest accepted request body.
    pub body_limit: usize,
    /// A request body must have arrived whole this long after its headers (else 408).
    pub body_timeout: Duration,
    /// Password checks that may wait for a hashing slot; more are refused with 503 `busy`.
    pub hash_queue: usize,
    /// Places of the hashing queue (running or waiting) that sign-in and sign-up may not
    /// take, kept for signed-in callers' checks (`GC_HASH_RESERVED`, decision 0026).
    pub hash_reserved: usize,
    /// Sign-ins and sign-ups per client IP per minute (`GC_AUTH_PER_IP_PER_MIN`).
    pub auth_per_ip_per_min: u32,
    /// Sign-in and sign-up password checks in flight per client IP
    /// (`GC_AUTH_PER_IP_IN_FLIGHT`); more are refused with 429 at once.
    pub auth_per_ip_in_flight: u32,
    /// Client IPs remembered by each per-IP limit (`GC_PER_IP_CLIENTS_MAX`).
    pub per_ip_clients_max: usize,
    /// Serve `GET /metrics` on the main listener (false when metrics are off or have their
    /// own address, `GC_METRICS_BIND`).
    pub metrics_on_main: bool,
    /// Usage reports running at once for one tenant (`GC_USAGE_REPORTS_PER_TENANT`); more
    /// are refused with 429 `rate_limited` at once.
    pub usage_reports_per_tenant: usize,
    /// Usage reports running at once in all (`GC_USAGE_REPORTS_MAX`), well under the
    /// database pool; more are refused with 503 `busy` at once.
    pub usage_reports_max: usize,
    /// Tests only: how long each usage report holds its place before it runs (zero).
    pub usage_report_hold: Duration,
}

impl HttpSettings {
    pub fn secure_cookies(&self) -> bool {
        self.public_origin.starts_with("https://")
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            public_origin: "http://127.0.0.1:8080".into(),
            signup_open: true,
            chat_completions: false,
            trusted_proxies: Vec::new(),
            body_limit: 1024 * 1024,
            body_timeout: Duration::from_secs(10),
            hash_queue: 4,
            hash_reserved: 2,
            auth_per_ip_per_min: 20,
            auth_per_ip_in_flight: 1,
            per_ip_clients_max: crate::throttle::MAX_CLIENTS,
            metrics_on_main: true,
            usage_reports_per_tenant: 2,
            usage_reports_max: 2,
            usage_report_hold: Duration::ZERO,
        }
    }
}

/// The adapters the domain's services need, built by the binary. `U` is the upstream of runs
/// (the region gateways in the server): [`AppState::new`] puts it behind the domain's
/// [`RunUpstream`], so the HTTP layer never names the adapter's types.
pub struct Adapters<U> {
    pub store: Arc<dyn Store>,
    pub hasher: Arc<dyn PasswordHasher>,
    pub credentials: Arc<dyn CredentialCodec>,
    pub sealer: Arc<dyn KeySealer>,
    pub upstream: Arc<U>,
    /// The region gateways' key and reachability checks.
    pub checks: Arc<dyn UpstreamChecks>,
}

/// A streamed run's body as the HTTP layer serves it: ready-to-send frames.
pub type AnswerStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<bytes::Bytes, Infallible>> + Send>>;

/// The run orchestration as the HTTP layer holds it.
pub type Upstream = Arc<dyn RunUpstream<bytes::Bytes, AnswerStream>>;

fn boxed<S>(stream: S) -> AnswerStream
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, Infallible>> + Send + 'static,
{
    Box::pin(stream)
}

/// Storage work for the blocking pool ([`AppState::db`]): runs once, with the store.
pub trait Work<T>: FnOnce(&dyn Store) -> DomainResult<T> + Send + 'static {}

impl<T, F: FnOnce(&dyn Store) -> DomainResult<T> + Send + 'static> Work<T> for F {}

/// Storage work that reads ([`AppState::read`]): it may run twice (on the serving thread, then
/// on the pool), so it is `Fn`.
pub trait ReadWork<T>: Fn(&dyn Store) -> DomainResult<T> + Send + 'static {}

impl<T, F: Fn(&dyn Store) -> DomainResult<T> + Send + 'static> ReadWork<T> for F {}

/// Shared application state.
#[derive(Clone)]
pub struct AppState {
    store: Arc<dyn Store>,
    hasher: Arc<dyn PasswordHasher>,
    pub(crate) credentials: Arc<dyn CredentialCodec>,
    pub(crate) sealer: Arc<dyn KeySealer>,
    /// Bounds concurrent bcrypt work so it never takes every core from the event loop.
    hash_permits: Arc<Semaphore>,
    /// Password checks running or waiting for a permit; bounded by `hash_capacity`.
    hash_in_flight: Arc<AtomicUsize>,
    hash_capacity: usize,
    /// Anonymous and signed-in checks running or waiting, each within its own limit
    /// (`hash_share_max`) as well as `hash_capacity` together (decision 0026).
    hash_by_share: [Arc<AtomicUsize>; 2],
    /// Places anonymous checks may hold (`hash_capacity` less `hash_reserved`, at least one),
    /// and signed-in checks (all but one, which stays for sign-in).
    hash_share_max: [usize; 2],
    /// Password checks per client IP (sign-in, sign-up and signed-in callers' checks).
    pub(crate) auth_throttle: Arc<IpThrottle>,
    /// Signed-in callers' password checks per account.
    pub(crate) account_throttle: Arc<IpThrottle>,
    pub policy: AccountPolicy,
    pub http: HttpSettings,
    /// The run orchestration over the region gateways.
    pub(crate) runs: Upstream,
    /// The region gateways' checks (the AI-key services' probe).
    pub(crate) checks: Arc<dyn UpstreamChecks>,
    /// Queue of activity lines and key verdicts written off the request path (runs, scans).
    pub(crate) recorder: RunRecorder,
    pub guard: Arc<GuardService>,
    /// The Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Record lists kept while the tenant's records are unchanged (decision 0019).
    pub(crate) lists: Arc<ListCache>,
    /// Usage reports in flight, per tenant and in all (decision 0027).
    pub(crate) usage_gate: Arc<crate::workspace::usage_gate::UsageGate>,
    /// The readiness probe's kept answer and its single check in flight.
    pub(crate) readiness: Arc<crate::system::Readiness>,
}

impl AppState {
    pub fn new<U>(
        adapters: Adapters<U>,
        policy: AccountPolicy,
        http: HttpSettings,
        recorder: RunRecorder,
        guard: Arc<GuardService>,
    ) -> Self
    where
        U: ChatUpstream<Body = bytes::Bytes>,
        U::Stream: futures_util::Stream<Item = Result<bytes::Bytes, Infallible>> + Send,
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let metrics = Arc::new(Metrics::new());
        let queue = recorder.clone();
        metrics.set_queue_probe(move || queue.depth());
        recorder.count_drops_in(metrics.run_records_dropped());
        let runs: Upstream = Arc::new(Served::new(
            Runs::new(
                adapters.upstream,
                Arc::new(MeteredSink {
                    recorder: recorder.clone(),
                    metrics: Arc::clone(&metrics),
                }),
            ),
            boxed::<U::Stream>,
        ));
        let hashing = cores.saturating_sub(1).max(1);
        let usage_gate = Arc::new(crate::workspace::usage_gate::UsageGate::new(
            http.usage_reports_per_tenant,
            http.usage_reports_max,
            http.usage_report_hold,
        ));
        Self {
            store: adapters.store,
            hasher: adapters.hasher,
            credentials: adapters.credentials,
            sealer: adapters.sealer,
            hash_permits: Arc::new(Semaphore::new(hashing)),
            hash_in_flight: Arc::new(AtomicUsize::new(0)),
            hash_capacity: hashing + http.hash_queue,
            // Anonymous checks keep at least one place, whatever is reserved.
            hash_by_share: [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))],
            hash_share_max: [
                (hashing + http.hash_queue)
                    .saturating_sub(http.hash_reserved)
                    .max(1),
                (hashing + http.hash_queue).saturating_sub(1).max(1),
            ],
            auth_throttle: Arc::new(IpThrottle::new(
                http.auth_per_ip_per_min,
                http.auth_per_ip_in_flight,
                http.per_ip_clients_max,
            )),
            account_throttle: Arc::new(IpThrottle::new(
                http.auth_per_ip_per_min,
                1,
                http.per_ip_clients_max,
            )),
            policy,
            http,
            runs,
            checks: adapters.checks,
            recorder,
            guard,
            metrics,
            lists: Arc::new(ListCache::default()),
            usage_gate,
            readiness: Arc::default(),
        }
    }

    /// The token counts this process's runs read, for the writer that adds to them.
    pub fn token_reads(&self) -> Arc<gc_domain::policy::quota::TokenReads> {
        self.runs.quotas().token_reads()
    }

    /// This process's quota state (leases; the completion allowance reservations assume).
    pub fn quotas(&self) -> &gc_domain::policy::quota::NodeQuotas {
        self.runs.quotas()
    }

    /// The ports of a run (`gc_domain::services::run`).
    pub(crate) fn run_ports(&self) -> RunPorts<'_, Self, bytes::Bytes, AnswerStream> {
        RunPorts {
            storage: self,
            upstream: &self.runs,
            sealer: &self.sealer,
            metrics: self.metrics.as_ref(),
            policy: self.policy,
        }
    }

    /// Runs synchronous storage work on the blocking pool.
    pub async fn db<T: Send + 'static>(&self, work: impl Work<T>) -> Result<T, ApiError> {
        Ok(self.on_pool(work).await?)
    }

    /// [`AppState::db`] answering the domain's error: a pool that is gone is `Unavailable`.
    pub(crate) async fn on_pool<T: Send + 'static>(&self, work: impl Work<T>) -> DomainResult<T> {
        let store = Arc::clone(&self.store);
        match actix_web::web::block(move || work(store.as_ref())).await {
            Ok(done) => done,
            Err(_) => Err(DomainError::Unavailable {
                retry_after_secs: 1,
            }),
        }
    }

    /// Runs storage work that reads: on this thread when the store can answer it at once
    /// without waiting (an idle local SQLite connection, `InlineRepo::reserve_inline`: no trip
    /// to the blocking pool and back), else on the blocking pool. A write the work asks for
    /// (a session's or key's periodic touch), or any store failure, is refused on this thread
    /// and the whole work runs again on the pool, so `work` must be safe to repeat.
    pub async fn read<T: Send + 'static>(&self, work: impl ReadWork<T>) -> Result<T, ApiError> {
        Ok(self.read_at_once(work).await?)
    }

    /// [`AppState::read`] answering the domain's error.
    pub(crate) async fn read_at_once<T: Send + 'static>(
        &self,
        work: impl ReadWork<T>,
    ) -> DomainResult<T> {
        if let Some(guard) = self.store.reserve_inline() {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                work(self.store.as_ref())
            }));
            let deferred = guard.deferred();
            drop(guard);
            match out {
                Ok(out) if !deferred => return out,
                Ok(_) => {}
                Err(_) => return Err(DomainError::Internal("read work panicked".into())),
            }
        }
        self.on_pool(work).await
    }

    /// A password check that opens a session (sign-in, sign-up), run on the anonymous share of
    /// the hashing queue: `work` gets the ports, the hasher, the new session's token hash and the
    /// client's metadata. The client's check slot (from `admit_auth`) is held until the hash is
    /// done, even when the client has gone away. Answers what `work` made and the session cookie.
    pub(crate) async fn with_new_session<T, F>(
        &self,
        req: &HttpRequest,
        slot: CheckSlot,
        work: F,
    ) -> Result<(T, Cookie<'static>), ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store, &dyn PasswordHasher, String, &ClientMeta) -> DomainResult<T>
            + Send
            + 'static,
    {
        let (token, token_hash) = self.credentials.new_session_token();
        let meta = ClientMeta {
            user_agent: user_agent(req),
            ip: client_ip(req, self)
                .map(|ip| ip.to_string())
                .unwrap_or_default(),
        };
        let made = self
            .with_hasher(HashShare::Anonymous, move |ports, hasher| {
                let _slot = slot;
                work(ports, hasher, token_hash, &meta)
            })
            .await?;
        Ok((made, session_cookie(token.expose(), self)))
    }

    /// Runs work that hashes or verifies a password on the blocking pool, a bounded number at
    /// a time. At most `hash_queue` more wait for a slot; beyond that the answer is 503 `busy`
    /// with `Retry-After`, at once, so a flood cannot build a queue that delays everyone.
    /// Anonymous checks ([`HashShare::Anonymous`]) hold at most all places but
    /// `hash_reserved`, which stay for signed-in callers; signed-in checks hold at most all
    /// places but one, which stays for sign-in (decision 0026).
    pub async fn with_hasher<T, F>(&self, share: HashShare, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store, &dyn PasswordHasher) -> DomainResult<T> + Send + 'static,
    {
        let index = match share {
            HashShare::Anonymous => 0,
            HashShare::SignedIn => 1,
        };
        let busy = || {
            ApiError::new(
                ErrorCode::Busy,
                "too many password checks are waiting; try again shortly",
            )
            .with_retry_after(1)
        };
        let take = |counter: &AtomicUsize, max: usize| {
            counter
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < max).then_some(n + 1)
                })
                .is_ok()
        };
        if !take(&self.hash_by_share[index], self.hash_share_max[index]) {
            return Err(busy());
        }
        let share_place = InFlight(Arc::clone(&self.hash_by_share[index]));
        if !take(&self.hash_in_flight, self.hash_capacity) {
            return Err(busy());
        }
        let place = (InFlight(Arc::clone(&self.hash_in_flight)), share_place);
        let permit = Arc::clone(&self.hash_permits)
            .acquire_owned()
            .await
            .map_err(|_| {
                ApiError::from(gc_domain::DomainError::Unavailable {
                    retry_after_secs: 1,
                })
            })?;
        let store = Arc::clone(&self.store);
        let hasher = Arc::clone(&self.hasher);
        // The place and the permit move into the blocking work, so they are held until the
        // hash is done even when the client hangs up and this future is dropped.
        Ok(actix_web::web::block(move || {
            let _held = (place, permit);
            work(store.as_ref(), hasher.as_ref())
        })
        .await??)
    }
}

/// Gives back a place in a bounded queue when dropped (also when the request goes away).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
