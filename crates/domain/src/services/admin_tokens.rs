//! Admin API tokens (decision 0036): a platform admin's named, expiring, revocable `gca_`
//! token for scripts, accepted as `Authorization: Bearer` on `/admin/**` only.
//!
//! A token acts for the admin who made it and is judged as that admin on every request: the
//! admin is loaded with the token, so a suspended, demoted or deleted admin's tokens are refused
//! at once (403 `member_suspended` / `admin_required`, 401 when the admin is gone). It becomes a
//! [`Principal`] with [`Credential::AdminToken`], whose [`Principal::admin_scope`] is the same
//! `AdminScope` a session gets; an `admin:read` token gets it only for requests that change
//! nothing (403 `insufficient_scope` otherwise). Managing tokens needs a session: a token can
//! neither make, list nor revoke tokens.
//!
//! Every use is recorded before anything else is decided ([`AdminTokenRepo::record_admin_token_use`]:
//! the admin, the token's id and name, the method and route), refused uses included;
//! `last_used_at` is written at most once per `AccountPolicy::touch_interval` (a minute).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::new_id;
use crate::page::{Page, PageRequest};
use crate::policy::access::{Credential, Principal};
use crate::policy::accounts::AccountPolicy;
pub use crate::policy::admin_tokens::{AdminToken, AdminTokenScope, TOKEN_PREFIX};
use crate::policy::admin_tokens::{AdminTokenUse, NewAdminToken};
use crate::ports::{AdminTokenRepo, CredentialCodec};
use crate::secret::SecretString;
use crate::values::{expiry, text};

/// A new token for the caller's session: the stored token and its secret, shown once.
pub struct CreatedAdminToken {
    pub token: AdminToken,
    pub secret: SecretString,
}

/// The proof for managing tokens: an active platform admin's own session (never a token, a
/// key or a Shadow view's borrowed rights). Returns the admin's id.
fn token_manager(principal: &Principal) -> DomainResult<Uuid> {
    principal.require_session()?;
    principal.admin_scope()?;
    Ok(principal.user().id)
}

/// What a caller asks for: `scope` is `admin` or `admin:read`, `expires_at` an RFC 3339 time
/// in the future (absent: the token does not expire).
#[derive(Debug, Clone)]
pub struct AdminTokenRequest {
    pub name: String,
    pub scope: String,
    pub expires_at: Option<String>,
}

/// Makes a token for the calling admin (a session only).
pub fn create<P: AdminTokenRepo + ?Sized>(
    store: &P,
    codec: &dyn CredentialCodec,
    principal: &Principal,
    request: &AdminTokenRequest,
    now: DateTime<Utc>,
) -> DomainResult<CreatedAdminToken> {
    let user_id = token_manager(principal)?;
    let name = text("name", &request.name, 1, 100)?;
    let scope = AdminTokenScope::parse("scope", &request.scope)?;
    let expires_at = expiry(request.expires_at.as_deref(), now)?;
    let (secret, token_hash) = codec.new_admin_token();
    let token = store.insert_admin_token(&NewAdminToken {
        token: AdminToken {
            id: new_id(),
            user_id,
            name,
            scope,
            created_at: now,
            expires_at,
            last_used_at: None,
        },
        token_hash,
    })?;
    Ok(CreatedAdminToken { token, secret })
}

/// The calling admin's tokens, newest first.
pub fn list<P: AdminTokenRepo + ?Sized>(
    store: &P,
    principal: &Principal,
    page: &PageRequest,
) -> DomainResult<Page<AdminToken>> {
    let user_id = token_manager(principal)?;
    store.list_admin_tokens(user_id, page)
}

/// Revokes one of the calling admin's tokens: it is refused (401) from the next request on.
pub fn revoke<P: AdminTokenRepo + ?Sized>(
    store: &P,
    principal: &Principal,
    id: Uuid,
) -> DomainResult<()> {
    let user_id = token_manager(principal)?;
    if store.delete_admin_token(user_id, id)? {
        Ok(())
    } else {
        Err(DomainError::NotFound("admin token"))
    }
}

/// Turns a token's hash into a `Principal`, recording the use first. An unknown (revoked, or
/// its admin deleted) or expired token is refused (401 `invalid_api_key`); the admin's state
/// and the token's scope are judged by [`Principal::admin_scope`], as for a session.
pub(crate) fn authenticate<P: AdminTokenRepo + ?Sized>(
    store: &P,
    policy: &AccountPolicy,
    token_hash: &str,
    writes: bool,
    route: &str,
    now: DateTime<Utc>,
) -> DomainResult<Principal> {
    let ctx = store
        .admin_token_context(token_hash)?
        .ok_or(DomainError::InvalidApiKey)?;
    if !ctx.token.is_usable_at(now) {
        return Err(DomainError::InvalidApiKey);
    }
    let touch = policy.touch_due(ctx.token.last_used_at, now);
    store.record_admin_token_use(
        &AdminTokenUse {
            id: new_id(),
            at: now,
            admin_id: ctx.user.id,
            token_id: ctx.token.id,
            token_name: ctx.token.name.clone(),
            route: route.chars().take(300).collect(),
        },
        touch,
    )?;
    Ok(Principal::new(
        ctx.user,
        ctx.tenant,
        Credential::AdminToken {
            token_id: ctx.token.id,
            name: ctx.token.name,
            scope: ctx.token.scope,
            writes,
        },
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use chrono::Duration;

    use super::*;
    use crate::fakes::FakeCodec;
    use crate::model::workspace::ActorKind;
    use crate::model::{Role, Status, User};
    use crate::policy::access::tests::{answers, code, session, user};
    use crate::policy::admin_tokens::AdminTokenContext;
    use crate::services::accounts::{check_credential, Presented};

    /// Tokens in memory, each with its hash and its admin.
    #[derive(Default)]
    struct Tokens {
        rows: Mutex<Vec<(NewAdminToken, User)>>,
        uses: Mutex<Vec<(AdminTokenUse, bool)>>,
    }

    impl Tokens {
        fn holding(token: AdminToken, hash: &str, admin: User) -> Self {
            let tokens = Self::default();
            tokens.rows.lock().unwrap().push((
                NewAdminToken {
                    token,
                    token_hash: hash.into(),
                },
                admin,
            ));
            tokens
        }
    }

    impl AdminTokenRepo for Tokens {
        fn insert_admin_token(&self, token: &NewAdminToken) -> DomainResult<AdminToken> {
            let admin = user(Role::PlatformAdmin, Status::Active, None);
            self.rows.lock().unwrap().push((token.clone(), admin));
            Ok(token.token.clone())
        }
        fn list_admin_tokens(
            &self,
            user_id: Uuid,
            page: &PageRequest,
        ) -> DomainResult<Page<AdminToken>> {
            let mut mine: Vec<AdminToken> = self
                .rows
                .lock()
                .unwrap()
                .iter()
                .filter(|(t, _)| t.token.user_id == user_id)
                .map(|(t, _)| t.token.clone())
                .collect();
            mine.reverse();
            Ok(page.finish(mine, |t| t.id))
        }
        fn delete_admin_token(&self, user_id: Uuid, id: Uuid) -> DomainResult<bool> {
            let mut rows = self.rows.lock().unwrap();
            let before = rows.len();
            rows.retain(|(t, _)| !(t.token.id == id && t.token.user_id == user_id));
            Ok(rows.len() < before)
        }
        fn admin_token_context(&self, hash: &str) -> DomainResult<Option<AdminTokenContext>> {
            Ok(self
                .rows
                .lock()
                .unwrap()
                .iter()
                .find(|(t, _)| t.token_hash == hash)
                .map(|(t, admin)| AdminTokenContext {
                    token: t.token.clone(),
                    user: admin.clone(),
                    tenant: None,
                }))
        }
        fn record_admin_token_use(&self, used: &AdminTokenUse, touch: bool) -> DomainResult<()> {
            self.uses.lock().unwrap().push((used.clone(), touch));
            Ok(())
        }
    }

    fn token(admin: &User, scope: AdminTokenScope, now: DateTime<Utc>) -> AdminToken {
        AdminToken {
            id: new_id(),
            user_id: admin.id,
            name: "ci".into(),
            scope,
            created_at: now,
            expires_at: None,
            last_used_at: None,
        }
    }

    fn principal(admin: User, scope: AdminTokenScope, writes: bool) -> Principal {
        let now = Utc::now();
        let store = Tokens::holding(token(&admin, scope, now), "h", admin);
        authenticate(
            &store,
            &AccountPolicy::default(),
            "h",
            writes,
            "GET /x",
            now,
        )
        .unwrap()
    }

    #[test]
    fn a_live_token_acts_as_its_admin_and_every_use_is_recorded() {
        let now = Utc::now();
        let admin = user(Role::PlatformAdmin, Status::Active, None);
        let t = token(&admin, AdminTokenScope::Admin, now);
        let store = Tokens::holding(t.clone(), "h", admin.clone());
        let policy = AccountPolicy::default();
        let p = authenticate(
            &store,
            &policy,
            "h",
            true,
            "POST /api/v1/admin/tenants",
            now,
        )
        .unwrap();
        assert_eq!(p.user().id, admin.id);
        assert!(p.session_id().is_none());
        let scope = p.admin_scope().unwrap();
        assert_eq!(scope.admin_id(), admin.id);
        assert_eq!(scope.actor().kind, ActorKind::Admin);
        assert_eq!(scope.actor().label, "ann@example.com (admin token ci)");
        assert_eq!(p.actor().label, scope.actor().label);
        let uses = store.uses.lock().unwrap().clone();
        assert_eq!(uses.len(), 1);
        let (used, touched) = &uses[0];
        assert!(*touched, "a token never used gets its last use");
        assert_eq!(
            (
                used.admin_id,
                used.token_id,
                used.token_name.as_str(),
                used.at
            ),
            (admin.id, t.id, "ci", now)
        );
        assert_eq!(used.route, "POST /api/v1/admin/tenants");
    }

    #[test]
    fn last_use_is_written_at_most_once_a_minute_but_every_use_is_recorded() {
        let now = Utc::now();
        let admin = user(Role::PlatformAdmin, Status::Active, None);
        let policy = AccountPolicy::default();
        for (ago, touch) in [
            (Duration::seconds(59), false),
            (Duration::seconds(60), true),
        ] {
            let mut t = token(&admin, AdminTokenScope::Admin, now);
            t.last_used_at = Some(now - ago);
            let store = Tokens::holding(t, "h", admin.clone());
            authenticate(&store, &policy, "h", false, "GET /x", now).unwrap();
            assert_eq!(store.uses.lock().unwrap()[0].1, touch, "{ago}");
        }
    }

    #[test]
    fn unknown_and_expired_tokens_are_refused_unrecorded() {
        let now = Utc::now();
        let admin = user(Role::PlatformAdmin, Status::Active, None);
        let policy = AccountPolicy::default();
        let mut t = token(&admin, AdminTokenScope::Admin, now);
        t.expires_at = Some(now);
        let store = Tokens::holding(t.clone(), "h", admin.clone());
        let err = authenticate(&store, &policy, "h", false, "GET /x", now).unwrap_err();
        assert_eq!(err.code(), "invalid_api_key");
        let err = authenticate(&store, &policy, "other", false, "GET /x", now).unwrap_err();
        assert_eq!(err.code(), "invalid_api_key");
        assert!(store.uses.lock().unwrap().is_empty());
        // A moment before expiry it still works.
        t.expires_at = Some(now + Duration::milliseconds(1));
        let store = Tokens::holding(t, "h", admin);
        assert!(authenticate(&store, &policy, "h", false, "GET /x", now).is_ok());
    }

    #[test]
    fn a_token_obeys_its_admins_state_and_its_scope() {
        let active = || user(Role::PlatformAdmin, Status::Active, None);
        let code = |p: Principal| p.admin_scope().map(|_| ()).map_err(|e| e.code().as_str());
        assert_eq!(
            code(principal(active(), AdminTokenScope::Admin, true)),
            Ok(())
        );
        assert_eq!(
            code(principal(active(), AdminTokenScope::AdminRead, false)),
            Ok(())
        );
        assert_eq!(
            code(principal(active(), AdminTokenScope::AdminRead, true)),
            Err("insufficient_scope")
        );
        let suspended = user(Role::PlatformAdmin, Status::Suspended, None);
        for (scope, writes) in [
            (AdminTokenScope::Admin, false),
            (AdminTokenScope::AdminRead, true),
        ] {
            assert_eq!(
                code(principal(suspended.clone(), scope, writes)),
                Err("member_suspended")
            );
        }
        let demoted = user(Role::Member, Status::Active, None);
        assert_eq!(
            code(principal(demoted, AdminTokenScope::Admin, false)),
            Err("admin_required")
        );
    }

    #[test]
    fn a_token_never_reaches_workspace_data_or_manages_tokens() {
        let p = principal(
            user(Role::PlatformAdmin, Status::Active, None),
            AdminTokenScope::Admin,
            true,
        );
        let (token, session) = ("invalid_api_key", "session_required");
        assert_eq!(answers(&p), [token, token, session, "ok"]);
        assert_eq!(code(p.active_member_tenant()), token);
        assert_eq!(code(p.require_session()), session);
        assert!(p.shadow().is_none());
        let store = Tokens::default();
        let request = AdminTokenRequest {
            name: "more".into(),
            scope: "admin".into(),
            expires_at: None,
        };
        assert_eq!(
            code(create(&store, &FakeCodec, &p, &request, Utc::now())),
            session
        );
        let page = PageRequest::new(None, None).unwrap();
        assert_eq!(code(list(&store, &p, &page)), session);
        assert_eq!(code(revoke(&store, &p, new_id())), session);
        assert!(store.rows.lock().unwrap().is_empty());
    }

    #[test]
    fn an_admins_session_makes_lists_and_revokes_its_own_tokens() {
        let now = Utc::now();
        let admin = session(user(Role::PlatformAdmin, Status::Active, None), None, None);
        let store = Tokens::default();
        let request = |scope: &str, expires: Option<&str>| AdminTokenRequest {
            name: " deploy ".into(),
            scope: scope.into(),
            expires_at: expires.map(str::to_owned),
        };
        let made = create(
            &store,
            &FakeCodec,
            &admin,
            &request("admin:read", Some("2999-01-01T00:00:00Z")),
            now,
        )
        .unwrap();
        assert!(made.secret.expose().starts_with(TOKEN_PREFIX));
        assert_eq!(made.token.user_id, admin.user().id);
        assert_eq!(made.token.scope, AdminTokenScope::AdminRead);
        assert_eq!(made.token.name, "deploy");
        assert!(made.token.expires_at.is_some());
        let stored = store.rows.lock().unwrap()[0].0.token_hash.clone();
        assert_eq!(stored, FakeCodec::hash_of(made.secret.expose()));
        for (req, field) in [
            (request("root", None), "scope"),
            (request("admin", Some("2001-01-01T00:00:00Z")), "expires_at"),
            (request("admin", Some("soon")), "expires_at"),
            (
                AdminTokenRequest {
                    name: " ".into(),
                    ..request("admin", None)
                },
                "name",
            ),
        ] {
            let err = create(&store, &FakeCodec, &admin, &req, now).err().unwrap();
            assert_eq!(err.code(), "validation_failed");
            assert!(err.to_string().starts_with(field), "{err}");
        }
        let page = PageRequest::new(None, None).unwrap();
        let listed = list(&store, &admin, &page).unwrap();
        assert_eq!(listed.items.len(), 1);
        // Another admin neither sees nor revokes it.
        let other = session(user(Role::PlatformAdmin, Status::Active, None), None, None);
        assert!(list(&store, &other, &page).unwrap().items.is_empty());
        assert_eq!(
            revoke(&store, &other, made.token.id).unwrap_err().code(),
            "not_found"
        );
        revoke(&store, &admin, made.token.id).unwrap();
        assert_eq!(
            revoke(&store, &admin, made.token.id).unwrap_err().code(),
            "not_found"
        );
        // Members and suspended admins manage none.
        let member = session(user(Role::Member, Status::Active, None), None, None);
        assert_eq!(
            list(&store, &member, &page).unwrap_err().code(),
            "admin_required"
        );
        let suspended = session(
            user(Role::PlatformAdmin, Status::Suspended, None),
            None,
            None,
        );
        assert_eq!(
            create(&store, &FakeCodec, &suspended, &request("admin", None), now)
                .err()
                .unwrap()
                .code(),
            "member_suspended"
        );
    }

    #[test]
    fn a_token_is_a_credential_on_admin_routes_only() {
        let shown = |admin_route| Presented::AdminToken {
            raw: "gca_abc",
            admin_route,
            writes: false,
            route: "GET /x",
        };
        assert!(check_credential(&FakeCodec, shown(true)).is_ok());
        assert_eq!(
            check_credential(&FakeCodec, shown(false))
                .unwrap_err()
                .code(),
            "invalid_api_key"
        );
        let malformed = Presented::AdminToken {
            raw: "gc_abc",
            admin_route: true,
            writes: false,
            route: "GET /x",
        };
        assert_eq!(
            check_credential(&FakeCodec, malformed).unwrap_err().code(),
            "invalid_api_key"
        );
        assert_eq!(
            AdminTokenScope::parse("scope", "admin:read")
                .unwrap()
                .as_str(),
            "admin:read"
        );
        assert!(AdminTokenScope::Admin.allows_writes());
        assert!(!AdminTokenScope::AdminRead.allows_writes());
    }
}
