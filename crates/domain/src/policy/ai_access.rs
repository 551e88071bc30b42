//! Tenant AI keys and AI access.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::model::Tenant;
use crate::values::Region;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AiKeyStatus {
    Ready,
    NotReady,
}

impl AiKeyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::NotReady => "not_ready",
        }
    }

    pub fn from_stored(raw: &str) -> Self {
        if raw == "ready" {
            Self::Ready
        } else {
            Self::NotReady
        }
    }
}

/// An upstream provider key of a tenant, locked to one region. The secret is sealed
/// (AES-256-GCM) and never leaves the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantAiKey {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub region: Region,
    pub label: String,
    pub hint: String,
    pub sealed_secret: String,
    pub chat_enabled: bool,
    pub status: AiKeyStatus,
    pub status_reason: Option<String>,
    pub checked_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

pub type NewTenantAiKey = TenantAiKey;

/// A tenant's AI access, as the contract defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AiAccess {
    Ready,
    Disabled,
    NotReady,
}

impl AiAccess {
    /// `disabled` when AI is off; else `ready` when a ready, chat-enabled key of the tenant's
    /// region exists; else `not_ready`.
    pub fn of(tenant: &Tenant, keys: &[TenantAiKey]) -> Self {
        if !tenant.ai_enabled {
            return Self::Disabled;
        }
        let usable = keys.iter().any(|k| {
            k.tenant_id == tenant.id
                && k.region == tenant.region
                && k.chat_enabled
                && k.status == AiKeyStatus::Ready
        });
        if usable {
            Self::Ready
        } else {
            Self::NotReady
        }
    }
}

/// Proof that a caller may run a chat request now: an active member (or a key with the `run`
/// scope) of a tenant whose AI access is ready, with the tenant's usable keys — each ready,
/// chat-enabled and locked to the tenant's region. Made only by [`RunScope::authorize`], which
/// loads the keys itself (the run preparation enters it after its own caller check, through
/// `authorize_for`).
#[derive(Debug, Clone)]
pub struct RunScope {
    tenant: Tenant,
    actor: crate::model::workspace::Actor,
    /// The workspace key the caller used, with its own limits (`None` for a session).
    key: Option<(Uuid, crate::policy::quota::KeyLimits)>,
    keys: Vec<TenantAiKey>,
}

impl RunScope {
    /// Applies the refusals in the contract's order: the member rules (and no Shadow view, and
    /// the `run` scope for keys), then `ai_access_disabled`, then `ai_access_not_ready` (also
    /// when the region has no gateway configured). The keys come from `ports`; any that is not
    /// ready, not chat-enabled or of another region is dropped here whatever the port answers.
    pub fn authorize<P: crate::ports::AiKeyRepo + ?Sized>(
        principal: &crate::policy::access::Principal,
        ports: &P,
        gateway_configured: bool,
    ) -> crate::DomainResult<Self> {
        let tenant = Self::caller_tenant(principal)?;
        Self::authorize_for(principal, tenant, ports, gateway_configured)
    }

    /// [`RunScope::authorize`] for the tenant [`RunScope::caller_tenant`] already answered for
    /// `principal` (the run preparation checks the caller before the body, then comes here).
    pub(crate) fn authorize_for<P: crate::ports::AiKeyRepo + ?Sized>(
        principal: &crate::policy::access::Principal,
        tenant: Tenant,
        ports: &P,
        gateway_configured: bool,
    ) -> crate::DomainResult<Self> {
        use crate::DomainError;
        if !tenant.ai_enabled {
            return Err(DomainError::AiAccessDisabled);
        }
        if !gateway_configured {
            return Err(DomainError::AiAccessNotReady(format!(
                "the {} gateway is not configured",
                tenant.region.as_str()
            )));
        }
        let keys: Vec<TenantAiKey> = ports
            .usable_ai_keys(&tenant)?
            .into_iter()
            .filter(|k| {
                k.tenant_id == tenant.id
                    && k.region == tenant.region
                    && k.chat_enabled
                    && k.status == AiKeyStatus::Ready
            })
            .collect();
        if keys.is_empty() {
            return Err(DomainError::AiAccessNotReady(format!(
                "no ready, chat-enabled {} key",
                tenant.region.as_str()
            )));
        }
        let key = match principal.credential() {
            crate::policy::access::Credential::ApiKey { key_id, limits, .. } => {
                Some((*key_id, *limits))
            }
            _ => None,
        };
        Ok(Self {
            tenant,
            actor: principal.actor(),
            key,
            keys,
        })
    }

    /// The first half of [`RunScope::authorize`]: the key's `run` scope, no Shadow view, and
    /// the member rules. Returns the caller's active tenant.
    pub(crate) fn caller_tenant(
        principal: &crate::policy::access::Principal,
    ) -> crate::DomainResult<Tenant> {
        use crate::DomainError;
        if let crate::policy::access::Credential::ApiKey { scopes, .. } = principal.credential() {
            if !scopes.contains(&crate::model::workspace::KeyScope::Run) {
                return Err(DomainError::InsufficientScope("run"));
            }
        }
        if principal.shadow().is_some() {
            return Err(DomainError::ShadowReadOnly);
        }
        Ok(principal.active_member_tenant()?.clone())
    }

    pub fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    pub fn region(&self) -> Region {
        self.tenant.region
    }

    pub fn actor(&self) -> &crate::model::workspace::Actor {
        &self.actor
    }

    /// The workspace key the caller used and its own limits; `None` for a session.
    pub fn key(&self) -> Option<(Uuid, crate::policy::quota::KeyLimits)> {
        self.key
    }

    /// The usable keys, starting at `start` (modulo their number) to spread the load.
    pub fn keys_from(&self, start: usize) -> impl Iterator<Item = &TenantAiKey> {
        let n = self.keys.len();
        (0..n).map(move |i| &self.keys[(start + i) % n])
    }
}

/// A judgement of one AI key's status, the only thing `AiKeyRepo::set_ai_key_status` stores.
/// Made only inside the domain: by a run that got an upstream 401 for the key (never ready),
/// or by an admin's diagnosis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyVerdict {
    key_id: Uuid,
    tenant_id: Uuid,
    status: AiKeyStatus,
    reason: Option<String>,
    at: DateTime<Utc>,
}

impl KeyVerdict {
    /// A run proved the key bad (or it does not open): `not_ready` with `reason`.
    pub(crate) fn rejected(
        scope: &RunScope,
        key: &TenantAiKey,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Option<Self> {
        (key.tenant_id == scope.tenant.id).then(|| Self {
            key_id: key.id,
            tenant_id: key.tenant_id,
            status: AiKeyStatus::NotReady,
            reason: Some(reason.to_owned()),
            at,
        })
    }

    /// An admin's diagnosis of the key.
    pub(crate) fn diagnosed(
        _scope: &crate::policy::access::AdminScope,
        key: &TenantAiKey,
        status: AiKeyStatus,
        reason: Option<String>,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            key_id: key.id,
            tenant_id: key.tenant_id,
            status,
            reason,
            at,
        }
    }

    pub fn key_id(&self) -> Uuid {
        self.key_id
    }

    pub fn tenant_id(&self) -> Uuid {
        self.tenant_id
    }

    pub fn status(&self) -> AiKeyStatus {
        self.status
    }

    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    pub fn at(&self) -> DateTime<Utc> {
        self.at
    }
}

/// The associated data that binds a sealed AI key to its tenant and id.
pub fn ai_key_binding(tenant_id: Uuid, key_id: Uuid) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(tenant_id.as_bytes());
    out.extend_from_slice(key_id.as_bytes());
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fakes::Fake;
    use crate::model::workspace::KeyScope;
    use crate::model::{Role, Status};
    use crate::policy::access::tests::{tenant, user};
    use crate::policy::access::{Credential, Principal};

    pub(crate) fn key(t: &Tenant, region: Region, chat: bool, status: AiKeyStatus) -> TenantAiKey {
        TenantAiKey {
            id: Uuid::now_v7(),
            tenant_id: t.id,
            region,
            label: "k".into(),
            hint: "…abcd".into(),
            sealed_secret: String::new(),
            chat_enabled: chat,
            status,
            status_reason: None,
            checked_at: None,
            created_at: Utc::now(),
        }
    }

    pub(crate) fn member(t: &Tenant, credential: Credential) -> Principal {
        Principal::new(
            user(Role::Member, Status::Active, Some(t)),
            Some(t.clone()),
            credential,
        )
    }

    pub(crate) fn session() -> Credential {
        Credential::Session {
            session_id: Uuid::now_v7(),
            shadow: None,
        }
    }

    #[test]
    fn ai_access_needs_ai_on_and_one_ready_chat_key_of_the_tenant_and_its_region() {
        let mut t = tenant(Status::Active);
        let other = tenant(Status::Active);
        let good = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        assert_eq!(
            AiAccess::of(&t, std::slice::from_ref(&good)),
            AiAccess::Ready
        );
        // Each condition alone is not enough.
        for bad in [
            key(&t, Region::Aica, true, AiKeyStatus::Ready),
            key(&t, Region::Aihk, false, AiKeyStatus::Ready),
            key(&t, Region::Aihk, true, AiKeyStatus::NotReady),
            key(&other, Region::Aihk, true, AiKeyStatus::Ready),
        ] {
            assert_eq!(AiAccess::of(&t, &[bad]), AiAccess::NotReady);
        }
        assert_eq!(AiAccess::of(&t, &[]), AiAccess::NotReady);
        t.ai_enabled = false;
        assert_eq!(AiAccess::of(&t, &[good]), AiAccess::Disabled);
    }

    #[test]
    fn a_sealed_key_is_bound_to_its_tenant_and_its_id() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let binding = ai_key_binding(a, b);
        assert_eq!(&binding[..16], a.as_bytes());
        assert_eq!(&binding[16..], b.as_bytes());
        assert_ne!(binding, ai_key_binding(b, a));
    }

    #[test]
    fn key_statuses_round_trip_and_anything_unknown_is_not_ready() {
        for s in [AiKeyStatus::Ready, AiKeyStatus::NotReady] {
            assert_eq!(AiKeyStatus::from_stored(s.as_str()), s);
        }
        assert_eq!(AiKeyStatus::Ready.as_str(), "ready");
        assert_eq!(AiKeyStatus::NotReady.as_str(), "not_ready");
        assert_eq!(AiKeyStatus::from_stored("READY"), AiKeyStatus::NotReady);
        assert_eq!(AiKeyStatus::from_stored(""), AiKeyStatus::NotReady);
    }

    #[test]
    fn only_ready_chat_enabled_keys_of_the_tenant_region_are_usable() {
        let t = tenant(Status::Active);
        let good = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        let keys = vec![
            key(&t, Region::Aica, true, AiKeyStatus::Ready),
            key(&t, Region::Aihk, false, AiKeyStatus::Ready),
            key(&t, Region::Aihk, true, AiKeyStatus::NotReady),
            good.clone(),
        ];
        let scope =
            RunScope::authorize(&member(&t, session()), &Fake::with_keys(keys), true).unwrap();
        let usable: Vec<_> = scope.keys_from(7).collect();
        assert_eq!(usable, vec![&good]);
    }

    #[test]
    fn refusals_come_in_the_contract_order() {
        let mut t = tenant(Status::Active);
        let wrong_region = vec![key(&t, Region::Aica, true, AiKeyStatus::Ready)];
        let err = RunScope::authorize(
            &member(&t, session()),
            &Fake::with_keys(wrong_region.clone()),
            true,
        )
        .unwrap_err();
        assert_eq!(err.code(), "ai_access_not_ready");
        let err = RunScope::authorize(
            &member(&t, session()),
            &Fake::with_keys(vec![key(&t, Region::Aihk, true, AiKeyStatus::Ready)]),
            false,
        )
        .unwrap_err();
        assert_eq!(err.code(), "ai_access_not_ready");
        t.ai_enabled = false;
        let err = RunScope::authorize(
            &member(&t, session()),
            &Fake::with_keys(wrong_region),
            false,
        )
        .unwrap_err();
        assert_eq!(err.code(), "ai_access_disabled");
        let key_without_run = Credential::ApiKey {
            key_id: Uuid::now_v7(),
            name: "k".into(),
            scopes: vec![KeyScope::WorkspaceRead],
            limits: crate::policy::quota::KeyLimits::default(),
        };
        let err =
            RunScope::authorize(&member(&t, key_without_run), &Fake::default(), true).unwrap_err();
        assert_eq!(err.code(), "insufficient_scope");
        let suspended = tenant(Status::Suspended);
        let err = RunScope::authorize(&member(&suspended, session()), &Fake::default(), true)
            .unwrap_err();
        assert_eq!(err.code(), "tenant_suspended");
    }

    #[test]
    fn keys_rotate_from_the_start_index() {
        let t = tenant(Status::Active);
        let keys: Vec<_> = (0..3)
            .map(|_| key(&t, Region::Aihk, true, AiKeyStatus::Ready))
            .collect();
        let scope =
            RunScope::authorize(&member(&t, session()), &Fake::with_keys(keys.clone()), true)
                .unwrap();
        let order: Vec<_> = scope.keys_from(1).map(|k| k.id).collect();
        assert_eq!(order, vec![keys[1].id, keys[2].id, keys[0].id]);
    }
}
