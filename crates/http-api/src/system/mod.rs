//! Health and the OpenAPI document.

use actix_web::{web, HttpResponse};
use gc_domain::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthBody {
    /// `ok`.
    pub status: &'static str,
}

/// 200 when the database answers, 503 otherwise.
#[utoipa::path(get, path = "/api/v1/health", tag = "system",
    responses((status = 200, body = HealthBody), (status = 503, description = "the database does not answer")))]
pub async fn health(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.db(gc_domain::system::health).await.map_err(|e| {
        if e.status().is_server_error() {
            ApiError::new(
                ErrorCode::ServiceUnavailable,
                "the database does not answer",
            )
            .with_retry_after(2)
        } else {
            e
        }
    })?;
    Ok(HttpResponse::Ok().json(HealthBody { status: "ok" }))
}

/// The OpenAPI 3.1 document of every route.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "system",
    responses((status = 200, description = "The OpenAPI document")))]
pub async fn openapi() -> HttpResponse {
    static DOCUMENT: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    HttpResponse::Ok().json(DOCUMENT.get_or_init(crate::openapi::document_json))
}
