//! The OpenAPI document, generated from the handlers' annotations. `cargo xtask openapi`
//! writes it to `docs/openapi.json`; a test fails when the file drifts.

use utoipa::OpenApi;

use crate::{admin, auth, system, workspace};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "gc",
        description = "Multi-tenant workspace service with an AI gateway. Errors have the body \
            {\"error\": {\"code\", \"message\", \"request_id\"}}.",
        license(name = "Apache-2.0")
    ),
    paths(
        system::health,
        system::openapi,
        auth::signup::signup,
        auth::signin::signin,
        auth::signout::signout,
        auth::change_password::change_password,
        auth::me::get_me,
        auth::me::patch_me,
        auth::sessions::list_sessions,
        auth::sessions::delete_sessions,
        auth::ip_admin::ip_admin,
        admin::tenants::list_tenants,
        admin::tenants::create_tenant,
        admin::tenants::patch_tenant,
        admin::users::list_users,
        admin::users::create_user,
        admin::users::patch_user,
        admin::users::assign_tenant,
        workspace::overview::overview,
    ),
    tags(
        (name = "system", description = "Health and this document"),
        (name = "auth", description = "Accounts, sign-in and sessions"),
        (name = "admin", description = "Tenants and users (platform admins)"),
        (name = "workspace", description = "The tenant's stored records"),
    )
)]
pub struct ApiDoc;

/// The document as pretty JSON, as committed in `docs/openapi.json`.
pub fn document() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
