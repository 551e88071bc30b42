//! A per-client-IP rate limit with a bounded table (sign-in and sign-up).
//!
//! The limit is a GCRA (generic cell rate algorithm): `per_minute` requests may come at once,
//! then one every `60 s / per_minute`. Each client costs one table entry that is forgotten once
//! it is indistinguishable from a fresh one. IPv6 clients are grouped by their /64, the block
//! one subscriber usually holds.
//!
//! Architecture Invariant: the table never holds more than `max_entries` clients. When it is
//! full of active clients, newcomers share one overflow entry (they are limited together), so
//! a flood of distinct addresses costs bounded memory and cannot push out a throttled client.

use std::collections::HashMap;

use actix_web::HttpRequest;
use gc_domain::ErrorCode;

use crate::error::ApiError;
use crate::extract::client_ip;
use crate::state::AppState;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Clients remembered at most (about 40 bytes each).
pub const MAX_CLIENTS: usize = 100_000;

/// How often a full table is swept for forgettable entries, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

struct Table {
    /// Per client: the theoretical arrival time of its next request.
    next: HashMap<IpAddr, Instant>,
    swept: Instant,
}

/// Limits requests per client IP (see the module documentation).
pub struct IpThrottle {
    interval: Duration,
    burst: u32,
    max_entries: usize,
    table: Mutex<Table>,
}

impl std::fmt::Debug for IpThrottle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpThrottle")
            .field("burst", &self.burst)
            .field("interval", &self.interval)
            .finish()
    }
}

/// The key of a client: its IPv4 address, or the /64 of its IPv6 address.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// The shared entry of newcomers when the table is full.
const OVERFLOW: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

impl IpThrottle {
    /// `per_minute` requests per client per minute (at least 1).
    pub fn per_minute(per_minute: u32) -> Self {
        Self::with_capacity(per_minute, MAX_CLIENTS)
    }

    /// As [`IpThrottle::per_minute`], remembering at most `max_entries` clients.
    pub fn with_capacity(per_minute: u32, max_entries: usize) -> Self {
        let burst = per_minute.max(1);
        Self {
            interval: Duration::from_secs(60) / burst,
            burst,
            max_entries: max_entries.max(1),
            table: Mutex::new(Table {
                next: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    /// Clients currently remembered.
    pub fn len(&self) -> usize {
        self.table.lock().map_or(0, |t| t.next.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Err(seconds to wait)` when `ip` has used its allowance.
    pub fn check(&self, ip: IpAddr) -> Result<(), u64> {
        self.check_at(ip, Instant::now())
    }

    fn check_at(&self, ip: IpAddr, now: Instant) -> Result<(), u64> {
        let Ok(mut table) = self.table.lock() else {
            // A poisoned lock means a bug elsewhere; refuse rather than let a flood through.
            return Err(1);
        };
        let mut key = client_key(ip);
        if !table.next.contains_key(&key) && table.next.len() >= self.max_entries {
            if now.duration_since(table.swept) >= SWEEP_EVERY {
                // An entry whose next time has passed is the same as no entry.
                table.next.retain(|_, next| *next > now);
                table.swept = now;
            }
            if table.next.len() >= self.max_entries {
                key = OVERFLOW;
            }
        }
        let tolerance = self.interval * self.burst;
        let previous = table.next.get(&key).copied().unwrap_or(now).max(now);
        let next = previous + self.interval;
        let ahead = next.duration_since(now);
        if ahead > tolerance {
            let wait = ahead - tolerance;
            return Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0));
        }
        // The overflow entry may exceed the cap by one; every other key is bounded above.
        table.next.insert(key, next);
        Ok(())
    }
}

/// The per-client-IP limit of sign-in and sign-up: 429 `rate_limited` with `Retry-After`.
pub fn admit_auth(req: &HttpRequest, state: &AppState) -> Result<(), ApiError> {
    let ip = client_ip(req, state).unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    state.auth_throttle.check(ip).map_err(|wait| {
        ApiError::new(
            ErrorCode::RateLimited,
            "too many sign-in or sign-up requests from this address; try again later",
        )
        .with_retry_after(wait)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_interval() {
        let t = IpThrottle::per_minute(3);
        let ip = IpAddr::from([203, 0, 113, 1]);
        let now = Instant::now();
        for _ in 0..3 {
            assert!(t.check_at(ip, now).is_ok());
        }
        assert_eq!(t.check_at(ip, now), Err(20));
        assert!(t.check_at(IpAddr::from([203, 0, 113, 2]), now).is_ok());
        assert!(t.check_at(ip, now + Duration::from_secs(20)).is_ok());
        assert!(t.check_at(ip, now + Duration::from_secs(20)).is_err());
    }

    #[test]
    fn ipv6_clients_are_grouped_by_their_64() {
        let t = IpThrottle::per_minute(1);
        let now = Instant::now();
        assert!(t.check_at("2001:db8:1:2::1".parse().unwrap(), now).is_ok());
        assert!(t
            .check_at("2001:db8:1:2::ffff".parse().unwrap(), now)
            .is_err());
        assert!(t.check_at("2001:db8:1:3::1".parse().unwrap(), now).is_ok());
    }

    #[test]
    fn the_table_is_bounded_and_newcomers_share_the_overflow() {
        let t = IpThrottle::with_capacity(2, 100);
        let now = Instant::now();
        for i in 0..100u32 {
            assert!(t.check_at(IpAddr::from(i.to_be_bytes()), now).is_ok());
        }
        // Full of active clients: newcomers share one entry, and memory stays put.
        for i in 1000..1002u32 {
            assert!(t.check_at(IpAddr::from(i.to_be_bytes()), now).is_ok());
        }
        assert!(t
            .check_at(IpAddr::from(5000u32.to_be_bytes()), now)
            .is_err());
        assert!(t.len() <= 101);
        // Once the old entries are forgettable, newcomers get their own again.
        let later = now + Duration::from_secs(120);
        assert!(t
            .check_at(IpAddr::from(6000u32.to_be_bytes()), later)
            .is_ok());
        assert!(t.len() <= 2, "{}", t.len());
    }
}
