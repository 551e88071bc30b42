//! `/guard/scan`: the skill scanner over HTTP, with or without credentials.

use std::net::IpAddr;
use std::num::NonZeroU32;

use gc_guard::executor::ScanExecutor;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

pub mod scan;

/// The Guard's executor (its own bounded threads, with the GitHub fetcher) and the anonymous
/// throttle, shared by every worker. Scans never run on the HTTP workers or on the blocking
/// pool that serves the database.
pub struct GuardService {
    /// Scans run here; the rules compile on the first scan (their automata take several MiB,
    /// which a server that never scans should not carry).
    pub executor: ScanExecutor,
    anonymous: DefaultKeyedRateLimiter<IpAddr>,
}

impl GuardService {
    /// `anonymous_per_minute` scans per client IP for callers without credentials.
    pub fn new(executor: ScanExecutor, anonymous_per_minute: u32) -> Self {
        let per_minute = NonZeroU32::new(anonymous_per_minute.max(1)).unwrap_or(NonZeroU32::MIN);
        Self {
            executor,
            anonymous: RateLimiter::keyed(Quota::per_minute(per_minute)),
        }
    }

    /// `Err(seconds to wait)` when this IP has used its anonymous allowance.
    pub fn admit_anonymous(&self, ip: IpAddr) -> Result<(), u64> {
        // Forget idle IPs now and then so the table stays small under churn.
        if self.anonymous.len() > 10_000 {
            self.anonymous.retain_recent();
        }
        self.anonymous.check_key(&ip).map_err(|not_until| {
            not_until
                .wait_time_from(DefaultClock::default().now())
                .as_secs()
                .max(1)
        })
    }
}
