//! Who is calling, and what they may touch.
//!
//! Architecture Invariant: `TenantScope` and `WriteScope` have private fields and are built
//! only here, from a `Principal` whose member and tenant are active (or, for reads only, from a
//! platform admin's Shadow view). Every workspace port takes one of them and filters by its
//! tenant id, so reading or writing workspace data without passing these checks does not
//! compile.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::{Actor, ActorKind, KeyScope};
use crate::model::{MemberStatus, Status, Tenant, User};

/// How the caller proved who it is.
#[derive(Debug, Clone)]
pub enum Credential {
    Session {
        session_id: Uuid,
        /// The tenant of the Shadow support view this admin session is in, and since when.
        shadow: Option<(Tenant, DateTime<Utc>)>,
    },
    ApiKey {
        key_id: Uuid,
        name: String,
        scopes: Vec<KeyScope>,
        /// The key's own quotas, as loaded for this request.
        limits: crate::policy::quota::KeyLimits,
    },
    /// A platform admin's `gca_` token, presented on an `/admin/**` route (decision 0036).
    AdminToken {
        token_id: Uuid,
        name: String,
        scope: crate::policy::admin_tokens::AdminTokenScope,
        /// The request may change something (any method but GET and HEAD): an `admin:read`
        /// token is refused it.
        writes: bool,
    },
}

/// An authenticated caller: the account, its tenant as loaded for this request, and the
/// credential used.
///
/// Architecture Invariant: the fields are private and the only constructor is crate-private,
/// called by the domain's authentication (`services::accounts`) after it looked the
/// credential up. No other crate can forge a caller.
#[derive(Debug, Clone)]
pub struct Principal {
    user: User,
    tenant: Option<Tenant>,
    credential: Credential,
}

impl Principal {
    pub(crate) fn new(user: User, tenant: Option<Tenant>, credential: Credential) -> Self {
        Self {
            user,
            tenant,
            credential,
        }
    }

    /// The account, as loaded for this request.
    pub fn user(&self) -> &User {
        &self.user
    }

    /// The account's tenant, as loaded for this request (whatever its state).
    pub fn tenant(&self) -> Option<&Tenant> {
        self.tenant.as_ref()
    }

    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// True for an active (not suspended) platform admin.
    fn is_active_admin(&self) -> bool {
        self.user.is_platform_admin() && self.user.status == Status::Active
    }

    pub fn session_id(&self) -> Option<Uuid> {
        match &self.credential {
            Credential::Session { session_id, .. } => Some(*session_id),
            Credential::ApiKey { .. } | Credential::AdminToken { .. } => None,
        }
    }

    /// The Shadow view this caller is in, if it is an active platform admin's session in one.
    /// A demoted or suspended admin's view is ignored.
    pub fn shadow(&self) -> Option<&(Tenant, DateTime<Utc>)> {
        match &self.credential {
            Credential::Session {
                shadow: Some(view), ..
            } if self.is_active_admin() => Some(view),
            _ => None,
        }
    }

    /// Refuses API keys: for routes that need a signed-in session.
    pub fn require_session(&self) -> DomainResult<Uuid> {
        self.session_id().ok_or(DomainError::SessionRequired)
    }

    /// The proof for every administration port: an active platform admin's session or admin
    /// token. Refusals, in order: an API key (`session_required`), not an admin
    /// (`admin_required`), a suspended admin (`member_suspended`), an `admin:read` token on a
    /// request that may change something (`insufficient_scope`).
    pub fn admin_scope(&self) -> DomainResult<AdminScope> {
        let read_only_token_writes = match &self.credential {
            Credential::ApiKey { .. } => return Err(DomainError::SessionRequired),
            Credential::Session { .. } => false,
            Credential::AdminToken { scope, writes, .. } => *writes && !scope.allows_writes(),
        };
        if !self.user.is_platform_admin() {
            return Err(DomainError::AdminRequired);
        }
        if self.user.status != Status::Active {
            return Err(DomainError::MemberSuspended);
        }
        if read_only_token_writes {
            return Err(DomainError::InsufficientScope("admin"));
        }
        Ok(AdminScope {
            actor: self.admin_actor(),
        })
    }

    /// The admin as an actor: the email, and the token's name when a token acts for them.
    fn admin_actor(&self) -> Actor {
        let email = self.user.email.as_str();
        Actor {
            kind: ActorKind::Admin,
            id: self.user.id,
            label: match &self.credential {
                Credential::AdminToken { name, .. } => format!("{email} (admin token {name})"),
                _ => email.to_owned(),
            },
        }
    }

    /// The activity-feed actor for this caller.
    pub fn actor(&self) -> Actor {
        match &self.credential {
            Credential::ApiKey { key_id, name, .. } => Actor {
                kind: ActorKind::Key,
                id: *key_id,
                label: format!("{name} ({})", self.user.email.as_str()),
            },
            Credential::Session { .. } => Actor {
                kind: if self.shadow().is_some() {
                    ActorKind::Admin
                } else {
                    ActorKind::Member
                },
                id: self.user.id,
                label: self.user.email.as_str().to_owned(),
            },
            Credential::AdminToken { .. } => self.admin_actor(),
        }
    }

    fn require_key_scope(&self, needed: KeyScope) -> DomainResult<()> {
        match &self.credential {
            Credential::ApiKey { scopes, .. } if !scopes.contains(&needed) => {
                Err(DomainError::InsufficientScope(needed.as_str()))
            }
            _ => Ok(()),
        }
    }

    /// The active tenant of an active member; the member rules of the contract, in order.
    fn active_tenant(&self) -> DomainResult<&Tenant> {
        // An admin token is a credential on `/admin/**` only, never for workspace data.
        if let Credential::AdminToken { .. } = self.credential {
            return Err(DomainError::InvalidApiKey);
        }
        match self.user.member_status() {
            MemberStatus::Suspended => return Err(DomainError::MemberSuspended),
            MemberStatus::Unassigned => return Err(DomainError::MemberUnassigned),
            MemberStatus::Active => {}
        }
        // A tenant id without a loaded tenant means it vanished: refuse rather than guess.
        let tenant = self
            .tenant
            .as_ref()
            .filter(|t| Some(t.id) == self.user.tenant_id)
            .ok_or(DomainError::MemberUnassigned)?;
        if tenant.status == Status::Suspended {
            return Err(DomainError::TenantSuspended);
        }
        Ok(tenant)
    }

    /// Checks the member rules only (no scope, no Shadow view): for routes such as `/run` that
    /// have their own scope types built on top.
    pub fn active_member_tenant(&self) -> DomainResult<&Tenant> {
        self.active_tenant()
    }

    /// Read access to workspace data, with the key scope `needed` (usually
    /// `workspace:read`).
    pub fn read_scope(&self, needed: KeyScope) -> DomainResult<TenantScope> {
        self.require_key_scope(needed)?;
        if let Some((tenant, _)) = self.shadow() {
            return Ok(TenantScope {
                tenant_id: tenant.id,
                actor: self.actor(),
                shadow: true,
            });
        }
        let tenant = self.active_tenant()?;
        Ok(TenantScope {
            tenant_id: tenant.id,
            actor: self.actor(),
            shadow: false,
        })
    }

    /// Write access to workspace data, with the key scope `needed` (usually
    /// `workspace:write`). Never from a Shadow view.
    pub fn write_scope(&self, needed: KeyScope) -> DomainResult<WriteScope> {
        self.require_key_scope(needed)?;
        if self.shadow().is_some() {
            return Err(DomainError::ShadowReadOnly);
        }
        let tenant = self.active_tenant()?;
        Ok(WriteScope {
            tenant_id: tenant.id,
            actor: self.actor(),
        })
    }

    /// Write access for managing workspace keys: a session only, never a Shadow view.
    pub fn key_management_scope(&self) -> DomainResult<WriteScope> {
        self.require_session()?;
        self.write_scope(KeyScope::WorkspaceWrite)
    }

    /// Read access for listing workspace keys: a session only (a Shadow view may read).
    pub fn key_listing_scope(&self) -> DomainResult<TenantScope> {
        self.require_session()?;
        self.read_scope(KeyScope::WorkspaceRead)
    }
}

/// Proof that the holder may read one tenant's workspace data.
#[derive(Debug, Clone)]
pub struct TenantScope {
    tenant_id: Uuid,
    actor: Actor,
    shadow: bool,
}

impl TenantScope {
    pub fn tenant_id(&self) -> Uuid {
        self.tenant_id
    }

    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// True when this is a platform admin's read-only Shadow view.
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }
}

/// Proof that the holder may write one tenant's workspace data. Never made from a Shadow view.
#[derive(Debug, Clone)]
pub struct WriteScope {
    tenant_id: Uuid,
    actor: Actor,
}

impl WriteScope {
    pub fn tenant_id(&self) -> Uuid {
        self.tenant_id
    }

    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// Every write scope can also read.
    pub fn as_read(&self) -> TenantScope {
        TenantScope {
            tenant_id: self.tenant_id,
            actor: self.actor.clone(),
            shadow: false,
        }
    }
}

/// Proof that the holder is an active platform admin's session, or the local operator at the
/// command line: every administration port method takes one. Made only by
/// [`Principal::admin_scope`] and [`LocalOperator`] (through [`AdminAuthority`]).
#[derive(Debug, Clone)]
pub struct AdminScope {
    actor: Actor,
}

/// Whoever may ask for an [`AdminScope`]: an active platform admin's session
/// ([`Principal`]) or the operator at the machine ([`LocalOperator`]). The administration
/// functions of `gc_domain::admin` take any of them and ask for the scope before they touch a
/// port. Implementing this trait elsewhere grants nothing: an `AdminScope` can only come from
/// these two.
pub trait AdminAuthority {
    /// The scope, or the refusal (`session_required`, `admin_required`, `member_suspended`).
    fn admin_scope(&self) -> DomainResult<AdminScope>;
}

impl AdminAuthority for Principal {
    fn admin_scope(&self) -> DomainResult<AdminScope> {
        Principal::admin_scope(self)
    }
}

/// The operator at the machine, running `gc-server admin ...` with the service's own database
/// URL. Never made from an HTTP request.
///
/// Architecture Invariant: only the `gc-server admin` command line makes one (a tidy test
/// checks that no other crate calls [`LocalOperator::at_the_console`]). It grants nothing the
/// operator does not already have: whoever can run it can open the database and change any
/// row directly. Going through the domain instead keeps the rules of the API (validation,
/// password length, keys revoked when a member leaves a tenant, activity lines) and records
/// the operator as the actor.
#[derive(Debug, Clone)]
pub struct LocalOperator {
    label: String,
}

impl LocalOperator {
    /// The operator of the local command line; `who` names them in activity feeds (for
    /// example the login name). For `gc-server admin` only.
    pub fn at_the_console(who: &str) -> Self {
        let who = who.trim();
        let label = if who.is_empty() {
            "operator (gc-server admin)".to_owned()
        } else {
            format!("operator {who} (gc-server admin)")
        };
        Self { label }
    }
}

impl AdminAuthority for LocalOperator {
    fn admin_scope(&self) -> DomainResult<AdminScope> {
        Ok(AdminScope {
            actor: Actor {
                kind: ActorKind::Admin,
                // The operator is no account: the nil id says so in activity lines.
                id: Uuid::nil(),
                label: self.label.clone(),
            },
        })
    }
}

impl AdminScope {
    /// The server itself, re-checking AI keys at start-up after its gateway configuration
    /// changed (`services::ai_keys::recheck_after_configuration`, which is all it may do).
    /// Crate-private: no other crate can make one.
    pub(crate) fn server_start_up() -> Self {
        Self {
            actor: Actor {
                kind: ActorKind::Admin,
                id: Uuid::nil(),
                label: "gc-server start-up (gateway configuration)".to_owned(),
            },
        }
    }

    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The admin's user id (nil for the local operator).
    pub fn admin_id(&self) -> Uuid {
        self.actor.id
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::Role;
    use crate::values::{Email, Region};

    pub fn tenant(status: Status) -> Tenant {
        Tenant {
            id: Uuid::now_v7(),
            name: "Acme".into(),
            status,
            region: Region::Aihk,
            ai_enabled: true,
            created_at: Utc::now(),
            limits: crate::policy::quota::TenantLimits::default(),
            allowed_models: None,
            ai_keys_version: 0,
        }
    }

    pub fn user(role: Role, status: Status, tenant: Option<&Tenant>) -> User {
        User {
            id: Uuid::now_v7(),
            email: Email::parse("email", "ann@example.com").unwrap(),
            name: "Ann".into(),
            role,
            status,
            tenant_id: tenant.map(|t| t.id),
            password_hash: String::new(),
            created_at: Utc::now(),
        }
    }

    /// An active tenant and a platform admin viewing it in the Shadow view.
    pub fn shadow_view() -> (Tenant, Principal) {
        let t = tenant(Status::Active);
        let p = session(
            user(Role::PlatformAdmin, Status::Active, None),
            None,
            Some(t.clone()),
        );
        (t, p)
    }

    /// An active member of `t` calling with a key (`ci`) of these scopes.
    pub fn keyed(t: &Tenant, scopes: Vec<KeyScope>) -> Principal {
        Principal::new(
            user(Role::Member, Status::Active, Some(t)),
            Some(t.clone()),
            Credential::ApiKey {
                key_id: Uuid::now_v7(),
                name: "ci".into(),
                scopes,
                limits: crate::policy::quota::KeyLimits::default(),
            },
        )
    }

    /// An active tenant and an active member of it, signed in with a session.
    pub fn active_member() -> (Tenant, Principal) {
        let t = tenant(Status::Active);
        let p = member_of(&t);
        (t, p)
    }

    /// An active member of `t`, signed in with a session.
    pub fn member_of(t: &Tenant) -> Principal {
        session(
            user(Role::Member, Status::Active, Some(t)),
            Some(t.clone()),
            None,
        )
    }

    /// "ok", or the code of the refusal.
    pub fn code<T>(answer: DomainResult<T>) -> String {
        answer.map_or_else(|e| e.code().to_string(), |_| "ok".into())
    }

    /// What `p` is answered for each scope: workspace read, workspace write, key management,
    /// admin.
    pub fn answers(p: &Principal) -> [String; 4] {
        [
            code(p.read_scope(KeyScope::WorkspaceRead)),
            code(p.write_scope(KeyScope::WorkspaceWrite)),
            code(p.key_management_scope()),
            code(p.admin_scope()),
        ]
    }

    pub fn session(user: User, tenant: Option<Tenant>, shadow: Option<Tenant>) -> Principal {
        Principal {
            user,
            tenant,
            credential: Credential::Session {
                session_id: Uuid::now_v7(),
                shadow: shadow.map(|t| (t, Utc::now())),
            },
        }
    }

    #[test]
    fn active_members_get_both_scopes_of_their_own_tenant() {
        let (t, p) = active_member();
        assert_eq!(
            p.read_scope(KeyScope::WorkspaceRead).unwrap().tenant_id(),
            t.id
        );
        assert_eq!(
            p.write_scope(KeyScope::WorkspaceWrite).unwrap().tenant_id(),
            t.id
        );
    }

    #[test]
    fn refused_members_get_no_scope_with_the_contract_codes() {
        let active = tenant(Status::Active);
        let suspended = tenant(Status::Suspended);
        let cases = [
            (
                session(user(Role::Member, Status::Active, None), None, None),
                "member_unassigned",
            ),
            (
                session(
                    user(Role::Member, Status::Suspended, Some(&active)),
                    Some(active.clone()),
                    None,
                ),
                "member_suspended",
            ),
            (
                session(
                    user(Role::Member, Status::Active, Some(&suspended)),
                    Some(suspended.clone()),
                    None,
                ),
                "tenant_suspended",
            ),
            // A tenant id whose tenant did not load is refused, never guessed.
            (
                session(
                    user(Role::Member, Status::Active, Some(&active)),
                    None,
                    None,
                ),
                "member_unassigned",
            ),
        ];
        for (p, code) in cases {
            assert_eq!(answers(&p)[..3], [code; 3]);
        }
    }

    #[test]
    fn a_shadow_view_reads_but_never_writes() {
        let (t, p) = shadow_view();
        let scope = p.read_scope(KeyScope::WorkspaceRead).unwrap();
        assert_eq!(scope.tenant_id(), t.id);
        assert!(scope.is_shadow());
        let refused = "shadow_read_only";
        assert_eq!(answers(&p), ["ok", refused, refused, "ok"]);
    }

    #[test]
    fn a_members_scope_is_its_own_tenant_and_not_a_shadow_view() {
        let (t, p) = active_member();
        assert_eq!(p.tenant().map(|x| x.id), Some(t.id));
        assert!(!p.read_scope(KeyScope::WorkspaceRead).unwrap().is_shadow());
        let admin = session(user(Role::PlatformAdmin, Status::Active, None), None, None);
        assert!(admin.tenant().is_none());
    }

    #[test]
    fn a_shadow_view_of_a_demoted_admin_is_ignored() {
        let t = tenant(Status::Active);
        let p = session(user(Role::Member, Status::Active, None), None, Some(t));
        assert_eq!(answers(&p)[0], "member_unassigned");
    }

    #[test]
    fn keys_need_their_scope_and_never_manage_keys() {
        let p = keyed(&tenant(Status::Active), vec![KeyScope::WorkspaceRead]);
        let session = "session_required";
        assert_eq!(answers(&p), ["ok", "insufficient_scope", session, session]);
    }

    #[test]
    fn only_an_active_admin_session_gets_the_admin_scope() {
        let t = tenant(Status::Active);
        let admin = session(user(Role::PlatformAdmin, Status::Active, None), None, None);
        assert_eq!(admin.admin_scope().unwrap().admin_id(), admin.user().id);
        let suspended = session(
            user(Role::PlatformAdmin, Status::Suspended, None),
            None,
            None,
        );
        assert_eq!(answers(&suspended)[3], "member_suspended");
        let member = session(
            user(Role::Member, Status::Active, Some(&t)),
            Some(t.clone()),
            None,
        );
        assert_eq!(answers(&member), ["ok", "ok", "ok", "admin_required"]);
    }

    #[test]
    fn the_local_operator_gets_an_admin_scope_with_a_nil_id_and_its_name() {
        let scope = LocalOperator::at_the_console("root").admin_scope().unwrap();
        assert_eq!(scope.admin_id(), Uuid::nil());
        assert_eq!(scope.actor().kind, ActorKind::Admin);
        assert_eq!(scope.actor().label, "operator root (gc-server admin)");
        let anonymous = LocalOperator::at_the_console(" ").admin_scope().unwrap();
        assert_eq!(anonymous.actor().label, "operator (gc-server admin)");
    }

    #[test]
    fn a_suspended_admin_loses_its_shadow_view() {
        let t = tenant(Status::Active);
        let p = session(
            user(Role::PlatformAdmin, Status::Suspended, None),
            None,
            Some(t),
        );
        assert!(p.shadow().is_none());
        assert_eq!(answers(&p)[0], "member_suspended");
    }
}
