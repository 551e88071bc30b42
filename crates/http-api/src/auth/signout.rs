use actix_web::{web, HttpResponse};

use crate::error::ApiError;
use crate::extract::{expired_session_cookie, Auth};
use crate::state::AppState;

/// Deletes the current session and expires the cookie.
#[utoipa::path(post, path = "/api/v1/auth/signout", tag = "auth",
    responses((status = 204, description = "Signed out"), (status = 401, description = "unauthenticated"),
        (status = 403, description = "session_required or origin_mismatch")))]
pub async fn signout(state: web::Data<AppState>, Auth(p): Auth) -> Result<HttpResponse, ApiError> {
    p.require_session()?;
    state
        .db(move |ports| gc_domain::services::accounts::sign_out(ports, &p))
        .await?;
    Ok(HttpResponse::NoContent()
        .cookie(expired_session_cookie(&state))
        .finish())
}
