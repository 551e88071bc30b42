//! Test support: a fresh database per test, on SQLite and on PostgreSQL.
//!
//! Not `cfg(test)`: the end-to-end test crate uses it too. Nothing here runs in production.
//!
//! - SQLite: [`fresh_sqlite_url`] gives `sqlite://<temp folder>/gc.db` and a guard that
//!   deletes the folder when dropped.
//! - PostgreSQL: [`fresh_postgres_database`] connects to the server named by
//!   `GC_TEST_POSTGRES_URL` (default [`DEFAULT_POSTGRES_URL`]), creates a uniquely named
//!   database and returns a guard whose `url()` points at it and whose `Drop` drops it (best
//!   effort, `WITH (FORCE)`). `Ok(None)` means PostgreSQL did not answer: the caller skips its
//!   PostgreSQL leg. [`postgres_or_skip`] wraps that: it prints a `SKIPPED PostgreSQL leg` line,
//!   or panics when `GC_REQUIRE_POSTGRES=1`.
//!
//! Usage, one test body run on both backends:
//!
//! ```no_run
//! use gc_persistence::{open, testing, PoolOptions};
//!
//! fn body(store: &gc_persistence::DbStore) { /* ... */ }
//!
//! let (url, _dir) = testing::fresh_sqlite_url();
//! let store = open(&url, PoolOptions::default()).unwrap();
//! store.migrate().unwrap();
//! body(&store);
//!
//! if let Some(db) = testing::postgres_or_skip("my_test") {
//!     let store = open(db.url(), PoolOptions::default()).unwrap();
//!     store.migrate().unwrap();
//!     body(&store);
//! } // the database is dropped here
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use diesel::connection::SimpleConnection;
use uuid::Uuid;

/// The PostgreSQL server tests use when `GC_TEST_POSTGRES_URL` is not set.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The administrative URL of the test PostgreSQL server (`GC_TEST_POSTGRES_URL` or the
/// default): a database that exists, from which test databases are created and dropped.
pub fn postgres_admin_url() -> String {
    std::env::var("GC_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_POSTGRES_URL.to_owned())
}

/// True when `GC_REQUIRE_POSTGRES=1`: a missing PostgreSQL is a failure, not a skip.
pub fn postgres_required() -> bool {
    std::env::var("GC_REQUIRE_POSTGRES").is_ok_and(|v| v.trim() == "1")
}

/// A SQLite test database's folder; deleted when dropped.
#[derive(Debug)]
pub struct TempDirGuard {
    path: PathBuf,
}

impl TempDirGuard {
    /// Creates a fresh, uniquely named folder under the system temp folder.
    pub fn new(prefix: &str) -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!("{prefix}-{}", Uuid::now_v7().simple()));
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDirGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A fresh SQLite database URL (`sqlite://<fresh temp folder>/gc.db`, file not yet created)
/// and the guard of its folder. Panics if the temp folder cannot be created.
pub fn fresh_sqlite_url() -> (String, TempDirGuard) {
    let dir = match TempDirGuard::new("gc-test") {
        Ok(dir) => dir,
        Err(e) => panic!("cannot create a temp folder for a SQLite test database: {e}"),
    };
    let url = format!("sqlite://{}", dir.path().join("gc.db").display());
    (url, dir)
}

/// A PostgreSQL database made for one test; dropped (best effort) when the guard drops.
#[derive(Debug)]
pub struct PostgresTestDatabase {
    url: String,
    admin_url: String,
    name: String,
}

impl PostgresTestDatabase {
    /// The URL of the test database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database name (`gc_test_<uuid>`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for PostgresTestDatabase {
    fn drop(&mut self) {
        if let Err(e) = drop_database_on(&self.admin_url, &self.name) {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

/// Adds `connect_timeout=3` to a PostgreSQL URL that has none, so a dead server fails fast.
fn with_connect_timeout(url: &str) -> String {
    if url.contains("connect_timeout=") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&connect_timeout=3")
    } else {
        format!("{url}?connect_timeout=3")
    }
}

/// `url` with its database name replaced by `name`.
pub fn postgres_url_with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{}", &base[..authority_end], name);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// Set once PostgreSQL has failed to answer in this process, so later tests skip at once.
static POSTGRES_DOWN: OnceLock<String> = OnceLock::new();

/// Writes straight to the process's stderr: the test harness captures `eprintln!` of passing
/// tests, and a skip must be seen.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Creates a fresh, uniquely named database on the test PostgreSQL server. `Ok(None)` when the
/// server does not answer (skip; remembered for the rest of the process); `Err` when it
/// answers but the database cannot be created.
pub fn fresh_postgres_database() -> Result<Option<PostgresTestDatabase>, String> {
    if POSTGRES_DOWN.get().is_some() {
        return Ok(None);
    }
    let admin_url = postgres_admin_url();
    let mut admin = match crate::store::establish_postgres(&with_connect_timeout(&admin_url)) {
        Ok(conn) => conn,
        Err(e) => {
            let _ = POSTGRES_DOWN.set(e.to_string());
            return Ok(None);
        }
    };
    let name = format!("gc_test_{}", Uuid::now_v7().simple());
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .map_err(|e| format!("cannot create test database {name}: {e}"))?;
    Ok(Some(PostgresTestDatabase {
        url: postgres_url_with_database(&admin_url, &name),
        admin_url,
        name,
    }))
}

/// A fresh PostgreSQL test database, or `None` after writing
/// `SKIPPED PostgreSQL leg of <label>: ...` to stderr (uncaptured) when the server does not
/// answer. Panics when `GC_REQUIRE_POSTGRES=1` and the server does not answer, or when the
/// database cannot be created.
pub fn postgres_or_skip(label: &str) -> Option<PostgresTestDatabase> {
    match fresh_postgres_database() {
        Ok(Some(db)) => Some(db),
        Ok(None) => {
            let cause = POSTGRES_DOWN.get().map_or("", String::as_str);
            let url = crate::redact_url(&postgres_admin_url());
            if postgres_required() {
                panic!("GC_REQUIRE_POSTGRES=1 but PostgreSQL at {url} does not answer ({label}): {cause}");
            }
            say(&format!(
                "SKIPPED PostgreSQL leg of {label}: PostgreSQL at {url} does not answer ({}); \
                 set GC_TEST_POSTGRES_URL, or GC_REQUIRE_POSTGRES=1 to fail instead",
                cause.split_whitespace().collect::<Vec<_>>().join(" ")
            ));
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// A store on `url`, migrated, whose pool holds at most `max_size` connections (for tests
/// that count or drop the pool's connections). Panics on failure, like the rest of this module.
pub fn open_migrated(url: &str, max_size: u32) -> crate::DbStore {
    let store = crate::open(
        url,
        crate::PoolOptions {
            max_size,
            ..crate::PoolOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("opening the test store: {e}"));
    store
        .migrate()
        .unwrap_or_else(|e| panic!("migrating the test store: {e}"));
    store
}

/// Drops the database named in `url` through the administrative URL (best effort, forcing
/// out open connections).
pub fn drop_database(url: &str) -> Result<(), String> {
    let base = url.split_once('?').map_or(url, |(base, _)| base);
    let name = base
        .rsplit_once('/')
        .map(|(_, name)| name)
        .filter(|n| !n.is_empty() && !n.contains('@') && !n.contains(':'))
        .ok_or_else(|| format!("no database name in {}", crate::redact_url(url)))?;
    drop_database_on(&postgres_admin_url(), name)
}

fn drop_database_on(admin_url: &str, name: &str) -> Result<(), String> {
    let mut admin = crate::store::establish_postgres(&with_connect_timeout(admin_url))
        .map_err(|e| e.to_string())?;
    let quoted = name.replace('"', "\"\"");
    admin
        .batch_execute(&format!(
            "DROP DATABASE IF EXISTS \"{quoted}\" WITH (FORCE)"
        ))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_replaced_in_urls() {
        assert_eq!(
            postgres_url_with_database("postgres://u@h:5432/postgres", "x"),
            "postgres://u@h:5432/x"
        );
        assert_eq!(
            postgres_url_with_database("postgres://u:p@h/postgres?sslmode=disable", "x"),
            "postgres://u:p@h/x?sslmode=disable"
        );
        assert_eq!(
            postgres_url_with_database("postgres://h", "x"),
            "postgres://h/x"
        );
    }
}
