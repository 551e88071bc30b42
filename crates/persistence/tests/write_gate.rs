//! This process's SQLite writers queue on the store's write gate, never in SQLite's busy
//! handler (decision 0028). With `busy_timeout` at 0 any writer that met the write lock held by
//! another connection of the same store would fail at once with `SQLITE_BUSY` (`Unavailable`):
//! without the gate, concurrent quota takes here fail; with it, none does.

// Test bodies are plain functions run by the harness, outside `#[test]`: unwrap is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Barrier};
use std::time::Duration;

use gc_domain::policy::quota::{QuotaSubject, QuotaWindow, RequestTake, Take};
use gc_domain::ports::QuotaRepo;
use gc_persistence::{open, testing, PoolOptions};
use uuid::Uuid;

#[test]
fn concurrent_sqlite_writers_of_one_store_never_meet_the_busy_handler() {
    let (url, _dir) = testing::fresh_sqlite_url();
    let store = open(
        &url,
        PoolOptions {
            max_size: 16,
            connection_timeout: Duration::from_secs(30),
            sqlite_busy_timeout: Duration::ZERO,
        },
    )
    .unwrap();
    store.migrate().unwrap();
    const THREADS: usize = 16;
    const TAKES: u64 = 40;
    let (tenant, key) = (Uuid::now_v7(), Uuid::now_v7());
    let windows = [
        QuotaWindow {
            subject: QuotaSubject::TenantMinute(tenant),
            start_ms: 0,
        },
        QuotaWindow {
            subject: QuotaSubject::KeyMinute(key),
            start_ms: 0,
        },
    ];
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (store, start) = (store.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let mut failed = Vec::new();
                for n in 0..TAKES {
                    // One window (a single statement) and two (a transaction) in turn.
                    let asks: Vec<RequestTake> = windows
                        .iter()
                        .take(1 + usize::from((n + i as u64) % 2 == 0))
                        .map(|w| RequestTake {
                            window: *w,
                            max: 1_000_000,
                            want: 1,
                        })
                        .collect();
                    match store.take_request(&asks) {
                        Ok(Take::Taken(_)) => {}
                        other => failed.push(format!("{other:?}")),
                    }
                }
                failed
            })
        })
        .collect();
    let failed: Vec<String> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} takes failed, first: {:?}",
        failed.len(),
        THREADS as u64 * TAKES,
        failed.first()
    );
}
