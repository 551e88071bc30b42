//! `/workspace/api-keys`: scoped workspace keys, managed with a signed-in session only. The
//! secret is shown once, at creation; only its SHA-256 is stored.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use gc_domain::model::new_id;
use gc_domain::values::text;
use gc_domain::workspace::{ActivityTarget, ApiKey, KeyScope, NewActivity};
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
