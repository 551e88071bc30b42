//! `/auth/signup`: whether sign-up is open (GET), and sign-up itself (POST: a new unassigned
//! account and its first session).

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Utc;
use gc_domain::services::accounts::{self, Signup};
use gc_domain::DomainError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::reply::Reply;
use crate::state::AppState;
use crate::throttle::admit_auth;
use crate::views::AccountView;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignupBody {
    pub email: String,
    /// 12 to 72 bytes.
    pub password: String,
    pub name: String,
}

/// Whether `POST /auth/signup` accepts new accounts (`GC_SIGNUP`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SignupStatus {
    /// False when sign-up is closed: `POST /auth/signup` answers 403 `signup_disabled`.
    pub open: bool,
}

/// Says whether sign-up is open, so a client can offer it only when it is. Public.
#[utoipa::path(get, path = "/api/v1/auth/signup", tag = "auth",
    responses((status = 200, body = SignupStatus)))]
pub async fn signup_status(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(SignupStatus {
        open: state.http.signup_open,
    })
}

/// Creates an account (unassigned until an administrator assigns a tenant) and signs it in.
#[utoipa::path(post, path = "/api/v1/auth/signup", tag = "auth", request_body = SignupBody,
    responses((status = 201, body = AccountView, description = "Created; sets the gc_session cookie"),
        (status = 429, description = "rate_limited (per client IP)")))]
pub async fn signup(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Json<SignupBody>,
) -> Reply {
    // One check in flight per client IP (it must not fill the shared hashing queue), and the
    // per-IP rate.
    let slot = admit_auth(&req, &state)?;
    let open = state.http.signup_open;
    if !open {
        return Err(DomainError::SignupDisabled.into());
    }
    let body = body.into_inner();
    let signup = Signup::parse(&body.email, body.password, &body.name)?;
    let policy = state.policy;
    let (user, cookie) = state
        .with_new_session(&req, slot, move |ports, hasher, token_hash, meta| {
            accounts::sign_up(
                ports,
                hasher,
                &policy,
                open,
                &signup,
                token_hash,
                meta,
                Utc::now(),
            )
        })
        .await?;
    Ok(HttpResponse::Created()
        .cookie(cookie)
        .json(AccountView::new(&user, None, None)))
}
