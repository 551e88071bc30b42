use actix_web::HttpRequest;
use gc_domain::services::accounts;
use gc_domain::values::Password;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::extract::{Auth, Body};
use crate::reply::{no_content, Reply};
use crate::throttle::{admit_session_check, HashShare};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePasswordBody {
    pub current_password: String,
    /// 12 to 72 bytes.
    pub new_password: String,
}

/// Changes the password; every other session of the account is revoked.
///
/// The check goes through the per-IP limits of sign-in and one check in flight per account
/// (decision 0026); the new password must pass the password policy.
#[utoipa::path(post, path = "/api/v1/auth/change-password", tag = "auth", request_body = ChangePasswordBody,
    responses((status = 204, description = "Changed"),
        (status = 422, description = "validation_failed (wrong current password or bad new one)"),
        (status = 429, description = "too_many_attempts: the same 5-per-15-minutes limit as sign-in; rate_limited: the per-IP or per-account limit of password checks (Retry-After)")))]
pub async fn change_password(
    req: HttpRequest,
    Auth(state, p): Auth,
    body: Body<ChangePasswordBody>,
) -> Reply {
    let body = body.after(p.require_session())?;
    // A new password the policy refuses is answered before it costs a hashing place or the
    // caller's allowance (the domain checks it again).
    Password::parse_for(
        "new_password",
        body.new_password.clone(),
        p.user().email.as_str(),
    )?;
    let slots = admit_session_check(&req, &state, p.user().id)?;
    let policy = state.policy;
    state
        .with_hasher(HashShare::SignedIn, move |ports, hasher| {
            // Held until the hash is done, even when the client has gone away.
            let _slots = slots;
            accounts::change_password(
                ports,
                hasher,
                &policy,
                &p,
                &body.current_password,
                body.new_password,
                chrono::Utc::now(),
            )
        })
        .await?;
    no_content()
}
