//! The region gateways (`gc-gateway`) as the domain's ports: the run upstream is
//! `gc_gateway::Gateways` itself (it implements `gc_domain::policy::runs::ChatUpstream`), which
//! [`gc_http_api::AppState::new`] puts behind the domain's `RunUpstream`; the key and
//! reachability checks are [`GatewayProbes`] (`KeyProbe`) and, for the state, [`GatewayChecks`]
//! (`KeyProbe`, and so the domain's dyn-compatible `UpstreamChecks`). The HTTP
//! layer names neither `gc-gateway` nor its types (decision 0041).

use std::sync::Arc;

use gc_domain::secret::SecretString;
use gc_domain::services::ai_keys::{GatewayCheck, KeyProbe, KeyProbeAnswer};
use gc_domain::values::Region;
use gc_gateway::{Gateways, KeyStatus};

/// The region gateways as the services' `KeyProbe`.
pub struct GatewayProbes<'a>(pub &'a Gateways);

/// [`GatewayProbes`] over the gateways the server's state shares.
pub struct GatewayChecks(pub Arc<Gateways>);

impl KeyProbe for GatewayChecks {
    async fn probe_key(&self, region: Region, secret: &SecretString) -> Option<KeyProbeAnswer> {
        GatewayProbes(&self.0).probe_key(region, secret).await
    }

    async fn check_gateway(&self, region: Region) -> Option<GatewayCheck> {
        GatewayProbes(&self.0).check_gateway(region).await
    }
}

impl KeyProbe for GatewayProbes<'_> {
    async fn probe_key(&self, region: Region, secret: &SecretString) -> Option<KeyProbeAnswer> {
        let gateway = self.0.region(region)?;
        let probe = gateway.probe(secret).await;
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
