//! The OpenAPI document, generated from the handlers' annotations. `cargo xtask openapi`
//! writes it to `docs/openapi.json`; a test fails when the file drifts.

use utoipa::OpenApi;

use crate::{admin, auth, gateway, guard, system, workspace};

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
        admin::usage::admin_usage,
        admin::users::list_users,
        admin::users::create_user,
        admin::users::patch_user,
        admin::users::assign_tenant,
        admin::ai_keys::list_ai_keys,
        admin::ai_keys::create_ai_key,
        admin::ai_keys::delete_ai_key,
        admin::diagnostics::diagnostics,
        gateway::run::run,
        gateway::run::chat_completions,
        gateway::models::list_models,
        gateway::models::get_model,
        guard::scan::describe,
        guard::scan::scan,
        workspace::overview::overview,
        workspace::settings::get_settings,
        workspace::settings::patch_settings,
        workspace::activity::list_activity,
        workspace::skills::list_skills,
        workspace::skills::create_skill,
        workspace::skills::get_skill,
        workspace::skills::patch_skill,
        workspace::skills::delete_skill,
        workspace::memory::list_collections,
        workspace::memory::create_collection,
        workspace::memory::get_collection,
        workspace::memory::patch_collection,
        workspace::memory::delete_collection,
        workspace::sources::list_sources,
        workspace::sources::create_source,
        workspace::sources::get_source,
        workspace::sources::patch_source,
        workspace::sources::delete_source,
        workspace::drafts::list_drafts,
        workspace::drafts::create_draft,
        workspace::drafts::get_draft,
        workspace::drafts::patch_draft,
        workspace::drafts::delete_draft,
        workspace::api_keys::list_api_keys,
        workspace::api_keys::create_api_key,
        workspace::api_keys::patch_api_key,
        workspace::api_keys::revoke_api_key,
        workspace::usage::workspace_usage,
        workspace::ai_access::get_ai_access,
        workspace::ai_access::get_guide,
    ),
    tags(
        (name = "system", description = "Health and this document"),
        (name = "auth", description = "Accounts, sign-in and sessions"),
        (name = "admin", description = "Tenants and users (platform admins)"),
        (name = "workspace", description = "The tenant's stored records"),
        (name = "gateway", description = "Chat runs through the tenant's region gateway"),
        (name = "guard", description = "The agent-skill scanner"),
    )
)]
pub struct ApiDoc;

/// The document as pretty JSON, as committed in `docs/openapi.json`.
pub fn document() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
