//! `/admin`: tenants and users, for platform admins' sessions only.

use actix_web::web;

pub mod ai_keys;
pub mod diagnostics;
pub mod tenants;
pub mod usage;
pub mod users;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/admin")
            .service(
                web::resource("/tenants")
                    .route(web::get().to(tenants::list_tenants))
                    .route(web::post().to(tenants::create_tenant)),
            )
            .service(web::resource("/tenants/{id}").route(web::patch().to(tenants::patch_tenant)))
            .service(web::resource("/usage").route(web::get().to(usage::admin_usage)))
            .service(
                web::resource("/tenants/{id}/ai-keys")
                    .route(web::get().to(ai_keys::list_ai_keys))
                    .route(web::post().to(ai_keys::create_ai_key)),
            )
            .service(
                web::resource("/tenants/{id}/ai-keys/{key_id}")
                    .route(web::delete().to(ai_keys::delete_ai_key)),
            )
            .service(
                web::resource("/ai-gateways/diagnostics")
                    .route(web::post().to(diagnostics::diagnostics)),
            )
            .service(
                web::resource("/users")
                    .route(web::get().to(users::list_users))
                    .route(web::post().to(users::create_user)),
            )
            .service(web::resource("/users/{id}").route(web::patch().to(users::patch_user)))
            .service(
                web::resource("/users/{id}/tenant").route(web::patch().to(users::assign_tenant)),
            ),
    );
}
