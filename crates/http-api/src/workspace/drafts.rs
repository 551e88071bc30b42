//! `/workspace/drafts/{kind}`: agent, workflow and app drafts, stored and never run. Any other
//! `{kind}` is an unknown route (404), answered before credentials are looked at.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use gc_domain::workspace::RecordKind;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::records::{self, Fields};
use crate::cursor::ListQuery;
use crate::error::ApiError;
use crate::extract::{Auth, Caller, Query};
use crate::state::AppState;

/// The `{kind}` path segment: `agents`, `workflows` or `apps`. Anything else fails path
/// extraction, which the path error handler answers with 404.
#[derive(Debug, Clone, Copy)]
pub struct DraftKind(pub RecordKind);

impl<'de> Deserialize<'de> for DraftKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        RecordKind::draft_from_path(&raw)
            .map(DraftKind)
            .ok_or_else(|| serde::de::Error::custom("unknown draft kind"))
    }
}

/// A stored draft.
#[derive(Debug, Serialize, ToSchema)]
pub struct Draft {
    pub id: Uuid,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Uuid,
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub definition: Map<String, Value>,
}

/// A page of drafts.
#[derive(Debug, Serialize, ToSchema)]
pub struct DraftList {
    pub data: Vec<Draft>,
    pub next_cursor: Option<String>,
}

/// The tenant's drafts of one kind, newest first.
#[utoipa::path(get, path = "/api/v1/workspace/drafts/{kind}", tag = "workspace",
    params(("kind" = String, Path, description = "`agents`, `workflows` or `apps`"), ListQuery),
    responses((status = 200, body = DraftList), (status = 404, description = "not_found: unknown kind")))]
pub async fn list_drafts(
    state: web::Data<AppState>,
    kind: web::Path<DraftKind>,
    caller: Caller,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    records::list(state, caller, kind.0, None, query).await
}

/// Stores a draft (version 1).
#[utoipa::path(post, path = "/api/v1/workspace/drafts/{kind}", tag = "workspace", request_body(content = Object, description = "The fields of a draft (schema generated from gc_domain::records)"),
    params(("kind" = String, Path, description = "`agents`, `workflows` or `apps`")),
    responses((status = 201, body = Draft, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 403, description = "insufficient_scope, shadow_read_only or a member refusal"),
        (status = 404, description = "not_found: unknown kind"),
        (status = 422, description = "validation_failed or unknown_field")))]
pub async fn create_draft(
    state: web::Data<AppState>,
    kind: web::Path<DraftKind>,
    Auth(p): Auth,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    records::create(state, p, kind.0, None, body).await
}

/// One draft, with its version as `ETag`.
#[utoipa::path(get, path = "/api/v1/workspace/drafts/{kind}/{id}", tag = "workspace",
    params(("kind" = String, Path, description = "`agents`, `workflows` or `apps`"),
        ("id" = Uuid, Path, description = "Draft id")),
    responses((status = 200, body = Draft, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 404, description = "not_found")))]
pub async fn get_draft(
    state: web::Data<AppState>,
    path: web::Path<(DraftKind, Uuid)>,
    Auth(p): Auth,
) -> Result<HttpResponse, ApiError> {
    let (kind, id) = path.into_inner();
    records::get(state, p, kind.0, None, id).await
}

/// Changes some fields of a draft; `If-Match: "<version>"` makes it conditional.
#[utoipa::path(patch, path = "/api/v1/workspace/drafts/{kind}/{id}", tag = "workspace", request_body(content = Object, description = "The fields of a draft (schema generated from gc_domain::records)"),
    params(("kind" = String, Path, description = "`agents`, `workflows` or `apps`"),
        ("id" = Uuid, Path, description = "Draft id"),
        ("If-Match" = Option<String>, Header, description = "The ETag of the version being changed")),
    responses((status = 200, body = Draft, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 404, description = "not_found"), (status = 409, description = "version_conflict"),
        (status = 422, description = "validation_failed or unknown_field")))]
pub async fn patch_draft(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(DraftKind, Uuid)>,
    Auth(p): Auth,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    let (kind, id) = path.into_inner();
    records::patch(state, req, p, kind.0, None, id, body).await
}

/// Deletes a draft.
#[utoipa::path(delete, path = "/api/v1/workspace/drafts/{kind}/{id}", tag = "workspace",
    params(("kind" = String, Path, description = "`agents`, `workflows` or `apps`"),
        ("id" = Uuid, Path, description = "Draft id")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "not_found")))]
pub async fn delete_draft(
    state: web::Data<AppState>,
    path: web::Path<(DraftKind, Uuid)>,
    Auth(p): Auth,
) -> Result<HttpResponse, ApiError> {
    let (kind, id) = path.into_inner();
    records::delete(state, p, kind.0, None, id).await
}
