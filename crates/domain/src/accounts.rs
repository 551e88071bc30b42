//! Accounts: sign-up, sign-in with a database-kept throttle, sessions and keys turned into a
//! `Principal`.

use chrono::{DateTime, Duration, Utc};

use crate::access::{Credential, Principal};
use crate::error::{DomainError, DomainResult};
use crate::model::{new_id, NewUser, Role, Session, User};
use crate::ports::Store;
use crate::values::{text, Email, Password};

/// Hashes and verifies passwords. Implemented with bcrypt in `gc-auth`; slow by design, so
/// callers run it on a blocking pool.
pub trait PasswordHasher: Send + Sync {
    fn hash(&self, password: &Password) -> DomainResult<String>;
    fn verify(&self, password: &str, hash: &str) -> bool;
    /// A hash of a random password at the same cost, verified for unknown emails so that
    /// timing does not tell whether an account exists.
    fn dummy_hash(&self) -> &str;
}

/// Session lifetime and sign-in throttle settings.
#[derive(Debug, Clone, Copy)]
pub struct AccountPolicy {
    pub session_idle: Duration,
    pub session_absolute: Duration,
    pub max_failures: u64,
    pub failure_window: Duration,
    /// `last_seen_at` / `last_used_at` are written at most this often.
    pub touch_interval: Duration,
}

impl Default for AccountPolicy {
    fn default() -> Self {
        Self {
            session_idle: Duration::hours(24),
            session_absolute: Duration::days(30),
            max_failures: 5,
            failure_window: Duration::minutes(15),
            touch_interval: Duration::minutes(1),
        }
    }
}

/// Where a request came from, stored with its session.
#[derive(Debug, Clone, Default)]
pub struct ClientMeta {
    pub user_agent: String,
    pub ip: String,
}

/// A validated sign-up.
#[derive(Debug, Clone)]
pub struct Signup {
    pub email: Email,
    pub password: Password,
    pub name: String,
}

impl Signup {
    pub fn parse(email: &str, password: String, name: &str) -> DomainResult<Self> {
        Ok(Self {
            email: Email::parse("email", email)?,
            password: Password::parse("password", password)?,
            name: text("name", name, 1, 100)?,
        })
    }
}

/// Creates an unassigned member (or, for the admin command, an account with `role` and
/// `tenant_id`).
pub fn create_account(
    store: &dyn Store,
    hasher: &dyn PasswordHasher,
    signup: &Signup,
    role: Role,
    tenant_id: Option<uuid::Uuid>,
    now: DateTime<Utc>,
) -> DomainResult<User> {
    if store.find_user_by_email(&signup.email)?.is_some() {
        return Err(DomainError::EmailTaken);
    }
    if let Some(tenant_id) = tenant_id {
        store
            .find_tenant(tenant_id)?
            .ok_or_else(|| DomainError::invalid("tenant_id", "no such tenant"))?;
    }
    let password_hash = hasher.hash(&signup.password)?;
    store.insert_user(&NewUser {
        id: new_id(),
        email: signup.email.clone(),
        name: signup.name.clone(),
        role,
        tenant_id,
        password_hash,
        created_at: now,
    })
}

/// Checks an email and password. The throttle is read before bcrypt runs, so a locked account
/// costs no hashing; unknown emails are verified against a dummy hash.
pub fn verify_signin(
    store: &dyn Store,
    hasher: &dyn PasswordHasher,
    policy: &AccountPolicy,
    email: &str,
    password: &str,
    now: DateTime<Utc>,
) -> DomainResult<User> {
    // An unparseable email is treated like an unknown one: same answer, same work.
    let key = email.trim().to_lowercase();
    let since = now - policy.failure_window;
    if store.count_failures_since(&key, since)? >= policy.max_failures {
        let oldest = store.oldest_failure_since(&key, since)?.unwrap_or(now);
        let retry = (oldest + policy.failure_window - now).num_seconds().max(1);
        return Err(DomainError::TooManyAttempts {
            retry_after_secs: u64::try_from(retry).unwrap_or(1),
        });
    }
    let user = match Email::parse("email", email) {
        Ok(email) => store.find_user_by_email(&email)?,
        Err(_) => None,
    };
    let hash = user
        .as_ref()
        .map_or(hasher.dummy_hash(), |u| u.password_hash.as_str());
    let matches = hasher.verify(password, hash);
    match user {
        Some(user) if matches => {
            store.clear_failures(&key)?;
            Ok(user)
        }
        _ => {
            store.record_failure(&key, now)?;
            Err(DomainError::InvalidCredentials)
        }
    }
}

/// Stores a new session for `user` with the hash of a fresh token.
pub fn open_session(
    store: &dyn Store,
    policy: &AccountPolicy,
    user: &User,
    token_hash: String,
    meta: &ClientMeta,
    now: DateTime<Utc>,
) -> DomainResult<Session> {
    let session = Session {
        id: new_id(),
        user_id: user.id,
        token_hash,
        created_at: now,
        last_seen_at: now,
        expires_at: now + policy.session_absolute,
        user_agent: meta.user_agent.chars().take(256).collect(),
        ip: meta.ip.chars().take(64).collect(),
        shadow_tenant_id: None,
        shadow_since: None,
    };
    store.insert_session(&session)?;
    Ok(session)
}

/// Turns a session token hash into a `Principal`. Member state is loaded fresh on every call,
/// so a suspension takes effect at the next request on every node.
pub fn authenticate_session(
    store: &dyn Store,
    policy: &AccountPolicy,
    token_hash: &str,
    now: DateTime<Utc>,
) -> DomainResult<Principal> {
    let ctx = store
        .session_context(token_hash)?
        .ok_or(DomainError::Unauthenticated)?;
    let session = &ctx.session;
    if session.expires_at <= now || session.last_seen_at + policy.session_idle <= now {
        return Err(DomainError::Unauthenticated);
    }
    if now - session.last_seen_at >= policy.touch_interval {
        store.touch_session(session.id, now)?;
    }
    let shadow = match (ctx.shadow_tenant, session.shadow_since) {
        (Some(tenant), Some(since)) if ctx.user.is_platform_admin() => Some((tenant, since)),
        _ => None,
    };
    Ok(Principal {
        credential: Credential::Session {
            session_id: session.id,
            shadow,
        },
        user: ctx.user,
        tenant: ctx.tenant,
    })
}

/// Turns an API-key hash into a `Principal`. Revoked and expired keys are refused; the member
/// rules are applied later by the scope functions, exactly as for sessions.
pub fn authenticate_key(
    store: &dyn Store,
    policy: &AccountPolicy,
    key_hash: &str,
    now: DateTime<Utc>,
) -> DomainResult<Principal> {
    let ctx = store
        .key_context(key_hash)?
        .ok_or(DomainError::InvalidApiKey)?;
    // A key belongs to the tenant it was made in: a member moved to another tenant loses it
    // (401). An unassigned or suspended member keeps a valid key that the scope functions then
    // refuse with `member_unassigned` / `member_suspended` (403), as for sessions.
    let moved = ctx
        .user
        .tenant_id
        .is_some_and(|tenant| tenant != ctx.key.tenant_id);
    if !ctx.key.is_usable_at(now) || moved {
        return Err(DomainError::InvalidApiKey);
    }
    if ctx
        .key
        .last_used_at
        .is_none_or(|at| now - at >= policy.touch_interval)
    {
        store.touch_api_key(ctx.key.id, now)?;
    }
    Ok(Principal {
        credential: Credential::ApiKey {
            key_id: ctx.key.id,
            name: ctx.key.name.clone(),
            scopes: ctx.key.scopes.clone(),
        },
        user: ctx.user,
        tenant: ctx.tenant,
    })
}

/// Changes the caller's password and revokes every other session of the account.
pub fn change_password(
    store: &dyn Store,
    hasher: &dyn PasswordHasher,
    principal: &Principal,
    current: &str,
    new: String,
) -> DomainResult<()> {
    let session_id = principal.require_session()?;
    let new = Password::parse("new_password", new)?;
    if !hasher.verify(current, &principal.user.password_hash) {
        return Err(DomainError::invalid(
            "current_password",
            "does not match the current password",
        ));
    }
    let hash = hasher.hash(&new)?;
    store.change_password(principal.user.id, &hash, Some(session_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_matches_the_contract() {
        let p = AccountPolicy::default();
        assert_eq!(p.session_idle, Duration::hours(24));
        assert_eq!(p.session_absolute, Duration::days(30));
        assert_eq!(p.max_failures, 5);
        assert_eq!(p.failure_window, Duration::minutes(15));
    }

    #[test]
    fn signup_validates_every_field() {
        assert!(Signup::parse("ann@example.com", "x".repeat(12), "Ann").is_ok());
        let e = Signup::parse("nope", "x".repeat(12), "Ann").unwrap_err();
        assert!(matches!(e, DomainError::Validation { ref field, .. } if field == "email"));
        let e = Signup::parse("ann@example.com", "short".into(), "Ann").unwrap_err();
        assert!(matches!(e, DomainError::Validation { ref field, .. } if field == "password"));
        let e = Signup::parse("ann@example.com", "x".repeat(12), " ").unwrap_err();
        assert!(matches!(e, DomainError::Validation { ref field, .. } if field == "name"));
    }
}
