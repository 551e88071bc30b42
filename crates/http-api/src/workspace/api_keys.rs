//! `/workspace/api-keys`: scoped workspace keys, managed with a signed-in session only. The
//! secret is shown once, at creation; only its SHA-256 is stored. Every decision is in
//! `gc_domain::services::api_keys`; the session check before the body is read only orders the
//! refusals (a caller who may not manage keys hears 401/403, not a complaint about the body).

use actix_web::web;
use chrono::{DateTime, Utc};
use gc_domain::model::workspace::ApiKey;
use gc_domain::services::api_keys::{
    self as service, KeyLimitsRequest, KeyPatchRequest, NewKeyRequest,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::cursor::ListQuery;
use crate::extract::{nullable_body, Auth, Body, Query};
use crate::reply::{created, list_page, no_content, ok, Reply};
use crate::views::ListBody;

/// A key as listed: never the secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyView {
    pub id: Uuid,
    pub name: String,
    /// Any of `workspace:read`, `workspace:write`, `guard:scan`, `run`.
    pub scopes: Vec<&'static str>,
    /// `gc_…` and the key's last four characters.
    pub hint: String,
    pub created_at: DateTime<Utc>,
    /// Updated at most once a minute.
    pub last_used_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// The key's own per-minute quotas (each null when it has none of its own; the tenant's
    /// apply as well).
    pub limits: KeyLimitsView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyLimitsView {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    /// Money per UTC month, a decimal string; null: none of its own.
    pub monthly_spend: Option<String>,
}

nullable_body! {
    /// A key's own quotas on create and PATCH: each a positive integer at most the tenant's
    /// limit, or null for none of its own. On PATCH a field left out stays as it is.
    pub struct KeyLimitsBody {
        requests_per_minute: i64,
        tokens_per_minute: i64,
        /// Money per UTC month, a decimal string (`"10.00"`), at most the tenant's.
        monthly_spend: String,
    }
}

impl From<KeyLimitsBody> for KeyLimitsRequest {
    fn from(b: KeyLimitsBody) -> Self {
        Self {
            requests_per_minute: b.requests_per_minute,
            tokens_per_minute: b.tokens_per_minute,
            monthly_spend: b.monthly_spend,
        }
    }
}

impl From<&ApiKey> for ApiKeyView {
    fn from(k: &ApiKey) -> Self {
        Self {
            id: k.id,
            name: k.name.clone(),
            scopes: k.scopes.iter().map(|s| s.as_str()).collect(),
            hint: k.hint.clone(),
            created_at: k.created_at,
            last_used_at: k.last_used_at,
            expires_at: k.expires_at,
            revoked_at: k.revoked_at,
            limits: KeyLimitsView {
                requests_per_minute: k.limits.requests_per_minute,
                tokens_per_minute: k.limits.tokens_per_minute,
                monthly_spend: k
                    .limits
                    .monthly_spend
                    .map(gc_domain::policy::prices::format_money),
            },
        }
    }
}

/// A key just created: the listed fields and, this once, the secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub view: ApiKeyView,
    /// The secret, `gc_…`. Shown only in this response; store it now.
    pub key: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKeyBody {
    /// 1 to 100 characters.
    pub name: String,
    /// At least one of `workspace:read`, `workspace:write`, `guard:scan`, `run`; duplicates
    /// collapse.
    pub scopes: Vec<String>,
    /// An RFC 3339 time in the future; absent or null for a key that does not expire.
    pub expires_at: Option<String>,
    /// The key's own per-minute quotas, at most the tenant's.
    #[serde(default, deserialize_with = "crate::extract::optional_object")]
    pub limits: Option<KeyLimitsBody>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchApiKeyBody {
    /// 1 to 100 characters.
    pub name: Option<String>,
    #[serde(default, deserialize_with = "crate::extract::optional_object")]
    pub limits: Option<KeyLimitsBody>,
}

/// The caller's tenant's keys, newest first (revoked ones included). Session only; a Shadow
/// view may read the list.
#[utoipa::path(get, path = "/api/v1/workspace/api-keys", tag = "workspace", params(ListQuery),
    responses((status = 200, body = ListBody<ApiKeyView>)))]
pub async fn list_api_keys(Auth(state, p): Auth, query: Query<ListQuery>) -> Reply {
    let page = query.after(p.key_listing_scope())?.page()?;
    let page = state
        .db(move |store| service::list_api_keys(store, &p, &page))
        .await?;
    list_page(page, |k| ApiKeyView::from(&k))
}

/// Creates a key acting for the caller. The response is the only time the secret is shown.
#[utoipa::path(post, path = "/api/v1/workspace/api-keys", tag = "workspace", request_body = CreateApiKeyBody,
    responses((status = 201, body = CreatedApiKey)))]
pub async fn create_api_key(Auth(state, p): Auth, body: Body<CreateApiKeyBody>) -> Reply {
    let body = body.after(p.key_management_scope())?;
    let request = NewKeyRequest {
        name: body.name,
        scopes: body.scopes,
        expires_at: body.expires_at,
        limits: body.limits.map(Into::into),
    };
    let codec = state.credentials.clone();
    let made = state
        .db(move |store| service::create_api_key(store, &*codec, &p, &request, Utc::now()))
        .await?;
    created(CreatedApiKey {
        view: ApiKeyView::from(&made.key),
        key: made.secret.expose().to_owned(),
    })
}

/// Renames a key or sets its own per-minute quotas (at most the tenant's; 422 otherwise).
/// New limits apply from the key's next request.
#[utoipa::path(patch, path = "/api/v1/workspace/api-keys/{id}", tag = "workspace",
    params(("id" = Uuid, Path, description = "Key id")), request_body = PatchApiKeyBody,
    responses((status = 200, body = ApiKeyView),
        (status = 404, description = "not_found (also when revoked)"),
        (status = 422, description = "validation_failed (a limit above the tenant's) or unknown_field")))]
pub async fn patch_api_key(
    id: web::Path<Uuid>,
    Auth(state, p): Auth,
    body: Body<PatchApiKeyBody>,
) -> Reply {
    let body = body.after(p.key_management_scope())?;
    let request = KeyPatchRequest {
        name: body.name,
        limits: body.limits.map(Into::into),
    };
    let id = id.into_inner();
    let updated = state
        .db(move |store| service::update_api_key(store, &p, id, &request, Utc::now()))
        .await?;
    ok(ApiKeyView::from(&updated))
}

/// Revokes a key: its next request gets 401 `invalid_api_key`. Revoking twice is a 404.
#[utoipa::path(delete, path = "/api/v1/workspace/api-keys/{id}", tag = "workspace",
    params(("id" = Uuid, Path, description = "Key id")),
    responses((status = 204, description = "Revoked"),
        (status = 404, description = "not_found (also when already revoked)")))]
pub async fn revoke_api_key(id: web::Path<Uuid>, Auth(state, p): Auth) -> Reply {
    let id = id.into_inner();
    state
        .db(move |store| service::revoke_api_key(store, &p, id, Utc::now()))
        .await?;
    no_content()
}
