use actix_web::web;
use chrono::Utc;
use gc_domain::model::{Role, Status, UserPatch};
use gc_domain::page::PageRequest;
use gc_domain::services::accounts::Signup;
use gc_domain::services::admin::{self, person_name};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::cursor::ListQuery;
use crate::extract::{nullable_body, parse_field, Auth, Body, Query};
use crate::reply::{created, list_page, ok, Reply};
use crate::views::{ListBody, UserView};

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UserListQuery {
    /// Only members of this tenant.
    pub tenant_id: Option<Uuid>,
    /// 1 to 200, default 50.
    #[param(minimum = 1, maximum = 200, default = 50)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page (opaque; an empty value means the first page).
    #[param(pattern = "^([A-Za-z0-9_-]{21}[AQgw])?$")]
    pub cursor: Option<String>,
}

/// Every user, newest first, optionally only one tenant's.
#[utoipa::path(get, path = "/api/v1/admin/users", tag = "admin", params(UserListQuery),
    responses((status = 200, body = ListBody<UserView>)))]
pub async fn list_users(Auth(state, p): Auth, query: Query<UserListQuery>) -> Reply {
    let query = query.after(p.admin_scope())?;
    let page: PageRequest = ListQuery {
        limit: query.limit,
        cursor: query.cursor,
    }
    .page()?;
    let tenant = query.tenant_id;
    let page = state
        .db(move |ports| admin::list_users(ports, &p, tenant, &page))
        .await?;
    list_page(page, UserView::from)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUserBody {
    pub email: String,
    pub name: String,
    /// 12 to 72 bytes.
    pub password: String,
    /// `member` (default) or `platform_admin`.
    pub role: Option<String>,
    pub tenant_id: Option<Uuid>,
}

/// Creates an account, optionally in a tenant.
#[utoipa::path(post, path = "/api/v1/admin/users", tag = "admin", request_body = CreateUserBody,
    responses((status = 201, body = UserView)))]
pub async fn create_user(
    req: actix_web::HttpRequest,
    Auth(state, p): Auth,
    body: Body<CreateUserBody>,
) -> Reply {
    let body = body.after(p.admin_scope())?;
    let signup = Signup::parse(&body.email, body.password, &body.name)?;
    let role = parse_field("role", body.role.as_deref(), Role::parse)?.unwrap_or(Role::Member);
    let tenant_id = body.tenant_id;
    // The hash goes through the limits of every password check (decision 0026).
    let slots = crate::throttle::admit_session_check(&req, &state, p.user().id)?;
    let user = state
        .with_hasher(
            crate::throttle::HashShare::SignedIn,
            move |ports, hasher| {
                let _slots = slots;
                admin::create_user(ports, hasher, &p, &signup, role, tenant_id, Utc::now())
            },
        )
        .await?;
    created(UserView::from(user))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchUserBody {
    pub name: Option<String>,
    /// `member` or `platform_admin`.
    pub role: Option<String>,
    /// `active` or `suspended`.
    pub status: Option<String>,
}

/// Renames, promotes or suspends a user. A suspension takes effect at the next request.
#[utoipa::path(patch, path = "/api/v1/admin/users/{id}", tag = "admin", request_body = PatchUserBody,
    params(("id" = Uuid, Path, description = "User id")),
    responses((status = 200, body = UserView)))]
pub async fn patch_user(
    Auth(state, p): Auth,
    id: web::Path<Uuid>,
    body: Body<PatchUserBody>,
) -> Reply {
    let body = body.after(p.admin_scope())?;
    let patch = UserPatch {
        name: body.name.as_deref().map(person_name).transpose()?,
        role: parse_field("role", body.role.as_deref(), Role::parse)?,
        status: parse_field("status", body.status.as_deref(), Status::parse)?,
    };
    let id = id.into_inner();
    let user = state
        .db(move |ports| admin::update_user(ports, &p, id, &patch))
        .await?;
    ok(UserView::from(user))
}

nullable_body! {
    pub struct AssignTenantBody {
        /// The tenant to assign; null makes the user unassigned. Required.
        tenant_id: Uuid,
    }
}

/// Assigns a user to a tenant, or with null unassigns it.
#[utoipa::path(patch, path = "/api/v1/admin/users/{id}/tenant", tag = "admin", request_body = AssignTenantBody,
    params(("id" = Uuid, Path, description = "User id")),
    responses((status = 200, body = UserView),
        (status = 422, description = "no such tenant")))]
pub async fn assign_tenant(
    Auth(state, p): Auth,
    id: web::Path<Uuid>,
    body: Body<AssignTenantBody>,
) -> Reply {
    let tenant_id = body.after(p.admin_scope())?.tenant_id.ok_or_else(|| {
        gc_domain::DomainError::invalid("tenant_id", "is required (null unassigns the user)")
    })?;
    let id = id.into_inner();
    let user = state
        .db(move |ports| admin::assign_tenant(ports, &p, id, tenant_id, Utc::now()))
        .await?;
    ok(UserView::from(user))
}
