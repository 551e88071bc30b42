//! `/guard/scan`: the skill scanner over HTTP, with or without credentials.

use std::net::IpAddr;

use gc_guard::executor::ScanExecutor;

use crate::throttle::IpThrottle;

pub mod scan;

/// The Guard's executor (its own bounded threads, with the GitHub fetcher) and the anonymous
/// throttle, shared by every worker. Scans never run on the HTTP workers or on the blocking
/// pool that serves the database.
pub struct GuardService {
    /// Scans run here; the rules compile on the first scan (their automata take several MiB,
    /// which a server that never scans should not carry).
    pub executor: ScanExecutor,
    /// Anonymous scans per client IP: a bounded table (see [`IpThrottle`]); when it is full of
    /// active clients, newcomers share one overflow allowance.
    anonymous: IpThrottle,
}

impl GuardService {
    /// `anonymous_per_minute` scans per client IP for callers without credentials, with at most
    /// `max_clients` client IPs remembered.
    pub fn new(executor: ScanExecutor, anonymous_per_minute: u32, max_clients: usize) -> Self {
        Self {
            executor,
            anonymous: IpThrottle::new(anonymous_per_minute, 1, max_clients),
        }
    }

    /// `Err(seconds to wait)` when this IP has used its anonymous allowance.
    pub fn admit_anonymous(&self, ip: IpAddr) -> Result<(), u64> {
        self.anonymous.check(ip)
    }
}
