//! Account rules: session lifetimes and the sign-in throttle's settings ([`AccountPolicy`]),
//! the throttle's key of an email, and the names of people and tenants.

use chrono::{DateTime, Duration, Utc};

use crate::error::DomainResult;
use crate::values::text;

/// Session lifetime and sign-in throttle settings.
#[derive(Debug, Clone, Copy)]
pub struct AccountPolicy {
    pub session_idle: Duration,
    pub session_absolute: Duration,
    pub max_failures: u64,
    pub failure_window: Duration,
    /// `last_seen_at` / `last_used_at` are written at most this often.
    pub touch_interval: Duration,
}

impl AccountPolicy {
    /// Whether a credential last used at `last` (never: `None`) is due to have its use written
    /// again at `now`.
    pub fn touch_due(&self, last: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
        last.is_none_or(|at| now - at >= self.touch_interval)
    }
}

impl Default for AccountPolicy {
    fn default() -> Self {
        Self {
            session_idle: Duration::hours(24),
            session_absolute: Duration::days(30),
            max_failures: 5,
            failure_window: Duration::minutes(15),
            touch_interval: Duration::minutes(1),
        }
    }
}

/// The throttle key of an email: trimmed and lower-cased, like `Email` values.
pub(crate) fn throttle_key(email: &str) -> String {
    email.trim().to_lowercase()
}

/// Validates a tenant name.
pub fn tenant_name(raw: &str) -> DomainResult<String> {
    text("name", raw, 1, 100)
}

/// Validates a person's display name.
pub fn person_name(raw: &str) -> DomainResult<String> {
    text("name", raw, 1, 100)
}
