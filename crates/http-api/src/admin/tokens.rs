//! `/admin/tokens`: a platform admin's API tokens for scripts (decision 0036). Managed with a
//! signed-in session only; the token is shown once, at creation, and stored as SHA-256. Every
//! decision is in `gc_domain::services::admin_tokens`; the session check before the body is read only
//! orders the refusals.

use actix_web::web;
use chrono::{DateTime, Utc};
use gc_domain::services::admin_tokens::{self as service, AdminToken, AdminTokenRequest};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::cursor::ListQuery;
use crate::extract::{Auth, Body, Query};
use crate::reply::{created, list_page, no_content, Reply};
use crate::views::ListBody;

/// A token as listed: never the token itself.
#[derive(Debug, Serialize, ToSchema)]
pub struct AdminTokenView {
    pub id: Uuid,
    pub name: String,
    /// `admin` (every administration route) or `admin:read` (GET only).
    pub scope: &'static str,
    pub created_at: DateTime<Utc>,
    /// Null for a token that does not expire.
    pub expires_at: Option<DateTime<Utc>>,
    /// Updated at most once a minute (every use is recorded in the audit table all the same).
    pub last_used_at: Option<DateTime<Utc>>,
}

impl From<&AdminToken> for AdminTokenView {
    fn from(t: &AdminToken) -> Self {
        Self {
            id: t.id,
            name: t.name.clone(),
            scope: t.scope.as_str(),
            created_at: t.created_at,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
        }
    }
}

/// A token just created: the listed fields and, this once, the token.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedAdminToken {
    #[serde(flatten)]
    pub view: AdminTokenView,
    /// `gca_…`: send as `Authorization: Bearer` on `/api/v1/admin/**`. Shown only in this
    /// response; store it now.
    pub token: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAdminTokenBody {
    /// 1 to 100 characters.
    pub name: String,
    /// `admin` or `admin:read`.
    pub scope: String,
    /// An RFC 3339 time in the future; absent or null for a token that does not expire.
    pub expires_at: Option<String>,
}

/// The caller's own tokens, newest first. Session only.
#[utoipa::path(get, path = "/api/v1/admin/tokens", tag = "admin", params(ListQuery),
    responses((status = 200, body = ListBody<AdminTokenView>)))]
pub async fn list_tokens(Auth(state, p): Auth, query: Query<ListQuery>) -> Reply {
    let page = query.after(p.require_session())?.page()?;
    let page = state
        .db(move |store| service::list(store, &p, &page))
        .await?;
    list_page(page, |t| AdminTokenView::from(&t))
}

/// Creates a token acting for the caller (as long as the caller is an active platform
/// admin). The response is the only time the token is shown.
#[utoipa::path(post, path = "/api/v1/admin/tokens", tag = "admin", request_body = CreateAdminTokenBody,
    responses((status = 201, body = CreatedAdminToken)))]
pub async fn create_token(Auth(state, p): Auth, body: Body<CreateAdminTokenBody>) -> Reply {
    p.require_session()?;
    let body = body.after(p.admin_scope())?;
    let request = AdminTokenRequest {
        name: body.name,
        scope: body.scope,
        expires_at: body.expires_at,
    };
    let codec = state.credentials.clone();
    let made = state
        .db(move |store| service::create(store, &*codec, &p, &request, Utc::now()))
        .await?;
    created(CreatedAdminToken {
        view: AdminTokenView::from(&made.token),
        token: made.secret.expose().to_owned(),
    })
}

/// Revokes one of the caller's tokens: its next request gets 401 `invalid_api_key`.
#[utoipa::path(delete, path = "/api/v1/admin/tokens/{id}", tag = "admin",
    params(("id" = Uuid, Path, description = "Token id")),
    responses((status = 204, description = "Revoked"),
        (status = 404, description = "not_found (also another admin's token, or revoked)")))]
pub async fn revoke_token(Auth(state, p): Auth, id: web::Path<Uuid>) -> Reply {
    let id = id.into_inner();
    state
        .db(move |store| service::revoke(store, &p, id))
        .await?;
    no_content()
}
