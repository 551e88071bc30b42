//! The connection type, the pool and `DbStore`, the one object that implements every port.
//!
//! The backend is chosen from the URL scheme here, never by `MultiConnection::establish`
//! (which tries backends in order, and SQLite accepts any string as a file name). Every
//! connection is established as its concrete type, so a failure reports the driver's real cause.

use std::path::{Path, PathBuf};
use std::time::Duration;

use diesel::connection::{AnsiTransactionManager, SimpleConnection, TransactionManager};
use diesel::prelude::*;
use diesel::r2d2::{CustomizeConnection, ManageConnection, Pool, PooledConnection};
use diesel::{PgConnection, SqliteConnection};
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use gc_domain::{DomainError, DomainResult};

use crate::error::{db_error, redact_url, PersistenceError};

/// Seconds a caller is told to wait when the pool has no connection to give.
pub const RETRY_AFTER_SECS: u64 = 2;

const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");
const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");

/// An arbitrary constant that names the advisory lock serialising migrations across nodes.
const MIGRATION_LOCK_KEY: i64 = 0x6763_6d69_6772_6174;

/// One connection type for both backends.
#[derive(diesel::MultiConnection)]
pub enum DbConnection {
    Pg(PgConnection),
    Sqlite(SqliteConnection),
}

/// Where the database is, parsed from the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Postgres(String),
    /// A SQLite file path, or `:memory:`.
    Sqlite(String),
}

impl Target {
    /// `postgres://` and `postgresql://` are PostgreSQL; `sqlite://PATH` (or `sqlite:PATH`) is
    /// a SQLite file at PATH (`sqlite:///abs/path` for an absolute one); `sqlite::memory:` is
    /// a private in-memory database (one connection).
    pub(crate) fn parse(url: &str) -> Result<Self, PersistenceError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url.to_owned()));
        }
        if url == "sqlite::memory:" || url == "sqlite://:memory:" {
            return Ok(Self::Sqlite(":memory:".to_owned()));
        }
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .filter(|p| !p.is_empty())
            .ok_or_else(|| PersistenceError::UnsupportedUrl(redact_url(url)))?;
        Ok(Self::Sqlite(path.to_owned()))
    }

    fn backend(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
            Self::Sqlite(_) => "sqlite",
        }
    }

    fn is_memory(&self) -> bool {
        matches!(self, Self::Sqlite(p) if p == ":memory:")
    }

    /// Establishes a concrete connection, so errors carry the driver's cause.
    fn establish(&self) -> ConnectionResult<DbConnection> {
        match self {
            Self::Postgres(url) => PgConnection::establish(url).map(DbConnection::Pg),
            Self::Sqlite(path) => SqliteConnection::establish(path).map(DbConnection::Sqlite),
        }
    }
}

/// The r2d2 manager: establishes connections of the backend chosen by the URL scheme.
#[derive(Debug)]
pub(crate) struct DbConnectionManager {
    target: Target,
}

impl ManageConnection for DbConnectionManager {
    type Connection = DbConnection;
    type Error = diesel::r2d2::Error;

    fn connect(&self) -> Result<DbConnection, Self::Error> {
        self.target
            .establish()
            .map_err(diesel::r2d2::Error::ConnectionError)
    }

    fn is_valid(&self, conn: &mut DbConnection) -> Result<(), Self::Error> {
        conn.batch_execute("SELECT 1")
            .map_err(diesel::r2d2::Error::QueryError)
    }

    fn has_broken(&self, conn: &mut DbConnection) -> bool {
        <DbConnection as Connection>::TransactionManager::is_broken_transaction_manager(conn)
    }
}

/// Per-connection SQLite settings: foreign keys enforced, a writer waits up to 5 s for the
/// lock instead of failing, and `synchronous = FULL` so nothing acknowledged is lost.
#[derive(Debug, Clone, Copy)]
struct SqlitePragmas;

const SQLITE_PRAGMAS: &str =
    "PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000; PRAGMA synchronous = FULL; \
     PRAGMA cache_size = -1024;";

impl CustomizeConnection<DbConnection, diesel::r2d2::Error> for SqlitePragmas {
    fn on_acquire(&self, conn: &mut DbConnection) -> Result<(), diesel::r2d2::Error> {
        match conn {
            DbConnection::Sqlite(c) => c
                .batch_execute(SQLITE_PRAGMAS)
                .map_err(diesel::r2d2::Error::QueryError),
            DbConnection::Pg(_) => Ok(()),
        }
    }
}

/// Logs pool errors (failed connection attempts) with tracing instead of the `log` crate.
#[derive(Debug, Clone, Copy)]
struct PoolErrorLogger;

impl r2d2::HandleError<diesel::r2d2::Error> for PoolErrorLogger {
    fn handle_error(&self, error: diesel::r2d2::Error) {
        tracing::error!(error = %error, "database connection failed");
    }
}

/// Runs one diesel expression on the concrete connection of either backend. Queries on the
/// hot path (credential lookups, record lists) use it: through the `MultiConnection` enum
/// diesel rebuilds and re-prepares the SQL on every call, on the concrete connection it keeps
/// the prepared statement.
macro_rules! on_backend {
    ($conn:expr, |$c:ident| $body:expr) => {
        match $conn {
            $crate::store::DbConnection::Sqlite($c) => $body,
            $crate::store::DbConnection::Pg($c) => $body,
        }
    };
}
pub(crate) use on_backend;

/// Pool settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// Most connections open at once (forced to 1 for `sqlite::memory:`).
    pub max_size: u32,
    /// How long a caller waits for a free connection before `Unavailable`.
    pub connection_timeout: Duration,
}

impl Default for PoolOptions {
    /// Ten connections, three seconds.
    fn default() -> Self {
        Self {
            max_size: 10,
            connection_timeout: Duration::from_secs(3),
        }
    }
}

/// The store: a pool of connections to SQLite or PostgreSQL, implementing every port of
/// `gc_domain::ports`. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct DbStore {
    pool: Pool<DbConnectionManager>,
    backend: &'static str,
}

impl std::fmt::Debug for DbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbStore")
            .field("backend", &self.backend)
            .field("pool", &self.pool.state())
            .finish()
    }
}

pub(crate) type Conn = PooledConnection<DbConnectionManager>;

/// Opens the store at `url` (`sqlite://PATH`, `sqlite::memory:`, `postgres://...`).
///
/// For SQLite, creates the file's folder and switches the database to WAL once. One connection
/// is established before the pool is built, so an unreachable database fails here with the
/// driver's cause. Does not migrate: call [`DbStore::migrate`].
pub fn open(url: &str, opts: PoolOptions) -> Result<DbStore, PersistenceError> {
    let target = Target::parse(url)?;
    if let Target::Sqlite(path) = &target {
        if !target.is_memory() {
            create_parent_folder(Path::new(path))?;
        }
    }
    let mut probe = target
        .establish()
        .map_err(|e| PersistenceError::Connect(format!("{} ({})", e, redact_url(url))))?;
    if let DbConnection::Sqlite(c) = &mut probe {
        // WAL is a property of the database file: set once, it stays.
        c.batch_execute("PRAGMA journal_mode = WAL;")
            .map_err(|e| PersistenceError::Setup(format!("journal_mode = WAL: {e}")))?;
    }
    let memory = target.is_memory();
    let backend = target.backend();
    let manager = DbConnectionManager { target };
    let mut builder = Pool::builder()
        // A SQLite file cannot drop a connection the way a server can: skip the `SELECT 1`
        // on every checkout there; PostgreSQL connections are still tested.
        .test_on_check_out(backend == "postgres")
        .max_size(if memory { 1 } else { opts.max_size.max(1) })
        .min_idle(Some(if memory { 1 } else { 0 }))
        .connection_timeout(opts.connection_timeout)
        .error_handler(Box::new(PoolErrorLogger))
        .connection_customizer(Box::new(SqlitePragmas));
    if memory {
        // An in-memory database lives as long as its one connection: never recycle it.
        builder = builder.idle_timeout(None).max_lifetime(None);
    }
    let pool = builder
        .build(manager)
        .map_err(|e| PersistenceError::Connect(e.to_string()))?;
    drop(probe);
    Ok(DbStore { pool, backend })
}

fn create_parent_folder(path: &Path) -> Result<(), PersistenceError> {
    match path.parent() {
        Some(parent) if parent != PathBuf::new() => std::fs::create_dir_all(parent).map_err(|e| {
            PersistenceError::Setup(format!("cannot create {}: {e}", parent.display()))
        }),
        _ => Ok(()),
    }
}

impl DbStore {
    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// Applies the pending embedded migrations of this backend; returns their versions (empty
    /// when the schema is current). On PostgreSQL an advisory lock serialises nodes that start
    /// at the same time.
    pub fn migrate(&self) -> Result<Vec<String>, PersistenceError> {
        let mut conn = self
            .pool
            .get()
            .map_err(|e| PersistenceError::Unavailable(e.to_string()))?;
        let migration = |e: Box<dyn std::error::Error + Send + Sync>| {
            PersistenceError::Migration(e.to_string())
        };
        let applied = match &mut *conn {
            DbConnection::Sqlite(c) => c
                .run_pending_migrations(SQLITE_MIGRATIONS)
                .map_err(migration)?
                .into_iter()
                .map(|v| v.to_string())
                .collect(),
            DbConnection::Pg(c) => {
                let lock = |c: &mut PgConnection, sql: &str| {
                    diesel::sql_query(sql)
                        .bind::<diesel::sql_types::BigInt, _>(MIGRATION_LOCK_KEY)
                        .execute(c)
                        .map_err(|e| PersistenceError::Migration(e.to_string()))
                };
                lock(c, "SELECT pg_advisory_lock($1)")?;
                let result: Result<Vec<String>, PersistenceError> = c
                    .run_pending_migrations(POSTGRES_MIGRATIONS)
                    .map(|vs| vs.into_iter().map(|v| v.to_string()).collect())
                    .map_err(migration);
                let unlocked = lock(c, "SELECT pg_advisory_unlock($1)");
                let applied = result?;
                unlocked?;
                applied
            }
        };
        if !applied.is_empty() {
            tracing::info!(backend = self.backend, migrations = ?applied, "database migrated");
        }
        Ok(applied)
    }

    /// A pooled connection, or `Unavailable` when none frees up within the timeout.
    pub(crate) fn conn(&self) -> DomainResult<Conn> {
        self.pool.get().map_err(|e| {
            tracing::error!(error = %e, "no database connection available");
            DomainError::Unavailable {
                retry_after_secs: RETRY_AFTER_SECS,
            }
        })
    }

    /// Runs `f` on a pooled connection (no transaction: one statement, or reads).
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&mut DbConnection) -> DomainResult<T>,
    ) -> DomainResult<T> {
        let mut conn = self.conn()?;
        f(&mut conn)
    }

    /// Runs `f` in a write transaction: `BEGIN IMMEDIATE` on SQLite (the write lock is taken
    /// up front, so two writers never deadlock upgrading a read lock), a plain transaction on
    /// PostgreSQL. Rolled back when `f` fails.
    pub(crate) fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut DbConnection) -> DomainResult<T>,
    ) -> DomainResult<T> {
        let mut conn = self.conn()?;
        write_transaction(&mut conn, op, f)
    }

    /// Connections of the pool: `(in use, idle)`.
    pub fn pool_stats(&self) -> (u32, u32) {
        let state = self.pool.state();
        (
            state.connections.saturating_sub(state.idle_connections),
            state.idle_connections,
        )
    }

    /// Takes a connection out of the pool and holds it until the guard drops (tests use it to
    /// exhaust a pool).
    #[doc(hidden)]
    pub fn hold_connection(&self) -> DomainResult<impl Drop> {
        self.conn()
    }
}

fn write_transaction<T>(
    conn: &mut DbConnection,
    op: &'static str,
    f: impl FnOnce(&mut DbConnection) -> DomainResult<T>,
) -> DomainResult<T> {
    type Tm = DbConnection;
    let begun = match conn {
        DbConnection::Sqlite(c) => {
            AnsiTransactionManager::begin_transaction_sql(c, "BEGIN IMMEDIATE")
        }
        DbConnection::Pg(_) => <Tm as TransactionManager<DbConnection>>::begin_transaction(conn),
    };
    begun.map_err(|e| db_error(op, e))?;
    // The enum's transaction manager delegates to the inner connection's, which now knows it
    // is in a transaction, so commit and rollback go through it for both backends.
    match f(conn) {
        Ok(value) => match <Tm as TransactionManager<DbConnection>>::commit_transaction(conn) {
            Ok(()) => Ok(value),
            Err(e) => {
                let _ = <Tm as TransactionManager<DbConnection>>::rollback_transaction(conn);
                Err(db_error(op, e))
            }
        },
        Err(user_error) => {
            if let Err(e) = <Tm as TransactionManager<DbConnection>>::rollback_transaction(conn) {
                tracing::error!(operation = op, error = %e, "rollback failed");
            }
            Err(user_error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_comes_from_the_scheme() {
        assert_eq!(
            Target::parse("postgres://u@h/db").unwrap(),
            Target::Postgres("postgres://u@h/db".into())
        );
        assert_eq!(
            Target::parse("postgresql://u@h/db").unwrap().backend(),
            "postgres"
        );
        assert_eq!(
            Target::parse("sqlite://data/gc.db").unwrap(),
            Target::Sqlite("data/gc.db".into())
        );
        assert_eq!(
            Target::parse("sqlite:///var/lib/gc.db").unwrap(),
            Target::Sqlite("/var/lib/gc.db".into())
        );
        assert!(Target::parse("sqlite::memory:").unwrap().is_memory());
        for bad in ["mysql://x", "data/gc.db", "sqlite://", ""] {
            assert!(matches!(
                Target::parse(bad),
                Err(PersistenceError::UnsupportedUrl(_))
            ));
        }
    }
}
