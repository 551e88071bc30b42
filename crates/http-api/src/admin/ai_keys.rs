//! `/admin/tenants/{id}/ai-keys`: a tenant's upstream keys. Each handler makes one call into
//! `gc_domain::services::ai_keys`.

use std::sync::Arc;

use actix_web::web;
use chrono::{DateTime, Utc};
use gc_domain::policy::ai_access::{AiKeyStatus, TenantAiKey};
use gc_domain::services::ai_keys::{self, NewAiKey};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::extract::{Auth, Body};
use crate::reply::{created, no_content, ok, Reply};

/// An upstream key as administrators see it: never the secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct AiKeyView {
    pub id: Uuid,
    pub tenant_id: Uuid,
    /// `AIHK` or `AICA`.
    pub region: &'static str,
    pub label: String,
    /// The last four characters of the secret.
    pub hint: String,
    pub chat_enabled: bool,
    /// `ready` or `not_ready`.
    #[schema(value_type = String)]
    pub status: AiKeyStatus,
    pub status_reason: Option<String>,
    pub checked_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl From<TenantAiKey> for AiKeyView {
    fn from(k: TenantAiKey) -> Self {
        Self {
            id: k.id,
            tenant_id: k.tenant_id,
            region: k.region.as_str(),
            label: k.label,
            hint: k.hint,
            chat_enabled: k.chat_enabled,
            status: k.status,
            status_reason: k.status_reason,
            checked_at: k.checked_at,
            created_at: k.created_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AiKeyList {
    pub data: Vec<AiKeyView>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAiKeyBody {
    /// `AIHK` or `AICA`: the only region this key is ever used in.
    pub region: String,
    /// The upstream provider key. Sealed at rest, never returned or logged.
    pub secret: String,
    pub label: Option<String>,
    /// Default true.
    pub chat_enabled: Option<bool>,
}

/// Adds an upstream key to a tenant. It is checked against its region's gateway at once
/// (`GET {base}/models`): `ready` when accepted, else `not_ready` with a reason.
#[utoipa::path(post, path = "/api/v1/admin/tenants/{id}/ai-keys", tag = "admin", request_body = CreateAiKeyBody,
    params(("id" = Uuid, Path, description = "Tenant id")),
    responses((status = 201, body = AiKeyView), (status = 404, description = "no such tenant")))]
pub async fn create_ai_key(
    Auth(state, p): Auth,
    tenant_id: web::Path<Uuid>,
    body: Body<CreateAiKeyBody>,
) -> Reply {
    let body = body.after(p.admin_scope())?;
    let key = ai_keys::create(
        (state.get_ref(), &state.probes(), Arc::clone(&state.sealer)),
        p,
        tenant_id.into_inner(),
        NewAiKey {
            region: body.region,
            secret: body.secret,
            label: body.label,
            chat_enabled: body.chat_enabled,
        },
        Utc::now(),
    )
    .await?;
    created(AiKeyView::from(key))
}

/// The tenant's upstream keys (never their secrets).
#[utoipa::path(get, path = "/api/v1/admin/tenants/{id}/ai-keys", tag = "admin",
    params(("id" = Uuid, Path, description = "Tenant id")),
    responses((status = 200, body = AiKeyList), (status = 404, description = "no such tenant")))]
pub async fn list_ai_keys(Auth(state, p): Auth, tenant_id: web::Path<Uuid>) -> Reply {
    p.admin_scope()?;
    let keys = ai_keys::list(state.get_ref(), p, tenant_id.into_inner()).await?;
    ok(AiKeyList {
        data: keys.into_iter().map(AiKeyView::from).collect(),
    })
}

/// Deletes an upstream key; it is unusable from the next request on.
#[utoipa::path(delete, path = "/api/v1/admin/tenants/{id}/ai-keys/{keyId}", tag = "admin",
    params(("id" = Uuid, Path, description = "Tenant id"), ("keyId" = Uuid, Path, description = "Key id")),
    responses((status = 204, description = "Deleted")))]
pub async fn delete_ai_key(Auth(state, p): Auth, path: web::Path<(Uuid, Uuid)>) -> Reply {
    p.admin_scope()?;
    let (tenant_id, key_id) = path.into_inner();
    ai_keys::delete(state.get_ref(), p, tenant_id, key_id).await?;
    no_content()
}
