//! Ports: what the domain needs from storage. Adapters in `gc-persistence` implement them.
//!
//! The ports are synchronous (diesel is); callers run them on a blocking pool. Each method is
//! one unit of work: it runs in one transaction where it writes more than one row, and every
//! workspace write appends its activity line in that same transaction. Workspace methods take a
//! `TenantScope` or `WriteScope` and filter every query by its tenant id.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::access::{TenantScope, WriteScope};
use crate::error::DomainResult;
use crate::gateway::{AiKeyStatus, NewTenantAiKey, TenantAiKey};
use crate::model::{NewUser, Session, SessionContext, Tenant, TenantPatch, User, UserPatch};
use crate::page::{Page, PageRequest};
use crate::values::{Email, Region};
use crate::workspace::{
    Activity, ApiKey, KeyContext, NewActivity, Record, RecordCounts, RecordKind, Settings,
};

pub trait UserRepo {
    /// Inserts a user; `EmailTaken` when the (lower-cased) email exists.
    fn insert_user(&self, user: &NewUser) -> DomainResult<User>;
    fn find_user(&self, id: Uuid) -> DomainResult<Option<User>>;
    fn find_user_by_email(&self, email: &Email) -> DomainResult<Option<User>>;
    /// Newest first, optionally only one tenant's members.
    fn list_users(&self, tenant_id: Option<Uuid>, page: &PageRequest) -> DomainResult<Page<User>>;
    fn update_user(&self, id: Uuid, patch: &UserPatch) -> DomainResult<Option<User>>;
    /// Assigns (or with `None` unassigns) a tenant; `NotFound("tenant")` if it does not exist.
    fn assign_tenant(&self, id: Uuid, tenant_id: Option<Uuid>) -> DomainResult<Option<User>>;
    /// Stores a new password hash and, in the same transaction, deletes every session of the
    /// user except `keep`.
    fn change_password(
        &self,
        id: Uuid,
        password_hash: &str,
        keep: Option<Uuid>,
    ) -> DomainResult<()>;
    /// Number of platform admins (for the bootstrap admin).
    fn count_admins(&self) -> DomainResult<u64>;
}

pub trait TenantRepo {
    fn insert_tenant(&self, tenant: &Tenant) -> DomainResult<Tenant>;
    fn find_tenant(&self, id: Uuid) -> DomainResult<Option<Tenant>>;
    fn list_tenants(&self, page: &PageRequest) -> DomainResult<Page<Tenant>>;
    fn update_tenant(&self, id: Uuid, patch: &TenantPatch) -> DomainResult<Option<Tenant>>;
}

pub trait SessionRepo {
    fn insert_session(&self, session: &Session) -> DomainResult<()>;
    /// The session with this token hash, with its user, the user's tenant and the Shadow
    /// tenant, whatever their state (the domain decides). Expiry is not checked here.
    fn session_context(&self, token_hash: &str) -> DomainResult<Option<SessionContext>>;
    fn touch_session(&self, id: Uuid, at: DateTime<Utc>) -> DomainResult<()>;
    /// The user's sessions, newest first.
    fn list_sessions(&self, user_id: Uuid) -> DomainResult<Vec<Session>>;
    /// Deletes one session of this user; false when there is none.
    fn delete_session(&self, user_id: Uuid, id: Uuid) -> DomainResult<bool>;
    /// Deletes every session of this user except `keep`; returns how many.
    fn delete_other_sessions(&self, user_id: Uuid, keep: Uuid) -> DomainResult<u64>;
    /// Deletes sessions whose absolute expiry or idle limit has passed.
    fn delete_expired_sessions(
        &self,
        idle_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> DomainResult<u64>;
    /// Admin sessions currently in a Shadow view of this tenant that were seen after
    /// `seen_after` and have not expired at `now`: `(admin email, since)`, oldest first.
    fn shadow_viewers(
        &self,
        tenant_id: Uuid,
        seen_after: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> DomainResult<Vec<(String, DateTime<Utc>)>>;
    /// Enters (`Some`) or leaves (`None`) a Shadow view on this session and appends `activity`
    /// to the tenant's feed in the same transaction.
    fn set_shadow(
        &self,
        session_id: Uuid,
        shadow: Option<(Uuid, DateTime<Utc>)>,
        activity: &NewActivity,
    ) -> DomainResult<()>;
}

/// Failed sign-ins, counted in the database so every node sees the same count.
pub trait SigninThrottleRepo {
    fn count_failures_since(&self, email: &str, since: DateTime<Utc>) -> DomainResult<u64>;
    /// The time of the oldest failure since `since` (to compute `Retry-After`).
    fn oldest_failure_since(
        &self,
        email: &str,
        since: DateTime<Utc>,
    ) -> DomainResult<Option<DateTime<Utc>>>;
    fn record_failure(&self, email: &str, at: DateTime<Utc>) -> DomainResult<()>;
    fn clear_failures(&self, email: &str) -> DomainResult<()>;
}

pub trait WorkspaceRepo {
    /// Records of one kind (and, for sources, one parent), newest first.
    fn list_records(
        &self,
        scope: &TenantScope,
        kind: RecordKind,
        parent_id: Option<Uuid>,
        page: &PageRequest,
    ) -> DomainResult<Page<Record>>;
    fn find_record(
        &self,
        scope: &TenantScope,
        kind: RecordKind,
        parent_id: Option<Uuid>,
        id: Uuid,
    ) -> DomainResult<Option<Record>>;
    /// Inserts a record (version 1) and its activity line.
    fn insert_record(
        &self,
        scope: &WriteScope,
        record: &Record,
        activity: &NewActivity,
    ) -> DomainResult<Record>;
    /// Replaces the fields of a record, bumping its version. `expected_version` (from
    /// `If-Match`) must match when given, else `VersionConflict`. `Ok(None)` when not found.
    #[allow(clippy::too_many_arguments)]
    fn update_record(
        &self,
        scope: &WriteScope,
        kind: RecordKind,
        parent_id: Option<Uuid>,
        id: Uuid,
        expected_version: Option<i64>,
        fields: &Map<String, Value>,
        at: DateTime<Utc>,
        activity: &NewActivity,
    ) -> DomainResult<Option<Record>>;
    /// Deletes a record and its children (a collection's sources); false when not found.
    fn delete_record(
        &self,
        scope: &WriteScope,
        kind: RecordKind,
        parent_id: Option<Uuid>,
        id: Uuid,
        activity: &NewActivity,
    ) -> DomainResult<bool>;
    fn record_counts(&self, scope: &TenantScope) -> DomainResult<RecordCounts>;
    /// The tenant's settings (empty fields and version 0 when never written).
    fn settings(&self, scope: &TenantScope) -> DomainResult<Settings>;
    fn update_settings(
        &self,
        scope: &WriteScope,
        expected_version: Option<i64>,
        fields: &Map<String, Value>,
        at: DateTime<Utc>,
        activity: &NewActivity,
    ) -> DomainResult<Settings>;
    fn list_activity(
        &self,
        scope: &TenantScope,
        page: &PageRequest,
    ) -> DomainResult<Page<Activity>>;
    /// Appends an activity line on its own (runs, scans): the tenant id is in `activity`.
    fn append_activity(&self, activity: &NewActivity) -> DomainResult<()>;
    /// Appends several activity lines in one transaction (the run-record writer's batches).
    fn append_activities(&self, activities: &[NewActivity]) -> DomainResult<()>;
}

pub trait ApiKeyRepo {
    fn insert_api_key(
        &self,
        scope: &WriteScope,
        key: &ApiKey,
        activity: &NewActivity,
    ) -> DomainResult<ApiKey>;
    /// The tenant's keys, newest first (revoked ones included).
    fn list_api_keys(&self, scope: &TenantScope, page: &PageRequest) -> DomainResult<Page<ApiKey>>;
    /// Sets `revoked_at` on a key of the tenant; false when not found or already revoked.
    fn revoke_api_key(
        &self,
        scope: &WriteScope,
        id: Uuid,
        at: DateTime<Utc>,
        activity: &NewActivity,
    ) -> DomainResult<bool>;
    /// The key with this hash, with its member and the member's tenant.
    fn key_context(&self, key_hash: &str) -> DomainResult<Option<KeyContext>>;
    fn touch_api_key(&self, id: Uuid, at: DateTime<Utc>) -> DomainResult<()>;
}

pub trait AiKeyRepo {
    fn insert_ai_key(&self, key: &NewTenantAiKey) -> DomainResult<TenantAiKey>;
    fn list_ai_keys(&self, tenant_id: Option<Uuid>) -> DomainResult<Vec<TenantAiKey>>;
    fn find_ai_key(&self, tenant_id: Uuid, id: Uuid) -> DomainResult<Option<TenantAiKey>>;
    fn delete_ai_key(&self, tenant_id: Uuid, id: Uuid) -> DomainResult<bool>;
    fn set_ai_key_status(
        &self,
        id: Uuid,
        status: AiKeyStatus,
        reason: Option<&str>,
        checked_at: DateTime<Utc>,
    ) -> DomainResult<()>;
    /// Keys of this tenant and region that are ready and chat-enabled.
    fn usable_ai_keys(&self, tenant_id: Uuid, region: Region) -> DomainResult<Vec<TenantAiKey>>;
}

pub trait HealthRepo {
    /// Answers when the database does.
    fn ping(&self) -> DomainResult<()>;
}

/// Everything the service needs from storage, as one object.
pub trait Store:
    UserRepo
    + TenantRepo
    + SessionRepo
    + SigninThrottleRepo
    + WorkspaceRepo
    + ApiKeyRepo
    + AiKeyRepo
    + HealthRepo
    + Send
    + Sync
    + 'static
{
}

impl<T> Store for T where
    T: UserRepo
        + TenantRepo
        + SessionRepo
        + SigninThrottleRepo
        + WorkspaceRepo
        + ApiKeyRepo
        + AiKeyRepo
        + HealthRepo
        + Send
        + Sync
        + 'static
{
}
