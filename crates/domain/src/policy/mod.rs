//! Pure decisions: each module states a rule and decides from the values it is given. None
//! calls a service; a few take a port as a generic bound to load what they decide on
//! (`ai_access::RunScope::authorize`, `runs::prepare_for`, the quota admission).
//!
//! - [`access`]: who is calling and what they may touch — `Principal`, the member and tenant
//!   rules, and the proofs `TenantScope`, `WriteScope`, `AdminScope`;
//! - [`accounts`]: session lifetimes, the sign-in throttle, names of people and tenants;
//! - [`admin_tokens`]: an admin token's scope and expiry;
//! - [`ai_access`]: tenant AI keys, AI access, the `RunScope` and key verdicts;
//! - [`models`], [`prices`]: model allow-lists, prices and money;
//! - [`quota`]: limits, quota windows and admission;
//! - [`records`]: field rules of stored records and settings;
//! - [`runs`]: run body checks, estimates, refusals and admission, key rotation and failover;
//! - [`skill_verdicts`]: what is stored of a Guard scan of a skill;
//! - [`usage`]: usage ranges, groupings and queries.

pub mod access;
pub mod accounts;
pub mod admin_tokens;
pub mod ai_access;
pub mod models;
pub mod prices;
pub mod quota;
pub mod records;
pub mod runs;
pub mod skill_verdicts;
pub mod usage;
