//! The ports of `gc_domain::services` that the HTTP layer provides: storage work on the
//! blocking pool ([`AppState`] as `Storage`) and the region gateways' checks
//! ([`GatewayProbes`] as `KeyProbe`). The Guard port is [`crate::guard::GuardService`]. The
//! handlers hand these to one service call each; they never call a gateway or the Guard
//! themselves.

use gc_domain::ports::Store;
use gc_domain::secret::SecretString;
use gc_domain::services::ai_keys::{GatewayCheck, KeyProbe, KeyProbeAnswer};
use gc_domain::services::Storage;
use gc_domain::values::Region;
use gc_domain::{DomainError, DomainResult};
use gc_gateway::{Gateways, KeyStatus, Secret};

use crate::state::AppState;

impl Storage for AppState {
    type Store = dyn Store;

    /// On the blocking pool ([`AppState::db`]); a pool that is gone answers `Unavailable`
    /// (as every handler's storage work does).
    async fn run<T, F>(&self, work: F) -> DomainResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store) -> DomainResult<T> + Send + 'static,
    {
        match self.db(move |store| Ok(work(store))).await {
            Ok(answer) => answer,
            Err(_) => Err(DomainError::Unavailable {
                retry_after_secs: 1,
            }),
        }
    }
}

/// The region gateways as the services' `KeyProbe`.
pub struct GatewayProbes<'a>(pub &'a Gateways);

impl AppState {
    /// This process's region gateways, as the key probe of the AI-key services.
    pub(crate) fn probes(&self) -> GatewayProbes<'_> {
        GatewayProbes(self.gateways())
    }
}

impl KeyProbe for GatewayProbes<'_> {
    async fn probe_key(&self, region: Region, secret: &SecretString) -> Option<KeyProbeAnswer> {
        let gateway = self.0.region(region)?;
        let probe = gateway.probe(&Secret::new(secret.expose())).await;
        Some(KeyProbeAnswer {
            accepted: probe.outcome == KeyStatus::Ready,
            reason: probe.reason,
        })
    }

    async fn check_gateway(&self, region: Region) -> Option<GatewayCheck> {
        let probe = self.0.region(region)?.check_reachable().await;
        Some(GatewayCheck {
            reachable: probe.reachable,
            status_code: probe.status_code,
            latency_ms: probe.latency_ms,
            reason: probe.reason,
        })
    }
}
