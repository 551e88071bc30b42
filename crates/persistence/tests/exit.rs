//! A process that uses PostgreSQL exits cleanly while other threads still open and close
//! connections (libpq over TLS must not leave OpenSSL's exit-time cleanup racing them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use gc_persistence::{open, testing, PoolOptions};

/// Set in the child: the URL it connects to, over and over, until the process exits.
const CHILD_URL: &str = "GC_EXIT_RACE_URL";
/// How long the child's main thread lives before it calls `exit`, in milliseconds.
const CHILD_MS: &str = "GC_EXIT_RACE_MS";

/// Without the fix, a raw connection loop died with SIGSEGV at about one exit in seven on the
/// CI machine and this test's child at its first exit, so forty clean exits in a row would
/// happen by chance about twice in a thousand runs. The race needs TLS to the server: against a
/// PostgreSQL with `ssl = off` (CI's has it on, Debian's default) this test cannot fail.
const EXITS: u64 = 40;

#[test]
fn a_process_exits_cleanly_while_threads_still_use_postgres() {
    if let Ok(url) = std::env::var(CHILD_URL) {
        child(&url);
    }
    let Some(db) = testing::postgres_or_skip("exit race") else {
        return;
    };
    let me = std::env::current_exe().unwrap();
    for i in 0..EXITS {
        let status = Command::new(&me)
            .args([
                "--exact",
                "a_process_exits_cleanly_while_threads_still_use_postgres",
                "--nocapture",
            ])
            .env(CHILD_URL, db.url())
            .env(CHILD_MS, (5 + i % 30).to_string())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "exit {i}: the child ended with {status} while its threads used PostgreSQL"
        );
    }
}

/// Four threads open a store (one probe connection) and drop it, in a loop; the main thread
/// waits a little and exits the process with their connections in every state.
fn child(url: &str) -> ! {
    for _ in 0..4 {
        let url = url.to_owned();
        std::thread::spawn(move || loop {
            let store = open(&url, PoolOptions::default()).expect("PostgreSQL answers");
            drop(store);
        });
    }
    let ms = std::env::var(CHILD_MS).unwrap().parse().unwrap();
    std::thread::sleep(Duration::from_millis(ms));
    std::process::exit(0)
}
