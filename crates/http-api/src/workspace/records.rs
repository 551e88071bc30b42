//! One generic resource for the stored records: skills, memory collections, memory sources and
//! drafts are one stored record (`RecordKind` + a JSON map of fields validated by
//! `gc_domain::policy::records`). Here are the one implementation of list, get, create, patch and
//! delete ([`list`] … [`delete`], generic over a [`RecordResource`]) and the
//! [`record_routes!`] descriptor each kind's module (`skills`, `memory`, `sources`, `drafts`)
//! invokes once with its paths, view and OpenAPI wording.
//!
//! A record's JSON is `{id, version, created_at, updated_at, created_by, ...fields}`, plus
//! `collection_id` for memory sources and `guard` for skills (issue 29: the Guard's stored
//! verdict, with `stale` against the scanner's rules version now; see
//! `gc_domain::services::skill_scan`). GET of one record sends `ETag: "<version>"`; PATCH
//! honours `If-Match: "<version>"` with 409 `version_conflict` when it is stale.

use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use gc_domain::model::workspace::{KeyScope, Record, RecordKind};
use gc_domain::services::skill_scan::{self, SkillGuard, SkillScanner};
use gc_domain::services::workspace as service;
use gc_domain::{DomainError, DomainResult, ErrorCode};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::list_cache;
use crate::cursor::ListQuery;
use crate::error::ApiError;
use crate::extract::{Auth, Caller, Query};
use crate::reply::{no_content, Reply};
use crate::state::AppState;

/// A record body as sent by the client: any JSON object, checked field by field by the domain.
pub type Fields = crate::extract::Body<Map<String, Value>>;

/// Appends a stored record's JSON to `out`:
/// `{id, version, created_at, updated_at, created_by, [collection_id], ...fields, [guard]}`;
/// `rules` is the Guard's rules version now (a skill's `guard.stale`).
///
/// Written by hand, byte for byte what serde writes for the same values (a test holds it to
/// that): ids are hex and hyphens and timestamps RFC 3339 digits, so nothing needs escaping, and
/// the fields are the stored object's text, spliced in as they are (issue 14: parsing them into
/// a map and escaping every string again was a third of a list's work). Validated fields never
/// use a metadata name (`gc_domain::policy::records` refuses unknown fields, and no field table has
/// one), so the members stay unique.
fn write_record(out: &mut Vec<u8>, r: &Record, rules: &str) {
    out.extend_from_slice(b"{\"id\":");
    write_id(out, &r.id);
    out.extend_from_slice(b",\"version\":");
    out.extend_from_slice(r.version.to_string().as_bytes());
    out.extend_from_slice(b",\"created_at\":");
    write_time(out, &r.created_at);
    out.extend_from_slice(b",\"updated_at\":");
    write_time(out, &r.updated_at);
    out.extend_from_slice(b",\"created_by\":");
    write_id(out, &r.created_by);
    if r.kind == RecordKind::MemorySource {
        out.extend_from_slice(b",\"collection_id\":");
        match &r.parent_id {
            Some(parent) => write_id(out, parent),
            None => out.extend_from_slice(b"null"),
        }
    }
    let members = r.fields.members();
    if !members.is_empty() {
        out.push(b',');
        out.extend_from_slice(members.as_bytes());
    }
    if r.kind == RecordKind::Skill {
        // `guard` is no field name (`gc_domain::policy::records` refuses it), so members stay unique.
        out.extend_from_slice(b",\"guard\":");
        match &r.guard {
            Some(guard) => guard.write_shown(out, rules),
            None => SkillGuard::never_scanned().write_shown(out, rules),
        }
    }
    out.push(b'}');
}

/// `"0a1b…"`: a hyphenated lower-case id, as serde writes it.
fn write_id(out: &mut Vec<u8>, id: &Uuid) {
    let mut buf = Uuid::encode_buffer();
    out.push(b'"');
    out.extend_from_slice(id.hyphenated().encode_lower(&mut buf).as_bytes());
    out.push(b'"');
}

/// `"2026-11-23T19:44:07.123Z"`: RFC 3339 as chrono's serde writes it (the sub-second digits
/// in groups of three, only as many as are not zero).
///
/// Digit by digit: chrono's formatter allocated a `String` through its formatting machinery for
/// each of a record's two times, an eighth of a list's instructions (issue 14). Years outside
/// 0–9999 and leap seconds, which stored records never have, go through chrono.
fn write_time(out: &mut Vec<u8>, at: &DateTime<Utc>) {
    use chrono::{Datelike, Timelike};
    /// Writes `value`'s last `to - from` decimal digits into `buf[from..to]`.
    fn put(buf: &mut [u8], from: usize, to: usize, mut value: u32) {
        for slot in buf[from..to].iter_mut().rev() {
            // A digit is below 10, so the cast keeps it.
            *slot = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    // The calendar fields off the naive UTC value: `DateTime`'s own accessors convert to
    // local time (a no-op for UTC, but not free) on every call.
    let at_utc = at.naive_utc();
    let (date, time) = (at_utc.date(), at_utc.time());
    let nanos = time.nanosecond();
    let year = match u32::try_from(date.year()) {
        Ok(year) if year <= 9999 && nanos < 1_000_000_000 => year,
        _ => {
            out.push(b'"');
            out.extend_from_slice(
                at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                    .as_bytes(),
            );
            out.push(b'"');
            return;
        }
    };
    let mut buf = *b"\"0000-00-00T00:00:00.000000000Z\"";
    let secs = time.num_seconds_from_midnight();
    put(&mut buf, 1, 5, year);
    put(&mut buf, 6, 8, date.month());
    put(&mut buf, 9, 11, date.day());
    put(&mut buf, 12, 14, secs / 3600);
    put(&mut buf, 15, 17, secs / 60 % 60);
    put(&mut buf, 18, 20, secs % 60);
    // Sub-second digits in groups of three, as many as are not zero; none for a whole second.
    let fraction = if nanos == 0 {
        0
    } else if nanos % 1_000_000 == 0 {
        3
    } else if nanos % 1_000 == 0 {
        6
    } else {
        9
    };
    put(&mut buf, 21, 30, nanos);
    if fraction == 0 {
        out.extend_from_slice(&buf[..20]);
    } else {
        out.extend_from_slice(&buf[..21 + fraction]);
    }
    out.extend_from_slice(b"Z\"");
}

/// A JSON response from bytes already written.
fn json_bytes(mut res: actix_web::HttpResponseBuilder, body: Vec<u8>) -> HttpResponse {
    res.content_type(header::ContentType::json()).body(body)
}

/// The body of a page of records: `{data, next_cursor}`.
pub(crate) fn record_page(
    items: &[Record],
    next_cursor: Option<String>,
    rules: &str,
) -> DomainResult<Vec<u8>> {
    let size: usize = items.iter().map(|r| r.fields.as_str().len() + 224).sum();
    let mut out = Vec::with_capacity(size + 64);
    out.extend_from_slice(b"{\"data\":[");
    for (i, r) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_record(&mut out, r, rules);
    }
    out.extend_from_slice(b"],\"next_cursor\":");
    serde_json::to_writer(&mut out, &next_cursor)
        .map_err(|e| DomainError::Internal(format!("cursor: {e}")))?;
    out.push(b'}');
    Ok(out)
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

/// The record as the body of `res`, with its ETag; a skill's `guard.stale` is against the
/// `guard`'s rules version now.
fn with_etag(
    mut res: actix_web::HttpResponseBuilder,
    r: &Record,
    guard: &impl SkillScanner,
) -> HttpResponse {
    let mut body = Vec::with_capacity(r.fields.as_str().len() + 224);
    write_record(&mut body, r, guard.rules_version());
    res.insert_header((header::ETAG, etag(r.version)));
    json_bytes(res, body)
}

/// One stored record kind's routes: which kind, parent and record their paths name. The path
/// is extracted before anything else, so a malformed id or an unknown draft kind is a 404
/// answered before credentials are looked at.
pub trait RecordResource: 'static {
    /// The path parameters of the kind's list (`()` when there are none).
    type Listing: FromRequest + 'static;
    /// The path parameters of one record, its `{id}` last.
    type One: FromRequest + 'static;
    /// The kind and the parent a list path names.
    fn listing(at: Self::Listing) -> (RecordKind, Option<Uuid>);
    /// The kind, the parent and the id a record path names.
    fn one(at: Self::One) -> (RecordKind, Option<Uuid>, Uuid);
}

/// A kind stored at the top of the workspace: `/workspace/{kinds}` and `/{kinds}/{id}`, no
/// parent (skills, memory collections).
pub trait TopLevel: 'static {
    const KIND: RecordKind;
}

impl<T: TopLevel> RecordResource for T {
    type Listing = ();
    type One = web::Path<Uuid>;

    fn listing((): ()) -> (RecordKind, Option<Uuid>) {
        (T::KIND, None)
    }

    fn one(id: web::Path<Uuid>) -> (RecordKind, Option<Uuid>, Uuid) {
        (T::KIND, None, id.into_inner())
    }
}

/// A page of the caller's records of the path's kind (under its parent for memory sources).
///
/// Authenticates and reads the tenant's record version on every request; whether this node's
/// kept answer is sent instead of reading the page is the list cache's
/// (`list_cache::record_list`, decisions 0019 and 0046).
pub async fn list<R: RecordResource>(
    state: web::Data<AppState>,
    at: R::Listing,
    caller: Caller,
    query: Query<ListQuery>,
) -> Reply {
    let (kind, parent) = R::listing(at);
    let page = query.into_inner().and_then(|q| q.page());
    let body = list_cache::record_list(&state, caller, kind, parent, page).await?;
    Ok(HttpResponse::Ok()
        .content_type(header::ContentType::json())
        .body(body))
}

/// Stores a record of the path's kind (version 1).
pub async fn create<R: RecordResource>(
    at: R::Listing,
    Auth(state, p): Auth,
    body: Fields,
) -> Reply {
    let (kind, parent) = R::listing(at);
    p.write_scope(KeyScope::WorkspaceWrite)?;
    let input = body.into_inner()?;
    let stored = if kind == RecordKind::Skill {
        // Scanned on the Guard's executor first, then stored with its verdict.
        let ports = (state.get_ref(), state.guard.as_ref());
        skill_scan::create_skill(ports, p, input, Utc::now()).await?
    } else {
        state
            .db(move |store| service::create_record(store, &p, kind, parent, &input, Utc::now()))
            .await?
    };
    Ok(with_etag(
        HttpResponse::Created(),
        &stored,
        state.guard.as_ref(),
    ))
}

/// One record, with its version as `ETag`.
pub async fn get<R: RecordResource>(at: R::One, Auth(state, p): Auth) -> Reply {
    let (kind, parent, id) = R::one(at);
    let record = state
        .read(move |store| service::get_record(store, &p, kind, parent, id))
        .await?;
    Ok(with_etag(HttpResponse::Ok(), &record, state.guard.as_ref()))
}

/// Changes some fields of a record; `If-Match: "<version>"` makes it conditional.
pub async fn patch<R: RecordResource>(
    req: HttpRequest,
    at: R::One,
    Auth(state, p): Auth,
    body: Fields,
) -> Reply {
    let (kind, parent, id) = R::one(at);
    p.write_scope(KeyScope::WorkspaceWrite)?;
    let expected = if_match(&req)?;
    let input = body.into_inner()?;
    let updated = if kind == RecordKind::Skill {
        let ports = (state.get_ref(), state.guard.as_ref());
        skill_scan::update_skill(ports, p, id, expected, input, Utc::now()).await?
    } else {
        state
            .db(move |store| {
                service::update_record(store, &p, kind, parent, id, expected, &input, Utc::now())
            })
            .await?
    };
    Ok(with_etag(
        HttpResponse::Ok(),
        &updated,
        state.guard.as_ref(),
    ))
}

/// Scans a stored skill again and stores the verdict (`POST /workspace/skills/{id}/scan`).
pub async fn rescan(id: web::Path<Uuid>, Auth(state, p): Auth) -> Reply {
    let guard = state.guard.as_ref();
    let scanned =
        skill_scan::rescan_skill((state.get_ref(), guard), p, id.into_inner(), Utc::now()).await?;
    Ok(with_etag(HttpResponse::Ok(), &scanned, guard))
}

/// Deletes a record (a memory collection with its sources).
pub async fn delete<R: RecordResource>(at: R::One, Auth(state, p): Auth) -> Reply {
    let (kind, parent, id) = R::one(at);
    state
        .db(move |store| service::delete_record(store, &p, kind, parent, id, Utc::now()))
        .await?;
    no_content()
}

/// One record kind's declaration: its view and page (the OpenAPI schemas: the JSON itself is
/// written by `write_record`, metadata first, then the kind's fields) and its five routes,
/// handlers that carry the kind's OpenAPI annotation (its paths, parameters and the answers
/// peculiar to it) and call the one implementation above with the kind's [`RecordResource`].
/// The route table mounts them and `openapi.rs` lists them by these names.
///
/// `parent` are the path parameters before `{id}`; `parent_missing` the 404 a missing parent
/// answers (lists and creates). `top_level` in their place declares a kind without a parent.
/// The refusals of the caller, the body and the parameters are not written here: `openapi.rs`
/// derives them from the route's access class in the route table.
macro_rules! record_routes {
    // A kind stored at the top of the workspace ([`TopLevel`]): no parent.
    (
        resource: $resource:ty,
        $(#[$view_doc:meta])* view: $view:ident $fields:tt,
        $(#[$page_doc:meta])* list_view: $list_view:ident,
        paths: $list_path:tt, $item_path:tt,
        top_level,
        $($rest:tt)*
    ) => {
        record_routes! {
            resource: $resource,
            $(#[$view_doc])* view: $view $fields,
            $(#[$page_doc])* list_view: $list_view,
            paths: $list_path, $item_path,
            parent: [], parent_missing: [],
            $($rest)*
        }
    };
    (
        resource: $resource:ty,
        $(#[$view_doc:meta])* view: $view:ident { $($(#[$field_doc:meta])* $field:ident: $field_ty:ty),* $(,)? },
        $(#[$page_doc:meta])* list_view: $list_view:ident,
        paths: $list_path:tt, $item_path:tt,
        parent: [$($parent:tt),*], parent_missing: [$($parent_missing:tt),*],
        body: $body_doc:tt, id: $id_doc:tt, missing: $missing:tt, deleted: $deleted:tt,
        $list:ident: $list_doc:tt,
        $create:ident: $create_doc:tt,
        $get:ident: $get_doc:tt,
        $patch:ident: $patch_doc:tt,
        $delete:ident: $delete_doc:tt $(,)?
    ) => {
        $(#[$view_doc])*
        #[derive(Debug, serde::Serialize, utoipa::ToSchema)]
        pub struct $view {
            pub id: Uuid,
            pub version: i64,
            pub created_at: chrono::DateTime<chrono::Utc>,
            pub updated_at: chrono::DateTime<chrono::Utc>,
            pub created_by: Uuid,
            $($(#[$field_doc])* pub $field: $field_ty,)*
        }

        $(#[$page_doc])*
        #[derive(Debug, serde::Serialize, utoipa::ToSchema)]
        pub struct $list_view {
            pub data: Vec<$view>,
            pub next_cursor: Option<String>,
        }

        #[doc = $list_doc]
        #[utoipa::path(get, path = $list_path, tag = "workspace",
            params($($parent,)* ListQuery),
            responses((status = 200, body = $list_view) $(, $parent_missing)*))]
        pub async fn $list(
            state: actix_web::web::Data<$crate::state::AppState>,
            at: <$resource as $crate::workspace::records::RecordResource>::Listing,
            caller: $crate::extract::Caller,
            query: $crate::extract::Query<$crate::cursor::ListQuery>,
        ) -> $crate::reply::Reply {
            $crate::workspace::records::list::<$resource>(state, at, caller, query).await
        }

        #[doc = $create_doc]
        #[utoipa::path(post, path = $list_path, tag = "workspace",
            request_body(content = Object, description = $body_doc),
            params($($parent),*),
            responses((status = 201, body = $view, headers(("ETag" = String, description = "\"<version>\"")))
                $(, $parent_missing)*))]
        pub async fn $create(
            at: <$resource as $crate::workspace::records::RecordResource>::Listing,
            auth: $crate::extract::Auth,
            body: $crate::workspace::records::Fields,
        ) -> $crate::reply::Reply {
            $crate::workspace::records::create::<$resource>(at, auth, body).await
        }

        #[doc = $get_doc]
        #[utoipa::path(get, path = $item_path, tag = "workspace",
            params($($parent,)* ("id" = Uuid, Path, description = $id_doc)),
            responses((status = 200, body = $view, headers(("ETag" = String, description = "\"<version>\""))),
                (status = 404, description = $missing)))]
        pub async fn $get(
            at: <$resource as $crate::workspace::records::RecordResource>::One,
            auth: $crate::extract::Auth,
        ) -> $crate::reply::Reply {
            $crate::workspace::records::get::<$resource>(at, auth).await
        }

        #[doc = $patch_doc]
        #[utoipa::path(patch, path = $item_path, tag = "workspace",
            request_body(content = Object, description = $body_doc),
            params($($parent,)* ("id" = Uuid, Path, description = $id_doc),
                ("If-Match" = Option<String>, Header, description = "The ETag of the version being changed")),
            responses((status = 200, body = $view, headers(("ETag" = String, description = "\"<version>\"")))))]
        pub async fn $patch(
            req: actix_web::HttpRequest,
            at: <$resource as $crate::workspace::records::RecordResource>::One,
            auth: $crate::extract::Auth,
            body: $crate::workspace::records::Fields,
        ) -> $crate::reply::Reply {
            $crate::workspace::records::patch::<$resource>(req, at, auth, body).await
        }

        #[doc = $delete_doc]
        #[utoipa::path(delete, path = $item_path, tag = "workspace",
            params($($parent,)* ("id" = Uuid, Path, description = $id_doc)),
            responses((status = 204, description = $deleted)))]
        pub async fn $delete(
            at: <$resource as $crate::workspace::records::RecordResource>::One,
            auth: $crate::extract::Auth,
        ) -> $crate::reply::Reply {
            $crate::workspace::records::delete::<$resource>(at, auth).await
        }
    };
}
pub(crate) use record_routes;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use gc_domain::model::workspace::RecordFields;

    /// The record's JSON as serde would write it, member by member.
    fn by_serde(r: &Record) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), serde_json::to_value(r.id).unwrap());
        m.insert("version".into(), serde_json::to_value(r.version).unwrap());
        m.insert(
            "created_at".into(),
            serde_json::to_value(r.created_at).unwrap(),
        );
        m.insert(
            "updated_at".into(),
            serde_json::to_value(r.updated_at).unwrap(),
        );
        m.insert(
            "created_by".into(),
            serde_json::to_value(r.created_by).unwrap(),
        );
        if r.kind == RecordKind::MemorySource {
            m.insert(
                "collection_id".into(),
                serde_json::to_value(r.parent_id).unwrap(),
            );
        }
        m.extend(r.fields.map());
        if r.kind == RecordKind::Skill {
            let mut shown = Vec::new();
            let guard = r.guard.clone().unwrap_or_else(SkillGuard::never_scanned);
            guard.write_shown(&mut shown, "r1");
            m.insert("guard".into(), serde_json::from_slice(&shown).unwrap());
        }
        Value::Object(m)
    }

    #[test]
    fn a_record_is_written_as_serde_writes_it() {
        let fields = |v: Value| RecordFields::from_map(v.as_object().unwrap());
        let times = [
            Utc.timestamp_millis_opt(1_795_219_200_000).unwrap(),
            Utc.timestamp_millis_opt(1_795_219_200_007).unwrap(),
            Utc.timestamp_millis_opt(1_795_219_200_120).unwrap(),
            Utc.timestamp_millis_opt(0).unwrap(),
            Utc.timestamp_nanos(1_795_219_200_000_120_000),
            Utc.timestamp_nanos(1_795_219_200_000_000_007),
            Utc.timestamp_millis_opt(-62_135_596_800_001).unwrap(),
            Utc.timestamp_millis_opt(253_402_300_800_000).unwrap(),
        ];
        for (i, kind) in RecordKind::ALL.into_iter().enumerate() {
            for parent in [None, Some(Uuid::from_u128(7 << 64 | i as u128))] {
                let r = Record {
                    id: Uuid::from_u128(0xfeed_0000_0000_0000_0000_0000_0000_0001 + i as u128),
                    kind,
                    parent_id: parent,
                    version: 1 + i as i64 * 1_000_000_007,
                    fields: fields(
                        serde_json::json!({"name": "a \"quoted\" name\n", "tags": ["x", "ü"], "n": 1.5}),
                    ),
                    created_at: times[i % times.len()],
                    updated_at: times[(i + 1) % times.len()],
                    created_by: Uuid::from_u128(u128::MAX - i as u128),
                    guard: None,
                };
                let mut out = Vec::new();
                write_record(&mut out, &r, "r1");
                let text = std::str::from_utf8(&out).unwrap();
                let parsed: Value = serde_json::from_str(text).unwrap();
                assert_eq!(parsed, by_serde(&r), "{text}");
                // Member order: the metadata first, as documented.
                assert!(text.starts_with(&format!("{{\"id\":\"{}\",\"version\":", r.id)));
            }
        }
        // Every time: milli-, micro- and nanosecond digits, and years outside 0–9999.
        for at in times {
            let mut out = Vec::new();
            write_time(&mut out, &at);
            assert_eq!(
                serde_json::from_slice::<Value>(&out).unwrap(),
                serde_json::to_value(at).unwrap()
            );
        }
        // No fields at all: still one object.
        let mut r = Record {
            id: Uuid::nil(),
            kind: RecordKind::Skill,
            parent_id: None,
            version: 3,
            fields: fields(serde_json::json!({})),
            created_at: times[0],
            updated_at: times[1],
            created_by: Uuid::nil(),
            guard: None,
        };
        let mut out = Vec::new();
        write_record(&mut out, &r, "r1");
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), by_serde(&r));
        // A page: `{data, next_cursor}`.
        r.version = 4;
        let page = record_page(&[r.clone(), r.clone()], Some("c".into()), "r1").unwrap();
        let page: Value = serde_json::from_slice(&page).unwrap();
        assert_eq!(page["data"].as_array().map(Vec::len), Some(2));
        assert_eq!(page["data"][1], by_serde(&r));
        assert_eq!(page["next_cursor"], "c");
        let empty: Value = serde_json::from_slice(&record_page(&[], None, "r1").unwrap()).unwrap();
        assert_eq!(empty, serde_json::json!({"data": [], "next_cursor": null}));
    }
}
