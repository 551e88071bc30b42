//! `/workspace/memory/{collectionId}/sources`: the sources of a memory collection. A `url`
//! source is stored as text and never fetched. The collection must be the caller's tenant's;
//! a source reached through another collection's id is not found.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use gc_domain::workspace::RecordKind;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::records::{self, Fields};
use crate::cursor::ListQuery;
use crate::error::ApiError;
use crate::extract::{Auth, Caller, Query};
use crate::state::AppState;

const KIND: RecordKind = RecordKind::MemorySource;

/// A stored memory source.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemorySource {
    pub id: Uuid,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Uuid,
    /// The collection it belongs to.
    pub collection_id: Uuid,
    pub title: String,
    pub kind: String,
    pub content: String,
}

/// A page of memory sources.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemorySourceList {
    pub data: Vec<MemorySource>,
    pub next_cursor: Option<String>,
}

/// The sources of a collection, newest first.
#[utoipa::path(get, path = "/api/v1/workspace/memory/{collectionId}/sources", tag = "workspace",
    params(("collectionId" = Uuid, Path, description = "Collection id"), ListQuery),
    responses((status = 200, body = MemorySourceList),
        (status = 404, description = "not_found: no such collection in your tenant")))]
pub async fn list_sources(
    state: web::Data<AppState>,
    collection: web::Path<Uuid>,
    caller: Caller,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    records::list(state, caller, KIND, Some(collection.into_inner()), query).await
}

/// Adds a source to a collection (version 1).
#[utoipa::path(post, path = "/api/v1/workspace/memory/{collectionId}/sources", tag = "workspace",
    request_body(content = Object, description = "The fields of a memory source (schema generated from gc_domain::records)"),
    params(("collectionId" = Uuid, Path, description = "Collection id")),
    responses((status = 201, body = MemorySource, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 403, description = "insufficient_scope, shadow_read_only or a member refusal"),
        (status = 404, description = "not_found: no such collection in your tenant"),
        (status = 422, description = "validation_failed or unknown_field")))]
pub async fn create_source(
    state: web::Data<AppState>,
    collection: web::Path<Uuid>,
    Auth(p): Auth,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    records::create(state, p, KIND, Some(collection.into_inner()), body).await
}

/// One source of a collection, with its version as `ETag`.
#[utoipa::path(get, path = "/api/v1/workspace/memory/{collectionId}/sources/{id}", tag = "workspace",
    params(("collectionId" = Uuid, Path, description = "Collection id"),
        ("id" = Uuid, Path, description = "Source id")),
    responses((status = 200, body = MemorySource, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 404, description = "not_found (also under another collection or tenant)")))]
pub async fn get_source(
    state: web::Data<AppState>,
    path: web::Path<(Uuid, Uuid)>,
    Auth(p): Auth,
) -> Result<HttpResponse, ApiError> {
    let (collection, id) = path.into_inner();
    records::get(state, p, KIND, Some(collection), id).await
}

/// Changes some fields of a source; `If-Match: "<version>"` makes it conditional.
#[utoipa::path(patch, path = "/api/v1/workspace/memory/{collectionId}/sources/{id}", tag = "workspace",
    request_body(content = Object, description = "The fields of a memory source (schema generated from gc_domain::records)"),
    params(("collectionId" = Uuid, Path, description = "Collection id"),
        ("id" = Uuid, Path, description = "Source id"),
        ("If-Match" = Option<String>, Header, description = "The ETag of the version being changed")),
    responses((status = 200, body = MemorySource, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 404, description = "not_found"), (status = 409, description = "version_conflict"),
        (status = 422, description = "validation_failed or unknown_field")))]
pub async fn patch_source(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(Uuid, Uuid)>,
    Auth(p): Auth,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    let (collection, id) = path.into_inner();
    records::patch(state, req, p, KIND, Some(collection), id, body).await
}

/// Deletes a source.
#[utoipa::path(delete, path = "/api/v1/workspace/memory/{collectionId}/sources/{id}", tag = "workspace",
    params(("collectionId" = Uuid, Path, description = "Collection id"),
        ("id" = Uuid, Path, description = "Source id")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "not_found")))]
pub async fn delete_source(
    state: web::Data<AppState>,
    path: web::Path<(Uuid, Uuid)>,
    Auth(p): Auth,
) -> Result<HttpResponse, ApiError> {
    let (collection, id) = path.into_inner();
    records::delete(state, p, KIND, Some(collection), id).await
}
