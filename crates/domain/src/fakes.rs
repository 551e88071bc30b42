//! In-memory fakes of the ports, for the services' unit tests.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::access::AdminScope;
use crate::error::{DomainError, DomainResult};
use crate::gateway::{KeyVerdict, NewTenantAiKey, TenantAiKey};
use crate::model::{NewUser, User, UserPatch};
use crate::page::{Page, PageRequest};
use crate::ports::{AiKeyRepo, KeySealer, QuotaRepo, Reservation, SigninThrottleRepo, UserRepo};
use crate::quota::{QuotaWindow, Take};
use crate::secret::SecretString;
use crate::values::{Email, Region};

/// A store holding users, password attempts and AI keys in memory.
#[derive(Default)]
pub struct Fake {
    pub users: Mutex<Vec<User>>,
    pub attempts: Mutex<Vec<(String, DateTime<Utc>)>>,
    pub keys: Mutex<Vec<TenantAiKey>>,
    pub verdicts: Mutex<Vec<KeyVerdict>>,
    pub passwords_changed: Mutex<u32>,
    /// Quota counters: (requests, tokens) per window.
    pub quota: Mutex<HashMap<QuotaWindow, (u64, u64)>>,
    /// Calls to the quota port.
    pub quota_calls: Mutex<u32>,
}

impl Fake {
    pub fn with_keys(keys: Vec<TenantAiKey>) -> Self {
        let fake = Self::default();
        *fake.keys.lock().unwrap() = keys;
        fake
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
    fn take_request(&self, takes: &[(QuotaWindow, u64)]) -> DomainResult<Take> {
        *self.quota_calls.lock().unwrap() += 1;
        let mut quota = self.quota.lock().unwrap();
        if let Some(i) = takes
            .iter()
            .position(|(w, max)| quota.get(w).map_or(0, |c| c.0) >= *max)
        {
            return Ok(Take::Full(i));
        }
        Ok(Take::Taken(
            takes
                .iter()
                .map(|(w, _)| {
                    let c = quota.entry(*w).or_default();
                    c.0 += 1;
                    c.0
                })
                .collect(),
        ))
    }
    fn prune_windows(&self, _: i64, _: i64) -> DomainResult<u64> {
        Ok(0)
    }
}

impl SigninThrottleRepo for Fake {
    fn reserve_attempt(
        &self,
        key: &str,
        since: DateTime<Utc>,
        at: DateTime<Utc>,
        max: u64,
    ) -> DomainResult<Reservation> {
        let mut attempts = self.attempts.lock().unwrap();
        let recent: Vec<DateTime<Utc>> = attempts
            .iter()
            .filter(|(k, t)| k == key && *t >= since)
            .map(|(_, t)| *t)
            .collect();
        if recent.len() as u64 >= max {
            let oldest = recent.into_iter().min().unwrap_or(at);
            return Ok(Reservation::Locked { oldest });
        }
        attempts.push((key.to_owned(), at));
        Ok(Reservation::Reserved)
    }

    fn clear_failures(&self, key: &str) -> DomainResult<()> {
        self.attempts.lock().unwrap().retain(|(k, _)| k != key);
        Ok(())
    }
}

impl UserRepo for Fake {
    fn insert_user(&self, user: &NewUser) -> DomainResult<User> {
        Err(DomainError::Internal(format!("not faked: {}", user.id)))
    }
    fn find_user(&self, id: Uuid) -> DomainResult<Option<User>> {
        Ok(self
            .users
            .lock()
            .unwrap()
            .iter()
            .find(|u| u.id == id)
            .cloned())
    }
    fn find_user_by_email(&self, email: &Email) -> DomainResult<Option<User>> {
        Ok(self
            .users
            .lock()
            .unwrap()
            .iter()
            .find(|u| u.email == *email)
            .cloned())
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
        _: Uuid,
        _: Option<Uuid>,
        _: Option<Uuid>,
        _: DateTime<Utc>,
        _: Option<&crate::workspace::NewActivity>,
    ) -> DomainResult<Option<User>> {
        Ok(None)
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
        Ok(self
            .keys
            .lock()
            .unwrap()
            .iter()
            .filter(|k| tenant.is_none_or(|t| t == k.tenant_id))
            .cloned()
            .collect())
    }
    fn delete_ai_key(&self, _: &AdminScope, tenant: Uuid, id: Uuid) -> DomainResult<bool> {
        let mut keys = self.keys.lock().unwrap();
        let before = keys.len();
        keys.retain(|k| !(k.tenant_id == tenant && k.id == id));
        Ok(keys.len() != before)
    }
    fn set_ai_key_status(&self, verdict: &KeyVerdict) -> DomainResult<()> {
        self.verdicts.lock().unwrap().push(verdict.clone());
        Ok(())
    }
    /// Answers every key of the tenant, whatever its state: the domain must filter.
    fn usable_ai_keys(&self, tenant_id: Uuid, _: Region) -> DomainResult<Vec<TenantAiKey>> {
        Ok(self
            .keys
            .lock()
            .unwrap()
            .iter()
            .filter(|k| k.tenant_id == tenant_id)
            .cloned()
            .collect())
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

/// Runs a future whose every await is ready at once (the fakes never wait).
pub fn ready<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
}
