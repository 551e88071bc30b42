use actix_web::{web, HttpResponse};
use chrono::Utc;
use gc_domain::admin;
use gc_domain::gateway::AiKeyStatus;
use gc_domain::values::Region;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::ai_keys::check_key;
use crate::error::ApiError;
use crate::extract::{Auth, Body};
use crate::state::AppState;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagnosticsBody {
    /// Only this region (`AIHK` or `AICA`).
    pub region: Option<String>,
    /// Only this tenant's keys.
    pub tenant_id: Option<Uuid>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GatewayDiagnosis {
    pub region: &'static str,
    pub configured: bool,
    pub reachable: bool,
    pub status_code: Option<u16>,
    pub latency_ms: Option<u64>,
    pub error: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyDiagnosis {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub region: &'static str,
    /// `ready` or `not_ready`, as re-checked now.
    pub status: &'static str,
    pub status_reason: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Diagnostics {
    pub gateways: Vec<GatewayDiagnosis>,
    pub keys: Vec<KeyDiagnosis>,
}

/// Checks each region's gateway and re-checks keys, updating their status. Secrets never
/// appear in the output. The body is optional: none at all means `{}`.
#[utoipa::path(post, path = "/api/v1/admin/ai-gateways/diagnostics", tag = "admin", request_body = DiagnosticsBody,
    responses((status = 200, body = Diagnostics), (status = 403, description = "admin_required")))]
pub async fn diagnostics(
    state: web::Data<AppState>,
    req: actix_web::HttpRequest,
    Auth(p): Auth,
    body: Body<DiagnosticsBody>,
) -> Result<HttpResponse, ApiError> {
    p.admin_scope()?;
    let empty = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .is_none_or(|v| v.as_bytes() == b"0")
        && !req
            .headers()
            .contains_key(actix_web::http::header::TRANSFER_ENCODING);
    let body = if empty {
        DiagnosticsBody {
            region: None,
            tenant_id: None,
        }
    } else {
        body.into_inner()?
    };
    let only = body
        .region
        .as_deref()
        .map(|r| Region::parse("region", r))
        .transpose()?;
    let regions: Vec<Region> = Region::ALL
        .into_iter()
        .filter(|r| only.is_none_or(|o| o == *r))
        .collect();

    let mut gateways = Vec::new();
    for region in &regions {
        let diagnosis = match state.gateways().region(*region) {
            None => GatewayDiagnosis {
                region: region.as_str(),
                configured: false,
                reachable: false,
                status_code: None,
                latency_ms: None,
                error: Some("not configured".into()),
            },
            Some(gw) => {
                let probe = gw.check_reachable().await;
                GatewayDiagnosis {
                    region: region.as_str(),
                    configured: true,
                    reachable: probe.reachable,
                    status_code: probe.status_code,
                    latency_ms: Some(probe.latency_ms),
                    error: if probe.reachable { None } else { probe.reason },
                }
            }
        };
        gateways.push(diagnosis);
    }

    let tenant = body.tenant_id;
    let sealer = state.sealer.clone();
    let wanted = regions.clone();
    let (scope, keys) = state
        .db(move |ports| admin::keys_to_diagnose(ports, sealer.as_ref(), &p, tenant, &wanted))
        .await?;
    let mut results = Vec::with_capacity(keys.len());
    for admin::KeyToCheck { key, secret } in keys {
        let (status, reason) = match secret {
            Some(secret) => {
                let (s, r, _) =
                    check_key(state.gateways().region(key.region), key.region, &secret).await;
                (s, r)
            }
            None => (
                AiKeyStatus::NotReady,
                Some("the key cannot be decrypted with the current master key".to_owned()),
            ),
        };
        results.push((key, status, reason));
    }
    let out = results
        .iter()
        .map(|(key, status, reason)| KeyDiagnosis {
            id: key.id,
            tenant_id: key.tenant_id,
            region: key.region.as_str(),
            status: status.as_str(),
            status_reason: reason.clone(),
        })
        .collect();
    state
        .db(move |ports| admin::record_diagnosis(ports, &scope, &results, Utc::now()))
        .await?;
    Ok(HttpResponse::Ok().json(Diagnostics {
        gateways,
        keys: out,
    }))
}
