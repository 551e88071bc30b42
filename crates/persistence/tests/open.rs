//! Opening stores: URL schemes, error causes, SQLite specifics.

// Test bodies are plain functions run by the harness, outside `#[test]`: unwrap is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_domain::ports::{HealthRepo, TenantRepo};
use gc_persistence::{open, testing, PersistenceError, PoolOptions};

#[test]
fn unknown_schemes_are_refused() {
    for url in ["mysql://root@localhost/gc", "data/gc.db", "sqlite://"] {
        assert!(
            matches!(
                open(url, PoolOptions::default()),
                Err(PersistenceError::UnsupportedUrl(_))
            ),
            "{url}"
        );
    }
}

#[test]
fn an_unreachable_postgres_reports_the_real_cause_without_the_password() {
    let err = open(
        "postgres://gc:s3cret@127.0.0.1:1/gc?connect_timeout=2",
        PoolOptions::default(),
    )
    .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, PersistenceError::Connect(_)), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
    assert!(!message.contains("Invalid connection url"), "{message}");
    assert!(message.contains("127.0.0.1"), "{message}");
}

#[test]
fn sqlite_creates_its_folder_and_uses_wal() {
    let (_, dir) = testing::fresh_sqlite_url();
    let path = dir.path().join("nested").join("deeper").join("gc.db");
    let url = format!("sqlite://{}", path.display());
    let store = open(&url, PoolOptions::default()).unwrap();
    assert_eq!(store.backend(), "sqlite");
    assert!(!store.migrate().unwrap().is_empty());
    store.ping().unwrap();
    assert!(path.exists());
    // WAL mode keeps a -wal file beside the database while connections are open.
    assert!(dir.path().join("nested/deeper/gc.db-wal").exists());
}

#[test]
fn sqlite_memory_works_for_tests() {
    let store = open("sqlite::memory:", PoolOptions::default()).unwrap();
    // Every migration of the backend, once: one per folder in `migrations/sqlite`.
    let mut applied = store.migrate().unwrap();
    applied.sort();
    assert_eq!(applied, sqlite_migrations_on_disk());
    assert!(store.migrate().unwrap().is_empty());
    assert!(store
        .find_tenant(gc_domain::model::new_id())
        .unwrap()
        .is_none());
}

/// The versions of the SQLite migrations in the repository: each folder's name up to its
/// first `_`, as diesel names a migration's version (`2026-01-01-000000_init` -> `20260101000000`).
fn sqlite_migrations_on_disk() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/sqlite");
    let mut versions: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_dir())
        .map(|entry| {
            let name = entry.file_name().into_string().unwrap();
            let version = name.split('_').next().unwrap_or_default();
            version.chars().filter(char::is_ascii_digit).collect()
        })
        .collect();
    versions.sort();
    assert!(
        !versions.is_empty(),
        "no migrations under {}",
        dir.display()
    );
    versions
}
