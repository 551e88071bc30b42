use actix_web::{web, HttpResponse};
use gc_domain::access::AdminScope;
use gc_domain::model::new_id;
use gc_domain::workspace::{ActivityTarget, NewActivity};
use gc_domain::DomainError;
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::{Auth, Body};
use crate::state::AppState;
use crate::views::AccountView;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IpAdminBody {
    /// The tenant whose Shadow support view to enter; null leaves the view. Required.
    #[serde(default, deserialize_with = "crate::extract::nullable")]
    #[schema(value_type = Option<Uuid>)]
    pub tenant_id: Option<Option<Uuid>>,
}

/// A platform admin enters (or leaves) the visible, read-only Shadow support view of a
/// tenant. Entry and exit are written to the tenant's activity feed.
#[utoipa::path(post, path = "/api/v1/auth/ip-admin", tag = "auth", request_body = IpAdminBody,
    responses((status = 200, body = AccountView), (status = 403, description = "admin_required"),
        (status = 404, description = "no such tenant")))]
pub async fn ip_admin(
    state: web::Data<AppState>,
    Auth(p): Auth,
    body: Body<IpAdminBody>,
) -> Result<HttpResponse, ApiError> {
    let admin = AdminScope::from_principal(&p)?;
    let session_id = p.require_session()?;
    let current = p.shadow().map(|(t, _)| t.id);
    let target = body.into_inner()?.tenant_id.ok_or_else(|| {
        DomainError::invalid("tenant_id", "is required (null leaves the Shadow view)")
    })?;
    let (tenant, since) = state
        .db(move |store| {
            // Stored timestamps keep milliseconds: answer with the value that is stored.
            let now = gc_domain::model::now_millis();
            let entry = |tenant_id: Uuid, action: &str| NewActivity {
                id: new_id(),
                tenant_id,
                at: now,
                actor: admin.actor().clone(),
                action: action.to_owned(),
                target: Some(ActivityTarget {
                    kind: "tenant".into(),
                    id: tenant_id,
                }),
                detail: json!({"admin_email": admin.actor().label}),
            };
            match target {
                Some(tenant_id) => {
                    let tenant = store
                        .find_tenant(tenant_id)?
                        .ok_or(DomainError::NotFound("tenant"))?;
                    if let Some(old) = current.filter(|old| *old != tenant_id) {
                        store.set_shadow(session_id, None, &entry(old, "shadow.exit"))?;
                    }
                    if current != Some(tenant_id) {
                        store.set_shadow(
                            session_id,
                            Some((tenant_id, now)),
                            &entry(tenant_id, "shadow.enter"),
                        )?;
                    }
                    Ok((Some(tenant), Some(now)))
                }
                None => {
                    if let Some(old) = current {
                        store.set_shadow(session_id, None, &entry(old, "shadow.exit"))?;
                    }
                    Ok((None, None))
                }
            }
        })
        .await?;
    // Keep the original `since` when the admin re-enters the view it is already in.
    let shadow = match (tenant, since) {
        (Some(t), Some(now)) => {
            let since = p
                .shadow()
                .filter(|(old, _)| old.id == t.id)
                .map_or(now, |(_, s)| *s);
            Some((t, since))
        }
        _ => None,
    };
    Ok(HttpResponse::Ok().json(AccountView::new(
        &p.user,
        p.tenant.as_ref(),
        shadow.as_ref(),
    )))
}
