//! `/workspace`: the tenant's stored records, settings, keys and activity.
//!
//! GET routes need a session or a key with `workspace:read`; writes need `workspace:write`
//! and are refused in a Shadow view (the scope types decide both). Key management takes a
//! session only.

use actix_web::web;

pub mod activity;
pub mod ai_access;
pub mod api_keys;
pub mod drafts;
pub mod memory;
pub mod overview;
pub mod records;
pub mod settings;
pub mod skills;
pub mod sources;
pub mod usage;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/workspace")
            .service(web::resource("").route(web::get().to(overview::overview)))
            .service(
                web::resource("/settings")
                    .route(web::get().to(settings::get_settings))
                    .route(web::patch().to(settings::patch_settings)),
            )
            .service(web::resource("/activity").route(web::get().to(activity::list_activity)))
            .service(
                web::resource("/skills")
                    .route(web::get().to(skills::list_skills))
                    .route(web::post().to(skills::create_skill)),
            )
            .service(
                web::resource("/skills/{id}")
                    .route(web::get().to(skills::get_skill))
                    .route(web::patch().to(skills::patch_skill))
                    .route(web::delete().to(skills::delete_skill)),
            )
            .service(
                web::resource("/memory")
                    .route(web::get().to(memory::list_collections))
                    .route(web::post().to(memory::create_collection)),
            )
            .service(
                web::resource("/memory/{id}")
                    .route(web::get().to(memory::get_collection))
                    .route(web::patch().to(memory::patch_collection))
                    .route(web::delete().to(memory::delete_collection)),
            )
            .service(
                web::resource("/memory/{collection_id}/sources")
                    .route(web::get().to(sources::list_sources))
                    .route(web::post().to(sources::create_source)),
            )
            .service(
                web::resource("/memory/{collection_id}/sources/{id}")
                    .route(web::get().to(sources::get_source))
                    .route(web::patch().to(sources::patch_source))
                    .route(web::delete().to(sources::delete_source)),
            )
            .service(
                web::resource("/drafts/{kind}")
                    .route(web::get().to(drafts::list_drafts))
                    .route(web::post().to(drafts::create_draft)),
            )
            .service(
                web::resource("/drafts/{kind}/{id}")
                    .route(web::get().to(drafts::get_draft))
                    .route(web::patch().to(drafts::patch_draft))
                    .route(web::delete().to(drafts::delete_draft)),
            )
            .service(
                web::resource("/api-keys")
                    .route(web::get().to(api_keys::list_api_keys))
                    .route(web::post().to(api_keys::create_api_key)),
            )
            .service(
                web::resource("/api-keys/{id}")
                    .route(web::delete().to(api_keys::revoke_api_key))
                    .route(web::patch().to(api_keys::patch_api_key)),
            )
            .service(web::resource("/usage").route(web::get().to(usage::workspace_usage)))
            .service(web::resource("/ai-access").route(web::get().to(ai_access::get_ai_access)))
            .service(web::resource("/ai-access/guide").route(web::get().to(ai_access::get_guide))),
    );
}
