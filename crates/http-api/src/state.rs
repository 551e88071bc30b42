//! What every handler shares: the ports the domain's services run on, the run orchestration
//! and the HTTP settings. Handlers reach storage only through domain functions that take the
//! ports (`AppState::db` hands them over), never by calling a port themselves.

use std::sync::Arc;

use gc_domain::accounts::{AccountPolicy, PasswordHasher};
use gc_domain::ports::{CredentialCodec, KeySealer, Store};
use gc_domain::runs::Runs;
use gc_domain::DomainResult;
use gc_gateway::Gateways;
use ipnet::IpNet;
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::gateway::RunRecorder;
use crate::guard::GuardService;
use crate::metrics::Metrics;

/// The run sink of the orchestration: counts finished runs, then queues them for the writer.
struct MeteredSink {
    recorder: RunRecorder,
    metrics: Arc<Metrics>,
}

impl gc_domain::runs::RunSink for MeteredSink {
    fn send(&self, event: gc_domain::runs::RunEvent) {
        if let gc_domain::runs::RunEvent::Run(_, line) = &event {
            let usage = line.usage();
            self.metrics.run_finished(
                line.region().as_str(),
                line.outcome(),
                usage.prompt_tokens,
                usage.completion_tokens,
            );
        }
        self.recorder.send(event);
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
    /// Serve `GET /metrics` on the main listener (false when metrics are off or have their
    /// own address, `GC_METRICS_BIND`).
    pub metrics_on_main: bool,
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
            metrics_on_main: true,
        }
    }
}

/// The adapters the domain's services need, built by the binary.
#[derive(Clone)]
pub struct Adapters {
    pub store: Arc<dyn Store>,
    pub hasher: Arc<dyn PasswordHasher>,
    pub credentials: Arc<dyn CredentialCodec>,
    pub sealer: Arc<dyn KeySealer>,
    pub gateways: Arc<Gateways>,
}

/// Shared application state.
#[derive(Clone)]
pub struct AppState {
    store: Arc<dyn Store>,
    hasher: Arc<dyn PasswordHasher>,
    pub(crate) credentials: Arc<dyn CredentialCodec>,
    pub(crate) sealer: Arc<dyn KeySealer>,
    /// Bounds concurrent bcrypt work so it never takes every core from the event loop.
    hash_permits: Arc<Semaphore>,
    pub policy: AccountPolicy,
    pub http: HttpSettings,
    /// The run orchestration over the region gateways.
    pub(crate) runs: Arc<Runs<Gateways>>,
    /// Queue of activity lines and key verdicts written off the request path (runs, scans).
    pub(crate) recorder: RunRecorder,
    pub guard: Arc<GuardService>,
    /// The Prometheus metrics.
    pub metrics: Arc<Metrics>,
}

impl AppState {
    pub fn new(
        adapters: Adapters,
        policy: AccountPolicy,
        http: HttpSettings,
        recorder: RunRecorder,
        guard: Arc<GuardService>,
    ) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let metrics = Arc::new(Metrics::new());
        let queue = recorder.clone();
        metrics.set_queue_probe(move || queue.depth());
        let runs = Arc::new(Runs::new(
            Arc::clone(&adapters.gateways),
            Arc::new(MeteredSink {
                recorder: recorder.clone(),
                metrics: Arc::clone(&metrics),
            }),
        ));
        Self {
            store: adapters.store,
            hasher: adapters.hasher,
            credentials: adapters.credentials,
            sealer: adapters.sealer,
            hash_permits: Arc::new(Semaphore::new(cores.saturating_sub(1).max(1))),
            policy,
            http,
            runs,
            recorder,
            guard,
            metrics,
        }
    }

    pub(crate) fn gateways(&self) -> &Gateways {
        self.runs.upstream()
    }

    /// Runs synchronous storage work on the blocking pool.
    pub async fn db<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store) -> DomainResult<T> + Send + 'static,
    {
        let store = Arc::clone(&self.store);
        Ok(actix_web::web::block(move || work(store.as_ref())).await??)
    }

    /// Runs work that hashes or verifies a password on the blocking pool, a bounded number at
    /// a time.
    pub async fn with_hasher<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store, &dyn PasswordHasher) -> DomainResult<T> + Send + 'static,
    {
        let _permit = Arc::clone(&self.hash_permits)
            .acquire_owned()
            .await
            .map_err(|_| {
                ApiError::from(gc_domain::DomainError::Unavailable {
                    retry_after_secs: 1,
                })
            })?;
        let store = Arc::clone(&self.store);
        let hasher = Arc::clone(&self.hasher);
        Ok(actix_web::web::block(move || work(store.as_ref(), hasher.as_ref())).await??)
    }
}
