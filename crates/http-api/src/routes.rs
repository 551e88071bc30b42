//! The route table: every route under `/api/v1`, declared once. The same declaration mounts
//! the routes and lists them ([`ROUTES`], [`CHAT_ROUTES`]), so a test that walks the list
//! walks exactly what the router serves (the route × caller test in `tests/tests/access.rs`
//! fails for a route that has no row).

use actix_web::http::Method;
use actix_web::web;

use crate::{admin, auth, gateway, guard, system, workspace};

/// One mounted route: its method and its path template under `/api/v1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
}

/// Declares a table: `$list` names every route, `$mount` mounts them on a `ServiceConfig`.
macro_rules! route_table {
    ($list:ident, $mount:ident; $( $path:literal $([wrap $mw:expr])? => { $( $method:ident $handler:path ),+ $(,)? } ),* $(,)?) => {
        #[doc = concat!("The routes [`", stringify!($mount), "`] mounts.")]
        pub const $list: &[Route] = &[ $( $( Route { method: stringify!($method), path: $path } ),+ ),* ];

        #[doc = concat!("Mounts the routes listed in [`", stringify!($list), "`].")]
        ///
        /// Paths without a `{parameter}` are mounted first: actix tries resources in order and
        /// matches a templated one with a regular expression, so a static route behind twelve
        /// templated ones paid twelve regex searches per request (issue 14: 5 % of a `/run`).
        /// No static path here is matched by a template, so the order changes no answer.
        fn $mount(cfg: &mut web::ServiceConfig) {
            for templated in [false, true] {
                $(
                    if $path.contains('{') == templated {
                        cfg.service(
                            web::resource($path)
                                $( .wrap(actix_web::middleware::from_fn($mw)) )?
                                $( .route(web::route().method(Method::$method).to($handler)) )+
                        );
                    }
                )*
            }
        }
    };
}

route_table! { ROUTES, mount_api;
    "/health" => { GET system::health },
    "/ready" => { GET system::ready },
    "/openapi.json" => { GET system::openapi },

    "/auth/signup" => { GET auth::signup::signup_status, POST auth::signup::signup },
    "/auth/signin" => { POST auth::signin::signin },
    "/auth/signout" => { POST auth::signout::signout },
    "/auth/change-password" => { POST auth::change_password::change_password },
    "/auth/ip-admin" => { POST auth::ip_admin::ip_admin },
    "/auth/me" => { GET auth::me::get_me, PATCH auth::me::patch_me },
    "/auth/sessions" => { GET auth::sessions::list_sessions, DELETE auth::sessions::delete_sessions },

    "/admin/tenants" => { GET admin::tenants::list_tenants, POST admin::tenants::create_tenant },
    "/admin/tenants/{id}" => { GET admin::tenants::get_tenant, PATCH admin::tenants::patch_tenant },
    "/admin/tenants/{id}/ai-keys" => { GET admin::ai_keys::list_ai_keys, POST admin::ai_keys::create_ai_key },
    "/admin/tenants/{id}/ai-keys/{key_id}" => { DELETE admin::ai_keys::delete_ai_key },
    "/admin/ai-gateways/diagnostics" => { POST admin::diagnostics::diagnostics },
    "/admin/users" => { GET admin::users::list_users, POST admin::users::create_user },
    "/admin/users/{id}" => { PATCH admin::users::patch_user },
    "/admin/users/{id}/tenant" => { PATCH admin::users::assign_tenant },
    "/admin/usage" => { GET admin::usage::admin_usage },

    "/workspace" => { GET workspace::overview::overview },
    "/workspace/settings" => { GET workspace::settings::get_settings, PATCH workspace::settings::patch_settings },
    "/workspace/activity" => { GET workspace::activity::list_activity },
    "/workspace/skills" => { GET workspace::skills::list_skills, POST workspace::skills::create_skill },
    "/workspace/skills/{id}" => {
        GET workspace::skills::get_skill,
        PATCH workspace::skills::patch_skill,
        DELETE workspace::skills::delete_skill,
    },
    "/workspace/memory" => { GET workspace::memory::list_collections, POST workspace::memory::create_collection },
    "/workspace/memory/{id}" => {
        GET workspace::memory::get_collection,
        PATCH workspace::memory::patch_collection,
        DELETE workspace::memory::delete_collection,
    },
    "/workspace/memory/{collection_id}/sources" => {
        GET workspace::sources::list_sources,
        POST workspace::sources::create_source,
    },
    "/workspace/memory/{collection_id}/sources/{id}" => {
        GET workspace::sources::get_source,
        PATCH workspace::sources::patch_source,
        DELETE workspace::sources::delete_source,
    },
    "/workspace/drafts/{kind}" => { GET workspace::drafts::list_drafts, POST workspace::drafts::create_draft },
    "/workspace/drafts/{kind}/{id}" => {
        GET workspace::drafts::get_draft,
        PATCH workspace::drafts::patch_draft,
        DELETE workspace::drafts::delete_draft,
    },
    "/workspace/api-keys" => { GET workspace::api_keys::list_api_keys, POST workspace::api_keys::create_api_key },
    "/workspace/api-keys/{id}" => {
        DELETE workspace::api_keys::revoke_api_key,
        PATCH workspace::api_keys::patch_api_key,
    },
    "/workspace/usage" => { GET workspace::usage::workspace_usage },
    "/workspace/ai-access" => { GET workspace::ai_access::get_ai_access },
    "/workspace/ai-access/guide" => { GET workspace::ai_access::get_guide },

    "/guard/scan" => { GET guard::scan::describe, POST guard::scan::scan },

    "/run" => { POST gateway::run::run },
    // OpenAI's model list, for /run users and OpenAI SDKs alike (errors in OpenAI's shape).
    "/models" [wrap gateway::openai_errors] => { GET gateway::models::list_models },
    "/models/{id}" [wrap gateway::openai_errors] => { GET gateway::models::get_model },
}

route_table! { CHAT_ROUTES, mount_chat;
    "/chat/completions" [wrap gateway::openai_errors] => { POST gateway::run::chat_completions },
}

/// Mounts every route; `/chat/completions` only when `chat_completions` is on.
pub fn mount(cfg: &mut web::ServiceConfig, chat_completions: bool) {
    mount_api(cfg);
    if chat_completions {
        mount_chat(cfg);
    }
}

/// Every route mounted with `chat_completions` on.
pub fn all() -> impl Iterator<Item = Route> {
    ROUTES.iter().chain(CHAT_ROUTES).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::dev::ResourceDef;

    #[test]
    fn no_static_path_is_matched_by_a_template() {
        // `mount_api` mounts static paths first; that is only safe when no template would
        // have taken a static path's requests before.
        let (templated, fixed): (Vec<Route>, Vec<Route>) =
            all().partition(|r| r.path.contains('{'));
        assert!(!templated.is_empty() && !fixed.is_empty());
        for t in &templated {
            let def = ResourceDef::new(t.path);
            for s in &fixed {
                assert!(!def.is_match(s.path), "{} would match {}", t.path, s.path);
            }
        }
    }
}
