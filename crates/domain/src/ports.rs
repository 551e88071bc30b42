//! Ports: what the domain needs from the outside world. Adapters implement them: storage in
//! `gc-persistence`, credentials and sealing in `gc-auth`, upstream calls in `gc-gateway`.
//!
//! The storage ports are synchronous (diesel is); callers run them on a blocking pool. Each
//! method is one unit of work: it runs in one transaction where it writes more than one row,
//! and every workspace write appends its activity line in that same transaction. Workspace
//! methods take a `TenantScope` or `WriteScope` and filter every query by its tenant id; every
//! administration method takes an `AdminScope`; AI-key status is written only as a
//! `KeyVerdict`, which only a `RunScope` or an `AdminScope` can make.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::DomainResult;
use crate::model::workspace::{
    Activity, ApiKey, ApiKeyPatch, KeyContext, NewActivity, Record, RecordCounts, RecordFields,
    RecordKind, RecordRef, Settings,
};
use crate::model::{Session, SessionContext, Tenant, TenantPatch, User, UserPatch};
use crate::page::{Page, PageRequest};
use crate::policy::access::{AdminScope, TenantScope, WriteScope};
use crate::policy::admin_tokens::{AdminToken, AdminTokenContext, AdminTokenUse, NewAdminToken};
use crate::policy::ai_access::{KeyVerdict, NewTenantAiKey, TenantAiKey};
use crate::policy::quota::{QuotaWindow, RequestTake, Take, TokenTake};
use crate::policy::runs::RunLine;
use crate::policy::skill_verdicts::SkillGuard;
use crate::policy::usage::{UsagePage, UsageQuery};
use crate::values::{Email, Password};

/// A workspace write's authority and its activity line: the store writes within `scope`'s
/// tenant and appends `activity` in the same transaction. The write's time is the line's.
#[derive(Debug, Clone, Copy)]
pub struct TenantWrite<'a> {
    pub scope: &'a WriteScope,
    pub activity: &'a NewActivity,
}

impl<'a> TenantWrite<'a> {
    pub fn new(scope: &'a WriteScope, activity: &'a NewActivity) -> Self {
        Self { scope, activity }
    }

    pub fn tenant_id(&self) -> Uuid {
        self.scope.tenant_id()
    }

    pub fn at(&self) -> DateTime<Utc> {
        self.activity.at()
    }
}

/// One page of the records of one kind (and, for sources, one parent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordQuery {
    pub kind: RecordKind,
    pub parent_id: Option<Uuid>,
    pub page: PageRequest,
}

impl RecordQuery {
    pub fn new(kind: RecordKind, parent_id: Option<Uuid>, page: PageRequest) -> Self {
        Self {
            kind,
            parent_id,
            page,
        }
    }
}

/// A change of a record's fields ([`WorkspaceRepo::update_record`]).
#[derive(Debug, Clone, Copy)]
pub struct RecordUpdate<'a> {
    pub record: RecordRef,
    /// The version the client read (`If-Match`), when it holds the write to one.
    pub expected_version: Option<i64>,
    pub fields: &'a RecordFields,
    /// A skill's new Guard result, stored with the fields in the same write.
    pub guard: Option<&'a SkillGuard>,
}

/// A Guard result for the record at `version` ([`WorkspaceRepo::set_record_guard`]).
#[derive(Debug, Clone, Copy)]
pub struct GuardStamp<'a> {
    pub record: RecordRef,
    pub version: i64,
    pub guard: &'a SkillGuard,
}

/// New settings for the tenant ([`WorkspaceRepo::update_settings`]).
#[derive(Debug, Clone, Copy)]
pub struct SettingsUpdate<'a> {
    pub expected_version: Option<i64>,
    pub fields: &'a Map<String, Value>,
}

/// The window sessions are kept in at `now`: not expired, and seen after `seen_after` (`now`
/// less the idle limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWindow {
    pub seen_after: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// A Shadow view entered or left on a session ([`SessionRepo::set_shadow`]), with the line
/// for the tenant's feed: entering views the line's tenant from the line's time.
#[derive(Debug, Clone, Copy)]
pub enum ShadowChange<'a> {
    Enter(&'a NewActivity),
    Leave(&'a NewActivity),
}

impl ShadowChange<'_> {
    /// The session's view after the change: the tenant viewed and since when.
    pub fn view(&self) -> Option<(Uuid, DateTime<Utc>)> {
        match self {
            Self::Enter(line) => Some((line.tenant_id(), line.at())),
            Self::Leave(_) => None,
        }
    }

    pub fn activity(&self) -> &NewActivity {
        match self {
            Self::Enter(line) | Self::Leave(line) => line,
        }
    }
}

/// A password attempt to reserve ([`SigninThrottleRepo::reserve_attempt`]): at most `max`
/// attempts for `key` since `since`; this one at `at`.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    pub key: &'a str,
    pub since: DateTime<Utc>,
    pub at: DateTime<Utc>,
    pub max: u64,
}

pub trait UserRepo {
    /// Inserts a user (its email lower-cased); `EmailTaken` when the email exists.
    fn insert_user(&self, user: &User) -> DomainResult<User>;
    fn find_user(&self, id: Uuid) -> DomainResult<Option<User>>;
    fn find_user_by_email(&self, email: &Email) -> DomainResult<Option<User>>;
    /// Newest first, optionally only one tenant's members.
    fn list_users(
        &self,
        scope: &AdminScope,
        tenant_id: Option<Uuid>,
        page: &PageRequest,
    ) -> DomainResult<Page<User>>;
    fn update_user(
        &self,
        scope: &AdminScope,
        id: Uuid,
        patch: &UserPatch,
    ) -> DomainResult<Option<User>>;
    /// Moves a member from tenant `from` to `to` (either may be `None`), in one transaction:
    /// only if the member is still in `from` (else `Ok(None)`: it changed meanwhile); when
    /// `from` is a tenant, every unrevoked key the member made there is revoked at `at` and
    /// `left` is appended to that tenant's feed. `NotFound("tenant")` if `to` does not exist.
    fn move_member(
        &self,
        scope: &AdminScope,
        id: Uuid,
        from: Option<Uuid>,
        to: Option<Uuid>,
        at: DateTime<Utc>,
        left: Option<&NewActivity>,
    ) -> DomainResult<Option<User>>;
    /// Sets a user's own display name (`None` leaves it); `Ok(None)` when the user is gone.
    fn rename_user(&self, id: Uuid, name: Option<&str>) -> DomainResult<Option<User>>;
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
    fn insert_tenant(&self, scope: &AdminScope, tenant: &Tenant) -> DomainResult<Tenant>;
    fn find_tenant(&self, id: Uuid) -> DomainResult<Option<Tenant>>;
    fn list_tenants(&self, scope: &AdminScope, page: &PageRequest) -> DomainResult<Page<Tenant>>;
    fn update_tenant(
        &self,
        scope: &AdminScope,
        id: Uuid,
        patch: &TenantPatch,
    ) -> DomainResult<Option<Tenant>>;
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
    /// Deletes sessions whose absolute expiry (at `window.now`) or idle limit (last seen
    /// before `window.seen_after`) has passed.
    fn delete_expired_sessions(&self, window: SessionWindow) -> DomainResult<u64>;
    /// Admin sessions currently in a Shadow view of this tenant that were seen after
    /// `window.seen_after` and have not expired at `window.now`: `(admin email, since)`,
    /// oldest first.
    fn shadow_viewers(
        &self,
        tenant_id: Uuid,
        window: SessionWindow,
    ) -> DomainResult<Vec<(String, DateTime<Utc>)>>;
    /// Enters or leaves a Shadow view on this session and appends the change's activity line
    /// to the tenant's feed in the same transaction.
    fn set_shadow(&self, session_id: Uuid, change: ShadowChange<'_>) -> DomainResult<()>;
}

/// The answer of [`SigninThrottleRepo::reserve_attempt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// An attempt was recorded; the password may be checked once.
    Reserved,
    /// `max` attempts were already recorded since `since`; the oldest at this time.
    Locked { oldest: DateTime<Utc> },
}

/// Password attempts, kept in the database so every node sees the same count.
pub trait SigninThrottleRepo {
    /// Atomically, serialised per key across every node: when fewer than `attempt.max` attempts
    /// for its key are recorded since `attempt.since`, records one at `attempt.at` and answers
    /// `Reserved`; else
    /// answers `Locked`. The attempt is reserved *before* the password is checked, so any
    /// number of concurrent requests admits at most `max` checks.
    fn reserve_attempt(&self, attempt: &Attempt<'_>) -> DomainResult<Reservation>;
    /// The password was right: forgets every recorded attempt for `key`.
    fn clear_failures(&self, key: &str) -> DomainResult<()>;
}

pub trait WorkspaceRepo {
    /// Records of one kind (and, for sources, one parent), newest first.
    fn list_records(&self, scope: &TenantScope, query: &RecordQuery) -> DomainResult<Page<Record>>;
    fn find_record(&self, scope: &TenantScope, record: RecordRef) -> DomainResult<Option<Record>>;
    /// Inserts a record (version 1) and its activity line.
    fn insert_record(&self, write: TenantWrite<'_>, record: &Record) -> DomainResult<Record>;
    /// Replaces the fields of a record (and, with `guard`, its Guard result), bumping its
    /// version. `update.expected_version` (from `If-Match`) must match when given, else
    /// `VersionConflict`. `Ok(None)` when not found.
    fn update_record(
        &self,
        write: TenantWrite<'_>,
        update: &RecordUpdate<'_>,
    ) -> DomainResult<Option<Record>>;
    /// Stores a record's Guard result (and its activity line) when the record is still at
    /// `stamp.version`; its fields, version and `updated_at` stay. `Ok(None)` when it is gone
    /// or changed.
    fn set_record_guard(
        &self,
        write: TenantWrite<'_>,
        stamp: &GuardStamp<'_>,
    ) -> DomainResult<Option<Record>>;
    /// Deletes a record and its children (a collection's sources); false when not found.
    fn delete_record(&self, write: TenantWrite<'_>, record: RecordRef) -> DomainResult<bool>;
    /// The tenant's record version: a number the database raises, in the same transaction,
    /// whenever one of the tenant's records is inserted, changed or deleted (0 before its first
    /// record). Equal answers mean no record of the tenant changed in between, on any node, so
    /// an answer computed from the records after reading a version may be reused while the
    /// version stays the same (decision 0019).
    fn records_version(&self, scope: &TenantScope) -> DomainResult<i64>;
    fn record_counts(&self, scope: &TenantScope) -> DomainResult<RecordCounts>;
    /// The tenant's settings (empty fields and version 0 when never written).
    fn settings(&self, scope: &TenantScope) -> DomainResult<Settings>;
    /// Replaces the tenant's settings, bumping their version; `expected_version` must match
    /// when given, else `VersionConflict`.
    fn update_settings(
        &self,
        write: TenantWrite<'_>,
        update: &SettingsUpdate<'_>,
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
    fn insert_api_key(&self, write: TenantWrite<'_>, key: &ApiKey) -> DomainResult<ApiKey>;
    /// The tenant's keys, newest first (revoked ones included).
    fn list_api_keys(&self, scope: &TenantScope, page: &PageRequest) -> DomainResult<Page<ApiKey>>;
    /// Sets `revoked_at` (the activity line's time) on a key of the tenant; false when not found
    /// or already revoked.
    fn revoke_api_key(&self, write: TenantWrite<'_>, id: Uuid) -> DomainResult<bool>;
    /// Renames a key of the tenant or changes its limits, and appends `activity`, in one
    /// transaction; `Ok(None)` when not found or revoked.
    fn update_api_key(
        &self,
        write: TenantWrite<'_>,
        id: Uuid,
        patch: &ApiKeyPatch,
    ) -> DomainResult<Option<ApiKey>>;
    /// The key with this hash, with its member and the member's tenant.
    fn key_context(&self, key_hash: &str) -> DomainResult<Option<KeyContext>>;
    fn touch_api_key(&self, id: Uuid, at: DateTime<Utc>) -> DomainResult<()>;
}

pub trait AiKeyRepo {
    fn insert_ai_key(&self, scope: &AdminScope, key: &NewTenantAiKey) -> DomainResult<TenantAiKey>;
    fn list_ai_keys(
        &self,
        scope: &AdminScope,
        tenant_id: Option<Uuid>,
    ) -> DomainResult<Vec<TenantAiKey>>;
    fn delete_ai_key(&self, scope: &AdminScope, tenant_id: Uuid, id: Uuid) -> DomainResult<bool>;
    /// Stores a key's status as judged by a run (a 401 from the upstream) or a diagnosis.
    fn set_ai_key_status(&self, verdict: &KeyVerdict) -> DomainResult<()>;
    /// Keys of the tenant, in its region, that are ready and chat-enabled. `tenant` is the
    /// tenant as read on this request: a store may answer from memory while the tenant's
    /// [`Tenant::ai_keys_version`] is the one it read the keys under (every change to a key
    /// raises it in the change's own transaction), never from an older read.
    fn usable_ai_keys(&self, tenant: &Tenant) -> DomainResult<Vec<TenantAiKey>>;
}

/// Quota counters, shared by every node on the database (see `crate::policy::quota`).
pub trait QuotaRepo {
    /// The tokens counted in each window, in order (0 for a window never written).
    fn window_tokens(&self, windows: &[QuotaWindow]) -> DomainResult<Vec<u64>>;
    /// Atomically, whatever the number of nodes and concurrent callers: when every window has
    /// counted fewer requests than its maximum, counts in each `want` requests (or 1 when
    /// `want` would pass the maximum) and answers what each counted and its new count;
    /// otherwise counts none and names the first full window. Nothing is answered before it
    /// is durable.
    fn take_request(&self, takes: &[RequestTake]) -> DomainResult<Take>;
    /// Whether the caller's thread may wait a few milliseconds for another request's take
    /// (false on a thread that serves connections, where the store defers every write).
    fn may_wait(&self) -> bool {
        true
    }
    /// Atomically, whatever the number of nodes and concurrent callers (decision 0025): when
    /// every window of `takes` can count its `tokens` without passing its `max`, counts them
    /// all and answers each window's new count (`Grant::granted` is the tokens); otherwise
    /// counts none and names the first window that is full. Rows are written in the one lock
    /// order (decision 0024). Nothing is answered before it is durable.
    fn reserve_tokens(&self, takes: &[TokenTake]) -> DomainResult<Take>;
    /// Takes `tokens` back off each window (a reservation whose run was then refused), never
    /// below zero.
    fn release_tokens(&self, windows: &[QuotaWindow], tokens: u64) -> DomainResult<()>;
    /// Forgets per-minute windows that started before `minute_before` and monthly windows that
    /// started before `month_before` (unix milliseconds).
    fn prune_windows(&self, minute_before: i64, month_before: i64) -> DomainResult<u64>;
}

/// Run records for usage, written by the run-record writer; read by the usage services.
pub trait UsageRepo {
    /// Stores a batch of the run-record writer in one transaction: the finished runs, each
    /// run's tokens added to its windows (`RunLine::token_windows`), and the batch's activity
    /// lines (as [`WorkspaceRepo::append_activities`] would). All or nothing.
    fn record_runs(&self, runs: &[RunLine], activities: &[NewActivity]) -> DomainResult<()>;
    /// [`UsageRepo::record_runs`] for a batch whose earlier attempt failed: when that attempt
    /// was committed after all (its answer was lost, e.g. with the connection), nothing is
    /// written again, so a batch is never applied twice. The default (for stores whose failed
    /// writes are never committed) writes it as `record_runs` does.
    fn record_runs_again(&self, runs: &[RunLine], activities: &[NewActivity]) -> DomainResult<()> {
        self.record_runs(runs, activities)
    }
    /// The scope's tenant's usage.
    fn tenant_usage(&self, scope: &TenantScope, query: &UsageQuery) -> DomainResult<UsagePage>;
    /// Every tenant's usage (or one's), grouped by tenant.
    fn all_usage(
        &self,
        scope: &AdminScope,
        tenant_id: Option<Uuid>,
        query: &UsageQuery,
    ) -> DomainResult<UsagePage>;
}

pub trait HealthRepo {
    /// Answers when the database does.
    fn ping(&self) -> DomainResult<()>;

    /// Answers when the database would take this node's work: it answers and accepts writes
    /// (the readiness probe). Without a stronger check of its own, a store answers as
    /// [`HealthRepo::ping`].
    fn ready(&self) -> DomainResult<()> {
        self.ping()
    }
}

/// Read work run on a thread that serves connections, instead of the blocking pool (issue 14).
pub trait InlineRepo {
    /// Reserves a read-only connection on this thread for read work about to run on it, when
    /// the store can answer without waiting for anything but its own disk: an idle connection to
    /// a local database file (SQLite), free at once. `None` (the default, and always on
    /// PostgreSQL) means the work goes to the blocking pool.
    ///
    /// While the guard lives, this thread's store calls use that connection and never wait: a
    /// write, or any failure, is refused at once and marks the guard
    /// [`deferred`](InlineGuard::deferred): the caller then runs the whole work again on the
    /// blocking pool, so work run this way must be safe to repeat (reads, and writes it would
    /// redo anyway).
    fn reserve_inline(&self) -> Option<InlineGuard> {
        None
    }
}

/// What a store keeps for a reservation; see [`InlineRepo::reserve_inline`].
pub trait InlineReservation {
    /// The work asked for something that would wait (a write), or failed.
    fn deferred(&self) -> bool;
}

/// A connection reserved for read work on the current thread; it goes back to the store when
/// the guard drops, and the guard cannot leave its thread.
#[must_use = "the reservation ends when the guard drops"]
pub struct InlineGuard(Box<dyn InlineReservation>);

impl InlineGuard {
    pub fn new(reservation: Box<dyn InlineReservation>) -> Self {
        Self(reservation)
    }

    /// True when the work must run again on the blocking pool; its answer is not to be used.
    pub fn deferred(&self) -> bool {
        self.0.deferred()
    }
}

/// Declares `Store` as all the given ports at once (plus `Send + Sync + 'static`) and makes
/// every type that has them all a `Store`: the list is written once.
macro_rules! store_of_ports {
    ($($port:ident),+ $(,)?) => {
        /// Everything the service needs from storage, as one object.
        pub trait Store: $($port +)+ Send + Sync + 'static {}

        impl<T> Store for T where T: $($port +)+ Send + Sync + 'static {}
    };
}

store_of_ports!(
    UserRepo,
    TenantRepo,
    SessionRepo,
    SigninThrottleRepo,
    WorkspaceRepo,
    ApiKeyRepo,
    AdminTokenRepo,
    AiKeyRepo,
    QuotaRepo,
    UsageRepo,
    HealthRepo,
    InlineRepo,
);

/// Makes and checks credentials. Implemented in `gc-auth` (random tokens, CRC32-checked
/// `gc_` keys, SHA-256). Checks here need no database: a malformed credential costs no query.
pub trait CredentialCodec: Send + Sync {
    /// A fresh session token for the client, and the hash to store.
    fn new_session_token(&self) -> (crate::secret::SecretString, String);
    /// A fresh workspace API key for the client, its stored hash and its display hint.
    fn new_api_key(&self) -> (crate::secret::SecretString, String, String);
    /// The hash to look up for a presented session token, or `None` when its shape is wrong.
    fn session_hash(&self, raw: &str) -> Option<String>;
    /// The hash to look up for a presented API key, or `None` when its checksum fails.
    fn api_key_hash(&self, raw: &str) -> Option<String>;
    /// A fresh `gca_` admin token for the client and its stored hash (decision 0036).
    fn new_admin_token(&self) -> (crate::secret::SecretString, String);
    /// The hash to look up for a presented admin token, or `None` when its checksum fails.
    fn admin_token_hash(&self, raw: &str) -> Option<String>;
}

/// Seals upstream AI keys at rest. Implemented in `gc-auth` (AES-256-GCM under the master
/// key, bound to the key's tenant and id).
pub trait KeySealer: Send + Sync {
    fn seal(&self, plaintext: &str, binding: &[u8]) -> DomainResult<String>;
    /// `None` when the sealed value does not open with any configured master key.
    fn open(&self, sealed: &str, binding: &[u8]) -> Option<crate::secret::SecretString>;
}

/// Storage of admin tokens.
pub trait AdminTokenRepo {
    fn insert_admin_token(&self, token: &NewAdminToken) -> DomainResult<AdminToken>;
    /// The tokens of one admin, newest first.
    fn list_admin_tokens(
        &self,
        user_id: Uuid,
        page: &PageRequest,
    ) -> DomainResult<Page<AdminToken>>;
    /// Deletes one of the admin's tokens; false when the admin has none with this id.
    fn delete_admin_token(&self, user_id: Uuid, id: Uuid) -> DomainResult<bool>;
    /// The token with this hash, its admin and the admin's tenant.
    fn admin_token_context(&self, token_hash: &str) -> DomainResult<Option<AdminTokenContext>>;
    /// Appends the audit line of one use and, when `touch`, sets the token's `last_used_at`
    /// to the use's time.
    fn record_admin_token_use(&self, used: &AdminTokenUse, touch: bool) -> DomainResult<()>;
}

/// Hashes and verifies passwords. Implemented with bcrypt in `gc-auth`; slow by design, so
/// callers run it on a blocking pool.
pub trait PasswordHasher: Send + Sync {
    fn hash(&self, password: &Password) -> DomainResult<String>;
    fn verify(&self, password: &str, hash: &str) -> bool;
    /// A hash of a random password at the same cost, verified for unknown emails so that
    /// timing does not tell whether an account exists.
    fn dummy_hash(&self) -> &str;
}
