//! The connection type, the pool and `DbStore`, the one object that implements every port.
//!
//! The backend is chosen from the URL scheme here, never by `MultiConnection::establish`
//! (which tries backends in order, and SQLite accepts any string as a file name). Every
//! connection is established as its concrete type, so a failure reports the driver's real cause.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use diesel::connection::{AnsiTransactionManager, SimpleConnection, TransactionManager};
use diesel::prelude::*;
use diesel::r2d2::{CustomizeConnection, ManageConnection, Pool, PooledConnection};
use diesel::{PgConnection, SqliteConnection};
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use gc_domain::ports::{InlineGuard, InlineRepo, InlineReservation};
use gc_domain::{DomainError, DomainResult};
use parking_lot::FairMutex;

use crate::error::{db_error, redact_url, PersistenceError};
use crate::owner_only;

/// Seconds a caller is told to wait when the pool has no connection to give.
pub const RETRY_AFTER_SECS: u64 = 2;

/// Inserts the rows of a slice (`$rows`, `&[R]`) into `$table` in multi-row statements of
/// fixed row counts: 32, 16, 8, 4, 2 and 1, the largest that fits first, so a batch of 63 is
/// six statements and one of 250 is ten. A statement of a fixed count is one of diesel's
/// statically identified queries, so each connection prepares it once and keeps it; a
/// statement of whatever length the batch had would be parsed anew for every batch (the run
/// recorder spent a quarter of its instructions parsing, issue 14). Rows keep their order.
/// Evaluates to `diesel::QueryResult<()>`; the first failure stops it.
macro_rules! insert_rows {
    ($conn:expr, $table:expr, $rows:expr) => {{
        let mut rest: &[_] = $rows;
        let mut done: diesel::QueryResult<()> = Ok(());
        while done.is_ok() && !rest.is_empty() {
            done = $crate::store::insert_rows!(@largest $conn, $table, rest, 32 16 8 4 2 1);
        }
        done
    }};
    (@largest $conn:expr, $table:expr, $rest:ident, $($n:literal)+) => {
        'largest: {
            $(
                if let Some((head, tail)) = $rest.split_first_chunk::<$n>() {
                    $rest = tail;
                    break 'largest $crate::store::on_backend!($conn, |c| {
                        diesel::insert_into($table).values(head).execute(c)
                    })
                    .map(|_| ());
                }
            )+
            Ok(())
        }
    };
}
pub(crate) use insert_rows;

pub(crate) const SQLITE_MIGRATIONS: EmbeddedMigrations =
    embed_migrations!("../../migrations/sqlite");
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
            Self::Postgres(url) => establish_postgres(url).map(DbConnection::Pg),
            Self::Sqlite(path) => SqliteConnection::establish(path).map(DbConnection::Sqlite),
        }
    }
}

/// Establishes a PostgreSQL connection. Every connection the crate opens goes through here.
///
/// libpq reaches the server through OpenSSL (`sslmode=prefer` by default), and OpenSSL, when
/// libpq initialises it, registers a cleanup that `exit` runs while other threads may still be
/// opening or closing TLS connections: the process then dies with SIGSEGV after its work is
/// done. Initialising OpenSSL first, the way the `openssl` crate does (`OPENSSL_INIT_NO_ATEXIT`),
/// means that cleanup is never registered; the kernel reclaims the memory at exit instead.
pub(crate) fn establish_postgres(url: &str) -> ConnectionResult<PgConnection> {
    openssl_sys::init();
    match loopback_without_tls(url) {
        // A server that insists on TLS for loopback (`hostssl` in `pg_hba.conf`) refuses the
        // plain connection: then connect as the URL says.
        Some(plain) => PgConnection::establish(&plain).or_else(|_| PgConnection::establish(url)),
        None => PgConnection::establish(url),
    }
}

/// The URL with `sslmode=disable` added when it names a loopback host (`localhost`,
/// `127.x.x.x`, `[::1]`) and chooses no `sslmode` itself (nor does `PGSSLMODE`); else `None`.
///
/// libpq's default, `sslmode=prefer`, encrypts whenever the server offers TLS, without
/// checking the server's certificate. On loopback the bytes never leave the kernel, so that
/// encryption protects nothing, and it cost about 6 % of gc-server's and 10 % of the
/// database's CPU per run on PostgreSQL (issue 33, decision 0053: OpenSSL in both processes
/// for every statement and answer). A URL that says `sslmode=…` is used as it is.
pub(crate) fn loopback_without_tls(url: &str) -> Option<String> {
    if std::env::var_os("PGSSLMODE").is_some() {
        return None;
    }
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let (authority_and_path, query) = match rest.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (rest, None),
    };
    if query.is_some_and(|q| {
        q.split('&').any(|kv| {
            kv.split('=')
                .next()
                .is_some_and(|k| k == "sslmode" || k == "host" || k == "hostaddr")
        })
    }) {
        return None;
    }
    let authority = authority_and_path.split('/').next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // One host only (libpq accepts `h1,h2`): a list is left as it is.
    if host_port.contains(',') {
        return None;
    }
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split_once(']').map(|(h, _)| h)?
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        return None;
    }
    let sep = if query.is_some_and(|q| !q.is_empty()) {
        "&"
    } else if query.is_some() {
        ""
    } else {
        "?"
    };
    Some(format!("{url}{sep}sslmode=disable"))
}

/// How long after a statement failed the way a lost connection fails every checkout tests
/// its connection (`SELECT 1`) before use.
pub(crate) const DOUBT_WINDOW: Duration = Duration::from_secs(60);

/// When connections were last put in doubt, in milliseconds since [`doubt_clock`]'s start;
/// 0 = never. One value per process: a doubt raised by one store's failure costs the other
/// stores of the process (tests hold several) a few `SELECT 1`s, nothing more.
static DOUBT_SINCE_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn doubt_clock() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    // +1: a doubt raised in the first millisecond is still not "never".
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX - 1)
        + 1
}

/// Puts every pooled connection in doubt: for [`DOUBT_WINDOW`] each checkout tests its
/// connection first. Called when a statement failed the way a lost connection fails.
pub(crate) fn doubt_connections() {
    DOUBT_SINCE_MS.store(doubt_clock(), std::sync::atomic::Ordering::Relaxed);
}

fn connections_in_doubt() -> bool {
    let since = DOUBT_SINCE_MS.load(std::sync::atomic::Ordering::Relaxed);
    since != 0 && doubt_clock().saturating_sub(since) < DOUBT_WINDOW.as_millis() as u64
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

    /// Called on every checkout. A `SELECT 1` there was half of PostgreSQL's round trips on
    /// the run path (issue 33), so a connection is only tested while connections are in
    /// doubt: for [`DOUBT_WINDOW`] after a statement failed the way a lost connection fails
    /// ([`doubt_connections`]). The first request on a connection the server dropped fails
    /// (503, retryable) and puts the pool in doubt; from then on every checkout tests, and a
    /// dead connection is discarded there and replaced instead of failing another request.
    /// Idle connections are closed by the pool after its idle timeout anyway.
    fn is_valid(&self, conn: &mut DbConnection) -> Result<(), Self::Error> {
        if !connections_in_doubt() {
            return Ok(());
        }
        conn.batch_execute("SELECT 1")
            .map_err(diesel::r2d2::Error::QueryError)
    }

    fn has_broken(&self, conn: &mut DbConnection) -> bool {
        <DbConnection as Connection>::TransactionManager::is_broken_transaction_manager(conn)
    }
}

/// Per-connection SQLite settings: foreign keys enforced, a writer waits up to
/// [`PoolOptions::sqlite_busy_timeout`] (5 s) for the lock instead of failing, and
/// `synchronous = FULL` so nothing acknowledged is lost.
#[derive(Debug, Clone)]
struct SqlitePragmas(String);

impl SqlitePragmas {
    fn new(busy_timeout: Duration) -> Self {
        Self(format!(
            "PRAGMA foreign_keys = ON; PRAGMA busy_timeout = {}; PRAGMA synchronous = FULL; \
             PRAGMA cache_size = -1024;",
            busy_timeout.as_millis().min(u128::from(u32::MAX))
        ))
    }
}

impl CustomizeConnection<DbConnection, diesel::r2d2::Error> for SqlitePragmas {
    fn on_acquire(&self, conn: &mut DbConnection) -> Result<(), diesel::r2d2::Error> {
        match conn {
            DbConnection::Sqlite(c) => c
                .batch_execute(&self.0)
                .map_err(diesel::r2d2::Error::QueryError),
            DbConnection::Pg(_) => Ok(()),
        }
    }
}

/// The inline read connections' settings: those of every connection, and `query_only`, so a
/// write there fails at once (and is deferred to the blocking pool) instead of waiting for
/// the write lock on a thread that serves connections.
#[derive(Debug, Clone)]
struct SqliteReadOnly(SqlitePragmas);

impl CustomizeConnection<DbConnection, diesel::r2d2::Error> for SqliteReadOnly {
    fn on_acquire(&self, conn: &mut DbConnection) -> Result<(), diesel::r2d2::Error> {
        self.0.on_acquire(conn)?;
        conn.batch_execute("PRAGMA query_only = 1;")
            .map_err(diesel::r2d2::Error::QueryError)
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
    /// SQLite only: how long a statement waits for another process's write lock
    /// (`busy_timeout`); this process's own writers queue on the store's write gate first
    /// (decision 0028). Tests set 0 to see any wait in SQLite's busy handler as a failure.
    pub sqlite_busy_timeout: Duration,
}

impl Default for PoolOptions {
    /// Ten connections, three seconds, a 5 s `busy_timeout`.
    fn default() -> Self {
        Self {
            max_size: 10,
            connection_timeout: Duration::from_secs(3),
            sqlite_busy_timeout: Duration::from_secs(5),
        }
    }
}

/// The store: a pool of connections to SQLite or PostgreSQL, implementing every port of
/// `gc_domain::ports`. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct DbStore {
    pool: Pool<DbConnectionManager>,
    /// Read-only connections for read work run on the threads that serve connections
    /// (`InlineRepo`); SQLite files only.
    inline: Option<Pool<DbConnectionManager>>,
    backend: &'static str,
    /// Names this store (all its clones) for a connection reserved on a thread.
    ident: Arc<()>,
    /// This node's answers to `usable_ai_keys`, under the tenants' AI-key versions (shared by
    /// all clones; decision 0022).
    pub(crate) usable_keys: Arc<crate::repos::ai_keys::UsableKeys>,
    /// SQLite only: this process's writers queue here, in the process, for the one write
    /// lock SQLite has (decision 0028). Without it they queue in SQLite's busy handler, which
    /// polls with sleeps of up to 100 ms and wakes no one when the lock frees: under 16
    /// concurrent quota takes some waited over a second while the lock stood idle. Fair: each
    /// unlock hands the gate to the writer that waited longest, so the run writer, which goes
    /// from one batch to the next, cannot keep a quota take or a lease refill waiting.
    write_gate: Option<Arc<FairMutex<()>>>,
}

/// Read-only connections kept open for inline reads. When all are in use, read work goes to
/// the blocking pool as before.
const INLINE_CONNECTIONS: u32 = 4;

/// A connection reserved on a thread by `reserve_inline`.
struct Reserved {
    /// The store it belongs to (`DbStore::id`).
    owner: usize,
    /// Out of the slot while a store call uses it; `None` after a panic dropped it.
    conn: Option<Conn>,
    /// A write, or a failure, was refused: the work goes to the blocking pool.
    deferred: bool,
}

thread_local! {
    static RESERVED: RefCell<Option<Reserved>> = const { RefCell::new(None) };
}

/// Gives the reserved connection back to its pool when the work on this thread is done.
struct ReservedGuard;

impl InlineReservation for ReservedGuard {
    fn deferred(&self) -> bool {
        RESERVED
            .try_with(|r| r.borrow().as_ref().is_none_or(|r| r.deferred))
            .unwrap_or(true)
    }
}

impl Drop for ReservedGuard {
    fn drop(&mut self) {
        let _ = RESERVED.try_with(|r| r.borrow_mut().take());
    }
}

impl InlineRepo for DbStore {
    /// An idle read-only SQLite connection, reserved at once or not at all. Never on
    /// PostgreSQL (its answers wait on the network) nor for `sqlite::memory:` (one connection).
    fn reserve_inline(&self) -> Option<InlineGuard> {
        let inline = self.inline.as_ref()?;
        let owner = self.id();
        RESERVED
            .try_with(|r| {
                let mut r = r.borrow_mut();
                if r.is_some() {
                    return None;
                }
                let conn = inline.try_get()?;
                *r = Some(Reserved {
                    owner,
                    conn: Some(conn),
                    deferred: false,
                });
                Some(InlineGuard::new(Box::new(ReservedGuard)))
            })
            .ok()
            .flatten()
    }
}

/// The connection reserved on this thread for store `owner`: `Some(Some(conn))` taken out of
/// its slot, `Some(None)` when there is a reservation but no usable connection, `None` when
/// there is no reservation for this store.
fn take_reserved(owner: usize) -> Option<Option<Conn>> {
    RESERVED
        .try_with(|r| match r.borrow_mut().as_mut() {
            Some(res) if res.owner == owner => Some(res.conn.take()),
            _ => None,
        })
        .ok()
        .flatten()
}

/// Whether this thread holds an inline reservation of the store `owner` (a thread that serves
/// connections: nothing there may wait).
pub(crate) fn reserved_here(owner: usize) -> bool {
    RESERVED
        .try_with(|r| r.borrow().as_ref().is_some_and(|res| res.owner == owner))
        .unwrap_or(false)
}

/// Puts the reserved connection back after a store call; `failed` defers the work.
fn return_reserved(conn: Conn, failed: bool) {
    let _ = RESERVED.try_with(|r| {
        if let Some(res) = r.borrow_mut().as_mut() {
            res.conn = Some(conn);
            res.deferred |= failed;
        }
    });
}

/// Marks this thread's reservation deferred and answers the refusal the store call returns.
fn defer() -> DomainError {
    let _ = RESERVED.try_with(|r| {
        if let Some(res) = r.borrow_mut().as_mut() {
            res.deferred = true;
        }
    });
    DomainError::Unavailable {
        retry_after_secs: RETRY_AFTER_SECS,
    }
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
            private_database_files(Path::new(path))?;
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
        // on every checkout there; PostgreSQL connections are tested while in doubt
        // (`DbConnectionManager::is_valid`).
        .test_on_check_out(backend == "postgres")
        .max_size(if memory { 1 } else { opts.max_size.max(1) })
        .min_idle(Some(if memory { 1 } else { 0 }))
        .connection_timeout(opts.connection_timeout)
        .error_handler(Box::new(PoolErrorLogger))
        .connection_customizer(Box::new(SqlitePragmas::new(opts.sqlite_busy_timeout)));
    if memory {
        // An in-memory database lives as long as its one connection: never recycle it.
        builder = builder.idle_timeout(None).max_lifetime(None);
    }
    let inline = if backend == "sqlite" && !memory {
        let manager = DbConnectionManager {
            target: manager.target.clone(),
        };
        let pool = Pool::builder()
            .test_on_check_out(false)
            .max_size(INLINE_CONNECTIONS)
            // Kept open: `reserve_inline` only takes an idle connection, it never opens one.
            .min_idle(Some(INLINE_CONNECTIONS))
            .idle_timeout(None)
            .error_handler(Box::new(PoolErrorLogger))
            .connection_customizer(Box::new(SqliteReadOnly(SqlitePragmas::new(
                opts.sqlite_busy_timeout,
            ))))
            .build(manager)
            .map_err(|e| PersistenceError::Connect(e.to_string()))?;
        Some(pool)
    } else {
        None
    };
    let pool = builder
        .build(manager)
        .map_err(|e| PersistenceError::Connect(e.to_string()))?;
    drop(probe);
    Ok(DbStore {
        pool,
        inline,
        backend,
        ident: Arc::new(()),
        usable_keys: Arc::default(),
        write_gate: (backend == "sqlite").then(Arc::default),
    })
}

/// Creates the folder of the SQLite file when it is missing, mode 0700 (owner only) on Unix:
/// it holds the database, and with the default settings the generated master key. An existing
/// folder is left as it is: the operator chose it (`/tmp`, say), and the files in it are
/// private anyway (see [`private_database_files`]).
fn create_parent_folder(path: &Path) -> Result<(), PersistenceError> {
    match path.parent() {
        Some(parent) if parent != PathBuf::new() => {
            owner_only::create_folder(parent).map_err(|e| {
                PersistenceError::Setup(format!("cannot create {}: {e}", parent.display()))
            })
        }
        _ => Ok(()),
    }
}

/// Makes the SQLite database readable by its owner only (Unix): a missing file is created
/// empty with mode 0600 before SQLite opens it (SQLite would create it 0644 less the umask),
/// and SQLite gives its `-wal` and `-shm` files the database file's mode. An existing file, or
/// `-wal`/`-shm` file, that others may read or write is set to 0600 with a warning (only a
/// warning when that is not allowed, say for a file of another owner).
fn private_database_files(path: &Path) -> Result<(), PersistenceError> {
    #[cfg(unix)]
    {
        if path.as_os_str().to_string_lossy().starts_with("file:") {
            // A SQLite URI (`file:...?mode=...`): SQLite resolves it, not a plain path.
            return Ok(());
        }
        match owner_only::create_file(path) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(PersistenceError::Setup(format!(
                    "cannot create {}: {e}",
                    path.display()
                )))
            }
        }
        let mut companions = path.as_os_str().to_owned();
        companions.push("-wal");
        let wal = PathBuf::from(companions);
        let mut companions = path.as_os_str().to_owned();
        companions.push("-shm");
        let shm = PathBuf::from(companions);
        for file in [path, wal.as_path(), shm.as_path()] {
            owner_only::tighten(file, owner_only::Kind::File, "the database file");
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
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

    /// Whether this thread may wait (not one holding an inline read reservation).
    pub(crate) fn may_wait_here(&self) -> bool {
        !reserved_here(self.id())
    }

    fn id(&self) -> usize {
        Arc::as_ptr(&self.ident) as usize
    }

    /// Runs `f` on the connection reserved on this thread for this store, if there is one
    /// (`InlineRepo::reserve_inline`: a failure there defers the work), else on one from the
    /// pool.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut DbConnection) -> DomainResult<T>,
    ) -> DomainResult<T> {
        match take_reserved(self.id()) {
            Some(Some(mut conn)) => {
                let out = f(&mut conn);
                return_reserved(conn, out.is_err());
                out
            }
            Some(None) => Err(defer()),
            None => f(&mut *self.conn()?),
        }
    }

    /// Runs `f`, reads, on the connection reserved on this thread or a pooled one (no
    /// transaction). A statement that writes goes through `write_one` or `write`.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&mut DbConnection) -> DomainResult<T>,
    ) -> DomainResult<T> {
        self.with_conn(f)
    }

    /// Runs `f`, one statement that writes (atomic on its own: no transaction to pay for), on
    /// a pooled connection. Never on a connection reserved for inline reads: there it is
    /// refused before any statement runs and the work is deferred to the blocking pool, as
    /// `write` does (the read-only connection would refuse it too, but as a failed statement,
    /// logged as a database error).
    pub(crate) fn write_one<T>(
        &self,
        f: impl FnOnce(&mut DbConnection) -> DomainResult<T>,
    ) -> DomainResult<T> {
        if take_reserved(self.id()).is_some() {
            // Never on a thread that serves connections: the work goes to the blocking pool.
            // (The taken connection is dropped back to its pool with the reservation; the
            // guard's `deferred` is now true.)
            return Err(defer());
        }
        // SQLite: one writer of this process at a time, queued here rather than in SQLite's
        // busy handler (the gate is taken before the connection, so a writer waiting for the
        // gate holds no pooled connection), in the order they came.
        let _gate = self.write_gate.as_ref().map(|g| g.lock());
        f(&mut *self.conn()?)
    }

    /// Runs `f` in a write transaction: `BEGIN IMMEDIATE` on SQLite (the write lock is taken
    /// up front, so two writers never deadlock upgrading a read lock), a plain transaction on
    /// PostgreSQL. Rolled back when `f` fails. Refused on a reserved thread, as `write_one`.
    pub(crate) fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut DbConnection) -> DomainResult<T>,
    ) -> DomainResult<T> {
        self.write_one(|conn| write_transaction(conn, op, f))
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

    #[test]
    fn loopback_urls_without_an_sslmode_skip_tls() {
        if std::env::var_os("PGSSLMODE").is_some() {
            assert_eq!(loopback_without_tls("postgres://u@127.0.0.1/db"), None);
            return;
        }
        for (url, want) in [
            (
                "postgres://u@127.0.0.1:5432/db",
                Some("postgres://u@127.0.0.1:5432/db?sslmode=disable"),
            ),
            (
                "postgresql://u:p@localhost/db?connect_timeout=3",
                Some("postgresql://u:p@localhost/db?connect_timeout=3&sslmode=disable"),
            ),
            (
                "postgres://[::1]:5432/db?",
                Some("postgres://[::1]:5432/db?sslmode=disable"),
            ),
            (
                "postgres://u@127.0.0.2/db",
                Some("postgres://u@127.0.0.2/db?sslmode=disable"),
            ),
            // The URL's own choice, another host, a host list or a socket stay as they are.
            ("postgres://u@127.0.0.1/db?sslmode=require", None),
            ("postgres://u@127.0.0.1/db?a=1&sslmode=prefer", None),
            ("postgres://u@db.example.com:5432/db", None),
            ("postgres://u@10.0.0.7/db", None),
            ("postgres://u@127.0.0.1,10.0.0.7/db", None),
            ("postgres://u@127.0.0.1/db?host=/var/run/postgresql", None),
            ("postgres:///db", None),
            ("postgres://u@localhost.example.com/db", None),
            ("sqlite://x.db", None),
        ] {
            assert_eq!(loopback_without_tls(url).as_deref(), want, "{url}");
        }
    }

    #[test]
    fn the_bundled_sqlite_is_built_as_decided() {
        // `.cargo/config.toml` (decision 0013): plans that never depend on bound values, no
        // memory-statistics mutex, multi-thread mode (no per-connection mutex).
        #[derive(diesel::QueryableByName)]
        struct Opt {
            #[diesel(sql_type = diesel::sql_types::Text)]
            compile_options: String,
        }
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        let opts: Vec<String> = diesel::sql_query("PRAGMA compile_options")
            .load::<Opt>(&mut conn)
            .unwrap()
            .into_iter()
            .map(|o| o.compile_options)
            .collect();
        for wanted in ["ENABLE_QPSG", "DEFAULT_MEMSTATUS=0", "THREADSAFE=2"] {
            assert!(opts.iter().any(|o| o == wanted), "{wanted} not in {opts:?}");
        }
    }
}

/// Issue 33: checkouts do not test connections (`SELECT 1`) unless connections are in doubt;
/// a connection the server dropped must still cost at most one failed request.
#[cfg(test)]
mod doubt_tests {
    use super::*;
    use gc_domain::ports::ApiKeyRepo;

    #[test]
    fn a_dropped_postgres_connection_fails_one_request_then_is_replaced() {
        let Some(db) = crate::testing::postgres_or_skip("dropped connection") else {
            return;
        };
        let store = crate::testing::open_migrated(db.url(), 2);
        // Both pooled connections open, then idle.
        let (a, b) = (store.conn().unwrap(), store.conn().unwrap());
        drop((a, b));
        let mut admin = establish_postgres(&crate::testing::postgres_admin_url()).unwrap();
        admin
            .batch_execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}'",
                db.name()
            ))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let outcomes: Vec<bool> = (0..6).map(|_| store.key_context("none").is_ok()).collect();
        // The first read may meet a dead connection (unless another test of this process put
        // connections in doubt already); every later one is served.
        assert!(
            outcomes[1..].iter().all(|ok| *ok),
            "after one failure the dead connections are tested and replaced: {outcomes:?}"
        );
        assert!(connections_in_doubt() || outcomes[0]);
    }

    /// Decision 0053: a loopback URL without `sslmode` gets a plain connection even when the
    /// server offers TLS; `sslmode=require` in the URL still gets TLS.
    #[test]
    fn a_loopback_postgres_connection_skips_tls_unless_the_url_asks_for_it() {
        let Some(db) = crate::testing::postgres_or_skip("loopback without TLS") else {
            return;
        };
        if loopback_without_tls(db.url()).is_none() {
            return; // not a loopback URL, or PGSSLMODE set: nothing is changed
        }
        #[derive(diesel::QueryableByName)]
        struct Ssl {
            #[diesel(sql_type = diesel::sql_types::Bool)]
            ssl: bool,
        }
        let ssl_of = |url: &str| -> bool {
            let mut conn = establish_postgres(url).unwrap();
            diesel::sql_query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                .get_result::<Ssl>(&mut conn)
                .unwrap()
                .ssl
        };
        assert!(
            !ssl_of(db.url()),
            "a loopback connection without sslmode is plain"
        );
        let mut conn = establish_postgres(db.url()).unwrap();
        #[derive(diesel::QueryableByName)]
        struct On {
            #[diesel(sql_type = diesel::sql_types::Text)]
            ssl: String,
        }
        let server_tls = diesel::sql_query("SELECT current_setting('ssl') AS ssl")
            .get_result::<On>(&mut conn)
            .unwrap()
            .ssl;
        if server_tls == "on" {
            let sep = if db.url().contains('?') { '&' } else { '?' };
            assert!(
                ssl_of(&format!("{}{sep}sslmode=require", db.url())),
                "the URL's own sslmode is kept"
            );
        }
    }
}
