//! `/workspace/memory`: memory collections. Deleting one deletes its sources in the same
//! transaction.

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

const KIND: RecordKind = RecordKind::MemoryCollection;

/// A stored memory collection.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryCollection {
    pub id: Uuid,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Uuid,
    pub name: String,
    pub description: String,
}

/// A page of memory collections.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryCollectionList {
    pub data: Vec<MemoryCollection>,
    pub next_cursor: Option<String>,
}

/// The tenant's memory collections, newest first.
#[utoipa::path(get, path = "/api/v1/workspace/memory", tag = "workspace", params(ListQuery),
    responses((status = 200, body = MemoryCollectionList), (status = 401, description = "unauthenticated"),
        (status = 403, description = "insufficient_scope or a member refusal")))]
pub async fn list_collections(
    state: web::Data<AppState>,
    caller: Caller,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    records::list(state, caller, KIND, None, query).await
}

/// Stores a memory collection (version 1).
#[utoipa::path(post, path = "/api/v1/workspace/memory", tag = "workspace", request_body(content = Object, description = "The fields of a memory collection (schema generated from gc_domain::records)"),
    responses((status = 201, body = MemoryCollection, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 403, description = "insufficient_scope, shadow_read_only or a member refusal"),
        (status = 422, description = "validation_failed or unknown_field")))]
pub async fn create_collection(
    state: web::Data<AppState>,
    Auth(p): Auth,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    records::create(state, p, KIND, None, body).await
}

/// One memory collection, with its version as `ETag`.
#[utoipa::path(get, path = "/api/v1/workspace/memory/{id}", tag = "workspace",
    params(("id" = Uuid, Path, description = "Collection id")),
    responses((status = 200, body = MemoryCollection, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 404, description = "not_found (also for another tenant's collection)")))]
pub async fn get_collection(
    state: web::Data<AppState>,
    id: web::Path<Uuid>,
    Auth(p): Auth,
) -> Result<HttpResponse, ApiError> {
    records::get(state, p, KIND, None, id.into_inner()).await
}

/// Changes some fields of a memory collection; `If-Match: "<version>"` makes it conditional.
#[utoipa::path(patch, path = "/api/v1/workspace/memory/{id}", tag = "workspace", request_body(content = Object, description = "The fields of a memory collection (schema generated from gc_domain::records)"),
    params(("id" = Uuid, Path, description = "Collection id"),
        ("If-Match" = Option<String>, Header, description = "The ETag of the version being changed")),
    responses((status = 200, body = MemoryCollection, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 404, description = "not_found"), (status = 409, description = "version_conflict"),
        (status = 422, description = "validation_failed or unknown_field")))]
pub async fn patch_collection(
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<Uuid>,
    Auth(p): Auth,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    records::patch(state, req, p, KIND, None, id.into_inner(), body).await
}

/// Deletes a memory collection and all of its sources.
#[utoipa::path(delete, path = "/api/v1/workspace/memory/{id}", tag = "workspace",
    params(("id" = Uuid, Path, description = "Collection id")),
    responses((status = 204, description = "Deleted, with its sources"), (status = 404, description = "not_found")))]
pub async fn delete_collection(
    state: web::Data<AppState>,
    id: web::Path<Uuid>,
    Auth(p): Auth,
) -> Result<HttpResponse, ApiError> {
    records::delete(state, p, KIND, None, id.into_inner()).await
}
