//! The service's own health, as the domain sees it.

use crate::error::DomainResult;
use crate::ports::HealthRepo;

/// Answers when the storage answers.
pub fn health<P: HealthRepo + ?Sized>(ports: &P) -> DomainResult<()> {
    ports.ping()
}

/// Answers when the storage would take this node's work: it answers and accepts writes.
pub fn ready<P: HealthRepo + ?Sized>(ports: &P) -> DomainResult<()> {
    ports.ready()
}
