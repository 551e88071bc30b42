//! `/workspace/settings`: one versioned settings object per tenant.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use gc_domain::model::workspace::{KeyScope, Settings};
use gc_domain::policy::records::settings_with_defaults;
use gc_domain::services::workspace as service;
use serde::Serialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::records::{etag, if_match, Fields};
use crate::extract::Auth;
use crate::reply::Reply;

/// The tenant's settings. `version` is 0 until they are first written.
#[derive(Debug, Serialize, ToSchema)]
pub struct SettingsView {
    pub display_name: String,
    pub description: String,
    pub default_model: String,
    pub timezone: String,
    pub version: i64,
    pub updated_at: Option<DateTime<Utc>>,
}

fn settings_json(s: &Settings) -> Value {
    let mut out = settings_with_defaults(&s.fields);
    out.insert("version".into(), json!(s.version));
    out.insert("updated_at".into(), json!(s.updated_at));
    Value::Object(out)
}

fn respond(s: &Settings) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::ETAG, etag(s.version)))
        .json(settings_json(s))
}

/// The tenant's settings, every field present, with the version as `ETag`.
#[utoipa::path(get, path = "/api/v1/workspace/settings", tag = "workspace",
    responses((status = 200, body = SettingsView, headers(("ETag" = String, description = "\"<version>\"")))))]
pub async fn get_settings(Auth(state, p): Auth) -> Reply {
    let s = state.db(move |store| service::settings(store, &p)).await?;
    Ok(respond(&s))
}

/// Changes some settings; `If-Match: "<version>"` makes it conditional.
#[utoipa::path(patch, path = "/api/v1/workspace/settings", tag = "workspace", request_body(content = Object, description = "The fields of the settings (schema generated from gc_domain::policy::records)"),
    params(("If-Match" = Option<String>, Header, description = "The ETag of the version being changed")),
    responses((status = 200, body = SettingsView, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 422, description = "validation_failed (e.g. an unknown timezone) or unknown_field")))]
pub async fn patch_settings(req: HttpRequest, Auth(state, p): Auth, body: Fields) -> Reply {
    p.write_scope(KeyScope::WorkspaceWrite)?;
    let expected = if_match(&req)?;
    let input: Map<String, Value> = body.into_inner()?;
    let s = state
        .db(move |store| service::update_settings(store, &p, expected, &input, Utc::now()))
        .await?;
    Ok(respond(&s))
}
