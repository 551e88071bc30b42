//! `POST /admin/ai-gateways/diagnostics`: one call into `gc_domain::services::diagnostics`.

use std::sync::Arc;

use chrono::Utc;
use gc_domain::services::diagnostics::{self, DiagnosisRequest};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::extract::{Auth, Body};
use crate::reply::{ok, Reply};

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
    responses((status = 200, body = Diagnostics)))]
pub async fn diagnostics(
    req: actix_web::HttpRequest,
    Auth(state, p): Auth,
    body: Body<DiagnosticsBody>,
) -> Reply {
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
    let diagnosis = diagnostics::diagnose(
        (state.get_ref(), &state.probes(), Arc::clone(&state.sealer)),
        p,
        DiagnosisRequest {
            region: body.region,
            tenant_id: body.tenant_id,
        },
        Utc::now(),
    )
    .await?;
    ok(Diagnostics::from(&diagnosis))
}

impl From<&diagnostics::Diagnosis> for Diagnostics {
    fn from(d: &diagnostics::Diagnosis) -> Self {
        Self {
            gateways: d
                .gateways
                .iter()
                .map(|g| GatewayDiagnosis {
                    region: g.region.as_str(),
                    configured: g.configured(),
                    reachable: g.reachable(),
                    status_code: g.status_code(),
                    latency_ms: g.latency_ms(),
                    error: g.error(),
                })
                .collect(),
            keys: d
                .keys
                .iter()
                .map(|k| KeyDiagnosis {
                    id: k.id,
                    tenant_id: k.tenant_id,
                    region: k.region.as_str(),
                    status: k.status.as_str(),
                    status_reason: k.status_reason.clone(),
                })
                .collect(),
        }
    }
}
