//! gc-domain: the domain model of gc.
//!
//! Three layers (decision 0045); a service imports the policy, the ports and the base, and
//! nothing of the policy or the base imports a service:
//! - the base: [`error`], validated [`values`], [`secret`], [`page`], the entities of
//!   [`model`] and the [`ports`] adapters implement;
//! - [`policy`]: pure decisions — who is calling and what they may touch (the scopes), member
//!   and tenant rules, AI access and key verdicts, record and body rules, prices, model
//!   allow-lists, limits, usage ranges, skill verdicts;
//! - [`services`]: one module per feature, one entry function per use case, each generic over
//!   the ports it needs; they apply the policy and call the ports.
//!
//! This crate does no I/O and depends on no web, database or async runtime crate.

pub mod error;
#[cfg(test)]
pub(crate) mod fakes;
pub mod model;
pub mod page;
pub mod policy;
pub mod ports;
pub mod secret;
pub mod services;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod values;

pub use error::{DomainError, DomainResult, ErrorCode};
