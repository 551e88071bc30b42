//! Entities: here those of the accounts and administration side (users, tenants, sessions);
//! the workspace's (records, settings, API keys, activity) in [`workspace`].

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::values::{Email, Region};

pub mod workspace;

/// The current time at the millisecond precision timestamps are stored with.
pub fn now_millis() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap_or(now)
}

/// A new identifier: UUID v7, so identifiers sort by creation time.
pub fn new_id() -> Uuid {
    Uuid::now_v7()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Member,
    PlatformAdmin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::PlatformAdmin => "platform_admin",
        }
    }

    pub fn parse(field: &str, raw: &str) -> DomainResult<Self> {
        match raw {
            "member" => Ok(Self::Member),
            "platform_admin" => Ok(Self::PlatformAdmin),
            _ => Err(DomainError::invalid(
                field,
                "must be member or platform_admin",
            )),
        }
    }
}

/// The stored state of an account or a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Active,
    Suspended,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Suspended => "suspended",
        }
    }

    pub fn parse(field: &str, raw: &str) -> DomainResult<Self> {
        match raw {
            "active" => Ok(Self::Active),
            "suspended" => Ok(Self::Suspended),
            _ => Err(DomainError::invalid(field, "must be active or suspended")),
        }
    }
}

/// What a member's own state looks like from outside: `unassigned` is derived from having no
/// tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStatus {
    Active,
    Unassigned,
    Suspended,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: Uuid,
    pub email: Email,
    pub name: String,
    pub role: Role,
    pub status: Status,
    pub tenant_id: Option<Uuid>,
    /// The bcrypt hash; never serialised.
    pub password_hash: String,
    pub created_at: DateTime<Utc>,
}

impl User {
    pub fn member_status(&self) -> MemberStatus {
        match (self.status, self.tenant_id) {
            (Status::Suspended, _) => MemberStatus::Suspended,
            (Status::Active, None) => MemberStatus::Unassigned,
            (Status::Active, Some(_)) => MemberStatus::Active,
        }
    }

    pub fn is_platform_admin(&self) -> bool {
        self.role == Role::PlatformAdmin
    }
}

/// A partial update of a user by an administrator.
#[derive(Debug, Clone, Default)]
pub struct UserPatch {
    pub name: Option<String>,
    pub role: Option<Role>,
    pub status: Option<Status>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    pub status: Status,
    pub region: Region,
    pub ai_enabled: bool,
    pub created_at: DateTime<Utc>,
    /// Quotas set by platform admins (none by default).
    pub limits: crate::policy::quota::TenantLimits,
    /// The models its runs may name, within the region's (`None`: the region's list).
    pub allowed_models: Option<Vec<String>>,
    /// The store's count of changes to the tenant's AI keys, read with the tenant (0 for a new
    /// one; only the store raises it). [`crate::ports::AiKeyRepo::usable_ai_keys`] is given the
    /// tenant as read on the same request, so a store may answer it from memory while this
    /// count is the one it read the keys under.
    pub ai_keys_version: i64,
}

#[derive(Debug, Clone, Default)]
pub struct TenantPatch {
    pub name: Option<String>,
    pub status: Option<Status>,
    pub region: Option<Region>,
    pub ai_enabled: Option<bool>,
    /// Each limit: absent (`None`) leaves it, `Some(None)` removes it.
    pub requests_per_minute: Option<Option<u64>>,
    pub tokens_per_minute: Option<Option<u64>>,
    pub monthly_tokens: Option<Option<u64>>,
    /// In nano-units ([`crate::policy::prices::Money`]).
    pub monthly_spend: Option<Option<u64>>,
    /// Absent leaves the list, `Some(None)` removes it.
    pub allowed_models: Option<Option<Vec<String>>>,
}

/// A signed-in browser or script session. Only the SHA-256 of its token is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: Uuid,
    pub user_id: Uuid,
    pub token_hash: String,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    /// The absolute expiry; the idle time-out is computed from `last_seen_at`.
    pub expires_at: DateTime<Utc>,
    pub user_agent: String,
    pub ip: String,
    /// The tenant whose Shadow support view this (admin) session is in.
    pub shadow_tenant_id: Option<Uuid>,
    pub shadow_since: Option<DateTime<Utc>>,
}

/// A session with everything needed to decide what it may do, loaded in one go.
#[derive(Debug, Clone)]
pub struct SessionContext {
    pub session: Session,
    pub user: User,
    pub tenant: Option<Tenant>,
    pub shadow_tenant: Option<Tenant>,
}
