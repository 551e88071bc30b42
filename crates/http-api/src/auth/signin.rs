//! `POST /auth/signin`: a password check, then a new session.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Utc;
use gc_domain::services::accounts;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::reply::Reply;
use crate::state::AppState;
use crate::throttle::admit_auth;
use crate::views::AccountView;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SigninBody {
    pub email: String,
    pub password: String,
}

/// Signs in and sets a new session cookie. Five failures for one email within 15 minutes lock
/// it for the rest of that window (429 with `Retry-After`), on every node.
#[utoipa::path(post, path = "/api/v1/auth/signin", tag = "auth", request_body = SigninBody,
    responses((status = 200, body = AccountView, description = "Signed in; sets the gc_session cookie"),
        (status = 429, description = "too_many_attempts, or rate_limited (per client IP)")))]
pub async fn signin(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Json<SigninBody>,
) -> Reply {
    // One check in flight per client IP (it must not fill the shared hashing queue), and the
    // per-IP rate.
    let slot = admit_auth(&req, &state)?;
    let body = body.into_inner();
    let policy = state.policy;
    let ((user, tenant), cookie) = state
        .with_new_session(&req, slot, move |ports, hasher, token_hash, meta| {
            accounts::sign_in(
                ports,
                hasher,
                &policy,
                &body.email,
                &body.password,
                token_hash,
                meta,
                Utc::now(),
            )
        })
        .await?;
    Ok(HttpResponse::Ok()
        .cookie(cookie)
        .json(AccountView::new(&user, tenant.as_ref(), None)))
}
