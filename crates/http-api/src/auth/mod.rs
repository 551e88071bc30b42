//! `/auth`: accounts, sign-in and sessions.

pub mod change_password;
pub mod ip_admin;
pub mod me;
pub mod sessions;
pub mod signin;
pub mod signout;
pub mod signup;

use actix_web::cookie::Cookie;
use actix_web::HttpRequest;
use gc_domain::accounts::{ClientMeta, PasswordHasher};
use gc_domain::ports::Store;
use gc_domain::DomainResult;

use crate::error::ApiError;
use crate::extract::{client_ip, session_cookie, user_agent};
use crate::state::AppState;
use crate::throttle::{CheckSlot, HashShare};

/// A password check that opens a session (sign-in, sign-up), run on the anonymous share of
/// the hashing queue: `work` gets the ports, the hasher, the new session's token hash and the
/// client's metadata. The client's check slot (from `admit_auth`) is held until the hash is
/// done, even when the client has gone away. Answers what `work` made and the session cookie.
async fn with_new_session<T, F>(
    state: &AppState,
    req: &HttpRequest,
    slot: CheckSlot,
    work: F,
) -> Result<(T, Cookie<'static>), ApiError>
where
    T: Send + 'static,
    F: FnOnce(&dyn Store, &dyn PasswordHasher, String, &ClientMeta) -> DomainResult<T>
        + Send
        + 'static,
{
    let (token, token_hash) = state.credentials.new_session_token();
    let meta = ClientMeta {
        user_agent: user_agent(req),
        ip: client_ip(req, state)
            .map(|ip| ip.to_string())
            .unwrap_or_default(),
    };
    let made = state
        .with_hasher(HashShare::Anonymous, move |ports, hasher| {
            let _slot = slot;
            work(ports, hasher, token_hash, &meta)
        })
        .await?;
    Ok((made, session_cookie(token.expose(), state)))
}
