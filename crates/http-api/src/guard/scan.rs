//! `POST /guard/scan` and its description: pasted content or an exact public GitHub repository.

use std::net::IpAddr;

use actix_web::http::header::ContentType;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Utc;
use gc_domain::services::guard_scan::{self, ScanRequest};
use gc_domain::ErrorCode;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;
use crate::extract::{client_ip, Body, MaybeAuth};
use crate::reply::Reply;
use crate::state::AppState;

/// Modes, limits and rules of the scanner.
#[utoipa::path(get, path = "/api/v1/guard/scan", tag = "guard",
    responses((status = 200, description = "{modes: [\"skill\"], limits: {...}, rules: [{id, severity, title}]}")))]
pub async fn describe(state: web::Data<AppState>) -> HttpResponse {
    let info = guard_scan::describe(state.guard.as_ref());
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(info.0)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScanBody {
    /// Pasted content, or exactly `https://github.com/OWNER/REPO` (optional trailing `/` or `.git`).
    pub target: String,
    /// Only `skill`.
    pub mode: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ScanQuery {
    /// `json` (default) or `sarif` (SARIF 2.1.0).
    pub format: Option<String>,
}

/// Scans pasted content or an exact public GitHub repository for dangerous agent-skill
/// content. Works without credentials (throttled per client IP); with a session or a key
/// (scope `guard:scan`) the scan is recorded in the tenant's activity feed.
#[utoipa::path(post, path = "/api/v1/guard/scan", tag = "guard", request_body = ScanBody, params(ScanQuery),
    responses((status = 200, description = "{verdict, mode, target, findings, stats}, or SARIF 2.1.0 with ?format=sarif"),
        (status = 429, description = "rate_limited (anonymous allowance, or the caller's share of concurrent scans)"),
        (status = 503, description = "scanner_busy (Retry-After)")))]
pub async fn scan(
    state: web::Data<AppState>,
    req: HttpRequest,
    MaybeAuth(principal): MaybeAuth,
    query: web::Query<ScanQuery>,
    body: Body<ScanBody>,
) -> Reply {
    let sarif_out = match query.format.as_deref() {
        None | Some("json") => false,
        Some("sarif") => true,
        Some(_) => {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                "format must be json or sarif",
            ))
        }
    };
    let ip = client_ip(&req, &state).unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let request = body.into_inner().map(|b| ScanRequest {
        target: b.target,
        mode: b.mode,
    });
    let outcome = guard_scan::scan(
        state.guard.as_ref(),
        &state.recorder,
        principal.as_ref(),
        ip,
        request,
        Utc::now(),
    )
    .await?;
    state.metrics.guard_scan(outcome.summary.verdict);
    if sarif_out {
        return Ok(HttpResponse::Ok()
            .content_type("application/sarif+json")
            .body(outcome.report.into_sarif()));
    }
    Ok(HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(outcome.report.to_json()))
}
