//! In-memory fakes of the ports, for the services' unit tests.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::{
    Activity, ApiKey, KeyContext, NewActivity, Record, RecordCounts, RecordKind, RecordRef,
    Settings,
};
use crate::model::{Session, SessionContext, Status, Tenant, TenantPatch, User, UserPatch};
use crate::page::{Page, PageRequest};
use crate::policy::access::{AdminScope, TenantScope, WriteScope};
use crate::policy::admin_tokens::{AdminToken, AdminTokenContext, AdminTokenUse, NewAdminToken};
use crate::policy::ai_access::{KeyVerdict, NewTenantAiKey, TenantAiKey};
use crate::policy::quota::{Grant, QuotaWindow, RequestTake, Take, TokenTake};
use crate::ports::AdminTokenRepo;
use crate::ports::{
    AiKeyRepo, ApiKeyRepo, Attempt, CredentialCodec, GuardStamp, KeySealer, QuotaRepo, RecordQuery,
    RecordUpdate, Reservation, SessionRepo, SessionWindow, SettingsUpdate, ShadowChange,
    SigninThrottleRepo, TenantRepo, TenantWrite, UserRepo, WorkspaceRepo,
};
use crate::secret::SecretString;
use crate::values::Email;

/// A recorded `move_member`: member, from, to.
pub type Move = (Uuid, Option<Uuid>, Option<Uuid>);

/// A recorded `set_shadow`: the view set (`None`: left), the activity line's tenant and action.
pub type ShadowWrite = (Option<(Uuid, DateTime<Utc>)>, Uuid, String);

/// A store holding users, tenants, sessions, workspace API keys, password attempts and AI
/// keys in memory, recording the writes the services make.
#[derive(Default)]
pub struct Fake {
    pub users: Mutex<Vec<User>>,
    pub attempts: Mutex<Vec<(String, DateTime<Utc>)>>,
    pub keys: Mutex<Vec<TenantAiKey>>,
    pub verdicts: Mutex<Vec<KeyVerdict>>,
    pub passwords_changed: Mutex<u32>,
    pub tenants: Mutex<Vec<Tenant>>,
    pub sessions: Mutex<Vec<Session>>,
    pub api_keys: Mutex<Vec<ApiKey>>,
    /// Every `touch_session` / `touch_api_key`: the session's or key's id and the time.
    pub touched: Mutex<Vec<(Uuid, DateTime<Utc>)>>,
    /// Every `move_member`.
    pub moves: Mutex<Vec<Move>>,
    /// Every `set_shadow`.
    pub shadow_writes: Mutex<Vec<ShadowWrite>>,
    /// The workspace side, for services that need both (the overview).
    pub workspace: FakeWorkspace,
    /// Quota counters: (requests, tokens) per window.
    pub quota: Mutex<HashMap<QuotaWindow, (u64, u64)>>,
    /// Calls to the quota port.
    pub quota_calls: Mutex<u32>,
    /// How many coming `take_request` calls fail `Unavailable` (a store that refused them).
    pub refuse_takes: Mutex<u32>,
    /// Admin tokens (decision 0036), each with its hash.
    pub admin_tokens: Mutex<Vec<NewAdminToken>>,
    /// Every recorded admin-token use and whether it touched the token.
    pub admin_token_uses: Mutex<Vec<(AdminTokenUse, bool)>>,
}

/// The first item of `list` that `pick` picks, cloned.
fn first<T: Clone>(list: &Mutex<Vec<T>>, pick: impl Fn(&T) -> bool) -> Option<T> {
    list.lock().unwrap().iter().find(|x| pick(x)).cloned()
}

/// The items of `list` that `pick` picks, cloned, in order.
fn picked<T: Clone>(list: &Mutex<Vec<T>>, pick: impl Fn(&T) -> bool) -> Vec<T> {
    list.lock()
        .unwrap()
        .iter()
        .filter(|x| pick(x))
        .cloned()
        .collect()
}

/// Removes the items of `list` that `pick` picks; how many it removed.
fn removed<T>(list: &Mutex<Vec<T>>, pick: impl Fn(&T) -> bool) -> usize {
    let mut list = list.lock().unwrap();
    let before = list.len();
    list.retain(|x| !pick(x));
    before - list.len()
}

impl Fake {
    pub fn with_keys(keys: Vec<TenantAiKey>) -> Self {
        let fake = Self::default();
        *fake.keys.lock().unwrap() = keys;
        fake
    }

    /// Takes all of `takes` or none, as the stores do: `Full` at the first whose window's
    /// `count` (requests or tokens) is `full` at what it has `used`, else each window's count
    /// raised by its `grant`.
    fn take_all<T>(
        &self,
        takes: &[T],
        window: impl Fn(&T) -> QuotaWindow,
        count: fn(&mut (u64, u64)) -> &mut u64,
        full: impl Fn(&T, u64) -> bool,
        grant: impl Fn(&T, u64) -> u64,
    ) -> Take {
        let mut quota = self.quota.lock().unwrap();
        let used = |t: &T| {
            quota
                .get(&window(t))
                .copied()
                .map_or(0, |mut c| *count(&mut c))
        };
        if let Some(i) = takes.iter().position(|t| full(t, used(t))) {
            return Take::Full(i);
        }
        Take::Taken(
            takes
                .iter()
                .map(|t| {
                    let n = count(quota.entry(window(t)).or_default());
                    let granted = grant(t, *n);
                    *n += granted;
                    Grant { granted, count: *n }
                })
                .collect(),
        )
    }

    /// A new tenant of `status` (the access tests' `tenant`), stored.
    pub fn stored_tenant(&self, status: Status) -> Tenant {
        let tenant = crate::policy::access::tests::tenant(status);
        self.tenants.lock().unwrap().push(tenant.clone());
        tenant
    }

    /// Adds tokens as the run-record writer does when runs end.
    pub fn add_tokens_now(&self, windows: Vec<QuotaWindow>, tokens: u64) {
        let mut quota = self.quota.lock().unwrap();
        for w in windows {
            quota.entry(w).or_default().1 += tokens;
        }
    }
}

impl QuotaRepo for Fake {
    fn window_tokens(&self, windows: &[QuotaWindow]) -> DomainResult<Vec<u64>> {
        *self.quota_calls.lock().unwrap() += 1;
        let quota = self.quota.lock().unwrap();
        Ok(windows
            .iter()
            .map(|w| quota.get(w).map_or(0, |c| c.1))
            .collect())
    }
    fn take_request(&self, takes: &[RequestTake]) -> DomainResult<Take> {
        *self.quota_calls.lock().unwrap() += 1;
        {
            let mut refuse = self.refuse_takes.lock().unwrap();
            if *refuse > 0 {
                *refuse -= 1;
                return Err(DomainError::Unavailable {
                    retry_after_secs: 1,
                });
            }
        }
        Ok(self.take_all(
            takes,
            |t| t.window,
            |c| &mut c.0,
            |t, used| used >= t.max,
            |t, used| if used + t.want <= t.max { t.want } else { 1 },
        ))
    }
    fn reserve_tokens(&self, takes: &[TokenTake]) -> DomainResult<Take> {
        *self.quota_calls.lock().unwrap() += 1;
        Ok(self.take_all(
            takes,
            |t| t.window,
            |c| &mut c.1,
            |t, used| t.max.is_some_and(|max| used + t.tokens > max),
            |t, _| t.tokens,
        ))
    }
    fn release_tokens(&self, windows: &[QuotaWindow], tokens: u64) -> DomainResult<()> {
        *self.quota_calls.lock().unwrap() += 1;
        let mut quota = self.quota.lock().unwrap();
        for w in windows {
            let c = quota.entry(*w).or_default();
            c.1 = c.1.saturating_sub(tokens);
        }
        Ok(())
    }
    fn prune_windows(&self, _: i64, _: i64) -> DomainResult<u64> {
        Ok(0)
    }
}

impl AdminTokenRepo for Fake {
    fn insert_admin_token(&self, token: &NewAdminToken) -> DomainResult<AdminToken> {
        self.admin_tokens.lock().unwrap().push(token.clone());
        Ok(token.token.clone())
    }
    /// The admin's tokens, newest first, in one page.
    fn list_admin_tokens(&self, user_id: Uuid, _: &PageRequest) -> DomainResult<Page<AdminToken>> {
        let mut items: Vec<AdminToken> = picked(&self.admin_tokens, |t| t.token.user_id == user_id)
            .into_iter()
            .map(|t| t.token)
            .collect();
        items.reverse();
        Ok(Page { items, next: None })
    }
    fn delete_admin_token(&self, user_id: Uuid, id: Uuid) -> DomainResult<bool> {
        Ok(removed(&self.admin_tokens, |t| {
            t.token.user_id == user_id && t.token.id == id
        }) > 0)
    }
    /// Whatever the state of the token and its admin: the domain must decide.
    fn admin_token_context(&self, token_hash: &str) -> DomainResult<Option<AdminTokenContext>> {
        let found = self.with_owner(
            &self.admin_tokens,
            |t| t.token_hash == token_hash,
            |t| t.token.user_id,
        )?;
        Ok(found.map(|(t, user, tenant)| AdminTokenContext {
            tenant,
            token: t.token,
            user,
        }))
    }
    fn record_admin_token_use(&self, used: &AdminTokenUse, touch: bool) -> DomainResult<()> {
        self.admin_token_uses
            .lock()
            .unwrap()
            .push((used.clone(), touch));
        if touch {
            for t in self.admin_tokens.lock().unwrap().iter_mut() {
                if t.token.id == used.token_id {
                    t.token.last_used_at = Some(used.at);
                }
            }
        }
        Ok(())
    }
}

impl SigninThrottleRepo for Fake {
    fn reserve_attempt(&self, attempt: &Attempt<'_>) -> DomainResult<Reservation> {
        let mut attempts = self.attempts.lock().unwrap();
        let recent: Vec<DateTime<Utc>> = attempts
            .iter()
            .filter(|(k, t)| k == attempt.key && *t >= attempt.since)
            .map(|(_, t)| *t)
            .collect();
        if recent.len() as u64 >= attempt.max {
            let oldest = recent.into_iter().min().unwrap_or(attempt.at);
            return Ok(Reservation::Locked { oldest });
        }
        attempts.push((attempt.key.to_owned(), attempt.at));
        Ok(Reservation::Reserved)
    }

    fn clear_failures(&self, key: &str) -> DomainResult<()> {
        self.attempts.lock().unwrap().retain(|(k, _)| k != key);
        Ok(())
    }
}

impl UserRepo for Fake {
    fn insert_user(&self, user: &User) -> DomainResult<User> {
        let mut users = self.users.lock().unwrap();
        if users.iter().any(|u| u.email == user.email) {
            return Err(DomainError::EmailTaken);
        }
        users.push(user.clone());
        Ok(user.clone())
    }
    fn find_user(&self, id: Uuid) -> DomainResult<Option<User>> {
        Ok(first(&self.users, |u| u.id == id))
    }
    fn find_user_by_email(&self, email: &Email) -> DomainResult<Option<User>> {
        Ok(first(&self.users, |u| u.email == *email))
    }
    fn list_users(
        &self,
        _: &AdminScope,
        _: Option<Uuid>,
        _: &PageRequest,
    ) -> DomainResult<Page<User>> {
        Ok(Page {
            items: self.users.lock().unwrap().clone(),
            next: None,
        })
    }
    fn update_user(&self, _: &AdminScope, _: Uuid, _: &UserPatch) -> DomainResult<Option<User>> {
        Ok(None)
    }
    fn move_member(
        &self,
        _: &AdminScope,
        id: Uuid,
        from: Option<Uuid>,
        to: Option<Uuid>,
        _: DateTime<Utc>,
        _: Option<&crate::model::workspace::NewActivity>,
    ) -> DomainResult<Option<User>> {
        self.moves.lock().unwrap().push((id, from, to));
        let mut users = self.users.lock().unwrap();
        let Some(user) = users.iter_mut().find(|u| u.id == id && u.tenant_id == from) else {
            return Ok(None);
        };
        user.tenant_id = to;
        Ok(Some(user.clone()))
    }
    fn rename_user(&self, _: Uuid, _: Option<&str>) -> DomainResult<Option<User>> {
        Ok(None)
    }
    fn change_password(&self, _: Uuid, _: &str, _: Option<Uuid>) -> DomainResult<()> {
        *self.passwords_changed.lock().unwrap() += 1;
        Ok(())
    }
    fn count_admins(&self) -> DomainResult<u64> {
        Ok(0)
    }
}

impl AiKeyRepo for Fake {
    fn insert_ai_key(&self, _: &AdminScope, key: &NewTenantAiKey) -> DomainResult<TenantAiKey> {
        self.keys.lock().unwrap().push(key.clone());
        Ok(key.clone())
    }
    fn list_ai_keys(&self, _: &AdminScope, tenant: Option<Uuid>) -> DomainResult<Vec<TenantAiKey>> {
        Ok(picked(&self.keys, |k| {
            tenant.is_none_or(|t| t == k.tenant_id)
        }))
    }
    fn delete_ai_key(&self, _: &AdminScope, tenant: Uuid, id: Uuid) -> DomainResult<bool> {
        Ok(removed(&self.keys, |k| k.tenant_id == tenant && k.id == id) > 0)
    }
    fn set_ai_key_status(&self, verdict: &KeyVerdict) -> DomainResult<()> {
        self.verdicts.lock().unwrap().push(verdict.clone());
        Ok(())
    }
    /// Answers every key of the tenant, whatever its state: the domain must filter.
    fn usable_ai_keys(&self, tenant: &Tenant) -> DomainResult<Vec<TenantAiKey>> {
        Ok(picked(&self.keys, |k| k.tenant_id == tenant.id))
    }
}

impl Fake {
    fn tenant(&self, id: Option<Uuid>) -> Option<Tenant> {
        let id = id?;
        first(&self.tenants, |t| t.id == id)
    }

    /// The first of `list` that `pick` picks, with its user (`user_id`) and the user's tenant,
    /// when it and its user are stored: a credential's context, whatever their states.
    fn with_owner<T: Clone>(
        &self,
        list: &Mutex<Vec<T>>,
        pick: impl Fn(&T) -> bool,
        user_id: impl Fn(&T) -> Uuid,
    ) -> DomainResult<Option<(T, User, Option<Tenant>)>> {
        let Some(found) = first(list, pick) else {
            return Ok(None);
        };
        Ok(self.find_user(user_id(&found))?.map(|user| {
            let tenant = self.tenant(user.tenant_id);
            (found, user, tenant)
        }))
    }
}

impl TenantRepo for Fake {
    fn insert_tenant(&self, _: &AdminScope, tenant: &Tenant) -> DomainResult<Tenant> {
        self.tenants.lock().unwrap().push(tenant.clone());
        Ok(tenant.clone())
    }
    fn find_tenant(&self, id: Uuid) -> DomainResult<Option<Tenant>> {
        Ok(self.tenant(Some(id)))
    }
    fn list_tenants(&self, _: &AdminScope, _: &PageRequest) -> DomainResult<Page<Tenant>> {
        Err(DomainError::Internal("not faked".into()))
    }
    fn update_tenant(
        &self,
        _: &AdminScope,
        _: Uuid,
        _: &TenantPatch,
    ) -> DomainResult<Option<Tenant>> {
        Err(DomainError::Internal("not faked".into()))
    }
}

impl SessionRepo for Fake {
    fn insert_session(&self, session: &Session) -> DomainResult<()> {
        self.sessions.lock().unwrap().push(session.clone());
        Ok(())
    }
    /// Whatever the state of the session, its user and tenants: the domain must decide.
    fn session_context(&self, token_hash: &str) -> DomainResult<Option<SessionContext>> {
        let found = self.with_owner(
            &self.sessions,
            |s| s.token_hash == token_hash,
            |s| s.user_id,
        )?;
        Ok(found.map(|(session, user, tenant)| SessionContext {
            tenant,
            shadow_tenant: self.tenant(session.shadow_tenant_id),
            session,
            user,
        }))
    }
    fn touch_session(&self, id: Uuid, at: DateTime<Utc>) -> DomainResult<()> {
        self.touched.lock().unwrap().push((id, at));
        for s in self.sessions.lock().unwrap().iter_mut() {
            if s.id == id {
                s.last_seen_at = at;
            }
        }
        Ok(())
    }
    fn list_sessions(&self, user_id: Uuid) -> DomainResult<Vec<Session>> {
        Ok(picked(&self.sessions, |s| s.user_id == user_id))
    }
    fn delete_session(&self, user_id: Uuid, id: Uuid) -> DomainResult<bool> {
        Ok(removed(&self.sessions, |s| s.user_id == user_id && s.id == id) > 0)
    }
    fn delete_other_sessions(&self, user_id: Uuid, keep: Uuid) -> DomainResult<u64> {
        Ok(removed(&self.sessions, |s| s.user_id == user_id && s.id != keep) as u64)
    }
    fn delete_expired_sessions(&self, _: SessionWindow) -> DomainResult<u64> {
        Err(DomainError::Internal("not faked".into()))
    }
    fn shadow_viewers(
        &self,
        tenant_id: Uuid,
        window: SessionWindow,
    ) -> DomainResult<Vec<(String, DateTime<Utc>)>> {
        let sessions = self.sessions.lock().unwrap().clone();
        let mut viewers = Vec::new();
        for s in sessions {
            let (Some(t), Some(since)) = (s.shadow_tenant_id, s.shadow_since) else {
                continue;
            };
            if t == tenant_id && s.last_seen_at > window.seen_after && s.expires_at > window.now {
                if let Some(user) = self.find_user(s.user_id)? {
                    viewers.push((user.email.as_str().to_owned(), since));
                }
            }
        }
        viewers.sort_by_key(|(_, since)| *since);
        Ok(viewers)
    }
    fn set_shadow(&self, session_id: Uuid, change: ShadowChange<'_>) -> DomainResult<()> {
        let (shadow, activity) = (change.view(), change.activity());
        self.shadow_writes.lock().unwrap().push((
            shadow,
            activity.tenant_id(),
            activity.action().to_owned(),
        ));
        for s in self.sessions.lock().unwrap().iter_mut() {
            if s.id == session_id {
                s.shadow_tenant_id = shadow.map(|(t, _)| t);
                s.shadow_since = shadow.map(|(_, since)| since);
            }
        }
        Ok(())
    }
}

/// A key of the scope's tenant that is not revoked.
fn live_key<'a>(keys: &'a mut [ApiKey], scope: &WriteScope, id: Uuid) -> Option<&'a mut ApiKey> {
    keys.iter_mut()
        .find(|k| k.id == id && k.tenant_id == scope.tenant_id() && k.revoked_at.is_none())
}

impl ApiKeyRepo for Fake {
    fn insert_api_key(&self, write: TenantWrite<'_>, key: &ApiKey) -> DomainResult<ApiKey> {
        self.api_keys.lock().unwrap().push(key.clone());
        self.workspace.append_activity(write.activity)?;
        Ok(key.clone())
    }
    /// The tenant's keys, newest first, in one page.
    fn list_api_keys(&self, scope: &TenantScope, _: &PageRequest) -> DomainResult<Page<ApiKey>> {
        let mut items = picked(&self.api_keys, |k| k.tenant_id == scope.tenant_id());
        items.reverse();
        Ok(Page { items, next: None })
    }
    fn revoke_api_key(&self, write: TenantWrite<'_>, id: Uuid) -> DomainResult<bool> {
        let mut keys = self.api_keys.lock().unwrap();
        let Some(key) = live_key(&mut keys, write.scope, id) else {
            return Ok(false);
        };
        key.revoked_at = Some(write.at());
        self.workspace.append_activity(write.activity)?;
        Ok(true)
    }
    /// Whatever the state of the key, its member and tenant: the domain must decide.
    fn key_context(&self, key_hash: &str) -> DomainResult<Option<KeyContext>> {
        let found = self.with_owner(&self.api_keys, |k| k.key_hash == key_hash, |k| k.user_id)?;
        Ok(found.map(|(key, user, tenant)| KeyContext { tenant, key, user }))
    }
    fn update_api_key(
        &self,
        write: TenantWrite<'_>,
        id: Uuid,
        patch: &crate::model::workspace::ApiKeyPatch,
    ) -> DomainResult<Option<ApiKey>> {
        let mut keys = self.api_keys.lock().unwrap();
        let Some(key) = live_key(&mut keys, write.scope, id) else {
            return Ok(None);
        };
        if let Some(name) = &patch.name {
            key.name = name.clone();
        }
        if let Some(v) = patch.requests_per_minute {
            key.limits.requests_per_minute = v;
        }
        if let Some(v) = patch.tokens_per_minute {
            key.limits.tokens_per_minute = v;
        }
        self.workspace.append_activity(write.activity)?;
        Ok(Some(key.clone()))
    }

    fn touch_api_key(&self, id: Uuid, at: DateTime<Utc>) -> DomainResult<()> {
        self.touched.lock().unwrap().push((id, at));
        for k in self.api_keys.lock().unwrap().iter_mut() {
            if k.id == id {
                k.last_used_at = Some(at);
            }
        }
        Ok(())
    }
}

/// Seals by prefixing; a value starting with `bad:` does not open.
pub struct FakeSealer;

impl KeySealer for FakeSealer {
    fn seal(&self, plaintext: &str, _: &[u8]) -> DomainResult<String> {
        Ok(format!("sealed:{plaintext}"))
    }
    fn open(&self, sealed: &str, _: &[u8]) -> Option<SecretString> {
        sealed.strip_prefix("sealed:").map(SecretString::new)
    }
}

/// Makes numbered keys `gc_test_<n>` whose hash is the key reversed.
pub struct FakeCodec;

impl FakeCodec {
    pub fn hash_of(raw: &str) -> String {
        raw.chars().rev().collect()
    }
}

impl CredentialCodec for FakeCodec {
    fn new_session_token(&self) -> (SecretString, String) {
        let raw = format!("session_{}", Uuid::now_v7().simple());
        let hash = Self::hash_of(&raw);
        (SecretString::new(raw), hash)
    }
    fn new_api_key(&self) -> (SecretString, String, String) {
        let raw = format!("gc_test_{}", Uuid::now_v7().simple());
        let hash = Self::hash_of(&raw);
        let hint = format!("gc_…{}", &raw[raw.len() - 4..]);
        (SecretString::new(raw), hash, hint)
    }
    fn session_hash(&self, raw: &str) -> Option<String> {
        Some(Self::hash_of(raw))
    }
    fn api_key_hash(&self, raw: &str) -> Option<String> {
        raw.starts_with("gc_").then(|| Self::hash_of(raw))
    }
    fn new_admin_token(&self) -> (SecretString, String) {
        let raw = format!("gca_test_{}", Uuid::now_v7().simple());
        let hash = Self::hash_of(&raw);
        (SecretString::new(raw), hash)
    }
    fn admin_token_hash(&self, raw: &str) -> Option<String> {
        raw.starts_with("gca_").then(|| Self::hash_of(raw))
    }
}

/// Wakes by raising its flag.
struct WakeFlag(std::sync::atomic::AtomicBool);

impl std::task::Wake for WakeFlag {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Runs a future whose every await is ready at once (the fakes never wait), or that wakes
/// itself before it answers pending. A future pending with no wake would never be polled
/// again by a real executor: that panics here (instead of spinning).
pub fn ready<F: std::future::Future>(f: F) -> F::Output {
    let flag = std::sync::Arc::new(WakeFlag(std::sync::atomic::AtomicBool::new(false)));
    let waker = std::task::Waker::from(std::sync::Arc::clone(&flag));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        assert!(
            flag.0.swap(false, std::sync::atomic::Ordering::SeqCst),
            "the future is pending and nothing will wake it"
        );
    }
}

/// An in-memory workspace: records by tenant, settings, and every activity line written.
#[derive(Default)]
pub struct FakeWorkspace {
    pub records: Mutex<Vec<(Uuid, Record)>>,
    pub activity: Mutex<Vec<NewActivity>>,
    /// How many of the next record updates lose a race (answer `VersionConflict`).
    pub lose_races: Mutex<u32>,
    /// Every port call, by name, to prove a refused call touched nothing.
    pub calls: Mutex<Vec<&'static str>>,
    /// The one tenant's settings (tests use one tenant).
    pub settings: Mutex<Option<Settings>>,
    /// Record versions by tenant, raised by every record write (the database's trigger).
    pub record_versions: Mutex<std::collections::HashMap<Uuid, i64>>,
}

impl FakeWorkspace {
    fn call(&self, name: &'static str) {
        self.calls.lock().unwrap().push(name);
    }

    /// A lost race (`VersionConflict`) while `lose_races` says one is due.
    fn lose_a_race(&self, expected: Option<i64>) -> DomainResult<()> {
        let mut races = self.lose_races.lock().unwrap();
        if *races > 0 {
            *races -= 1;
            return Err(DomainError::VersionConflict {
                expected: expected.unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// A record write of the tenant: its record version raised (as the database's trigger
    /// does) and the activity line kept.
    fn wrote(&self, tenant: Uuid, activity: &NewActivity) {
        *self
            .record_versions
            .lock()
            .unwrap()
            .entry(tenant)
            .or_default() += 1;
        self.activity.lock().unwrap().push(activity.clone());
    }

    /// Changes the first record of the write's tenant that `change` changes (answering
    /// whether it did) and records the write; `None` when it changed none.
    fn change(
        &self,
        write: TenantWrite<'_>,
        mut change: impl FnMut(&mut Record) -> DomainResult<bool>,
    ) -> DomainResult<Option<Record>> {
        let mut records = self.records.lock().unwrap();
        let mut changed = None;
        for (t, r) in records.iter_mut() {
            if *t == write.tenant_id() && change(r)? {
                changed = Some(r.clone());
                break;
            }
        }
        drop(records);
        if changed.is_some() {
            self.wrote(write.tenant_id(), write.activity);
        }
        Ok(changed)
    }

    fn find(&self, tenant: Uuid, record: RecordRef) -> Option<Record> {
        self.records
            .lock()
            .unwrap()
            .iter()
            .find(|(t, r)| *t == tenant && r.is_at(record))
            .map(|(_, r)| r.clone())
    }
}

/// A version conflict when `expected` is given and is not `version` (a write's `If-Match`).
fn in_version(expected: Option<i64>, version: i64) -> DomainResult<()> {
    match expected {
        Some(v) if v != version => Err(DomainError::VersionConflict { expected: v }),
        _ => Ok(()),
    }
}

/// A fake holding a [`FakeWorkspace`]; its workspace ports are that workspace's.
pub trait HoldsWorkspace {
    fn fake_workspace(&self) -> &FakeWorkspace;

    /// The workspace, with a call of port method `name` counted.
    fn called(&self, name: &'static str) -> &FakeWorkspace {
        let ws = self.fake_workspace();
        ws.call(name);
        ws
    }
}

impl HoldsWorkspace for FakeWorkspace {
    fn fake_workspace(&self) -> &FakeWorkspace {
        self
    }
}

impl HoldsWorkspace for Fake {
    fn fake_workspace(&self) -> &FakeWorkspace {
        &self.workspace
    }
}

impl<T: HoldsWorkspace> WorkspaceRepo for T {
    fn list_records(&self, scope: &TenantScope, query: &RecordQuery) -> DomainResult<Page<Record>> {
        let ws = self.called("list_records");
        let items = ws
            .records
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, r)| {
                *t == scope.tenant_id() && r.kind == query.kind && r.parent_id == query.parent_id
            })
            .map(|(_, r)| r.clone())
            .collect();
        Ok(Page { items, next: None })
    }

    fn find_record(&self, scope: &TenantScope, record: RecordRef) -> DomainResult<Option<Record>> {
        let ws = self.called("find_record");
        Ok(ws.find(scope.tenant_id(), record))
    }

    fn insert_record(&self, write: TenantWrite<'_>, record: &Record) -> DomainResult<Record> {
        let ws = self.called("insert_record");
        ws.records
            .lock()
            .unwrap()
            .push((write.tenant_id(), record.clone()));
        ws.wrote(write.tenant_id(), write.activity);
        Ok(record.clone())
    }

    fn update_record(
        &self,
        write: TenantWrite<'_>,
        update: &RecordUpdate<'_>,
    ) -> DomainResult<Option<Record>> {
        let ws = self.called("update_record");
        let expected_version = update.expected_version;
        ws.lose_a_race(expected_version)?;
        ws.change(write, |r| {
            if !r.is_at(update.record) {
                return Ok(false);
            }
            in_version(expected_version, r.version)?;
            r.fields = update.fields.clone();
            r.version += 1;
            r.updated_at = write.at();
            if let Some(guard) = update.guard {
                r.guard = Some(guard.clone());
            }
            Ok(true)
        })
    }

    fn set_record_guard(
        &self,
        write: TenantWrite<'_>,
        stamp: &GuardStamp<'_>,
    ) -> DomainResult<Option<Record>> {
        self.called("set_record_guard").change(write, |r| {
            let at = r.is_at(stamp.record) && r.version == stamp.version;
            if at {
                r.guard = Some(stamp.guard.clone());
            }
            Ok(at)
        })
    }

    fn delete_record(&self, write: TenantWrite<'_>, record: RecordRef) -> DomainResult<bool> {
        let ws = self.called("delete_record");
        let mut records = ws.records.lock().unwrap();
        let before = records.len();
        records.retain(|(t, r)| !(*t == write.tenant_id() && r.is_at(record)));
        let deleted = records.len() < before;
        if deleted {
            ws.wrote(write.tenant_id(), write.activity);
        }
        Ok(deleted)
    }

    fn records_version(&self, scope: &TenantScope) -> DomainResult<i64> {
        let ws = self.called("records_version");
        Ok(ws
            .record_versions
            .lock()
            .unwrap()
            .get(&scope.tenant_id())
            .copied()
            .unwrap_or(0))
    }

    fn record_counts(&self, scope: &TenantScope) -> DomainResult<RecordCounts> {
        let ws = self.called("record_counts");
        let records = ws.records.lock().unwrap();
        let count = |kind: RecordKind| {
            records
                .iter()
                .filter(|(t, r)| *t == scope.tenant_id() && r.kind == kind)
                .count() as u64
        };
        Ok(RecordCounts {
            skills: count(RecordKind::Skill),
            memory_collections: count(RecordKind::MemoryCollection),
            agents: count(RecordKind::AgentDraft),
            workflows: count(RecordKind::WorkflowDraft),
            apps: count(RecordKind::AppDraft),
            api_keys: 0,
        })
    }

    fn settings(&self, _scope: &TenantScope) -> DomainResult<Settings> {
        let ws = self.called("settings");
        Ok(ws.settings.lock().unwrap().clone().unwrap_or(Settings {
            fields: Map::new(),
            version: 0,
            updated_at: None,
        }))
    }

    fn update_settings(
        &self,
        write: TenantWrite<'_>,
        update: &SettingsUpdate<'_>,
    ) -> DomainResult<Settings> {
        let ws = self.called("update_settings");
        let expected_version = update.expected_version;
        ws.lose_a_race(expected_version)?;
        let current = self.settings(&write.scope.as_read())?;
        in_version(expected_version, current.version)?;
        let next = Settings {
            fields: update.fields.clone(),
            version: current.version + 1,
            updated_at: Some(write.at()),
        };
        *ws.settings.lock().unwrap() = Some(next.clone());
        ws.activity.lock().unwrap().push(write.activity.clone());
        Ok(next)
    }

    fn list_activity(
        &self,
        _scope: &TenantScope,
        _page: &PageRequest,
    ) -> DomainResult<Page<Activity>> {
        self.called("list_activity");
        Ok(Page {
            items: Vec::new(),
            next: None,
        })
    }

    fn append_activity(&self, activity: &NewActivity) -> DomainResult<()> {
        let ws = self.fake_workspace();
        ws.activity.lock().unwrap().push(activity.clone());
        Ok(())
    }

    fn append_activities(&self, activities: &[NewActivity]) -> DomainResult<()> {
        let ws = self.fake_workspace();
        ws.activity
            .lock()
            .unwrap()
            .extend(activities.iter().cloned());
        Ok(())
    }
}

/// Storage work run at once on the fake (the services' `Storage` port).
impl crate::services::Storage for Fake {
    type Store = Fake;
    fn run<T, F>(&self, work: F) -> impl std::future::Future<Output = DomainResult<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Fake) -> DomainResult<T> + Send + 'static,
    {
        std::future::ready(work(self))
    }
}

/// Region gateways that answer from a table: `keys` maps a secret to its probe answer (a
/// secret not listed is refused without a reason); a region absent from `gateways` has no
/// gateway. Every key probe is recorded.
#[derive(Default)]
pub struct FakeProbe {
    pub gateways: HashMap<crate::values::Region, crate::services::ai_keys::GatewayCheck>,
    pub keys: HashMap<String, crate::services::ai_keys::KeyProbeAnswer>,
    /// Every key probe: the region and the secret probed.
    pub probed: Mutex<Vec<(crate::values::Region, String)>>,
    /// Every gateway check, by region.
    pub checked: Mutex<Vec<crate::values::Region>>,
}

impl crate::services::ai_keys::KeyProbe for FakeProbe {
    fn probe_key(
        &self,
        region: crate::values::Region,
        secret: &SecretString,
    ) -> impl std::future::Future<Output = Option<crate::services::ai_keys::KeyProbeAnswer>> {
        self.probed
            .lock()
            .unwrap()
            .push((region, secret.expose().to_owned()));
        std::future::ready(self.gateways.contains_key(&region).then(|| {
            self.keys.get(secret.expose()).cloned().unwrap_or(
                crate::services::ai_keys::KeyProbeAnswer {
                    accepted: false,
                    reason: None,
                },
            )
        }))
    }
    fn check_gateway(
        &self,
        region: crate::values::Region,
    ) -> impl std::future::Future<Output = Option<crate::services::ai_keys::GatewayCheck>> {
        self.checked.lock().unwrap().push(region);
        std::future::ready(self.gateways.get(&region).cloned())
    }
}

/// A Guard whose scans report `verdict` with `findings` findings (the report is the summary
/// itself); `allowance` anonymous scans are admitted, then each is told to wait 42 s. Every
/// scan is recorded with its caller; a request whose mode is not `skill` is refused.
pub struct FakeGuard {
    pub allowance: Mutex<u32>,
    pub verdict: &'static str,
    pub findings: usize,
    pub scans: Mutex<Vec<(crate::services::guard_scan::ScanCaller, String)>>,
}

impl Default for FakeGuard {
    fn default() -> Self {
        Self {
            allowance: Mutex::new(1),
            verdict: "pass",
            findings: 0,
            scans: Mutex::new(Vec::new()),
        }
    }
}

impl crate::services::guard_scan::GuardScanner for FakeGuard {
    type Report = crate::services::guard_scan::ScanSummary;
    type Info = &'static str;
    type Error = DomainError;
    fn info(&self) -> &'static str {
        "fake guard"
    }
    fn admit_anonymous(&self, _: std::net::IpAddr) -> Result<(), u64> {
        let mut left = self.allowance.lock().unwrap();
        if *left == 0 {
            return Err(42);
        }
        *left -= 1;
        Ok(())
    }
    fn scan(
        &self,
        caller: &crate::services::guard_scan::ScanCaller,
        request: crate::services::guard_scan::ScanRequest,
    ) -> impl std::future::Future<Output = Result<Self::Report, DomainError>> {
        use crate::services::guard_scan::{ScanSummary, ScannedTarget};
        let answer = if request.mode == "skill" {
            self.scans
                .lock()
                .unwrap()
                .push((caller.clone(), request.target.clone()));
            Ok(ScanSummary {
                verdict: self.verdict,
                target: match request.target.strip_prefix("https://github.com/") {
                    Some(path) => {
                        let (owner, repo) = path.split_once('/').unwrap_or((path, ""));
                        ScannedTarget::Repository {
                            owner: owner.into(),
                            repo: repo.into(),
                        }
                    }
                    None => ScannedTarget::Content,
                },
                findings: self.findings,
            })
        } else {
            Err(DomainError::invalid("mode", "only skill"))
        };
        std::future::ready(answer)
    }
    fn summary(report: &Self::Report) -> crate::services::guard_scan::ScanSummary {
        report.clone()
    }
}

/// A run sink that keeps every event (the services' activity lines), with room for every run
/// unless `full` is set (then no run gets a place: the run writer's queue is full).
#[derive(Default)]
pub struct FakeSink {
    pub events: std::sync::Arc<Mutex<Vec<crate::policy::runs::RunEvent>>>,
    pub full: std::sync::atomic::AtomicBool,
}

impl crate::policy::runs::RunSink for FakeSink {
    fn send(&self, event: crate::policy::runs::RunEvent) {
        self.events.lock().unwrap().push(event);
    }
    fn reserve(&self, _stream: bool) -> Option<crate::policy::runs::RunSlot> {
        if self.full.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let events = std::sync::Arc::clone(&self.events);
        Some(crate::policy::runs::RunSlot::new(move |e| {
            events.lock().unwrap().push(e)
        }))
    }
}

/// Detached storage work, waiting for the test to run it.
pub type DetachedWork = Box<dyn FnOnce(&Fake) + Send>;

/// The run service's storage ([`crate::services::run::RunStorage`]) over a [`Fake`]: reads run
/// at once; detached work waits in `detached` until [`FakeRunStorage::run_detached`] (nobody
/// waits for it, as on the blocking pool).
#[derive(Default)]
pub struct FakeRunStorage {
    pub store: Fake,
    /// Every read.
    pub reads: Mutex<u32>,
    /// How many coming reads answer `Unavailable` without running their work.
    pub unavailable: Mutex<u32>,
    /// When set, a read during which the store refused a call (`Fake::refuse_takes`) runs
    /// its work once more (as a read refused on the serving thread runs again on the pool).
    pub retry_refused: bool,
    /// Detached work not run yet, with what it is.
    pub detached: Mutex<Vec<(&'static str, DetachedWork)>>,
}

impl FakeRunStorage {
    /// What was detached so far and not yet run.
    pub fn detached_names(&self) -> Vec<&'static str> {
        self.detached
            .lock()
            .unwrap()
            .iter()
            .map(|(n, _)| *n)
            .collect()
    }

    /// Runs the detached work, in order; answers what it was.
    pub fn run_detached(&self) -> Vec<&'static str> {
        let work = std::mem::take(&mut *self.detached.lock().unwrap());
        work.into_iter()
            .map(|(name, work)| {
                work(&self.store);
                name
            })
            .collect()
    }
}

impl crate::services::run::RunStorage for FakeRunStorage {
    type Store = Fake;
    fn read<T, F>(&self, work: F) -> impl std::future::Future<Output = DomainResult<T>>
    where
        T: Send + 'static,
        F: Fn(&Fake) -> DomainResult<T> + Send + 'static,
    {
        *self.reads.lock().unwrap() += 1;
        let refused = {
            let mut left = self.unavailable.lock().unwrap();
            let refused = *left > 0;
            *left = left.saturating_sub(1);
            refused
        };
        let answer = if refused {
            Err(DomainError::Unavailable {
                retry_after_secs: 1,
            })
        } else {
            let refusals = *self.store.refuse_takes.lock().unwrap();
            let answer = work(&self.store);
            let refused = *self.store.refuse_takes.lock().unwrap() < refusals;
            if refused && self.retry_refused {
                work(&self.store)
            } else {
                answer
            }
        };
        std::future::ready(answer)
    }
    fn detach<F>(&self, what: &'static str, work: F)
    where
        F: FnOnce(&Fake) + Send + 'static,
    {
        self.detached.lock().unwrap().push((what, Box::new(work)));
    }
}

/// The run figures, as reported.
#[derive(Default)]
pub struct FakeMetrics {
    /// Every quota refusal's reason.
    pub refused: Mutex<Vec<&'static str>>,
    /// Every run latency: region, route, upstream time, added time.
    pub latencies: Mutex<Vec<(&'static str, &'static str, Duration, Duration)>>,
}

impl crate::services::run::RunMetrics for FakeMetrics {
    fn quota_refused(&self, reason: &'static str) {
        self.refused.lock().unwrap().push(reason);
    }
    fn run_latency(&self, l: crate::services::run::RunLatency) {
        let latency = (l.region, l.route, l.upstream, l.added);
        self.latencies.lock().unwrap().push(latency);
    }
}

/// A region gateway for runs: every region is configured except `unconfigured`; a call fails
/// with the next of `failures` while any is left, else answers the body it was sent (a
/// stream, numbered by the call, when the body asks for one) with a usage of 2 + 3 tokens.
/// Every call is recorded; a stream's end waits in `finishing` until the test ends it.
/// Tokens are counted one per word.
pub struct FakeUpstream {
    pub unconfigured: Vec<crate::values::Region>,
    pub models: Vec<String>,
    pub failures: Mutex<std::collections::VecDeque<crate::policy::runs::UpstreamFailure>>,
    /// Every call: the kind, region, key secret and body sent.
    pub calls: Mutex<Vec<UpstreamCall>>,
    pub finishing: Mutex<Vec<StreamEnd>>,
}

/// What a stream does with its report when it ends.
pub type StreamEnd = Box<dyn FnOnce(crate::policy::runs::RunReport) + Send>;

/// One call a [`FakeUpstream`] received: the kind, region, key secret and body.
pub type UpstreamCall = (
    crate::policy::runs::RunKind,
    crate::values::Region,
    String,
    Map<String, Value>,
);

impl Default for FakeUpstream {
    fn default() -> Self {
        Self {
            unconfigured: Vec::new(),
            models: vec!["m-default".into(), "m-large".into()],
            failures: Mutex::default(),
            calls: Mutex::default(),
            finishing: Mutex::default(),
        }
    }
}

impl FakeUpstream {
    /// The secrets of the keys called, in order.
    pub fn secrets(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.2.clone())
            .collect()
    }
}

/// The report of an answered run of `model`: in 7 ms, no first-token time, a usage of 2 + 3
/// tokens.
pub fn answered(model: impl Into<String>) -> crate::policy::runs::RunReport {
    use crate::policy::runs::{RunEnd, RunReport, TokenUsage};
    RunReport {
        end: RunEnd::Ok,
        model: model.into(),
        latency_ms: 7,
        ttft_ms: None,
        usage: Some(TokenUsage {
            prompt_tokens: 2,
            completion_tokens: 3,
            total_tokens: 5,
        }),
        error_code: None,
        relayed_tokens: None,
    }
}

type FakeAnswer = Result<
    crate::policy::runs::ChatAnswer<Map<String, Value>, u32>,
    crate::policy::runs::UpstreamFailure,
>;

impl crate::policy::runs::ChatUpstream for FakeUpstream {
    type Body = Map<String, Value>;
    type Stream = u32;
    fn configured(&self, region: crate::values::Region) -> bool {
        !self.unconfigured.contains(&region)
    }
    fn chat(
        &self,
        region: crate::values::Region,
        key: &SecretString,
        body: Map<String, Value>,
    ) -> impl std::future::Future<Output = FakeAnswer> + Send {
        self.call(crate::policy::runs::RunKind::Chat, region, key, body)
    }
    fn call(
        &self,
        kind: crate::policy::runs::RunKind,
        region: crate::values::Region,
        key: &SecretString,
        body: Map<String, Value>,
    ) -> impl std::future::Future<Output = FakeAnswer> + Send {
        use crate::policy::runs::ChatAnswer;
        let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("m-default")
            .to_owned();
        let mut calls = self.calls.lock().unwrap();
        calls.push((kind, region, key.expose().to_owned(), body.clone()));
        let n = u32::try_from(calls.len()).unwrap_or(u32::MAX);
        let answer = match self.failures.lock().unwrap().pop_front() {
            Some(failure) => Err(failure),
            None if stream => Ok(ChatAnswer::Stream(n)),
            None => Ok(ChatAnswer::Complete {
                body,
                report: answered(model),
            }),
        };
        std::future::ready(answer)
    }
    fn models(&self, _: crate::values::Region) -> Vec<String> {
        self.models.clone()
    }
    fn backoff(&self) -> impl std::future::Future<Output = ()> + Send {
        std::future::ready(())
    }
    fn on_finish(
        &self,
        stream: u32,
        _count_relayed: bool,
        done: Box<dyn FnOnce(crate::policy::runs::RunReport) + Send>,
    ) -> u32 {
        self.finishing.lock().unwrap().push(done);
        stream
    }
    fn count_tokens(&self, _: &str, text: &str) -> u64 {
        text.split_whitespace().count() as u64
    }
}
