//! Feature services: one module per feature, one entry function per use case, each generic over
//! the ports it needs. A handler extracts its input, calls one entry function and maps the
//! answer; everything the feature decides (who may, in which share, what is recorded, which
//! status a probe means) happens here, by the rules of [`crate::policy`].
//!
//! - accounts and administration: [`accounts`] (sign-up, sign-in, sessions, credentials into a
//!   `Principal`), [`admin`] (tenants, users, tenant AI keys' storage, Shadow view),
//!   [`admin_tokens`], [`provisioning`] (the operator's command line);
//! - the workspace: [`workspace`] (records, settings, activity, overview, AI-access view),
//!   [`api_keys`], [`skill_scan`], [`usage`];
//! - runs: [`run`] (the four run routes), [`run_records`] (the run-record writer);
//! - the Guard, the AI keys and the service itself: [`guard_scan`], [`ai_keys`],
//!   [`diagnostics`], [`system`].
//!
//! The ports these services add are declared beside them, narrow to what they use:
//! [`Storage`] (storage work run off the caller's thread), [`ai_keys::KeyProbe`] (the region
//! gateways' checks), [`guard_scan::GuardScanner`] (the Guard's executor and its anonymous
//! allowance) and [`skill_scan::SkillScanner`]. Activity lines go to the existing
//! [`crate::policy::runs::RunSink`].

use std::future::Future;

use crate::error::DomainResult;

pub mod accounts;
pub mod admin;
pub mod admin_tokens;
pub mod ai_keys;
pub mod api_keys;
pub mod diagnostics;
pub mod guard_scan;
pub mod provisioning;
pub mod run;
pub mod run_records;
pub mod skill_scan;
pub mod system;
pub mod usage;
pub mod workspace;

/// Runs synchronous storage work (diesel is synchronous) where it may block: the HTTP layer
/// runs it on its blocking pool, the tests' fakes at once. One call is one trip; the work gets
/// the store as `Self::Store`.
pub trait Storage {
    /// The store the work is handed (`dyn Store` in the server).
    type Store: ?Sized;
    /// Runs `work`; a store that cannot run it now answers `Unavailable`.
    fn run<T, F>(&self, work: F) -> impl Future<Output = DomainResult<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Self::Store) -> DomainResult<T> + Send + 'static;
}
