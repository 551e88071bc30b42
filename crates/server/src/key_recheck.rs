//! The start-up re-check of tenant AI keys: once the server listens, the `not_ready` keys of
//! every region whose gateway is configured now are probed again in the background
//! ([`gc_domain::services::ai_keys::recheck_after_configuration`]), so a key added before its
//! region's URL was set, or judged against a URL that was wrong, follows the configuration
//! without an admin's diagnosis. Serving never waits for it: it runs on the server's runtime,
//! probes at most [`CONCURRENCY`] keys at once and [`MAX_KEYS`] in all, and gives up after
//! [`DEADLINE`] (every verdict found by then is kept). Each verdict is stored on the key and
//! written as an `ai_key.rechecked` line in its tenant's activity feed; the totals are logged.

use std::sync::Arc;
use std::time::Duration;

use actix_web::web;
use chrono::Utc;
use gc_domain::gateway::AiKeyStatus;
use gc_domain::services::ai_keys::{recheck_after_configuration, RecheckBounds};
use gc_domain::values::Region;
use gc_gateway::Gateways;
use gc_http_api::adapters::GatewayProbes;
use gc_http_api::AppState;

use crate::Config;

/// Key probes in flight at once.
pub const CONCURRENCY: usize = 4;
/// Keys re-checked at most per start (oldest first).
pub const MAX_KEYS: usize = 1_000;
/// How long the whole re-check may take.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Starts the re-check in the background; returns at once. Nothing is started when no region
/// has a gateway. Must be called from within the server's runtime.
pub fn spawn(config: &Config, state: web::Data<AppState>) -> anyhow::Result<()> {
    let gateways = Gateways::new(crate::gateways(config)?);
    let configured: Vec<Region> = Region::ALL
        .into_iter()
        .filter(|r| gateways.region(*r).is_some())
        .collect();
    if configured.is_empty() {
        return Ok(());
    }
    let gateways = Arc::new(gateways);
    let sealer: Arc<dyn gc_domain::ports::KeySealer> = Arc::new(crate::sealer(config)?);
    actix_web::rt::spawn(async move {
        let probes = GatewayProbes(&gateways);
        let bounds = RecheckBounds {
            concurrency: CONCURRENCY,
            max_keys: MAX_KEYS,
        };
        let work = recheck_after_configuration(
            state.get_ref(),
            &probes,
            sealer,
            configured,
            bounds,
            Utc::now(),
        );
        match tokio::time::timeout(DEADLINE, work).await {
            Ok(Ok(keys)) if keys.is_empty() => {}
            Ok(Ok(keys)) => {
                let ready = keys
                    .iter()
                    .filter(|k| k.status == AiKeyStatus::Ready)
                    .count();
                for k in &keys {
                    tracing::info!(
                        key_id = %k.id,
                        tenant_id = %k.tenant_id,
                        region = k.region.as_str(),
                        status = k.status.as_str(),
                        reason = k.status_reason.as_deref().unwrap_or(""),
                        "AI key re-checked at start-up"
                    );
                }
                tracing::info!(
                    checked = keys.len(),
                    ready,
                    "re-checked the not-ready AI keys of the configured regions"
                );
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "the start-up AI key re-check failed"),
            Err(_) => tracing::warn!(
                seconds = DEADLINE.as_secs(),
                "the start-up AI key re-check ran out of time; the verdicts found are kept"
            ),
        }
    });
    Ok(())
}
