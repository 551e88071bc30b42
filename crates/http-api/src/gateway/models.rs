//! `GET /models` and `GET /models/{id}`: OpenAI's model list for the caller's tenant region,
//! `auto` first, on the same credentials as a run (`run`-scoped keys or sessions).

use actix_web::{web, HttpResponse};
use gc_domain::services::run;
use gc_domain::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::extract::Caller;
use crate::state::AppState;

/// The `created` of every model: 2026-11-21T00:00:00Z, when gc's model list appeared. gc does
/// not know when an upstream model was made, and a constant (rather than the process's start
/// time) answers the same on every node and after every restart, so clients that sort or cache
/// by it see a stable list.
pub const MODELS_CREATED: i64 = 1_795_219_200;

/// One model, as OpenAI lists it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelView {
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    /// Always 1795219200 (2026-11-21T00:00:00Z): gc does not know when a model was made.
    pub created: i64,
    /// Always `gc`.
    pub owned_by: &'static str,
}

impl ModelView {
    fn new(id: String) -> Self {
        Self {
            id,
            object: "model",
            created: MODELS_CREATED,
            owned_by: "gc",
        }
    }
}

/// OpenAI's list shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<ModelView>,
}

async fn models_of(state: &web::Data<AppState>, caller: Caller) -> Result<Vec<String>, ApiError> {
    let runs = state.runs.clone();
    caller
        .read(state, move |_, p| run::models(runs.as_ref(), p))
        .await
}

/// The models a run may name: `auto`, then `GC_GATEWAY_<REGION>_MODELS` of the caller's region.
#[utoipa::path(get, path = "/api/v1/models", tag = "gateway",
    responses((status = 200, body = ModelList),
        (status = 401, description = "OpenAI-shaped error"),
        (status = 403, description = "insufficient_scope (no run scope), shadow_read_only or a member refusal")))]
pub async fn list_models(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<HttpResponse, ApiError> {
    let models = models_of(&state, caller).await?;
    Ok(HttpResponse::Ok().json(ModelList {
        object: "list",
        data: models.into_iter().map(ModelView::new).collect(),
    }))
}

/// One model of the list; 404 (OpenAI-shaped) for any other id.
#[utoipa::path(get, path = "/api/v1/models/{id}", tag = "gateway",
    params(("id" = String, Path, description = "Model id")),
    responses((status = 200, body = ModelView), (status = 404, description = "not_found")))]
pub async fn get_model(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let models = models_of(&state, caller).await?;
    if models.contains(&id) {
        Ok(HttpResponse::Ok().json(ModelView::new(id)))
    } else {
        Err(ApiError::new(
            ErrorCode::NotFound,
            format!(
                "the model `{}` does not exist",
                id.chars().take(200).collect::<String>()
            ),
        )
        .with_param("model"))
    }
}
