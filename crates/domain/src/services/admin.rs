//! Administration of tenants, users and tenant AI keys by platform admins.
//!
//! Every function starts from a `Principal` and asks it for an `AdminScope` (an active
//! platform admin's session) before it touches a port; every administration port method
//! takes that scope, so an operation without the check does not compile. The tenant and user
//! functions also accept the [`LocalOperator`](crate::policy::access::LocalOperator) of `gc-server admin` (any [`AdminAuthority`]),
//! so the command line applies the same rules as the API.

use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::{ActivityTarget, NewActivity};
use crate::model::{new_id, Role, Status, Tenant, TenantPatch, User, UserPatch};
use crate::page::{Page, PageRequest};
use crate::policy::access::{AdminAuthority, AdminScope, Principal};
use crate::policy::accounts::throttle_key;
pub use crate::policy::accounts::{person_name, tenant_name};
use crate::policy::ai_access::{ai_key_binding, AiAccess, AiKeyStatus, KeyVerdict, TenantAiKey};
use crate::ports::PasswordHasher;
use crate::ports::{
    AiKeyRepo, KeySealer, SessionRepo, ShadowChange, SigninThrottleRepo, TenantRepo, UserRepo,
};
use crate::secret::SecretString;
use crate::services::accounts::{create_account, Signup};
use crate::values::{text, Email, Password, Region};

/// A tenant with its AI access, as admins see it.
pub type TenantWithAccess = (Tenant, AiAccess);

fn with_access<P: AiKeyRepo + ?Sized>(store: &P, t: Tenant) -> DomainResult<TenantWithAccess> {
    let access = ai_access(store, &t)?;
    Ok((t, access))
}

pub fn list_tenants<P: TenantRepo + AiKeyRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    page: &PageRequest,
) -> DomainResult<Page<TenantWithAccess>> {
    let scope = admin.admin_scope()?;
    let page = store.list_tenants(&scope, page)?;
    let mut data = Vec::with_capacity(page.items.len());
    for t in page.items {
        data.push(with_access(store, t)?);
    }
    Ok(Page {
        items: data,
        next: page.next,
    })
}

/// One tenant with its AI access; `NotFound` when there is none with this id.
pub fn get_tenant<P: TenantRepo + AiKeyRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    id: Uuid,
) -> DomainResult<TenantWithAccess> {
    admin.admin_scope()?;
    let t = store
        .find_tenant(id)?
        .ok_or(DomainError::NotFound("tenant"))?;
    with_access(store, t)
}

pub fn create_tenant<P: TenantRepo + AiKeyRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    name: &str,
    region: Region,
    ai_enabled: bool,
    now: DateTime<Utc>,
) -> DomainResult<TenantWithAccess> {
    let scope = admin.admin_scope()?;
    let t = store.insert_tenant(
        &scope,
        &Tenant {
            id: new_id(),
            name: tenant_name(name)?,
            status: Status::Active,
            region,
            ai_enabled,
            created_at: now,
            limits: crate::policy::quota::TenantLimits::default(),
            allowed_models: None,
            ai_keys_version: 0,
        },
    )?;
    with_access(store, t)
}

pub fn update_tenant<P: TenantRepo + AiKeyRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    id: Uuid,
    patch: &TenantPatch,
) -> DomainResult<TenantWithAccess> {
    let scope = admin.admin_scope()?;
    let t = store
        .update_tenant(&scope, id, patch)?
        .ok_or(DomainError::NotFound("tenant"))?;
    with_access(store, t)
}

pub fn list_users<P: UserRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    tenant_id: Option<Uuid>,
    page: &PageRequest,
) -> DomainResult<Page<User>> {
    let scope = admin.admin_scope()?;
    store.list_users(&scope, tenant_id, page)
}

/// Creates an account with a role, optionally in a tenant.
pub fn create_user<P: UserRepo + TenantRepo + ?Sized>(
    store: &P,
    hasher: &dyn PasswordHasher,
    admin: &impl AdminAuthority,
    signup: &Signup,
    role: Role,
    tenant_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> DomainResult<User> {
    admin.admin_scope()?;
    create_account(store, hasher, signup, role, tenant_id, now)
}

pub fn update_user<P: UserRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    id: Uuid,
    patch: &UserPatch,
) -> DomainResult<User> {
    let scope = admin.admin_scope()?;
    store
        .update_user(&scope, id, patch)?
        .ok_or(DomainError::NotFound("user"))
}

/// How many times a move re-reads the member when a concurrent move got in between.
const MOVE_ATTEMPTS: usize = 3;

/// Assigns a member to a tenant, or with `None` unassigns it. Leaving a tenant revokes the
/// keys the member made there, with an `api_key.revoked` line (detail `membership_changed`)
/// in that tenant's feed, in the same transaction (decision record 0005).
pub fn assign_tenant<P: UserRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    id: Uuid,
    tenant_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> DomainResult<User> {
    let scope = admin.admin_scope()?;
    // `move_member` checks the new tenant inside its transaction (`NotFound("tenant")`).
    for _ in 0..MOVE_ATTEMPTS {
        let user = store.find_user(id)?.ok_or(DomainError::NotFound("user"))?;
        if user.tenant_id == tenant_id {
            return Ok(user);
        }
        let left = user.tenant_id.map(|from| {
            NewActivity::admin(
                &scope,
                from,
                now,
                "api_key.revoked",
                Some(ActivityTarget {
                    kind: "member".into(),
                    id: user.id,
                }),
                json!({"reason": "membership_changed", "member_email": user.email.as_str()}),
            )
        });
        match store.move_member(&scope, id, user.tenant_id, tenant_id, now, left.as_ref()) {
            Ok(Some(user)) => return Ok(user),
            Ok(None) => continue,
            Err(DomainError::NotFound("tenant")) => {
                return Err(DomainError::invalid("tenant_id", "no such tenant"))
            }
            Err(e) => return Err(e),
        }
    }
    Err(DomainError::Unavailable {
        retry_after_secs: 1,
    })
}

/// The account with this email (case-insensitive), for administration by email.
pub fn find_user_by_email<P: UserRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    email: &str,
) -> DomainResult<User> {
    admin.admin_scope()?;
    let email = Email::parse("email", email)?;
    store
        .find_user_by_email(&email)?
        .ok_or(DomainError::NotFound("user"))
}

/// Sets a new password for an account and revokes every session it has (in one
/// transaction); the password rules are those of sign-up. Forgets the account's failed
/// sign-in attempts, so the new password works at once.
pub fn reset_password<P: UserRepo + SigninThrottleRepo + ?Sized>(
    store: &P,
    hasher: &dyn PasswordHasher,
    admin: &impl AdminAuthority,
    id: Uuid,
    password: String,
) -> DomainResult<User> {
    admin.admin_scope()?;
    let user = store.find_user(id)?.ok_or(DomainError::NotFound("user"))?;
    let password = Password::parse_for("password", password, user.email.as_str())?;
    let hash = hasher.hash(&password)?;
    store.change_password(user.id, &hash, None)?;
    store.clear_failures(&throttle_key(user.email.as_str()))?;
    Ok(user)
}

/// The AI access of a tenant, computed from its keys.
pub fn ai_access<P: AiKeyRepo + ?Sized>(store: &P, tenant: &Tenant) -> DomainResult<AiAccess> {
    if !tenant.ai_enabled {
        return Ok(AiAccess::Disabled);
    }
    let keys = store.usable_ai_keys(tenant)?;
    Ok(AiAccess::of(tenant, &keys))
}

/// A validated new AI key, sealed, waiting for its first check against the gateway.
#[derive(Debug)]
pub struct NewAiKeyPlan {
    scope: AdminScope,
    key: TenantAiKey,
    secret: SecretString,
}

impl NewAiKeyPlan {
    pub fn region(&self) -> Region {
        self.key.region
    }

    pub fn secret(&self) -> &SecretString {
        &self.secret
    }
}

/// Checks and seals a new tenant AI key (not stored yet: it is probed first).
#[allow(clippy::too_many_arguments)]
pub fn plan_ai_key<P: TenantRepo + ?Sized>(
    store: &P,
    sealer: &dyn KeySealer,
    admin: &impl AdminAuthority,
    tenant_id: Uuid,
    region: &str,
    secret: &str,
    label: Option<&str>,
    chat_enabled: bool,
    now: DateTime<Utc>,
) -> DomainResult<NewAiKeyPlan> {
    let scope = admin.admin_scope()?;
    let region = Region::parse("region", region)?;
    let secret = secret.trim();
    if secret.is_empty()
        || secret.len() > 1024
        || secret.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(DomainError::invalid(
            "secret",
            "must be 1 to 1024 visible characters",
        ));
    }
    let label = text("label", label.unwrap_or(""), 0, 100)?;
    store
        .find_tenant(tenant_id)?
        .ok_or(DomainError::NotFound("tenant"))?;
    let id = new_id();
    let secret = SecretString::new(secret);
    let sealed = sealer.seal(secret.expose(), &ai_key_binding(tenant_id, id))?;
    Ok(NewAiKeyPlan {
        scope,
        key: TenantAiKey {
            id,
            tenant_id,
            region,
            label,
            hint: secret.hint(),
            sealed_secret: sealed,
            chat_enabled,
            status: AiKeyStatus::NotReady,
            status_reason: None,
            checked_at: Some(now),
            created_at: now,
        },
        secret,
    })
}

/// Stores a planned key with the status its first check gave.
pub fn store_ai_key<P: AiKeyRepo + ?Sized>(
    store: &P,
    plan: NewAiKeyPlan,
    status: AiKeyStatus,
    reason: Option<String>,
) -> DomainResult<TenantAiKey> {
    let mut key = plan.key;
    key.status = status;
    key.status_reason = reason;
    store.insert_ai_key(&plan.scope, &key)
}

pub fn list_ai_keys<P: TenantRepo + AiKeyRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    tenant_id: Uuid,
) -> DomainResult<Vec<TenantAiKey>> {
    let scope = admin.admin_scope()?;
    store
        .find_tenant(tenant_id)?
        .ok_or(DomainError::NotFound("tenant"))?;
    store.list_ai_keys(&scope, Some(tenant_id))
}

pub fn delete_ai_key<P: AiKeyRepo + ?Sized>(
    store: &P,
    admin: &impl AdminAuthority,
    tenant_id: Uuid,
    key_id: Uuid,
) -> DomainResult<()> {
    let scope = admin.admin_scope()?;
    if store.delete_ai_key(&scope, tenant_id, key_id)? {
        Ok(())
    } else {
        Err(DomainError::NotFound("AI key"))
    }
}

/// A key to re-check in a diagnosis, opened (or `None` when it does not open).
#[derive(Debug)]
pub struct KeyToCheck {
    pub key: TenantAiKey,
    pub secret: Option<SecretString>,
}

/// The keys a diagnosis re-checks: every key (or one tenant's) of the given regions.
pub fn keys_to_diagnose<P: AiKeyRepo + ?Sized>(
    store: &P,
    sealer: &dyn KeySealer,
    admin: &impl AdminAuthority,
    tenant_id: Option<Uuid>,
    regions: &[Region],
) -> DomainResult<(AdminScope, Vec<KeyToCheck>)> {
    let scope = admin.admin_scope()?;
    let keys = store
        .list_ai_keys(&scope, tenant_id)?
        .into_iter()
        .filter(|k| regions.contains(&k.region))
        .map(|key| {
            let secret = sealer.open(&key.sealed_secret, &ai_key_binding(key.tenant_id, key.id));
            KeyToCheck { key, secret }
        })
        .collect();
    Ok((scope, keys))
}

/// Stores the statuses a diagnosis found.
pub fn record_diagnosis<P: AiKeyRepo + ?Sized>(
    store: &P,
    scope: &AdminScope,
    results: &[(TenantAiKey, AiKeyStatus, Option<String>)],
    now: DateTime<Utc>,
) -> DomainResult<()> {
    for (key, status, reason) in results {
        store.set_ai_key_status(&KeyVerdict::diagnosed(
            scope,
            key,
            *status,
            reason.clone(),
            now,
        ))?;
    }
    Ok(())
}

/// Enters (`Some`) or leaves (`None`) a tenant's Shadow view on the admin's session, with
/// `shadow.enter` / `shadow.exit` lines in the tenants' feeds. Returns the tenant viewed now
/// and since when.
pub fn set_shadow<P: SessionRepo + TenantRepo + ?Sized>(
    store: &P,
    admin: &Principal,
    target: Option<Uuid>,
    now: DateTime<Utc>,
) -> DomainResult<Option<(Tenant, DateTime<Utc>)>> {
    let scope = admin.admin_scope()?;
    let session_id = admin.require_session()?;
    let current = admin.shadow().map(|(t, since)| (t.id, *since));
    let entry = |tenant_id: Uuid, action: &str| {
        NewActivity::admin(
            &scope,
            tenant_id,
            now,
            action,
            Some(ActivityTarget {
                kind: "tenant".into(),
                id: tenant_id,
            }),
            json!({"admin_email": scope.actor().label}),
        )
    };
    let old = current.map(|(id, _)| id);
    match target {
        Some(tenant_id) => {
            let tenant = store
                .find_tenant(tenant_id)?
                .ok_or(DomainError::NotFound("tenant"))?;
            if let Some(old) = old.filter(|old| *old != tenant_id) {
                store.set_shadow(session_id, ShadowChange::Leave(&entry(old, "shadow.exit")))?;
            }
            // Re-entering the view one is already in keeps its original `since`.
            let since = match current {
                Some((id, since)) if id == tenant_id => since,
                _ => {
                    let line = entry(tenant_id, "shadow.enter");
                    store.set_shadow(session_id, ShadowChange::Enter(&line))?;
                    now
                }
            };
            Ok(Some((tenant, since)))
        }
        None => {
            if let Some(old) = old {
                store.set_shadow(session_id, ShadowChange::Leave(&entry(old, "shadow.exit")))?;
            }
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{Fake, FakeSealer};
    use crate::policy::access::tests::{session, tenant, user};
    use crate::policy::ai_access::tests::key;

    fn admin() -> Principal {
        session(user(Role::PlatformAdmin, Status::Active, None), None, None)
    }

    /// An admin whose session is in `t`'s Shadow view, and since when.
    fn admin_viewing(t: &Tenant) -> (Principal, DateTime<Utc>) {
        let p = session(
            user(Role::PlatformAdmin, Status::Active, None),
            None,
            Some(t.clone()),
        );
        let since = p.shadow().map(|(_, since)| *since).unwrap();
        (p, since)
    }

    #[test]
    fn assigning_the_tenant_a_member_already_has_changes_nothing() {
        let store = Fake::default();
        let t = tenant(Status::Active);
        let member = user(Role::Member, Status::Active, Some(&t));
        store.users.lock().unwrap().push(member.clone());
        let got = assign_tenant(&store, &admin(), member.id, Some(t.id), Utc::now()).unwrap();
        assert_eq!(got, member);
        assert!(store.moves.lock().unwrap().is_empty());
    }

    #[test]
    fn assigning_another_tenant_moves_the_member_from_its_current_one() {
        let store = Fake::default();
        let t = tenant(Status::Active);
        let other = tenant(Status::Active);
        let member = user(Role::Member, Status::Active, Some(&t));
        store.users.lock().unwrap().push(member.clone());
        let got = assign_tenant(&store, &admin(), member.id, Some(other.id), Utc::now()).unwrap();
        assert_eq!(got.tenant_id, Some(other.id));
        assert_eq!(
            *store.moves.lock().unwrap(),
            vec![(member.id, Some(t.id), Some(other.id))]
        );
    }

    #[test]
    fn ai_access_is_disabled_when_ai_is_off_whatever_the_keys() {
        let mut t = tenant(Status::Active);
        let store = Fake::with_keys(vec![key(&t, t.region, true, AiKeyStatus::Ready)]);
        assert_eq!(ai_access(&store, &t).unwrap(), AiAccess::Ready);
        t.ai_enabled = false;
        assert_eq!(ai_access(&store, &t).unwrap(), AiAccess::Disabled);
    }

    fn plan(store: &Fake, t: &Tenant, secret: &str) -> Result<NewAiKeyPlan, String> {
        plan_ai_key(
            store,
            &FakeSealer,
            &admin(),
            t.id,
            "AIHK",
            secret,
            None,
            true,
            Utc::now(),
        )
        .map_err(|e| match e {
            DomainError::Validation { field, .. } => field,
            other => other.code().to_string(),
        })
    }

    #[test]
    fn an_ai_key_secret_is_1_to_1024_visible_characters() {
        let store = Fake::default();
        let t = store.stored_tenant(Status::Active);
        let refused = Err("secret".to_owned());
        let longest = "k".repeat(1024);
        let accepted = plan(&store, &t, &format!("  {longest}\n")).unwrap();
        assert_eq!(accepted.secret().expose(), longest);
        assert!(plan(&store, &t, "k").is_ok());
        assert_eq!(plan(&store, &t, "").map(|_| ()), refused);
        assert_eq!(plan(&store, &t, " \t ").map(|_| ()), refused);
        assert_eq!(plan(&store, &t, &"k".repeat(1025)).map(|_| ()), refused);
        // An inner space (whitespace, not a control character) and an inner control character
        // that is not whitespace are each refused.
        assert_eq!(plan(&store, &t, "sk-ab cd").map(|_| ()), refused);
        assert_eq!(plan(&store, &t, "sk-ab\u{1}cd").map(|_| ()), refused);
        assert_eq!(plan(&store, &t, "sk-ab\u{a0}cd").map(|_| ()), refused);
    }

    #[test]
    fn switching_the_shadow_view_leaves_the_old_tenant_then_enters_the_new_one() {
        let store = Fake::default();
        let a = tenant(Status::Active);
        let b = tenant(Status::Active);
        store.tenants.lock().unwrap().extend([a.clone(), b.clone()]);
        let (p, _) = admin_viewing(&a);
        let now = Utc::now();
        let (viewed, since) = set_shadow(&store, &p, Some(b.id), now).unwrap().unwrap();
        assert_eq!((viewed.id, since), (b.id, now));
        assert_eq!(
            *store.shadow_writes.lock().unwrap(),
            vec![
                (None, a.id, "shadow.exit".to_owned()),
                (Some((b.id, now)), b.id, "shadow.enter".to_owned()),
            ]
        );
    }

    #[test]
    fn re_entering_the_current_shadow_view_keeps_its_since_and_writes_nothing() {
        let store = Fake::default();
        let a = store.stored_tenant(Status::Active);
        let (p, since) = admin_viewing(&a);
        let later = since + chrono::Duration::minutes(10);
        let (viewed, got) = set_shadow(&store, &p, Some(a.id), later).unwrap().unwrap();
        assert_eq!((viewed.id, got), (a.id, since));
        assert!(store.shadow_writes.lock().unwrap().is_empty());
    }
}
