//! `/guard/scan`: the skill scanner over HTTP, with or without credentials.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, OnceLock};

use gc_guard::fetch::GitHubFetcher;
use gc_guard::Scanner;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

pub mod scan;

/// The scanner, the GitHub fetcher and the anonymous throttle, shared by every worker.
pub struct GuardService {
    /// Compiled on the first scan: the rules' automata take several MiB, which a server that
    /// never scans should not carry.
    scanner: OnceLock<Arc<Scanner>>,
    pub fetcher: GitHubFetcher,
    anonymous: DefaultKeyedRateLimiter<IpAddr>,
}

impl GuardService {
    /// `anonymous_per_minute` scans per client IP for callers without credentials.
    pub fn new(fetcher: GitHubFetcher, anonymous_per_minute: u32) -> Self {
        let per_minute = NonZeroU32::new(anonymous_per_minute.max(1)).unwrap_or(NonZeroU32::MIN);
        Self {
            scanner: OnceLock::new(),
            fetcher,
            anonymous: RateLimiter::keyed(Quota::per_minute(per_minute)),
        }
    }

    /// The compiled scanner, built on first use. Call it off the event loop: the first call
    /// compiles every rule.
    pub fn scanner(&self) -> Result<Arc<Scanner>, gc_guard::RuleError> {
        if let Some(scanner) = self.scanner.get() {
            return Ok(Arc::clone(scanner));
        }
        let built = Arc::new(Scanner::new()?);
        Ok(Arc::clone(self.scanner.get_or_init(|| built)))
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
