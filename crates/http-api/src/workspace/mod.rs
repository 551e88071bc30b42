//! `/workspace`: the tenant's stored records, settings, keys and activity.

use actix_web::web;

pub mod overview;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/workspace")
            .service(web::resource("").route(web::get().to(overview::overview))),
    );
}
