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
use gc_domain::access::{Principal, WriteScope};
use gc_domain::model::new_id;
use gc_domain::records::{validate_create, validate_patch};
use gc_domain::workspace::{ActivityTarget, KeyScope, NewActivity, Record, RecordKind};
use gc_domain::DomainError;
use gc_domain::ErrorCode;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::cursor::{self, ListQuery};
use crate::error::ApiError;
use crate::extract::{Caller, Query};
use crate::state::AppState;

/// A record body as sent by the client: any JSON object, checked field by field by the domain.
pub type Fields = crate::extract::Body<Map<String, Value>>;

/// How many times a PATCH without `If-Match` re-reads and re-applies itself when a
/// concurrent writer got in between its read and its write.
const PATCH_ATTEMPTS: usize = 3;

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
fn activity(scope: &WriteScope, kind: RecordKind, verb: &str, r: &Record) -> NewActivity {
    let label = r
        .fields
        .get("name")
        .or_else(|| r.fields.get("title"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut detail = json!({ "name": label });
    if let (Some(parent), Some(obj)) = (r.parent_id, detail.as_object_mut()) {
        obj.insert("collection_id".into(), json!(parent));
    }
    NewActivity::write(
        scope,
        Utc::now(),
        &format!("{}.{verb}", kind.as_str()),
        Some(ActivityTarget {
            kind: kind.as_str().to_owned(),
            id: r.id,
        }),
        detail,
    )
}

fn not_found(kind: RecordKind) -> ApiError {
    DomainError::NotFound(kind.noun()).into()
}

/// `GET` of a list: newest first, `?limit=&cursor=`. Authentication and the query share one
/// trip to the blocking pool.
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    kind: RecordKind,
    parent: Option<Uuid>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = query.into_inner().and_then(|q| q.page());
    let page = caller
        .db(&state, move |store, p| {
            let scope = p.read_scope(KeyScope::WorkspaceRead)?;
            // A bad query string is reported only to a caller who may read at all.
            match page {
                Ok(page) => store.list_records(&scope, kind, parent, &page).map(Ok),
                Err(e) => Ok(Err(e)),
            }
        })
        .await??;
    Ok(HttpResponse::Ok().json(RecordPage {
        data: page.items.iter().map(RecordJson).collect(),
        next_cursor: page.next.map(cursor::encode),
    }))
}

/// `POST`: validates, stores version 1 and its activity line; 201 with the record.
pub async fn create(
    state: web::Data<AppState>,
    p: Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    let fields = validate_create(kind, &body.into_inner()?)?;
    let now = Utc::now();
    let record = Record {
        id: new_id(),
        kind,
        parent_id: parent,
        version: 1,
        fields,
        created_at: now,
        updated_at: now,
        // The member, also when a key acts for them (the feed names the key).
        created_by: p.user().id,
    };
    let stored = state
        .db(move |store| {
            let line = activity(&scope, kind, "create", &record);
            store.insert_record(&scope, &record, &line)
        })
        .await?;
    Ok(with_etag(HttpResponse::Created(), &stored))
}

/// `GET` of one record, with its ETag.
pub async fn get(
    state: web::Data<AppState>,
    p: Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
) -> Result<HttpResponse, ApiError> {
    let scope = p.read_scope(KeyScope::WorkspaceRead)?;
    let record = state
        .db(move |store| store.find_record(&scope, kind, parent, id))
        .await?
        .ok_or_else(|| not_found(kind))?;
    Ok(with_etag(HttpResponse::Ok(), &record))
}

/// `PATCH`: merges the given fields over the stored ones and bumps the version.
pub async fn patch(
    state: web::Data<AppState>,
    req: HttpRequest,
    p: Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
    body: Fields,
) -> Result<HttpResponse, ApiError> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    let expected = if_match(&req)?;
    let input = body.into_inner()?;
    let updated = state
        .db(move |store| {
            let read = scope.as_read();
            let mut attempt = 0;
            loop {
                attempt += 1;
                let current = store
                    .find_record(&read, kind, parent, id)?
                    .ok_or(DomainError::NotFound(kind.noun()))?;
                if let Some(expected) = expected {
                    if expected != current.version {
                        return Err(DomainError::VersionConflict { expected });
                    }
                }
                let fields = validate_patch(kind, &input, &current.fields)?;
                // The feed names the record as it is after the change.
                let after = Record {
                    fields: fields.clone(),
                    ..current
                };
                let line = activity(&scope, kind, "update", &after);
                // Without `If-Match` the write is still conditional on the version just read,
                // so a concurrent change is re-read and merged rather than overwritten.
                match store.update_record(
                    &scope,
                    kind,
                    parent,
                    id,
                    Some(expected.unwrap_or(after.version)),
                    &fields,
                    Utc::now(),
                    &line,
                ) {
                    Err(DomainError::VersionConflict { .. })
                        if expected.is_none() && attempt < PATCH_ATTEMPTS =>
                    {
                        continue
                    }
                    other => return other?.ok_or(DomainError::NotFound(kind.noun())),
                }
            }
        })
        .await?;
    Ok(with_etag(HttpResponse::Ok(), &updated))
}

/// `DELETE`: 204; a collection takes its sources with it. A second delete is a 404.
pub async fn delete(
    state: web::Data<AppState>,
    p: Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
) -> Result<HttpResponse, ApiError> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    let deleted = state
        .db(move |store| {
            let Some(current) = store.find_record(&scope.as_read(), kind, parent, id)? else {
                return Ok(false);
            };
            let line = activity(&scope, kind, "delete", &current);
            store.delete_record(&scope, kind, parent, id, &line)
        })
        .await?;
    if deleted {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(not_found(kind))
    }
}
