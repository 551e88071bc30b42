//! The outermost middleware: request ids, the uniform error body, and the Shadow header.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpResponse};
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub const SHADOW_TENANT: HeaderName = HeaderName::from_static("x-shadow-tenant");

/// The id of the current request, in request extensions.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// Set by the credential extractor when the caller is in a Shadow view.
#[derive(Debug, Clone, Copy)]
pub struct ShadowTenant(pub Uuid);

/// Marks a response whose errors use OpenAI's shape (`/chat/completions`).
#[derive(Debug, Clone, Copy)]
pub struct OpenAiErrors;

/// A caller's id is echoed when it is sane: 1 to 128 visible ASCII characters.
fn sane(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic())
}

pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| sane(v))
        .map_or_else(|| Uuid::now_v7().to_string(), str::to_owned);
    req.extensions_mut().insert(RequestId(id.clone()));
    let started = std::time::Instant::now();

    let res = next.call(req).await?.map_into_boxed_body();

    let status = res.status();
    let mut res = if status.as_u16() >= 400 {
        let api_error = res
            .response()
            .error()
            .and_then(|e| e.as_error::<ApiError>())
            .cloned();
        let is_json = res
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        match api_error {
            Some(e) => rewrite(res, &e, &id),
            None if !is_json => rewrite(res, &ApiError::from_status(status), &id),
            None => res,
        }
    } else {
        res
    };

    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(REQUEST_ID, v);
    }
    // The path only: query strings and headers are never logged.
    tracing::info!(
        request_id = %id,
        method = %res.request().method(),
        path = %res.request().path(),
        status = res.status().as_u16(),
        latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "request"
    );
    // The route template, never the raw path: label values stay a small, fixed set.
    if let Some(state) = res.request().app_data::<actix_web::web::Data<AppState>>() {
        let route = res
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".to_owned());
        state.metrics.http_request(
            res.request().method().as_str(),
            route,
            res.status().as_u16(),
        );
    }
    let shadow = res.request().extensions().get::<ShadowTenant>().copied();
    if let Some(ShadowTenant(tenant)) = shadow {
        if let Ok(v) = HeaderValue::from_str(&tenant.to_string()) {
            res.headers_mut().insert(SHADOW_TENANT, v);
        }
    }
    Ok(res)
}

fn rewrite(res: ServiceResponse<BoxBody>, e: &ApiError, id: &str) -> ServiceResponse<BoxBody> {
    let openai = res.request().extensions().get::<OpenAiErrors>().is_some();
    let body = if openai {
        let kind = match e.status().as_u16() {
            // OpenAI's word for a spent budget: its clients do not retry it.
            429 if e.code() == gc_domain::ErrorCode::BudgetExhausted => "insufficient_quota",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            429 => "rate_limit_error",
            s if s >= 500 => "api_error",
            _ => "invalid_request_error",
        };
        serde_json::json!({"error": {
            "code": e.code().as_str(),
            "message": e.message(),
            "type": kind,
            "param": e.param(),
            "request_id": id,
        }})
    } else {
        e.body(id)
    };
    res.map_body(|head, _| {
        head.headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        // Drop any length left from the old body.
        head.headers.remove(actix_web::http::header::CONTENT_LENGTH);
        BoxBody::new(body.to_string())
    })
}

/// The 404 for unknown routes.
pub async fn not_found() -> HttpResponse {
    HttpResponse::NotFound().finish()
}
