//! The shared core of the record routes: skills, memory collections, memory sources and
//! drafts are one generic stored record (`RecordKind` + a JSON map of fields validated by
//! `gc_domain::records`). The per-family modules hold the routes and their OpenAPI
//! annotations and call into here.
//!
//! A record's JSON is `{id, version, created_at, updated_at, created_by, ...fields}`, plus
//! `collection_id` for memory sources. GET of one record sends `ETag: "<version>"`; PATCH
//! honours `If-Match: "<version>"` with 409 `version_conflict` when it is stale.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Utc;
use gc_domain::access::Principal;
use gc_domain::workspace::{KeyScope, Record, RecordKind};
use gc_domain::workspace_service as service;
use gc_domain::ErrorCode;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::cursor::{self, ListQuery};
use crate::error::ApiError;
use crate::extract::{Caller, Query};
use crate::state::AppState;

/// A record body as sent by the client: any JSON object, checked field by field by the domain.
pub type Fields = crate::extract::Body<Map<String, Value>>;

/// How many times a PATCH without `If-Match` re-reads and re-applies itself when a
/// concurrent writer got in between its read and its write.
/// The JSON of a stored record, serialised straight from the record (no copy of its
/// fields): `{id, version, created_at, updated_at, created_by, [collection_id], ...fields}`.
pub struct RecordJson<'a>(pub &'a Record);

impl serde::Serialize for RecordJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        const META: [&str; 6] = [
            "id",
            "version",
            "created_at",
            "updated_at",
            "created_by",
            "collection_id",
        ];
        let r = self.0;
        let source = r.kind == RecordKind::MemorySource;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &r.id)?;
        map.serialize_entry("version", &r.version)?;
        map.serialize_entry("created_at", &r.created_at)?;
        map.serialize_entry("updated_at", &r.updated_at)?;
        map.serialize_entry("created_by", &r.created_by)?;
        if source {
            map.serialize_entry("collection_id", &r.parent_id)?;
        }
        // Validated fields never use these names; skip them anyway so keys stay unique.
        for (name, value) in r.fields.iter().filter(|(n, _)| !META.contains(&n.as_str())) {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// A page of records: `{data, next_cursor}`.
#[derive(serde::Serialize)]
struct RecordPage<'a> {
    data: Vec<RecordJson<'a>>,
    next_cursor: Option<String>,
}

/// The strong entity tag of a version: `"3"`.
pub fn etag(version: i64) -> String {
    format!("\"{version}\"")
}

/// The version named by `If-Match`: `"3"` (also `W/"3"` or a bare `3`); `None` when the header
/// is absent or `*`. Anything else is a 400, never silently ignored.
pub fn if_match(req: &HttpRequest) -> Result<Option<i64>, ApiError> {
    let Some(raw) = req.headers().get(header::IF_MATCH) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::new(
            ErrorCode::InvalidIfMatch,
            "If-Match must be the record's ETag, a version in double quotes such as \"3\"",
        )
    };
    let raw = raw.to_str().map_err(|_| bad())?.trim();
    if raw == "*" {
        return Ok(None);
    }
    let tag = raw.strip_prefix("W/").unwrap_or(raw);
    let tag = tag
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(tag);
    tag.parse::<i64>().map(Some).map_err(|_| bad())
}

/// The record as the body of `res`, with its ETag.
fn with_etag(mut res: actix_web::HttpResponseBuilder, r: &Record) -> HttpResponse {
    res.insert_header((header::ETAG, etag(r.version)))
        .json(RecordJson(r))
}

/// The activity line of a record write, e.g. `skill.create` with the record as target.
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    kind: RecordKind,
    parent: Option<Uuid>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = query.into_inner().and_then(|q| q.page());
    // Credentials first: a bad query from a caller who may not list is still a refusal.
    let page = caller
        .db(&state, move |store, p| match page {
            Ok(page) => service::list_records(store, p, kind, parent, &page).map(Ok),
            Err(e) => p.read_scope(KeyScope::WorkspaceRead).map(|_| Err(e)),
        })
        .await??;
    Ok(HttpResponse::Ok().json(RecordPage {
        data: page.items.iter().map(RecordJson).collect(),
        next_cursor: page.next.map(cursor::encode),
    }))
}

pub async fn create(
    state: web::Data<AppState>,
    p: Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    p.write_scope(KeyScope::WorkspaceWrite)?;
    let input = body.into_inner()?;
    let stored = state
        .db(move |store| service::create_record(store, &p, kind, parent, &input, Utc::now()))
        .await?;
    Ok(with_etag(HttpResponse::Created(), &stored))
}

pub async fn get(
    state: web::Data<AppState>,
    p: Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .db(move |store| service::get_record(store, &p, kind, parent, id))
        .await?;
    Ok(with_etag(HttpResponse::Ok(), &record))
}

pub async fn patch(
    state: web::Data<AppState>,
    req: HttpRequest,
    p: Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    p.write_scope(KeyScope::WorkspaceWrite)?;
    let expected = if_match(&req)?;
    let input = body.into_inner()?;
    let updated = state
        .db(move |store| {
            service::update_record(store, &p, kind, parent, id, expected, &input, Utc::now())
        })
        .await?;
    Ok(with_etag(HttpResponse::Ok(), &updated))
}

pub async fn delete(
    state: web::Data<AppState>,
    p: Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
) -> Result<HttpResponse, ApiError> {
    state
        .db(move |store| service::delete_record(store, &p, kind, parent, id, Utc::now()))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
