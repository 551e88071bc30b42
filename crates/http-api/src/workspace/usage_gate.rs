//! How many usage reports run at once (issue 28, decision 0027): at most `per_subject` for one
//! tenant (admins' reports share one subject), and at most `max` in all, set well under the
//! database pool so reports can never hold every connection. Beyond the first bound a report
//! is refused at once with 429 `rate_limited`, beyond the second with 503 `busy`, both with
//! `Retry-After: 1`: nothing waits in a queue.
//!
//! The table holds a subject only while one of its reports runs, and a report runs only under
//! the global bound, so it never holds more than `max` entries: it is bounded by construction
//! and has no eviction (when it is "full", the global bound refuses first).
//!
//! The permit is moved into the storage work, so it is handed back when the query has
//! finished, not when the client hangs up: a client that disconnects cannot start more
//! queries than the bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use gc_domain::ErrorCode;
use uuid::Uuid;

use crate::error::ApiError;

/// Whose reports count together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReportSubject {
    /// One tenant's members and keys (`GET /workspace/usage`).
    Tenant(Uuid),
    /// Every platform admin (`GET /admin/usage`).
    Admins,
}

#[derive(Debug, Default)]
struct InFlight {
    total: usize,
    by_subject: HashMap<ReportSubject, usize>,
}

/// The bounds on usage reports in flight.
#[derive(Debug)]
pub struct UsageGate {
    per_subject: usize,
    max: usize,
    /// Tests only: how long a report holds its permit before it runs (zero in production),
    /// so the bounds can be tested without millions of rows.
    hold: Duration,
    in_flight: Mutex<InFlight>,
}

impl UsageGate {
    /// At most `per_subject` reports per subject and `max` in all (each at least 1).
    pub fn new(per_subject: usize, max: usize, hold: Duration) -> Self {
        let max = max.max(1);
        Self {
            per_subject: per_subject.clamp(1, max),
            max,
            hold,
            in_flight: Mutex::new(InFlight::default()),
        }
    }

    fn table(&self) -> MutexGuard<'_, InFlight> {
        // The table is consistent between statements: a panic elsewhere cannot leave it
        // half-updated, so a poisoned lock is still good.
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A permit to run one report for `subject`, or the refusal to answer.
    pub fn enter(self: &Arc<Self>, subject: ReportSubject) -> Result<UsagePermit, ApiError> {
        let mut t = self.table();
        let mine = t.by_subject.get(&subject).copied().unwrap_or(0);
        if mine >= self.per_subject {
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "{} usage reports are already running for this tenant; retry shortly",
                    self.per_subject
                ),
            )
            .with_retry_after(1));
        }
        if t.total >= self.max {
            return Err(ApiError::new(
                ErrorCode::Busy,
                "too many usage reports are running; retry shortly",
            )
            .with_retry_after(1));
        }
        t.total += 1;
        *t.by_subject.entry(subject).or_default() += 1;
        Ok(UsagePermit {
            gate: Arc::clone(self),
            subject,
        })
    }

    /// Reports running now: `(in all, for subject)`.
    pub fn running(&self, subject: ReportSubject) -> (usize, usize) {
        let t = self.table();
        (t.total, t.by_subject.get(&subject).copied().unwrap_or(0))
    }

    /// The test hold (zero in production).
    pub(crate) fn hold(&self) -> Duration {
        self.hold
    }
}

/// One running report; handed back when dropped.
#[derive(Debug)]
pub struct UsagePermit {
    gate: Arc<UsageGate>,
    subject: ReportSubject,
}

impl UsagePermit {
    /// Waits out the test hold, if one is set.
    pub(crate) async fn held(self) -> Self {
        let hold = self.gate.hold();
        if !hold.is_zero() {
            actix_web::rt::time::sleep(hold).await;
        }
        self
    }
}

impl Drop for UsagePermit {
    fn drop(&mut self) {
        let mut t = self.gate.table();
        t.total = t.total.saturating_sub(1);
        if let Some(n) = t.by_subject.get_mut(&self.subject) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.by_subject.remove(&self.subject);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_per_subject_then_in_all_and_hands_back() {
        let gate = Arc::new(UsageGate::new(2, 3, Duration::ZERO));
        let (a, b, c) = (
            ReportSubject::Tenant(Uuid::now_v7()),
            ReportSubject::Tenant(Uuid::now_v7()),
            ReportSubject::Admins,
        );
        let a1 = gate.enter(a).unwrap();
        let _a2 = gate.enter(a).unwrap();
        let e = gate.enter(a).unwrap_err();
        assert_eq!(
            (e.code().as_str(), e.retry_after()),
            ("rate_limited", Some(1))
        );
        let _b1 = gate.enter(b).unwrap();
        let e = gate.enter(c).unwrap_err();
        assert_eq!((e.code().as_str(), e.retry_after()), ("busy", Some(1)));
        drop(a1);
        assert_eq!(gate.running(a), (2, 1));
        let c1 = gate.enter(c).unwrap();
        drop(c1);
        assert_eq!(gate.running(c), (2, 0));
        // A subject without reports leaves no entry behind.
        assert_eq!(gate.table().by_subject.len(), 2);
    }

    #[test]
    fn a_subject_never_gets_more_than_the_whole() {
        let gate = Arc::new(UsageGate::new(10, 1, Duration::ZERO));
        let s = ReportSubject::Admins;
        let _p = gate.enter(s).unwrap();
        assert_eq!(gate.enter(s).unwrap_err().code().as_str(), "rate_limited");
    }
}
