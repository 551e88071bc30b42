//! `/workspace/api-keys`: scoped workspace keys, managed with a signed-in session only. The
//! secret is shown once, at creation; only its SHA-256 is stored.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use gc_domain::model::new_id;
use gc_domain::quota::{limit_value, KeyLimits};
use gc_domain::values::text;
use gc_domain::workspace::{ActivityTarget, ApiKey, ApiKeyPatch, KeyScope, NewActivity};
use gc_domain::DomainError;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::cursor::ListQuery;
use crate::error::ApiError;
use crate::extract::{Auth, Body, Query};
use crate::state::AppState;
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
}

/// A key's own quotas on create and PATCH: each a positive integer at most the tenant's
/// limit, or null for none of its own. On PATCH a field left out stays as it is.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyLimitsBody {
    #[serde(default, deserialize_with = "crate::extract::nullable")]
    #[schema(value_type = Option<i64>)]
    pub requests_per_minute: Option<Option<i64>>,
    #[serde(default, deserialize_with = "crate::extract::nullable")]
    #[schema(value_type = Option<i64>)]
    pub tokens_per_minute: Option<Option<i64>>,
}

/// One limit of a PATCH: left out (`None`), removed (`Some(None)`) or set.
type LimitChange = Option<Option<u64>>;

/// The checked limits of a body: `(requests_per_minute, tokens_per_minute)`, each `None` when
/// left out, and refused above the caller's tenant's limits.
fn checked_limits(
    p: &gc_domain::access::Principal,
    body: Option<&KeyLimitsBody>,
) -> Result<(LimitChange, LimitChange), ApiError> {
    let Some(body) = body else {
        return Ok((None, None));
    };
    let rpm = body
        .requests_per_minute
        .map(|v| limit_value("limits.requests_per_minute", v))
        .transpose()?;
    let tpm = body
        .tokens_per_minute
        .map(|v| limit_value("limits.tokens_per_minute", v))
        .transpose()?;
    let tenant = p.active_member_tenant()?.limits;
    KeyLimits {
        requests_per_minute: rpm.flatten(),
        tokens_per_minute: tpm.flatten(),
    }
    .check_within(&tenant)?;
    Ok((rpm, tpm))
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
    pub limits: Option<KeyLimitsBody>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchApiKeyBody {
    /// 1 to 100 characters.
    pub name: Option<String>,
    pub limits: Option<KeyLimitsBody>,
}

/// The caller's tenant's keys, newest first (revoked ones included). Session only; a Shadow
/// view may read the list.
#[utoipa::path(get, path = "/api/v1/workspace/api-keys", tag = "workspace", params(ListQuery),
    responses((status = 200, body = ListBody<ApiKeyView>), (status = 401, description = "unauthenticated"),
        (status = 403, description = "session_required or a member refusal")))]
pub async fn list_api_keys(
    state: web::Data<AppState>,
    Auth(p): Auth,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let scope = p.key_listing_scope()?;
    let page = query.into_inner()?.page()?;
    let page = state
        .db(move |store| store.list_api_keys(&scope, &page))
        .await?;
    Ok(HttpResponse::Ok().json(ListBody::from_page(page, |k| ApiKeyView::from(&k))))
}

/// Creates a key acting for the caller. The response is the only time the secret is shown.
#[utoipa::path(post, path = "/api/v1/workspace/api-keys", tag = "workspace", request_body = CreateApiKeyBody,
    responses((status = 201, body = CreatedApiKey),
        (status = 403, description = "session_required, shadow_read_only or a member refusal"),
        (status = 422, description = "validation_failed or unknown_field")))]
pub async fn create_api_key(
    state: web::Data<AppState>,
    Auth(p): Auth,
    body: Body<CreateApiKeyBody>,
) -> Result<HttpResponse, ApiError> {
    let scope = p.key_management_scope()?;
    let body = body.into_inner()?;
    let name = text("name", &body.name, 1, 100)?;
    if body.scopes.is_empty() {
        return Err(DomainError::invalid("scopes", "must name at least one scope").into());
    }
    let mut scopes = Vec::with_capacity(body.scopes.len());
    for raw in &body.scopes {
        let s = KeyScope::parse("scopes", raw)?;
        if !scopes.contains(&s) {
            scopes.push(s);
        }
    }
    let (rpm, tpm) = checked_limits(&p, body.limits.as_ref())?;
    let now = Utc::now();
    let expires_at = match body.expires_at.as_deref() {
        None => None,
        Some(raw) => {
            let at = DateTime::parse_from_rfc3339(raw)
                .map_err(|_| {
                    DomainError::invalid(
                        "expires_at",
                        "must be an RFC 3339 time such as 2030-01-01T00:00:00Z",
                    )
                })?
                .with_timezone(&Utc);
            if at <= now {
                return Err(DomainError::invalid("expires_at", "must be in the future").into());
            }
            Some(at)
        }
    };
    let (secret, key_hash, hint) = state.credentials.new_api_key();
    let key = ApiKey {
        id: new_id(),
        tenant_id: scope.tenant_id(),
        user_id: p.user().id,
        name,
        scopes,
        hint,
        key_hash,
        created_at: now,
        last_used_at: None,
        expires_at,
        revoked_at: None,
        limits: KeyLimits {
            requests_per_minute: rpm.flatten(),
            tokens_per_minute: tpm.flatten(),
        },
    };
    let stored = state
        .db(move |store| {
            let line = NewActivity::write(
                &scope,
                now,
                "api_key.create",
                Some(ActivityTarget {
                    kind: "api_key".into(),
                    id: key.id,
                }),
                json!({
                    "name": key.name,
                    "scopes": key.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                    "expires_at": key.expires_at,
                }),
            );
            store.insert_api_key(&scope, &key, &line)
        })
        .await?;
    Ok(HttpResponse::Created().json(CreatedApiKey {
        view: ApiKeyView::from(&stored),
        key: secret.expose().to_owned(),
    }))
}

/// Renames a key or sets its own per-minute quotas (at most the tenant's; 422 otherwise).
/// New limits apply from the key's next request.
#[utoipa::path(patch, path = "/api/v1/workspace/api-keys/{id}", tag = "workspace",
    params(("id" = Uuid, Path, description = "Key id")), request_body = PatchApiKeyBody,
    responses((status = 200, body = ApiKeyView),
        (status = 403, description = "session_required, shadow_read_only or a member refusal"),
        (status = 404, description = "not_found (also when revoked)"),
        (status = 422, description = "validation_failed (a limit above the tenant's) or unknown_field")))]
pub async fn patch_api_key(
    state: web::Data<AppState>,
    id: web::Path<Uuid>,
    Auth(p): Auth,
    body: Body<PatchApiKeyBody>,
) -> Result<HttpResponse, ApiError> {
    let scope = p.key_management_scope()?;
    let body = body.into_inner()?;
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 1, 100))
        .transpose()?;
    let (rpm, tpm) = checked_limits(&p, body.limits.as_ref())?;
    let patch = ApiKeyPatch {
        name,
        requests_per_minute: rpm,
        tokens_per_minute: tpm,
    };
    let id = id.into_inner();
    let updated = state
        .db(move |store| {
            let mut detail = serde_json::Map::new();
            if let Some(name) = &patch.name {
                detail.insert("name".into(), json!(name));
            }
            if let Some(v) = patch.requests_per_minute {
                detail.insert("requests_per_minute".into(), json!(v));
            }
            if let Some(v) = patch.tokens_per_minute {
                detail.insert("tokens_per_minute".into(), json!(v));
            }
            let line = NewActivity::write(
                &scope,
                Utc::now(),
                "api_key.update",
                Some(ActivityTarget {
                    kind: "api_key".into(),
                    id,
                }),
                serde_json::Value::Object(detail),
            );
            store.update_api_key(&scope, id, &patch, &line)
        })
        .await?
        .ok_or(DomainError::NotFound("API key"))?;
    Ok(HttpResponse::Ok().json(ApiKeyView::from(&updated)))
}

/// Revokes a key: its next request gets 401 `invalid_api_key`. Revoking twice is a 404.
#[utoipa::path(delete, path = "/api/v1/workspace/api-keys/{id}", tag = "workspace",
    params(("id" = Uuid, Path, description = "Key id")),
    responses((status = 204, description = "Revoked"),
        (status = 403, description = "session_required, shadow_read_only or a member refusal"),
        (status = 404, description = "not_found (also when already revoked)")))]
pub async fn revoke_api_key(
    state: web::Data<AppState>,
    id: web::Path<Uuid>,
    Auth(p): Auth,
) -> Result<HttpResponse, ApiError> {
    let scope = p.key_management_scope()?;
    let id = id.into_inner();
    let revoked = state
        .db(move |store| {
            let now = Utc::now();
            let line = NewActivity::write(
                &scope,
                now,
                "api_key.revoke",
                Some(ActivityTarget {
                    kind: "api_key".into(),
                    id,
                }),
                json!({}),
            );
            store.revoke_api_key(&scope, id, now, &line)
        })
        .await?;
    if revoked {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(DomainError::NotFound("API key").into())
    }
}
