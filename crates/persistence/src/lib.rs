//! gc-persistence: the storage adapter of gc, on SQLite or PostgreSQL.
//!
//! [`open`] a [`DbStore`] with a database URL (`sqlite://PATH`, `sqlite::memory:` or
//! `postgres://...`; the scheme picks the backend), call [`DbStore::migrate`] at start, then
//! hand the store to the domain: it implements every port of `gc_domain::ports` (and so
//! `gc_domain::ports::Store`).
//!
//! This crate owns the diesel schema (`schema`), one row struct per table (`rows`), the
//! migrations of both backends (embedded from `migrations/{sqlite,postgres}` at the workspace
//! root), the pool and its connection settings (`store`), and the repository implementations
//! (`repos`). Every port method is synchronous: run it on a blocking pool.
//!
//! [`owner_only`] creates and tightens the files and folders only their owner may use (the
//! database's, and the server's data folder and master key).
//!
//! [`testing`] holds the helpers tests use to get a fresh database per test on each backend.

mod columns;
mod error;
mod fixed;
pub mod owner_only;
mod repos;
mod rows;
mod schema;
mod store;
pub mod testing;

pub use error::{redact_url, PersistenceError};
pub use store::{open, DbConnection, DbStore, PoolOptions, RETRY_AFTER_SECS};
