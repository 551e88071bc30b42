//! Accounts: sign-up, sign-in with a database-kept throttle, sessions and keys turned into a
//! `Principal`.

use chrono::{DateTime, Utc};

use crate::error::{DomainError, DomainResult};
use crate::model::{new_id, Role, Session, Status, User};
use crate::policy::access::{Credential, Principal};
pub use crate::policy::accounts::AccountPolicy;
use crate::policy::accounts::{person_name, throttle_key};
pub use crate::ports::PasswordHasher;
use crate::ports::{
    ApiKeyRepo, Attempt, CredentialCodec, Reservation, SessionRepo, SigninThrottleRepo, TenantRepo,
    UserRepo,
};
use crate::values::{Email, Password};

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
    /// Checks every field; the password by the whole policy, the email's rule included.
    pub fn parse(email: &str, password: String, name: &str) -> DomainResult<Self> {
        let email = Email::parse("email", email)?;
        let password = Password::parse_for("password", password, email.as_str())?;
        Ok(Self {
            email,
            password,
            name: person_name(name)?,
        })
    }
}

/// Creates an unassigned member (or, for the admin command, an account with `role` and
/// `tenant_id`).
pub fn create_account<P: UserRepo + TenantRepo + ?Sized>(
    store: &P,
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
    store.insert_user(&User {
        id: new_id(),
        email: signup.email.clone(),
        name: signup.name.clone(),
        role,
        status: Status::Active,
        tenant_id,
        password_hash,
        created_at: now,
    })
}

/// Reserves one password check for `email` (at most `policy.max_failures` per
/// `policy.failure_window`, whatever the concurrency and however many nodes), or refuses with
/// `too_many_attempts` and the seconds until the oldest attempt leaves the window.
pub fn reserve_password_check<P: SigninThrottleRepo + ?Sized>(
    store: &P,
    policy: &AccountPolicy,
    email: &str,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    let since = now - policy.failure_window;
    let key = throttle_key(email);
    let attempt = Attempt {
        key: &key,
        since,
        at: now,
        max: policy.max_failures,
    };
    match store.reserve_attempt(&attempt)? {
        Reservation::Reserved => Ok(()),
        Reservation::Locked { oldest } => {
            let retry = (oldest + policy.failure_window - now).num_seconds().max(1);
            Err(DomainError::TooManyAttempts {
                retry_after_secs: u64::try_from(retry).unwrap_or(1),
            })
        }
    }
}

/// Checks an email and password. An attempt is reserved in the database before bcrypt runs,
/// so a locked account costs no hashing and concurrent requests cannot overrun the limit; a
/// right password forgets the attempts. Unknown emails are verified against a dummy hash.
pub fn verify_signin<P: UserRepo + SigninThrottleRepo + ?Sized>(
    store: &P,
    hasher: &dyn PasswordHasher,
    policy: &AccountPolicy,
    email: &str,
    password: &str,
    now: DateTime<Utc>,
) -> DomainResult<User> {
    // An unparseable email is treated like an unknown one: same answer, same work.
    reserve_password_check(store, policy, email, now)?;
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
            store.clear_failures(&throttle_key(email))?;
            Ok(user)
        }
        _ => Err(DomainError::InvalidCredentials),
    }
}

/// Stores a new session for `user` with the hash of a fresh token.
pub fn open_session<P: SessionRepo + ?Sized>(
    store: &P,
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
pub fn authenticate_session<P: SessionRepo + ?Sized>(
    store: &P,
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
    if policy.touch_due(Some(session.last_seen_at), now) {
        store.touch_session(session.id, now)?;
    }
    let shadow = match (ctx.shadow_tenant, session.shadow_since) {
        (Some(tenant), Some(since)) if ctx.user.is_platform_admin() => Some((tenant, since)),
        _ => None,
    };
    Ok(Principal::new(
        ctx.user,
        ctx.tenant,
        Credential::Session {
            session_id: session.id,
            shadow,
        },
    ))
}

/// Turns an API-key hash into a `Principal`. Revoked and expired keys are refused; the member
/// rules are applied later by the scope functions, exactly as for sessions.
pub fn authenticate_key<P: ApiKeyRepo + ?Sized>(
    store: &P,
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
    if policy.touch_due(ctx.key.last_used_at, now) {
        store.touch_api_key(ctx.key.id, now)?;
    }
    Ok(Principal::new(
        ctx.user,
        ctx.tenant,
        Credential::ApiKey {
            key_id: ctx.key.id,
            name: ctx.key.name.clone(),
            scopes: ctx.key.scopes.clone(),
            limits: ctx.key.limits,
        },
    ))
}

/// Changes the caller's password and revokes every other session of the account. The check
/// of `current` counts toward the same attempt limit as sign-in.
pub fn change_password<P: UserRepo + SigninThrottleRepo + ?Sized>(
    store: &P,
    hasher: &dyn PasswordHasher,
    policy: &AccountPolicy,
    principal: &Principal,
    current: &str,
    new: String,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    let session_id = principal.require_session()?;
    let email = principal.user().email.as_str();
    let new = Password::parse_for("new_password", new, email)?;
    reserve_password_check(store, policy, email, now)?;
    if !hasher.verify(current, &principal.user().password_hash) {
        return Err(DomainError::invalid(
            "current_password",
            "does not match the current password",
        ));
    }
    store.clear_failures(&throttle_key(email))?;
    let hash = hasher.hash(&new)?;
    store.change_password(principal.user().id, &hash, Some(session_id))
}

/// A credential that passed every check that needs no database (the key's checksum, the
/// token's shape); only its hash is kept. Made by [`check_credential`].
#[derive(Debug, Clone)]
pub struct CheckedCredential(Checked);

#[derive(Debug, Clone)]
enum Checked {
    Key(String),
    Session(String),
    /// An admin token's hash, whether the request may change something, and its route.
    AdminToken {
        hash: String,
        writes: bool,
        route: String,
    },
}

/// A credential as the client presented it.
#[derive(Debug, Clone, Copy)]
pub enum Presented<'a> {
    Bearer(&'a str),
    SessionToken(&'a str),
    /// A Bearer `gca_` admin token (decision 0036): `admin_route` when the request is for an
    /// `/admin/**` route (the only place it is a credential), `writes` when its method may
    /// change something, `route` the method and path for the audit line.
    AdminToken {
        raw: &'a str,
        admin_route: bool,
        writes: bool,
        route: &'a str,
    },
}

/// Checks a presented credential's shape without the database: a made-up key fails its
/// checksum here and costs no query (`invalid_api_key`; `unauthenticated` for a token).
pub fn check_credential(
    codec: &dyn CredentialCodec,
    presented: Presented<'_>,
) -> DomainResult<CheckedCredential> {
    match presented {
        Presented::Bearer(raw) => codec
            .api_key_hash(raw)
            .map(|h| CheckedCredential(Checked::Key(h)))
            .ok_or(DomainError::InvalidApiKey),
        Presented::SessionToken(raw) => codec
            .session_hash(raw)
            .map(|h| CheckedCredential(Checked::Session(h)))
            .ok_or(DomainError::Unauthenticated),
        Presented::AdminToken {
            raw,
            admin_route,
            writes,
            route,
        } => codec
            .admin_token_hash(raw)
            .filter(|_| admin_route)
            .map(|hash| {
                CheckedCredential(Checked::AdminToken {
                    hash,
                    writes,
                    route: route.to_owned(),
                })
            })
            .ok_or(DomainError::InvalidApiKey),
    }
}

/// Turns a checked credential into a `Principal`: the domain's one way to make one.
pub fn authenticate<P: SessionRepo + ApiKeyRepo + crate::ports::AdminTokenRepo + ?Sized>(
    store: &P,
    policy: &AccountPolicy,
    checked: &CheckedCredential,
    now: DateTime<Utc>,
) -> DomainResult<Principal> {
    match &checked.0 {
        Checked::Key(hash) => authenticate_key(store, policy, hash, now),
        Checked::Session(hash) => authenticate_session(store, policy, hash, now),
        Checked::AdminToken {
            hash,
            writes,
            route,
        } => crate::services::admin_tokens::authenticate(store, policy, hash, *writes, route, now),
    }
}

/// Signs in: checks the password under the attempt limit and opens a session with the hash
/// of a fresh token. Returns the user and its tenant.
#[allow(clippy::too_many_arguments)]
pub fn sign_in<P: UserRepo + TenantRepo + SessionRepo + SigninThrottleRepo + ?Sized>(
    store: &P,
    hasher: &dyn PasswordHasher,
    policy: &AccountPolicy,
    email: &str,
    password: &str,
    token_hash: String,
    meta: &ClientMeta,
    now: DateTime<Utc>,
) -> DomainResult<(User, Option<crate::model::Tenant>)> {
    let user = verify_signin(store, hasher, policy, email, password, now)?;
    open_session(store, policy, &user, token_hash, meta, now)?;
    let tenant = match user.tenant_id {
        Some(id) => store.find_tenant(id)?,
        None => None,
    };
    Ok((user, tenant))
}

/// Signs up an unassigned member (when sign-up is open) and opens its first session.
#[allow(clippy::too_many_arguments)]
pub fn sign_up<P: UserRepo + TenantRepo + SessionRepo + ?Sized>(
    store: &P,
    hasher: &dyn PasswordHasher,
    policy: &AccountPolicy,
    open: bool,
    signup: &Signup,
    token_hash: String,
    meta: &ClientMeta,
    now: DateTime<Utc>,
) -> DomainResult<User> {
    if !open {
        return Err(DomainError::SignupDisabled);
    }
    let user = create_account(store, hasher, signup, Role::Member, None, now)?;
    open_session(store, policy, &user, token_hash, meta, now)?;
    Ok(user)
}

/// The caller's own sessions, newest first (sessions only).
pub fn list_sessions<P: SessionRepo + ?Sized>(
    store: &P,
    principal: &Principal,
) -> DomainResult<Vec<Session>> {
    principal.require_session()?;
    store.list_sessions(principal.user().id)
}

/// Revokes one of the caller's sessions (`None`: every one but the current session).
pub fn revoke_sessions<P: SessionRepo + ?Sized>(
    store: &P,
    principal: &Principal,
    only: Option<uuid::Uuid>,
) -> DomainResult<()> {
    let current = principal.require_session()?;
    let user_id = principal.user().id;
    match only {
        Some(id) if !store.delete_session(user_id, id)? => Err(DomainError::NotFound("session")),
        Some(_) => Ok(()),
        None => store.delete_other_sessions(user_id, current).map(|_| ()),
    }
}

/// Ends the caller's current session.
pub fn sign_out<P: SessionRepo + ?Sized>(store: &P, principal: &Principal) -> DomainResult<()> {
    let current = principal.require_session()?;
    store.delete_session(principal.user().id, current)?;
    Ok(())
}

/// Renames the caller (sessions only).
pub fn rename<P: UserRepo + ?Sized>(
    store: &P,
    principal: &Principal,
    name: Option<&str>,
) -> DomainResult<User> {
    principal.require_session()?;
    let name = name.map(person_name).transpose()?;
    store
        .rename_user(principal.user().id, name.as_deref())?
        .ok_or(DomainError::Unauthenticated)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

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
        assert!(Signup::parse("ann@example.com", "quiet-lemon-harbour".into(), "Ann").is_ok());
        let e = Signup::parse("nope", "quiet-lemon-harbour".into(), "Ann").unwrap_err();
        assert!(matches!(e, DomainError::Validation { ref field, .. } if field == "email"));
        let e = Signup::parse("ann@example.com", "short".into(), "Ann").unwrap_err();
        assert!(matches!(e, DomainError::Validation { ref field, .. } if field == "password"));
        let e = Signup::parse("ann@example.com", "quiet-lemon-harbour".into(), " ").unwrap_err();
        assert!(matches!(e, DomainError::Validation { ref field, .. } if field == "name"));
    }

    use crate::fakes::Fake;
    use crate::policy::access::tests::code;

    struct Plain;

    impl PasswordHasher for Plain {
        fn hash(&self, password: &Password) -> DomainResult<String> {
            Ok(format!("h:{}", password.expose()))
        }
        fn verify(&self, password: &str, hash: &str) -> bool {
            hash == format!("h:{password}")
        }
        fn dummy_hash(&self) -> &str {
            "h:\u{0}"
        }
    }

    fn ann(store: &Fake) -> User {
        let mut user =
            crate::policy::access::tests::user(Role::Member, crate::model::Status::Active, None);
        user.password_hash = "h:right-password".into();
        store.users.lock().unwrap().push(user.clone());
        user
    }

    /// Ann's sign-in with her right password at `at`.
    fn ann_signs_in(store: &Fake, policy: &AccountPolicy, at: DateTime<Utc>) -> DomainResult<User> {
        verify_signin(
            store,
            &Plain,
            policy,
            "ann@example.com",
            "right-password",
            at,
        )
    }

    /// Ann, signed in as `p`, changes her password to a good one, giving `current`.
    fn ann_changes_password(
        store: &Fake,
        policy: &AccountPolicy,
        p: &Principal,
        current: &str,
        now: DateTime<Utc>,
    ) -> DomainResult<()> {
        change_password(
            store,
            &Plain,
            policy,
            p,
            current,
            "quiet-lemon-harbour".into(),
            now,
        )
    }

    #[test]
    fn the_sixth_check_in_the_window_is_refused_before_the_password_is_checked() {
        let store = Fake::default();
        ann(&store);
        let policy = AccountPolicy::default();
        let t0 = Utc::now();
        for i in 0..5 {
            let at = t0 + Duration::minutes(i);
            let e = verify_signin(&store, &Plain, &policy, "Ann@Example.com", "wrong", at);
            assert_eq!(e.unwrap_err().code(), "invalid_credentials");
        }
        // Even the right password is not checked now; Retry-After counts from the oldest.
        let at = t0 + Duration::minutes(5);
        match ann_signs_in(&store, &policy, at) {
            Err(DomainError::TooManyAttempts { retry_after_secs }) => {
                assert_eq!(retry_after_secs, 10 * 60)
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(store.attempts.lock().unwrap().len(), 5);
        // Once the oldest attempt leaves the window, one more check is admitted; a right
        // password forgets every attempt.
        let later = t0 + Duration::minutes(15) + Duration::seconds(1);
        assert!(ann_signs_in(&store, &policy, later).is_ok());
        assert!(store.attempts.lock().unwrap().is_empty());
    }

    #[test]
    fn one_accounts_failures_do_not_lock_another() {
        let store = Fake::default();
        ann(&store);
        let policy = AccountPolicy::default();
        let t0 = Utc::now();
        for _ in 0..5 {
            let e = verify_signin(&store, &Plain, &policy, "mallory@example.com", "x", t0);
            assert_eq!(e.unwrap_err().code(), "invalid_credentials");
        }
        assert_eq!(
            verify_signin(&store, &Plain, &policy, "mallory@example.com", "x", t0)
                .unwrap_err()
                .code(),
            "too_many_attempts"
        );
        assert!(ann_signs_in(&store, &policy, t0).is_ok());
        assert_eq!(throttle_key("  Ann@Example.COM "), "ann@example.com");
    }

    fn signed_in(user: User) -> Principal {
        Principal::new(
            user,
            None,
            Credential::Session {
                session_id: new_id(),
                shadow: None,
            },
        )
    }

    #[test]
    fn change_password_counts_toward_the_same_limit() {
        let store = Fake::default();
        let user = ann(&store);
        let p = signed_in(user);
        let policy = AccountPolicy::default();
        let now = Utc::now();
        for _ in 0..5 {
            let e = ann_changes_password(&store, &policy, &p, "wrong", now);
            assert_eq!(e.unwrap_err().code(), "validation_failed");
        }
        let e = ann_changes_password(&store, &policy, &p, "right-password", now);
        assert_eq!(e.unwrap_err().code(), "too_many_attempts");
        assert_eq!(*store.passwords_changed.lock().unwrap(), 0);
        // A locked sign-in locks change-password too, and the other way round: one count.
        let e = ann_signs_in(&store, &policy, now);
        assert_eq!(e.unwrap_err().code(), "too_many_attempts");
    }

    #[test]
    fn a_right_current_password_changes_it() {
        let store = Fake::default();
        let user = ann(&store);
        let p = signed_in(user);
        let policy = AccountPolicy::default();
        ann_changes_password(&store, &policy, &p, "right-password", Utc::now()).unwrap();
        assert_eq!(*store.passwords_changed.lock().unwrap(), 1);
        assert!(store.attempts.lock().unwrap().is_empty());
    }

    // Sessions: the absolute expiry and the idle limit, each on its own, at the boundary.

    fn policy() -> AccountPolicy {
        AccountPolicy::default()
    }

    /// A session of `user` stored with token hash `tok`, seen at `last_seen`, expiring at
    /// `expires`.
    fn stored_session(
        store: &Fake,
        user: &User,
        last_seen: DateTime<Utc>,
        expires: DateTime<Utc>,
    ) -> Session {
        let session = Session {
            id: new_id(),
            user_id: user.id,
            token_hash: "tok".into(),
            created_at: last_seen,
            last_seen_at: last_seen,
            expires_at: expires,
            user_agent: String::new(),
            ip: String::new(),
            shadow_tenant_id: None,
            shadow_since: None,
        };
        store.sessions.lock().unwrap().push(session.clone());
        session
    }

    fn session_code(store: &Fake, now: DateTime<Utc>) -> String {
        code(authenticate_session(store, &policy(), "tok", now))
    }

    #[test]
    fn a_new_session_lasts_the_absolute_lifetime() {
        let store = Fake::default();
        let user = ann(&store);
        let now = Utc::now();
        let s = open_session(
            &store,
            &policy(),
            &user,
            "tok".into(),
            &ClientMeta::default(),
            now,
        )
        .unwrap();
        assert_eq!(s.expires_at, now + Duration::days(30));
        // Kept alive by use, it works until just before its absolute expiry.
        let mut at = now;
        while at + Duration::hours(12) < s.expires_at {
            at += Duration::hours(12);
            assert_eq!(session_code(&store, at), "ok");
        }
        assert_eq!(session_code(&store, s.expires_at), "unauthenticated");
    }

    /// A session seen at `seen` and expiring at `expires` is refused at `now` and an hour
    /// later, and works a second before `now`.
    fn assert_refused_from(now: DateTime<Utc>, seen: DateTime<Utc>, expires: DateTime<Utc>) {
        let store = Fake::default();
        let user = ann(&store);
        stored_session(&store, &user, seen, expires);
        assert_eq!(session_code(&store, now), "unauthenticated");
        assert_eq!(
            session_code(&store, now + Duration::hours(1)),
            "unauthenticated"
        );
        assert_eq!(session_code(&store, now - Duration::seconds(1)), "ok");
    }

    #[test]
    fn a_session_is_refused_from_its_absolute_expiry_on() {
        let now = Utc::now();
        // Seen a minute ago, so only the absolute expiry decides.
        assert_refused_from(now, now - Duration::minutes(1), now);
    }

    #[test]
    fn a_session_is_refused_from_its_idle_limit_on() {
        let now = Utc::now();
        // Far from its absolute expiry, so only the idle limit decides.
        assert_refused_from(now, now - Duration::hours(24), now + Duration::days(20));
    }

    #[test]
    fn a_session_is_touched_once_per_touch_interval() {
        let store = Fake::default();
        let user = ann(&store);
        let seen = Utc::now();
        let s = stored_session(&store, &user, seen, seen + Duration::days(1));
        let before = seen + Duration::minutes(1) - Duration::seconds(1);
        assert_eq!(session_code(&store, before), "ok");
        assert!(store.touched.lock().unwrap().is_empty());
        let at = seen + Duration::minutes(1);
        assert_eq!(session_code(&store, at), "ok");
        assert_eq!(*store.touched.lock().unwrap(), vec![(s.id, at)]);
    }

    fn in_shadow_view(
        store: &Fake,
        role: Role,
    ) -> (Principal, crate::model::Tenant, DateTime<Utc>) {
        let t = store.stored_tenant(crate::model::Status::Active);
        let mut user = crate::policy::access::tests::user(role, crate::model::Status::Active, None);
        user.email = Email::parse("email", "root@example.com").unwrap();
        store.users.lock().unwrap().push(user.clone());
        let now = Utc::now();
        let since = now - Duration::minutes(5);
        let mut s = stored_session(store, &user, now, now + Duration::days(1));
        s.shadow_tenant_id = Some(t.id);
        s.shadow_since = Some(since);
        *store.sessions.lock().unwrap() = vec![s];
        let p = authenticate_session(store, &policy(), "tok", now).unwrap();
        (p, t, since)
    }

    #[test]
    fn a_platform_admins_session_keeps_its_shadow_view() {
        let store = Fake::default();
        let (p, t, since) = in_shadow_view(&store, Role::PlatformAdmin);
        assert_eq!(p.shadow(), Some(&(t.clone(), since)));
        assert_eq!(
            p.read_scope(crate::model::workspace::KeyScope::WorkspaceRead)
                .unwrap()
                .tenant_id(),
            t.id
        );
    }

    #[test]
    fn a_members_session_carries_no_shadow_view() {
        // A demoted admin's session may still name a Shadow tenant: it is dropped.
        let store = Fake::default();
        let (p, _, _) = in_shadow_view(&store, Role::Member);
        assert!(matches!(
            p.credential(),
            Credential::Session { shadow: None, .. }
        ));
        assert_eq!(
            p.read_scope(crate::model::workspace::KeyScope::WorkspaceRead)
                .unwrap_err()
                .code(),
            "member_unassigned"
        );
    }

    // Keys: revoked, expired and moved members lose them; unassigned members keep them.

    fn stored_key(
        store: &Fake,
        user: &User,
        tenant_id: uuid::Uuid,
    ) -> crate::model::workspace::ApiKey {
        let key = crate::model::workspace::ApiKey {
            id: new_id(),
            tenant_id,
            user_id: user.id,
            name: "ci".into(),
            scopes: vec![crate::model::workspace::KeyScope::WorkspaceRead],
            hint: "abcd".into(),
            key_hash: "kh".into(),
            created_at: Utc::now(),
            last_used_at: None,
            expires_at: None,
            revoked_at: None,
            limits: crate::policy::quota::KeyLimits::default(),
        };
        store.api_keys.lock().unwrap().push(key.clone());
        key
    }

    fn key_code(store: &Fake, now: DateTime<Utc>) -> String {
        code(authenticate_key(store, &policy(), "kh", now))
    }

    /// A store holding a member of a tenant and one key of theirs.
    fn member_with_key() -> (
        Fake,
        User,
        crate::model::Tenant,
        crate::model::workspace::ApiKey,
    ) {
        let store = Fake::default();
        let t = store.stored_tenant(crate::model::Status::Active);
        let user = crate::policy::access::tests::user(
            Role::Member,
            crate::model::Status::Active,
            Some(&t),
        );
        store.users.lock().unwrap().push(user.clone());
        let key = stored_key(&store, &user, t.id);
        (store, user, t, key)
    }

    #[test]
    fn a_members_usable_key_of_their_tenant_authenticates() {
        let (store, user, t, _) = member_with_key();
        let p = authenticate_key(&store, &policy(), "kh", Utc::now()).unwrap();
        assert_eq!(p.user().id, user.id);
        assert_eq!(p.tenant().map(|t| t.id), Some(t.id));
        assert!(p.session_id().is_none());
        assert_eq!(key_code(&store, Utc::now()), "ok");
        assert_eq!(key_code(&Fake::default(), Utc::now()), "invalid_api_key");
    }

    #[test]
    fn a_revoked_key_is_refused() {
        let (store, ..) = member_with_key();
        let now = Utc::now();
        store.api_keys.lock().unwrap()[0].revoked_at = Some(now - Duration::seconds(1));
        assert_eq!(key_code(&store, now), "invalid_api_key");
        assert!(store.touched.lock().unwrap().is_empty());
    }

    #[test]
    fn a_key_is_refused_from_its_expiry_on() {
        let (store, ..) = member_with_key();
        let now = Utc::now();
        store.api_keys.lock().unwrap()[0].expires_at = Some(now);
        assert_eq!(key_code(&store, now), "invalid_api_key");
        assert_eq!(key_code(&store, now - Duration::seconds(1)), "ok");
    }

    #[test]
    fn a_member_moved_to_another_tenant_loses_the_key() {
        let (store, ..) = member_with_key();
        let other = store.stored_tenant(crate::model::Status::Active);
        store.users.lock().unwrap()[0].tenant_id = Some(other.id);
        assert_eq!(key_code(&store, Utc::now()), "invalid_api_key");
    }

    #[test]
    fn an_unassigned_member_keeps_a_valid_key_that_the_scopes_refuse() {
        let (store, ..) = member_with_key();
        store.users.lock().unwrap()[0].tenant_id = None;
        let p = authenticate_key(&store, &policy(), "kh", Utc::now()).unwrap();
        assert_eq!(
            p.read_scope(crate::model::workspace::KeyScope::WorkspaceRead)
                .unwrap_err()
                .code(),
            "member_unassigned"
        );
    }

    #[test]
    fn a_key_is_touched_when_never_used_then_once_per_touch_interval() {
        let (store, _, _, key) = member_with_key();
        let t0 = Utc::now();
        assert_eq!(key_code(&store, t0), "ok");
        assert_eq!(*store.touched.lock().unwrap(), vec![(key.id, t0)]);
        let early = t0 + Duration::minutes(1) - Duration::seconds(1);
        assert_eq!(key_code(&store, early), "ok");
        assert_eq!(store.touched.lock().unwrap().len(), 1);
        let due = t0 + Duration::minutes(1);
        assert_eq!(key_code(&store, due), "ok");
        assert_eq!(
            *store.touched.lock().unwrap(),
            vec![(key.id, t0), (key.id, due)]
        );
    }

    // Sign-up and session revocation.

    #[test]
    fn sign_up_is_refused_when_closed_and_opens_a_session_when_open() {
        let store = Fake::default();
        let signup = Signup::parse("bob@example.com", "quiet-lemon-harbour".into(), "Bob").unwrap();
        let meta = ClientMeta::default();
        let now = Utc::now();
        let e = sign_up(
            &store,
            &Plain,
            &policy(),
            false,
            &signup,
            "tok".into(),
            &meta,
            now,
        );
        assert_eq!(e.unwrap_err().code(), "signup_disabled");
        assert!(store.users.lock().unwrap().is_empty());
        assert!(store.sessions.lock().unwrap().is_empty());
        let user = sign_up(
            &store,
            &Plain,
            &policy(),
            true,
            &signup,
            "tok".into(),
            &meta,
            now,
        )
        .unwrap();
        assert_eq!(user.tenant_id, None);
        assert_eq!(user.role, Role::Member);
        assert_eq!(session_code(&store, now), "ok");
    }

    #[test]
    fn revoking_a_session_needs_it_to_be_the_callers() {
        let store = Fake::default();
        let user = ann(&store);
        let now = Utc::now();
        let mine = stored_session(&store, &user, now, now + Duration::days(1));
        let mut other = mine.clone();
        other.id = new_id();
        other.user_id = new_id();
        store.sessions.lock().unwrap().push(other.clone());
        let p = signed_in(user);
        let e = revoke_sessions(&store, &p, Some(other.id)).unwrap_err();
        assert!(matches!(e, DomainError::NotFound("session")));
        assert_eq!(store.sessions.lock().unwrap().len(), 2);
        revoke_sessions(&store, &p, Some(mine.id)).unwrap();
        assert_eq!(*store.sessions.lock().unwrap(), vec![other.clone()]);
        let e = revoke_sessions(&store, &p, Some(mine.id)).unwrap_err();
        assert!(matches!(e, DomainError::NotFound("session")));
    }
}
