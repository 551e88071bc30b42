use actix_web::HttpResponse;

use crate::extract::{expired_session_cookie, Auth};
use crate::reply::Reply;

/// Deletes the current session and expires the cookie.
#[utoipa::path(post, path = "/api/v1/auth/signout", tag = "auth",
    responses((status = 204, description = "Signed out")))]
pub async fn signout(Auth(state, p): Auth) -> Reply {
    p.require_session()?;
    state
        .db(move |ports| gc_domain::services::accounts::sign_out(ports, &p))
        .await?;
    Ok(HttpResponse::NoContent()
        .cookie(expired_session_cookie(&state))
        .finish())
}
