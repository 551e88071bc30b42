//! The ports of `gc_domain::services` that the HTTP layer provides: storage work on the
//! blocking pool ([`AppState`] as `Storage` and `RunStorage`, the latter on the serving thread
//! when the store can answer at once), the run figures ([`Metrics`] as `RunMetrics`) and the
//! region gateways' checks ([`KeyChecks`] as `KeyProbe`, over the `UpstreamChecks` the binary
//! wires). The Guard port is [`crate::guard::GuardService`]. The handlers hand these to one
//! service call each; they never call a gateway or the Guard themselves.

use gc_domain::ports::Store;
use gc_domain::secret::SecretString;
use gc_domain::services::ai_keys::{GatewayCheck, KeyProbe, KeyProbeAnswer};
use gc_domain::services::run::{RunLatency, RunMetrics, RunStorage, UpstreamChecks};
use gc_domain::services::Storage;
use gc_domain::values::Region;
use gc_domain::DomainResult;

use crate::metrics::Metrics;
use crate::state::{AppState, ReadWork, Work};

impl Storage for AppState {
    type Store = dyn Store;

    /// On the blocking pool ([`AppState::db`]); a pool that is gone answers `Unavailable`
    /// (as every handler's storage work does).
    async fn run<T: Send + 'static, F: Work<T>>(&self, work: F) -> DomainResult<T> {
        self.on_pool(work).await
    }
}

impl RunStorage for AppState {
    type Store = dyn Store;

    /// [`AppState::read`]: on the serving thread when the store can answer at once.
    async fn read<T: Send + 'static, F: ReadWork<T>>(&self, work: F) -> DomainResult<T> {
        self.read_at_once(work).await
    }

    /// On the blocking pool, from a task of its own.
    fn detach<F>(&self, what: &'static str, work: F)
    where
        F: FnOnce(&dyn Store) + Send + 'static,
    {
        let state = self.clone();
        actix_web::rt::spawn(async move {
            if let Err(e) = state
                .on_pool(move |store| {
                    work(store);
                    Ok(())
                })
                .await
            {
                tracing::warn!(error = %e.code().as_str(), "{what} did not run");
            }
        });
    }
}

impl RunMetrics for Metrics {
    fn quota_refused(&self, reason: &'static str) {
        Metrics::quota_refused(self, reason);
    }

    fn run_latency(&self, l: RunLatency) {
        let (upstream, added) = (l.upstream.as_secs_f64(), l.added.as_secs_f64());
        Metrics::run_latency(self, l.region, l.route, upstream, added);
    }
}

/// The region gateways' checks as the services' `KeyProbe`.
pub struct KeyChecks<'a>(pub &'a dyn UpstreamChecks);

impl AppState {
    /// This process's region gateways, as the key probe of the AI-key services.
    pub(crate) fn probes(&self) -> KeyChecks<'_> {
        KeyChecks(self.checks.as_ref())
    }
}

impl KeyProbe for KeyChecks<'_> {
    async fn probe_key(&self, region: Region, secret: &SecretString) -> Option<KeyProbeAnswer> {
        self.0.probe_key(region, secret).await
    }

    async fn check_gateway(&self, region: Region) -> Option<GatewayCheck> {
        self.0.check_gateway(region).await
    }
}
