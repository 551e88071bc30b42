//! `/auth`: accounts, sign-in and sessions.

use actix_web::web;

pub mod change_password;
pub mod ip_admin;
pub mod me;
pub mod sessions;
pub mod signin;
pub mod signout;
pub mod signup;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/auth")
            .service(web::resource("/signup").route(web::post().to(signup::signup)))
            .service(web::resource("/signin").route(web::post().to(signin::signin)))
            .service(web::resource("/signout").route(web::post().to(signout::signout)))
            .service(
                web::resource("/change-password")
                    .route(web::post().to(change_password::change_password)),
            )
            .service(web::resource("/ip-admin").route(web::post().to(ip_admin::ip_admin)))
            .service(
                web::resource("/me")
                    .route(web::get().to(me::get_me))
                    .route(web::patch().to(me::patch_me)),
            )
            .service(
                web::resource("/sessions")
                    .route(web::get().to(sessions::list_sessions))
                    .route(web::delete().to(sessions::delete_sessions)),
            ),
    );
}
