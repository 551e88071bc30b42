//! The start-up re-check of tenant AI keys: once the server listens, the `not_ready` keys of
//! every region whose gateway is configured now are probed again in the background
//! ([`gc_domain::services::ai_keys::recheck_after_configuration`]), so a key added before its
//! region's URL was set, or judged against a URL that was wrong, follows the configuration
//! without an admin's diagnosis. Serving never waits for it: it runs on the server's runtime,
//! probes at most [`CONCURRENCY`] keys at once and [`MAX_KEYS`] in all, and gives up after
//! [`DEADLINE`] (every verdict found by then is kept). Each verdict is stored on the key and
//! written as an `ai_key.rechecked` line in its tenant's activity feed; the totals are logged.
//!
//! Before serving, [`note_gateway_urls`] compares each configured region's gateway URL with the
//! fingerprint kept from the last start (decision 0044); when it differs, every key of the
//! region, `ready` ones too, is marked (its `checked_at` cleared) and so probed again by the
//! re-check, which probes every marked key besides the `not_ready` ones.

use std::sync::Arc;
use std::time::Duration;

use actix_web::web;
use chrono::Utc;
use gc_domain::policy::ai_access::AiKeyStatus;
use gc_domain::services::ai_keys::{recheck_after_configuration, RecheckBounds};
use gc_domain::values::Region;
use gc_gateway::Gateways;
use gc_http_api::AppState;

use crate::upstream::GatewayProbes;
use crate::Config;

/// A region gateway URL's fingerprint as kept in the database: SHA-256 of the URL without
/// surrounding space or trailing `/` (the URL itself is not kept: it may carry credentials).
pub fn url_fingerprint(url: &str) -> String {
    gc_auth::sha256_hex(url.trim().trim_end_matches('/'))
}

/// Notes each configured region's gateway URL in `store` before the server serves: a region
/// whose URL is new or differs from the last start's has its keys marked for the re-check
/// ([`gc_persistence::DbStore::note_gateway_url`]). One short write per configured region; a
/// failure is logged and start-up goes on (the `not_ready` keys are still re-checked).
pub fn note_gateway_urls(config: &Config, store: &gc_persistence::DbStore) {
    for (region, url) in [
        (Region::Aihk, &config.gateway_aihk_url),
        (Region::Aica, &config.gateway_aica_url),
    ] {
        let Some(url) = url.as_deref().filter(|u| !u.trim().is_empty()) else {
            continue;
        };
        match store.note_gateway_url(region, &url_fingerprint(url), Utc::now()) {
            Ok(None) => {}
            Ok(Some(marked)) => tracing::info!(
                region = region.as_str(),
                keys = marked,
                "the region's gateway URL is new or changed: its AI keys will be probed again"
            ),
            Err(e) => tracing::warn!(
                region = region.as_str(),
                error = %e,
                "could not compare the region's gateway URL with the last start's"
            ),
        }
    }
}

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
                    "re-checked the AI keys not judged against the current gateway URLs"
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
