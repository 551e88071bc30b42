//! The route table: every route under `/api/v1`, declared once with its method, path, access
//! class and handler. The same declaration mounts the routes, lists them ([`ROUTES`],
//! [`CHAT_ROUTES`]) and lists their handlers for the OpenAPI document ([`ApiPaths`],
//! [`ChatPaths`]); `openapi.rs` reads each operation's credentials and the refusals they imply
//! from the class declared here. A test that walks the list walks exactly what the router
//! serves (the route × caller test in `tests/tests/access.rs` fails for a route that has no
//! row, and checks that its expected policy agrees with the class declared here).
//!
//! Adding a route is one line here plus its handler (with its `#[utoipa::path]` annotation:
//! body, success answer, route-specific statuses) calling its service.

use actix_web::http::Method;
use actix_web::web;
use gc_domain::ErrorCode;

use crate::{admin, auth, gateway, guard, system, workspace};

/// The scope a key needs to read the workspace (GET on `/workspace/**`).
pub const READ: &str = "workspace:read";
/// The scope a key needs to change the workspace (POST, PATCH, DELETE on `/workspace/**`).
pub const WRITE: &str = "workspace:write";

/// What a route accepts as credentials, and so which refusals it can answer: the OpenAPI
/// document's `security` and shared error statuses are derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No credentials read at all.
    Public,
    /// Anonymous, a session or a `guard:scan` key (`POST /guard/scan`).
    Guard,
    /// A session of any account, whatever its state (`/auth/**` but sign-in, sign-up and
    /// ip-admin).
    Session,
    /// A platform admin's session or admin token (`/admin/**`; an `admin:read` token on GET
    /// only).
    Admin,
    /// A platform admin's session only (`/auth/ip-admin`, `/admin/tokens/**`).
    AdminSession,
    /// A member's session only (`/workspace/api-keys/**`).
    KeyManagement,
    /// A member's session or a key with the scope.
    Workspace(&'static str),
    /// A member's session or a key with `run` (`/run`, `/chat/completions`).
    Run,
    /// A run's credentials, nothing reaches an upstream (`GET /models`, `/models/{id}`).
    Models,
}

/// One mounted route: its method, its path template under `/api/v1` and its access class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
    /// The errors peculiar to this route, beyond those its access class, body and parameters
    /// imply (the OpenAPI document lists each under its status).
    pub errors: &'static [ErrorCode],
    /// Errors are answered in OpenAI's shape (the resource is wrapped in
    /// `gateway::openai_errors`).
    pub openai_errors: bool,
}

/// Declares a table: `$list` names every route, `$mount` mounts them on a `ServiceConfig`,
/// `$doc` is the OpenAPI document of their handlers' annotations (paths only).
///
/// An entry is `"/path" [openai_errors]? => { METHOD [access class] module::handler
/// errors(ErrorCode, ...)?, ... }`: `[openai_errors]` answers the resource's errors in OpenAI's
/// shape, `errors(...)` names the errors peculiar to the route. A last `records { "/path" =>
/// module { list, create, get, patch, delete }, ... }` declares the stored record kinds' five
/// routes each (decision 0029): the two resources `/path` and `/path/{id}`, GET with the
/// `workspace:read` class, the others `workspace:write`.
macro_rules! route_table {
    (
        $list:ident, $mount:ident, $doc:ident;
        $(
            $path:literal $([$openai:ident])? => {
                $(
                    $method:ident [$($access:tt)+] $($handler:ident)::+
                    $(errors($($code:ident),+ $(,)?))?
                ),+ $(,)?
            }
        ),* $(,)?
        $(
            records {
                $(
                    $rpath:literal => $($rmodule:ident)::+ {
                        $list_h:ident, $create_h:ident, $get_h:ident, $patch_h:ident,
                        $delete_h:ident $(,)?
                    }
                ),* $(,)?
            }
        )?
    ) => {
        #[doc = concat!("The routes [`", stringify!($mount), "`] mounts, one slice per resource.")]
        pub const $list: &[&[Route]] = &[ $( {
            const OPENAI_ERRORS: bool = route_table!(@openai $($openai)?);
            &[ $(
                Route {
                    method: stringify!($method),
                    path: $path,
                    access: Access::$($access)+,
                    errors: &[ $($( ErrorCode::$code ),+)? ],
                    openai_errors: OPENAI_ERRORS,
                }
            ),+ ]
        }, )* $($(
            &[
                route_table!(@record GET $rpath, READ),
                route_table!(@record POST $rpath, WRITE),
            ],
            &[
                route_table!(@record GET concat!($rpath, "/{id}"), READ),
                route_table!(@record PATCH concat!($rpath, "/{id}"), WRITE),
                route_table!(@record DELETE concat!($rpath, "/{id}"), WRITE),
            ],
        )*)? ];

        #[doc = concat!(
            "The OpenAPI paths of the routes in [`", stringify!($list),
            "`], from their handlers' annotations."
        )]
        #[derive(utoipa::OpenApi)]
        #[openapi(paths(
            $( $( $($handler)::+ ),+ ),*
            $($(
                , $($rmodule)::+::$list_h, $($rmodule)::+::$create_h, $($rmodule)::+::$get_h,
                $($rmodule)::+::$patch_h, $($rmodule)::+::$delete_h
            )*)?
        ))]
        pub struct $doc;

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
                                $( .wrap(actix_web::middleware::from_fn(gateway::$openai)) )?
                                $( .route(
                                    web::route().method(Method::$method).to($($handler)::+)
                                ) )+
                        );
                    }
                )*
                $($(
                    if $rpath.contains('{') == templated {
                        cfg.service(
                            web::resource($rpath)
                                .route(web::get().to($($rmodule)::+::$list_h))
                                .route(web::post().to($($rmodule)::+::$create_h)),
                        );
                    }
                    if templated {
                        cfg.service(
                            web::resource(concat!($rpath, "/{id}"))
                                .route(web::get().to($($rmodule)::+::$get_h))
                                .route(web::patch().to($($rmodule)::+::$patch_h))
                                .route(web::delete().to($($rmodule)::+::$delete_h)),
                        );
                    }
                )*)?
            }
        }
    };
    (@record $method:ident $path:expr, $scope:ident) => {
        Route {
            method: stringify!($method),
            path: $path,
            access: Access::Workspace($scope),
            errors: &[],
            openai_errors: false,
        }
    };
    (@openai) => {
        false
    };
    (@openai openai_errors) => {
        true
    };
}

route_table! { ROUTES, mount_api, ApiPaths;
    "/health" => { GET [Public] system::health errors(ServiceUnavailable) },
    "/ready" => { GET [Public] system::ready },
    "/openapi.json" => { GET [Public] system::openapi },

    "/auth/signup" => {
        GET [Public] auth::signup::signup_status,
        POST [Public] auth::signup::signup
            errors(SignupDisabled, EmailTaken, RateLimited, Busy, ServiceUnavailable),
    },
    "/auth/signin" => {
        POST [Public] auth::signin::signin
            errors(InvalidCredentials, TooManyAttempts, RateLimited, Busy, ServiceUnavailable),
    },
    "/auth/signout" => { POST [Session] auth::signout::signout },
    "/auth/change-password" => {
        POST [Session] auth::change_password::change_password
            errors(TooManyAttempts, RateLimited, Busy),
    },
    "/auth/ip-admin" => { POST [AdminSession] auth::ip_admin::ip_admin errors(NotFound) },
    "/auth/me" => { GET [Session] auth::me::get_me, PATCH [Session] auth::me::patch_me },
    "/auth/sessions" => {
        GET [Session] auth::sessions::list_sessions,
        DELETE [Session] auth::sessions::delete_sessions errors(NotFound),
    },

    "/admin/tenants" => {
        GET [Admin] admin::tenants::list_tenants,
        POST [Admin] admin::tenants::create_tenant,
    },
    "/admin/tenants/{id}" => {
        GET [Admin] admin::tenants::get_tenant,
        PATCH [Admin] admin::tenants::patch_tenant,
    },
    "/admin/tenants/{id}/ai-keys" => {
        GET [Admin] admin::ai_keys::list_ai_keys,
        POST [Admin] admin::ai_keys::create_ai_key,
    },
    "/admin/tenants/{id}/ai-keys/{key_id}" => { DELETE [Admin] admin::ai_keys::delete_ai_key },
    "/admin/ai-gateways/diagnostics" => {
        POST [Admin] admin::diagnostics::diagnostics errors(NotFound),
    },
    "/admin/users" => {
        GET [Admin] admin::users::list_users,
        POST [Admin] admin::users::create_user errors(EmailTaken, NotFound, RateLimited, Busy),
    },
    "/admin/users/{id}" => { PATCH [Admin] admin::users::patch_user },
    "/admin/users/{id}/tenant" => { PATCH [Admin] admin::users::assign_tenant },
    "/admin/usage" => { GET [Admin] admin::usage::admin_usage },
    "/admin/tokens" => {
        GET [AdminSession] admin::tokens::list_tokens,
        POST [AdminSession] admin::tokens::create_token,
    },
    "/admin/tokens/{id}" => { DELETE [AdminSession] admin::tokens::revoke_token errors(NotFound) },

    "/workspace" => { GET [Workspace(READ)] workspace::overview::overview },
    "/workspace/settings" => {
        GET [Workspace(READ)] workspace::settings::get_settings,
        PATCH [Workspace(WRITE)] workspace::settings::patch_settings,
    },
    "/workspace/activity" => { GET [Workspace(READ)] workspace::activity::list_activity },
    "/workspace/skills/{id}/scan" => {
        POST [Workspace(WRITE)] workspace::skills::scan_skill,
    },
    "/workspace/api-keys" => {
        GET [KeyManagement] workspace::api_keys::list_api_keys,
        POST [KeyManagement] workspace::api_keys::create_api_key,
    },
    "/workspace/api-keys/{id}" => {
        DELETE [KeyManagement] workspace::api_keys::revoke_api_key,
        PATCH [KeyManagement] workspace::api_keys::patch_api_key,
    },
    "/workspace/usage" => { GET [Workspace(READ)] workspace::usage::workspace_usage },
    "/workspace/ai-access" => { GET [Workspace(READ)] workspace::ai_access::get_ai_access },
    "/workspace/ai-access/guide" => { GET [Workspace(READ)] workspace::ai_access::get_guide },

    "/guard/scan" => {
        GET [Public] guard::scan::describe,
        POST [Guard] guard::scan::scan errors(
            RepositoryNotFound, UnsupportedMode, InvalidTarget, TargetNotAllowed,
            ArchiveNotAccepted, RedirectNotFollowed, RepositoryTooLarge, RateLimited,
            UpstreamError, ScannerBusy, ServiceUnavailable, UpstreamTimeout,
        ),
    },

    "/run" => { POST [Run] gateway::run::run },
    // OpenAI's model list, for /run users and OpenAI SDKs alike (errors in OpenAI's shape).
    "/models" [openai_errors] => { GET [Models] gateway::models::list_models },
    "/models/{id}" [openai_errors] => { GET [Models] gateway::models::get_model },

    // The stored record kinds (decision 0029), one line each: `"/path" => module { list,
    // create, get, patch, delete }`. GET and POST on the path, GET, PATCH and DELETE on
    // `/path/{id}`; GET needs `workspace:read`, the others `workspace:write`.
    records {
        "/workspace/skills" => workspace::skills { list_skills, create_skill, get_skill, patch_skill, delete_skill },
        "/workspace/memory" => workspace::memory { list_collections, create_collection, get_collection, patch_collection, delete_collection },
        "/workspace/memory/{collection_id}/sources" => workspace::sources { list_sources, create_source, get_source, patch_source, delete_source },
        "/workspace/drafts/{kind}" => workspace::drafts { list_drafts, create_draft, get_draft, patch_draft, delete_draft },
    }
}

// The OpenAI-compatible surface, mounted together when `chat_completions` is on
// (`GC_CHAT_COMPLETIONS`): one flag for every route an OpenAI SDK calls besides `/models`.
route_table! { CHAT_ROUTES, mount_chat, ChatPaths;
    "/chat/completions" [openai_errors] => { POST [Run] gateway::run::chat_completions },
    "/responses" [openai_errors] => { POST [Run] gateway::run::responses },
    "/embeddings" [openai_errors] => { POST [Run] gateway::run::embeddings },
}

/// Mounts every route; `/chat/completions`, `/responses` and `/embeddings` only when
/// `chat_completions` is on.
pub fn mount(cfg: &mut web::ServiceConfig, chat_completions: bool) {
    mount_api(cfg);
    if chat_completions {
        mount_chat(cfg);
    }
}

/// Every route mounted with `chat_completions` on.
pub fn all() -> impl Iterator<Item = Route> {
    ROUTES
        .iter()
        .chain(CHAT_ROUTES)
        .flat_map(|r| r.iter())
        .copied()
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
