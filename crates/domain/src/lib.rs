//! gc-domain: the domain model of gc.
//!
//! Entities and validated value types, the authorisation rules that turn a caller into a
//! `TenantScope` or `WriteScope`, the ports storage implements, and the services that decide.
//! This crate does no I/O and depends on no web, database or async runtime crate.

pub mod access;
pub mod accounts;
pub mod admin;
pub mod admin_tokens;
pub mod error;
#[cfg(test)]
pub(crate) mod fakes;
pub mod gateway;
pub mod model;
pub mod models;
pub mod page;
pub mod ports;
pub mod prices;
pub mod quota;
pub mod records;
pub mod runs;
pub mod secret;
pub mod services;
pub mod system;
pub mod usage;
pub mod values;
pub mod workspace;
pub mod workspace_keys;
pub mod workspace_service;

pub use error::{DomainError, DomainResult, ErrorCode};
