//! The answers handlers give (decision 0049). A handler is extract ([`crate::extract::Auth`]
//! gives the state and the caller as one), one service call, and one of these: its type is
//! [`Reply`], its last line `ok(view)`, `created(view)`, `list_page(page, view)` or `no_content()`.

use actix_web::HttpResponse;
use gc_domain::page::Page;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::views::ListBody;

/// What a handler answers: a response, or the error the uniform error body is made of.
pub type Reply = Result<HttpResponse, ApiError>;

/// 200 with `body` as JSON.
pub fn ok(body: impl Serialize) -> Reply {
    Ok(HttpResponse::Ok().json(body))
}

/// 201 with `body` (what was made) as JSON.
pub fn created(body: impl Serialize) -> Reply {
    Ok(HttpResponse::Created().json(body))
}

/// 204, no body.
pub fn no_content() -> Reply {
    Ok(HttpResponse::NoContent().finish())
}

/// 200 with a page of a list, each item shown by `view`: `{data, next_cursor}`.
pub fn list_page<T, V: ToSchema + Serialize>(page: Page<T>, view: impl Fn(T) -> V) -> Reply {
    ok(ListBody::from_page(page, view))
}
