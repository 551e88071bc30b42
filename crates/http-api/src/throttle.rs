//! Per-client-IP limits with a bounded table: a request rate (sign-in and sign-up, anonymous
//! Guard scans) and, for password checks, how many one client may have in flight at once.
//!
//! The rate is a GCRA (generic cell rate algorithm): `per_minute` requests may come at once,
//! then one every `60 s / per_minute`. Each client costs one table entry that is forgotten once
//! it is indistinguishable from a fresh one (its rate is back to a full burst and it has no
//! password check in flight). IPv6 clients are grouped by their /64, the block one subscriber
//! usually holds.
//!
//! Password checks in flight are capped per client ([`IpThrottle::admit_check`]) because the
//! hashing queue is shared: without the cap one client's burst fills every hashing slot and
//! waiting place, and another client's sign-in waits behind all of them. With it, one client
//! holds at most `max_checks` places; a further check from it is refused at once (429
//! `rate_limited`, `Retry-After: 1`) without using its rate allowance.
//!
//! Every password check goes through these limits, not only sign-in and sign-up (decision
//! 0026): a check by a caller who already has a session (change-password, an administrator
//! creating an account) is admitted by [`admit_session_check`], which applies the same per-IP
//! rate and cap and, on a second table keyed by account, one check in flight per account and
//! the same rate per account. Such checks then use the hashing places anonymous checks may not
//! take ([`HashShare`]).
//!
//! Architecture Invariant: the table never holds more than `max_entries` clients (plus the
//! overflow entry). When it is full of active clients, newcomers share one overflow entry: they
//! are limited together (one rate, one cap on checks in flight), so a flood of distinct
//! addresses costs bounded memory and cannot push out a throttled client. A check by a signed-in
//! account whose address finds the table full is not put in the overflow entry (a flood would
//! have spent it): its per-account limit alone applies.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::HttpRequest;
use gc_domain::ErrorCode;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::client_ip;
use crate::state::AppState;

/// Clients remembered at most by default (about 48 bytes each).
pub const MAX_CLIENTS: usize = 100_000;

/// How often a full table is swept for forgettable entries, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// What the table remembers of one client.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The theoretical arrival time of its next request.
    next: Instant,
    /// Its password checks admitted and not yet finished.
    checks: u32,
}

impl Entry {
    /// Whether forgetting the entry changes nothing.
    fn forgettable(&self, now: Instant) -> bool {
        self.next <= now && self.checks == 0
    }
}

struct Table {
    clients: HashMap<Key, Entry>,
    swept: Instant,
}

/// Why a client is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It has used its allowance: seconds to wait.
    TooFast(u64),
    /// It already has the most password checks in flight.
    Checking,
}

/// Limits requests per client IP (see the module documentation).
pub struct IpThrottle {
    interval: Duration,
    burst: u32,
    max_checks: u32,
    max_entries: usize,
    table: Mutex<Table>,
}

impl std::fmt::Debug for IpThrottle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpThrottle")
            .field("burst", &self.burst)
            .field("interval", &self.interval)
            .field("max_checks", &self.max_checks)
            .field("max_entries", &self.max_entries)
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

/// A table key: one client, one account, or the overflow entry newcomers share when the table
/// is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Client(IpAddr),
    Account(Uuid),
    Overflow,
}

/// Which places of the hashing queue a password check may take (decision 0026).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashShare {
    /// Sign-in and sign-up: every place but the `GC_HASH_RESERVED` kept for signed-in callers,
    /// so a flood from many addresses cannot take them all.
    Anonymous,
    /// A caller with a session or key (change-password, an administrator creating an
    /// account): any place.
    SignedIn,
}

/// A password check admitted by [`IpThrottle::admit_check`]; the client's place is given back
/// when this is dropped. Keep it until the check has finished (move it into the blocking work),
/// so a client that goes away does not free its place while its hash is still computed.
#[derive(Debug)]
pub struct CheckSlot {
    throttle: Arc<IpThrottle>,
    key: Key,
}

impl Drop for CheckSlot {
    fn drop(&mut self) {
        if let Ok(mut table) = self.throttle.table.lock() {
            if let Some(entry) = table.clients.get_mut(&self.key) {
                entry.checks = entry.checks.saturating_sub(1);
            }
        }
    }
}

impl IpThrottle {
    /// `per_minute` requests per client per minute (at least 1), one password check in flight
    /// per client, [`MAX_CLIENTS`] clients remembered.
    pub fn per_minute(per_minute: u32) -> Self {
        Self::new(per_minute, 1, MAX_CLIENTS)
    }

    /// `per_minute` requests per client per minute, at most `max_checks` password checks in
    /// flight per client, at most `max_entries` clients remembered (each at least 1).
    pub fn new(per_minute: u32, max_checks: u32, max_entries: usize) -> Self {
        let burst = per_minute.max(1);
        Self {
            interval: Duration::from_secs(60) / burst,
            burst,
            max_checks: max_checks.max(1),
            max_entries: max_entries.max(1),
            table: Mutex::new(Table {
                clients: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    /// Clients currently remembered.
    pub fn len(&self) -> usize {
        self.table.lock().map_or(0, |t| t.clients.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Err(seconds to wait)` when `ip` has used its allowance.
    pub fn check(&self, ip: IpAddr) -> Result<(), u64> {
        match self.admit_at(client(ip), Instant::now(), false, true) {
            Ok(_) => Ok(()),
            Err(Refusal::TooFast(wait)) => Err(wait),
            // Only password checks are counted in flight.
            Err(Refusal::Checking) => Err(1),
        }
    }

    /// Admits one password check from `ip`: within its rate, and with fewer than `max_checks`
    /// checks in flight. A refusal for checks in flight does not use the rate allowance.
    pub fn admit_check(self: &Arc<Self>, ip: IpAddr) -> Result<CheckSlot, Refusal> {
        self.slot(self.admit_at(client(ip), Instant::now(), true, true)?)
    }

    /// [`Self::admit_check`] for a signed-in caller's check: when the table is full and `ip` is
    /// not in it, `Ok(None)` (no per-IP limit) instead of the overflow entry.
    pub fn admit_check_unless_full(
        self: &Arc<Self>,
        ip: IpAddr,
    ) -> Result<Option<CheckSlot>, Refusal> {
        match self.admit_at(client(ip), Instant::now(), true, false)? {
            Some(key) => self.slot(Some(key)).map(Some),
            None => Ok(None),
        }
    }

    /// Admits one password check for `account` (a table keyed by account).
    pub fn admit_account_check(self: &Arc<Self>, account: Uuid) -> Result<CheckSlot, Refusal> {
        self.slot(self.admit_at(Key::Account(account), Instant::now(), true, true)?)
    }

    fn slot(self: &Arc<Self>, key: Option<Key>) -> Result<CheckSlot, Refusal> {
        // `admit_at` with `spill` always answers a key; refuse rather than admit uncounted.
        let key = key.ok_or(Refusal::TooFast(1))?;
        Ok(CheckSlot {
            throttle: Arc::clone(self),
            key,
        })
    }

    /// The rate check (and, with `checking`, the cap on checks in flight) at `now`. Returns the
    /// key the client was counted under: its own, or the overflow entry when the table is full
    /// (with `spill`; without, `None` and nothing is counted).
    fn admit_at(
        &self,
        key: Key,
        now: Instant,
        checking: bool,
        spill: bool,
    ) -> Result<Option<Key>, Refusal> {
        let Ok(mut table) = self.table.lock() else {
            // A poisoned lock means a bug elsewhere; refuse rather than let a flood through.
            return Err(Refusal::TooFast(1));
        };
        let mut key = key;
        if !table.clients.contains_key(&key) && table.clients.len() >= self.max_entries {
            if now.duration_since(table.swept) >= SWEEP_EVERY {
                table.clients.retain(|_, e| !e.forgettable(now));
                table.swept = now;
            }
            if table.clients.len() >= self.max_entries {
                if !spill {
                    return Ok(None);
                }
                key = Key::Overflow;
            }
        }
        let entry = table.clients.get(&key).copied().unwrap_or(Entry {
            next: now,
            checks: 0,
        });
        if checking && entry.checks >= self.max_checks {
            return Err(Refusal::Checking);
        }
        let tolerance = self.interval * self.burst;
        let next = entry.next.max(now) + self.interval;
        let ahead = next.duration_since(now);
        if ahead > tolerance {
            let wait = ahead - tolerance;
            return Err(Refusal::TooFast(
                wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
            ));
        }
        // The overflow entry may exceed the cap by one; every other key is bounded above.
        table.clients.insert(
            key,
            Entry {
                next,
                checks: entry.checks + u32::from(checking),
            },
        );
        Ok(Some(key))
    }
}

/// The table key of a client IP.
fn client(ip: IpAddr) -> Key {
    Key::Client(client_key(ip))
}

/// The per-client-IP limits of sign-in and sign-up, before their password check: 429
/// `rate_limited` with `Retry-After` when the client is over its rate or already has its
/// password checks in flight. Hold the slot until the check has finished.
pub fn admit_auth(req: &HttpRequest, state: &AppState) -> Result<CheckSlot, ApiError> {
    let ip = client_ip(req, state).unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    state
        .auth_throttle
        .admit_check(ip)
        .map_err(|refusal| refusal.answer(SIGN_IN_FROM_IP))
}

/// What a refusal of the password-check limits says: too fast (with the wait), or a check
/// already in flight (retry after a second). One entry per limit.
struct RefusalText {
    too_fast: &'static str,
    checking: &'static str,
}

const SIGN_IN_FROM_IP: RefusalText = RefusalText {
    too_fast: "too many sign-in or sign-up requests from this address; try again later",
    checking: "a sign-in or sign-up from this address is already being checked; try again when it has finished",
};

const CHECK_FROM_IP: RefusalText = RefusalText {
    too_fast: "too many password checks from this address; try again later",
    checking:
        "a password from this address is already being checked; try again when it has finished",
};

const CHECK_FOR_ACCOUNT: RefusalText = RefusalText {
    too_fast: "too many password checks for this account; try again later",
    checking: "a password of this account is already being checked; try again when it has finished",
};

impl Refusal {
    /// 429 `rate_limited` with `Retry-After`, in the words of the limit that refused.
    fn answer(self, text: RefusalText) -> ApiError {
        let (message, wait) = match self {
            Refusal::TooFast(wait) => (text.too_fast, wait),
            Refusal::Checking => (text.checking, 1),
        };
        ApiError::new(ErrorCode::RateLimited, message).with_retry_after(wait)
    }
}

/// The places a signed-in caller's password check holds until it has finished: its client
/// IP's (none when the per-IP table is full) and its account's.
#[derive(Debug)]
pub struct SessionCheck {
    _ip: Option<CheckSlot>,
    _account: CheckSlot,
}

/// The limits of a password check by a signed-in caller (change-password, an administrator
/// creating an account), before it: the per-IP rate and checks in flight shared with sign-in
/// and sign-up, then one check in flight per account and the same rate per account. 429
/// `rate_limited` with `Retry-After` beyond either. Hold the result until the check has
/// finished, and run the check with [`HashShare::SignedIn`].
pub fn admit_session_check(
    req: &HttpRequest,
    state: &AppState,
    account: Uuid,
) -> Result<SessionCheck, ApiError> {
    let ip = client_ip(req, state).unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    let ip_slot = state
        .auth_throttle
        .admit_check_unless_full(ip)
        .map_err(|refusal| refusal.answer(CHECK_FROM_IP))?;
    let account_slot = state
        .account_throttle
        .admit_account_check(account)
        .map_err(|refusal| refusal.answer(CHECK_FOR_ACCOUNT))?;
    Ok(SessionCheck {
        _ip: ip_slot,
        _account: account_slot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_at(t: &IpThrottle, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        t.admit_at(client(ip), now, false, true).map(|_| ())
    }

    #[test]
    fn a_burst_then_one_per_interval() {
        let t = IpThrottle::per_minute(3);
        let ip = IpAddr::from([203, 0, 113, 1]);
        let now = Instant::now();
        for _ in 0..3 {
            assert!(check_at(&t, ip, now).is_ok());
        }
        assert_eq!(check_at(&t, ip, now), Err(Refusal::TooFast(20)));
        assert!(check_at(&t, IpAddr::from([203, 0, 113, 2]), now).is_ok());
        assert!(check_at(&t, ip, now + Duration::from_secs(20)).is_ok());
        assert!(check_at(&t, ip, now + Duration::from_secs(20)).is_err());
    }

    #[test]
    fn ipv6_clients_are_grouped_by_their_64() {
        let t = IpThrottle::per_minute(1);
        let now = Instant::now();
        assert!(check_at(&t, "2001:db8:1:2::1".parse().unwrap(), now).is_ok());
        assert!(check_at(&t, "2001:db8:1:2::ffff".parse().unwrap(), now).is_err());
        assert!(check_at(&t, "2001:db8:1:3::1".parse().unwrap(), now).is_ok());
    }

    #[test]
    fn the_table_is_bounded_and_newcomers_share_the_overflow() {
        let t = IpThrottle::new(2, 1, 100);
        let now = Instant::now();
        for i in 0..100u32 {
            assert!(check_at(&t, IpAddr::from(i.to_be_bytes()), now).is_ok());
        }
        // Full of active clients: newcomers share one entry, and memory stays put.
        for i in 1000..1002u32 {
            assert!(check_at(&t, IpAddr::from(i.to_be_bytes()), now).is_ok());
        }
        assert!(check_at(&t, IpAddr::from(5000u32.to_be_bytes()), now).is_err());
        assert!(t.len() <= 101);
        // A remembered client keeps its own allowance.
        assert!(check_at(&t, IpAddr::from(7u32.to_be_bytes()), now).is_ok());
        // Once the old entries are forgettable, newcomers get their own again.
        let later = now + Duration::from_secs(120);
        assert!(check_at(&t, IpAddr::from(6000u32.to_be_bytes()), later).is_ok());
        assert!(t.len() <= 2, "{}", t.len());
    }

    #[test]
    fn the_unspecified_and_loopback_v6_addresses_are_clients_not_the_overflow() {
        let t = IpThrottle::new(1, 1, 2);
        let now = Instant::now();
        assert!(check_at(&t, "::1".parse().unwrap(), now).is_ok());
        assert!(check_at(&t, IpAddr::from([192, 0, 2, 1]), now).is_ok());
        // The table is full: the overflow entry is fresh, whatever `::1` has used.
        assert!(check_at(&t, IpAddr::from([192, 0, 2, 2]), now).is_ok());
        assert!(check_at(&t, "::1".parse().unwrap(), now).is_err());
    }

    #[test]
    fn one_password_check_in_flight_per_client() {
        let t = Arc::new(IpThrottle::new(20, 1, 100));
        let ip = IpAddr::from([203, 0, 113, 9]);
        let first = t.admit_check(ip).unwrap();
        // Refused while the first is in flight, without using the rate allowance.
        for _ in 0..50 {
            assert_eq!(t.admit_check(ip).unwrap_err(), Refusal::Checking);
        }
        // Another client is not affected, and a plain rate check is not a password check.
        let other = t.admit_check(IpAddr::from([203, 0, 113, 10])).unwrap();
        assert!(t.check(ip).is_ok());
        drop(first);
        let again = t.admit_check(ip).unwrap();
        drop((again, other));
        // 20 a minute: 1 plain check and 2 password checks used, 17 left.
        for _ in 0..17 {
            drop(t.admit_check(ip).unwrap());
        }
        assert!(matches!(t.admit_check(ip), Err(Refusal::TooFast(_))));
    }

    #[test]
    fn a_small_fixed_number_of_checks_in_flight() {
        let t = Arc::new(IpThrottle::new(100, 2, 100));
        let ip = IpAddr::from([203, 0, 113, 9]);
        let slots = [t.admit_check(ip).unwrap(), t.admit_check(ip).unwrap()];
        assert_eq!(t.admit_check(ip).unwrap_err(), Refusal::Checking);
        drop(slots);
        assert!(t.admit_check(ip).is_ok());
    }

    #[test]
    fn a_client_with_a_check_in_flight_is_never_forgotten() {
        let t = Arc::new(IpThrottle::new(60, 1, 1));
        let ip = IpAddr::from([203, 0, 113, 9]);
        let slot = t.admit_check(ip).unwrap();
        // Long after its rate is back to a full burst, a newcomer finds the table full and the
        // sweep keeps the entry: its check is still running.
        let later = Instant::now() + Duration::from_secs(600);
        assert_eq!(
            t.admit_at(client(IpAddr::from([198, 51, 100, 1])), later, true, true),
            Ok(Some(Key::Overflow))
        );
        assert_eq!(
            t.admit_at(client(ip), later, true, true),
            Err(Refusal::Checking)
        );
        drop(slot);
        assert_eq!(
            t.admit_at(client(ip), later, true, true),
            Ok(Some(Key::Client(ip)))
        );
    }

    #[test]
    fn newcomers_over_a_full_table_share_one_check_in_flight() {
        let t = Arc::new(IpThrottle::new(60, 1, 1));
        let _held = t.admit_check(IpAddr::from([203, 0, 113, 9])).unwrap();
        let overflow = t.admit_check(IpAddr::from([198, 51, 100, 1])).unwrap();
        assert_eq!(
            t.admit_check(IpAddr::from([198, 51, 100, 2])).unwrap_err(),
            Refusal::Checking
        );
        drop(overflow);
        assert!(t.admit_check(IpAddr::from([198, 51, 100, 2])).is_ok());
        assert!(t.len() <= 2);
    }

    #[test]
    fn a_signed_in_check_over_a_full_table_skips_the_overflow() {
        let t = Arc::new(IpThrottle::new(60, 1, 1));
        let _held = t.admit_check(IpAddr::from([203, 0, 113, 9])).unwrap();
        let _flood = t.admit_check(IpAddr::from([198, 51, 100, 1])).unwrap();
        // The overflow is taken; a signed-in caller's check is not counted there.
        let newcomer = IpAddr::from([198, 51, 100, 2]);
        assert_eq!(t.admit_check(newcomer).unwrap_err(), Refusal::Checking);
        assert!(t.admit_check_unless_full(newcomer).unwrap().is_none());
        // A remembered client's check is counted as usual.
        assert_eq!(
            t.admit_check_unless_full(IpAddr::from([203, 0, 113, 9]))
                .unwrap_err(),
            Refusal::Checking
        );
    }

    #[test]
    fn one_check_in_flight_per_account() {
        let t = Arc::new(IpThrottle::new(3, 1, 100));
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let first = t.admit_account_check(a).unwrap();
        assert_eq!(t.admit_account_check(a).unwrap_err(), Refusal::Checking);
        let other = t.admit_account_check(b).unwrap();
        drop((first, other));
        drop(t.admit_account_check(a).unwrap());
        drop(t.admit_account_check(a).unwrap());
        // Three a minute per account.
        assert!(matches!(t.admit_account_check(a), Err(Refusal::TooFast(_))));
    }
}
