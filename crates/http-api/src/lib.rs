//! gc-http-api: the HTTP API of gc on actix-web.
//!
//! Handlers are short: extract, call the domain, map to a response body. Every route is
//! declared once in [`routes`]; the binary calls only [`configure`]. Storage work runs on
//! the blocking pool through [`state::AppState::db`].

pub mod adapters;
pub mod admin;
pub mod auth;
pub mod cursor;
pub mod error;
pub mod extract;
pub mod gateway;
pub mod guard;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod reply;
pub mod routes;
pub mod state;
pub mod system;
pub mod throttle;
pub mod views;
pub mod workspace;

use actix_web::web;
use gc_domain::ErrorCode;

pub use middleware::request_context;
pub use state::{AppState, HttpSettings};

/// Mounts every route under `/api/v1`, the body and query error handlers, and the JSON 404.
/// Wrap the app in [`request_context`] (outermost) for request ids and uniform errors.
pub fn configure(cfg: &mut web::ServiceConfig, state: web::Data<AppState>) {
    let limit = state.http.body_limit;
    let chat_completions = state.http.chat_completions;
    let metrics_on_main = state.http.metrics_on_main;
    cfg.app_data(state)
        .app_data(
            web::JsonConfig::default()
                .limit(limit)
                .error_handler(|err, _| error::json_error(&err).into()),
        )
        .app_data(web::PayloadConfig::default().limit(limit))
        .app_data(web::QueryConfig::default().error_handler(|err, _| {
            error::ApiError::new(
                ErrorCode::InvalidQuery,
                format!("the query string is invalid: {err}"),
            )
            .into()
        }))
        .app_data(
            web::PathConfig::default().error_handler(|_, _| error::ApiError::not_found().into()),
        )
        .service(web::scope("/api/v1").configure(|cfg| routes::mount(cfg, chat_completions)))
        .configure(|cfg| {
            if metrics_on_main {
                metrics::config(cfg);
            }
        })
        .default_service(web::to(middleware::not_found));
}
