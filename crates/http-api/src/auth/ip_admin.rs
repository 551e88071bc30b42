use gc_domain::services::admin;
use gc_domain::DomainError;
use uuid::Uuid;

use crate::extract::{nullable_body, Auth, Body};
use crate::reply::{ok, Reply};
use crate::views::AccountView;

nullable_body! {
    pub struct IpAdminBody {
        /// The tenant whose Shadow support view to enter; null leaves the view. Required.
        tenant_id: Uuid,
    }
}

/// A platform admin enters (or leaves) the visible, read-only Shadow support view of a
/// tenant. Entry and exit are written to the tenant's activity feed.
#[utoipa::path(post, path = "/api/v1/auth/ip-admin", tag = "auth", request_body = IpAdminBody,
    responses((status = 200, body = AccountView), (status = 403, description = "admin_required, member_suspended (a suspended admin)"),
        (status = 404, description = "no such tenant")))]
pub async fn ip_admin(Auth(state, p): Auth, body: Body<IpAdminBody>) -> Reply {
    let target = body.after(p.admin_scope())?.tenant_id.ok_or_else(|| {
        DomainError::invalid("tenant_id", "is required (null leaves the Shadow view)")
    })?;
    let caller = p.clone();
    // Stored timestamps keep milliseconds: answer with the value that is stored.
    let shadow = state
        .db(move |ports| admin::set_shadow(ports, &caller, target, gc_domain::model::now_millis()))
        .await?;
    ok(AccountView::new(p.user(), p.tenant(), shadow.as_ref()))
}
