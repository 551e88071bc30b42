//! The probes (liveness and readiness) and the OpenAPI document.

pub mod readiness;

use actix_web::{web, HttpResponse};
use gc_domain::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::reply::{ok, Reply};
use crate::state::AppState;

pub use readiness::{Readiness, ReadyBody};

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthBody {
    /// `ok`.
    pub status: &'static str,
}

/// Liveness: 200 while this process serves requests, without asking the database (a database
/// outage is a readiness matter: restarting every node would not fix it). 503 only when the
/// process is broken for good and must be restarted: its run-record writer has stopped.
#[utoipa::path(get, path = "/api/v1/health", tag = "system",
    responses((status = 200, body = HealthBody),
        (status = 503, description = "the process must be restarted: its run-record writer has stopped")))]
pub async fn health(state: web::Data<AppState>) -> Reply {
    if state.recorder.writer_stopped() {
        return Err(ApiError::new(
            ErrorCode::ServiceUnavailable,
            "the run-record writer has stopped; restart this process",
        )
        .with_retry_after(5));
    }
    ok(HealthBody { status: "ok" })
}

/// Readiness: 200 `ready` when this node can do its work (the database answers and accepts
/// writes within two seconds, the run-record writer is running and its queue is not full),
/// else 503 `not_ready`; `checks` says which. The answer is kept for one second and only one
/// check runs at a time, so a flood of probes costs the database one query a second.
#[utoipa::path(get, path = "/api/v1/ready", tag = "system",
    responses((status = 200, body = ReadyBody, description = "ready"),
        (status = 503, body = ReadyBody, description = "not ready: `checks` says what failed")))]
pub async fn ready(state: web::Data<AppState>) -> HttpResponse {
    let body = state.readiness.check(&state).await;
    let mut res = if body.status == readiness::ReadyStatus::Ready {
        HttpResponse::Ok()
    } else {
        HttpResponse::ServiceUnavailable()
    };
    res.insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(body)
}

/// The OpenAPI 3.1 document of every route.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "system",
    responses((status = 200, description = "The OpenAPI document")))]
pub async fn openapi() -> HttpResponse {
    static DOCUMENT: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    HttpResponse::Ok().json(DOCUMENT.get_or_init(crate::openapi::document_json))
}
