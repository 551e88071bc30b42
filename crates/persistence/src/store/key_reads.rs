//! The caller's key context on PostgreSQL: reads that arrive while one is running are made
//! together, as one statement, by one of their threads (decision 0048).
//!
//! Every request still reads its key, member and tenant from the database after it arrived:
//! a read joins the queue, and the statement that answers it starts after that. So a
//! revocation or suspension that committed before a request asked is refused at that request,
//! on every node, exactly as with one statement per request. What is shared is the statement,
//! its round trip and the database's work per statement, which on PostgreSQL cost about as
//! much as the rest of a run (decision 0043).
//!
//! Leader and followers: the first thread to ask, with no statement of this store running,
//! runs its read at once (no wait at concurrency one). Threads that ask while a statement runs
//! queue; when the statement ends, the leader hands the lead to the longest-waiting of them,
//! which reads every queued key (up to [`MOST_PER_STATEMENT`]) in one statement and answers
//! each waiting thread. Every waiter is answered, also when the statement fails (each gets the
//! error) or the leader's thread panics (each gets `Unavailable`).

use std::sync::Arc;

use diesel::prelude::*;
use gc_domain::workspace::KeyContext;
use gc_domain::{DomainError, DomainResult};
use parking_lot::{Condvar, Mutex};

use crate::error::db_error;
use crate::rows::{ApiKeyRow, TenantRow, UserRow};
use crate::schema::{api_keys, tenants, users};
use crate::store::{on_backend, DbConnection, DbStore, RETRY_AFTER_SECS};

/// A key's row, its member's and the member's tenant (none for an unassigned member).
pub(crate) type KeyRows = (ApiKeyRow, UserRow, Option<TenantRow>);

/// Most keys one statement reads; more waiting are read by the next.
pub(crate) const MOST_PER_STATEMENT: usize = 64;

/// What a waiting thread is told.
enum Slot {
    Waiting,
    /// Its turn to run the next statement for everyone queued.
    Lead,
    Done(Box<DomainResult<Option<KeyRows>>>),
}

struct Waiter {
    slot: Mutex<Slot>,
    woken: Condvar,
}

impl Waiter {
    fn tell(&self, news: Slot) {
        *self.slot.lock() = news;
        self.woken.notify_one();
    }
}

#[derive(Default)]
struct Queue {
    /// Statements running (or threads handed the lead, about to run one).
    leaders: usize,
    waiting: Vec<(String, Arc<Waiter>)>,
}

/// Statements of one store that may run at once; a read that finds fewer runs its own at once.
pub(crate) const STATEMENTS_AT_ONCE: usize = 2;

/// The queue of one store's key reads (shared by its clones).
pub(crate) struct KeyReads {
    /// At most this many statements at once ([`STATEMENTS_AT_ONCE`]).
    most_leaders: usize,
    queue: Mutex<Queue>,
    /// Statements run, and keys they read (for the tests and the decision's figures).
    statements: std::sync::atomic::AtomicU64,
    keys: std::sync::atomic::AtomicU64,
}

impl Default for KeyReads {
    fn default() -> Self {
        Self::with_statements_at_once(STATEMENTS_AT_ONCE)
    }
}

impl KeyReads {
    fn with_statements_at_once(most_leaders: usize) -> Self {
        Self {
            most_leaders: most_leaders.max(1),
            queue: Mutex::default(),
            statements: std::sync::atomic::AtomicU64::new(0),
            keys: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The rows of the key whose hash is `hash`, read by a statement that started after this
    /// call began. `fetch` reads the rows of several hashes (any order, absent ones left out).
    pub(crate) fn read(
        &self,
        hash: &str,
        fetch: impl Fn(&[&str]) -> DomainResult<Vec<KeyRows>>,
    ) -> DomainResult<Option<KeyRows>> {
        let me = Arc::new(Waiter {
            slot: Mutex::new(Slot::Waiting),
            woken: Condvar::new(),
        });
        let lead_now = {
            let mut queue = self.queue.lock();
            if queue.leaders < self.most_leaders {
                queue.leaders += 1;
                true
            } else {
                queue.waiting.push((hash.to_owned(), Arc::clone(&me)));
                false
            }
        };
        if lead_now {
            self.lead((hash.to_owned(), Arc::clone(&me)), &fetch);
        }
        let mut slot = me.slot.lock();
        loop {
            match std::mem::replace(&mut *slot, Slot::Waiting) {
                Slot::Done(answer) => return *answer,
                Slot::Lead => {
                    drop(slot);
                    self.lead((hash.to_owned(), Arc::clone(&me)), &fetch);
                    slot = me.slot.lock();
                }
                Slot::Waiting => me.woken.wait(&mut slot),
            }
        }
    }

    /// Runs one statement for `own` read and the queued ones, answers them, and hands the
    /// lead on.
    fn lead(
        &self,
        own: (String, Arc<Waiter>),
        fetch: &dyn Fn(&[&str]) -> DomainResult<Vec<KeyRows>>,
    ) {
        let mut batch = vec![own];
        {
            let mut queue = self.queue.lock();
            let n = queue.waiting.len().min(MOST_PER_STATEMENT - 1);
            batch.extend(queue.waiting.drain(..n));
        }
        // Dropped last: the lead passes on even if `fetch` panics, and every waiter of the
        // batch not answered yet is (with `Unavailable`).
        let mut batch = Batch {
            reads: self,
            waiters: batch,
        };
        let hashes: Vec<&str> = batch.waiters.iter().map(|(h, _)| h.as_str()).collect();
        let found = fetch(&hashes);
        self.statements
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.keys
            .fetch_add(hashes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        drop(hashes);
        for (hash, waiter) in batch.waiters.drain(..) {
            let answer = match &found {
                Ok(rows) => Ok(rows.iter().find(|r| r.0.key_hash == hash).cloned()),
                Err(e) => Err(e.clone()),
            };
            waiter.tell(Slot::Done(Box::new(answer)));
        }
    }

    /// `(statements, keys)` read so far.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.statements.load(std::sync::atomic::Ordering::Relaxed),
            self.keys.load(std::sync::atomic::Ordering::Relaxed),
        )
    }
}

/// One statement's reads; on drop, answers the ones not answered and passes the lead on.
struct Batch<'a> {
    reads: &'a KeyReads,
    waiters: Vec<(String, Arc<Waiter>)>,
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        for (_, waiter) in self.waiters.drain(..) {
            waiter.tell(Slot::Done(Box::new(Err(DomainError::Unavailable {
                retry_after_secs: RETRY_AFTER_SECS,
            }))));
        }
        // The longest-waiting read leads next (taken out of the queue: it is told once).
        let mut queue = self.reads.queue.lock();
        if queue.waiting.is_empty() {
            queue.leaders = queue.leaders.saturating_sub(1);
        } else {
            let (_, next) = queue.waiting.remove(0);
            next.tell(Slot::Lead);
        }
    }
}

/// The rows of every key among `hashes`, with their members and tenants: one statement
/// (`key_hash = ANY($1)` on PostgreSQL, where it is kept prepared per connection).
fn fetch_many(conn: &mut DbConnection, hashes: &[&str]) -> DomainResult<Vec<KeyRows>> {
    on_backend!(conn, |c| api_keys::table
        .inner_join(users::table)
        .left_join(tenants::table.on(users::tenant_id.eq(tenants::id.nullable())))
        .filter(api_keys::key_hash.eq_any(hashes))
        .select((
            ApiKeyRow::as_select(),
            UserRow::as_select(),
            Option::<TenantRow>::as_select(),
        ))
        .load::<KeyRows>(c))
    .map_err(|e| db_error("key_context", e))
}

/// The rows of the key `hash`: one statement of its own.
fn fetch_one(conn: &mut DbConnection, hash: &str) -> DomainResult<Option<KeyRows>> {
    on_backend!(conn, |c| api_keys::table
        .inner_join(users::table)
        .left_join(tenants::table.on(users::tenant_id.eq(tenants::id.nullable())))
        .filter(api_keys::key_hash.eq(hash))
        .select((
            ApiKeyRow::as_select(),
            UserRow::as_select(),
            Option::<TenantRow>::as_select(),
        ))
        .first::<KeyRows>(c))
    .optional()
    .map_err(|e| db_error("key_context", e))
}

impl DbStore {
    /// The caller's key, its member and the member's tenant (what `ApiKeyRepo::key_context`
    /// answers), read from the database after this call began. On PostgreSQL, from a thread
    /// that may wait, through the store's shared reads ([`KeyReads`]); else one statement.
    pub fn read_key_context(&self, key_hash: &str) -> DomainResult<Option<KeyContext>> {
        let found = if self.backend() == "postgres" && self.may_wait_here() {
            self.key_reads.read(key_hash, |hashes| {
                self.read(|conn| fetch_many(conn, hashes))
            })?
        } else {
            self.read(|conn| fetch_one(conn, key_hash))?
        };
        let Some((key, user, tenant)) = found else {
            return Ok(None);
        };
        Ok(Some(KeyContext {
            key: key.into_domain()?,
            user: user.into_domain()?,
            tenant: tenant.map(TenantRow::into_domain).transpose()?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;

    /// Rows for `hash` whose key name is `stamp`: the moment the statement started.
    fn rows(hash: &str, stamp: u64) -> KeyRows {
        let key = ApiKeyRow {
            id: format!("id-{hash}"),
            tenant_id: "t".into(),
            user_id: "u".into(),
            name: stamp.to_string(),
            scopes: String::new(),
            hint: String::new(),
            key_hash: hash.to_owned(),
            created_at: 0,
            last_used_at: None,
            expires_at: None,
            revoked_at: None,
            requests_per_minute: None,
            tokens_per_minute: None,
            monthly_spend: None,
        };
        let user = UserRow {
            id: "u".into(),
            email: "u@example.com".into(),
            name: "u".into(),
            role: "member".into(),
            status: "active".into(),
            tenant_id: None,
            password_hash: String::new(),
            created_at: 0,
        };
        (key, user, None)
    }

    /// Waits until `n` reads are queued behind the running statement.
    fn until_queued(reads: &KeyReads, n: usize) {
        let start = Instant::now();
        while reads.queue.lock().waiting.len() < n {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "reads never queued"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn reads_that_wait_for_a_statement_are_made_by_one_next_statement() {
        let reads = Arc::new(KeyReads::with_statements_at_once(1));
        let (release, hold) = mpsc::channel::<()>();
        let hold = Mutex::new(hold);
        std::thread::scope(|s| {
            // The first read runs at once and holds its statement until released.
            let first = s.spawn(|| {
                reads.read("k0", |hashes| {
                    assert_eq!(hashes, ["k0"]);
                    hold.lock().recv().expect("released");
                    Ok(vec![rows("k0", 0)])
                })
            });
            while reads.queue.lock().leaders == 0 {
                std::thread::yield_now();
            }
            let others: Vec<_> = (1..=5)
                .map(|i| {
                    let reads = &reads;
                    s.spawn(move || {
                        let hash = format!("k{i}");
                        reads.read(&hash, |hashes| {
                            let mut sorted = hashes.to_vec();
                            sorted.sort_unstable();
                            assert_eq!(sorted, ["k1", "k2", "k3", "k4", "k5"]);
                            // k5 has no row: its reader gets `None`.
                            Ok(hashes
                                .iter()
                                .filter(|h| **h != "k5")
                                .map(|h| rows(h, 1))
                                .collect())
                        })
                    })
                })
                .collect();
            until_queued(&reads, 5);
            release.send(()).expect("first read waits");
            let first = first.join().expect("first read").expect("answered");
            assert_eq!(first.map(|r| r.0.key_hash), Some("k0".to_owned()));
            for (i, other) in others.into_iter().enumerate() {
                let got = other.join().expect("read").expect("answered");
                let want = (i + 1 < 5).then(|| format!("k{}", i + 1));
                assert_eq!(got.map(|r| r.0.key_hash), want);
            }
        });
        assert_eq!(
            reads.counts(),
            (2, 6),
            "one statement for the five that waited"
        );
        assert_eq!(
            reads.queue.lock().leaders,
            0,
            "the lead is given up when no one waits"
        );
    }

    #[test]
    fn every_read_is_answered_by_a_statement_that_started_after_it_asked() {
        let reads = KeyReads::default();
        let clock = AtomicU64::new(1);
        std::thread::scope(|s| {
            for t in 0..16 {
                let (reads, clock) = (&reads, &clock);
                s.spawn(move || {
                    for i in 0..200 {
                        let hash = format!("k{t}-{i}");
                        let asked = clock.fetch_add(1, Ordering::SeqCst);
                        let got = reads
                            .read(&hash, |hashes| {
                                let started = clock.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_micros(50));
                                Ok(hashes.iter().map(|h| rows(h, started)).collect())
                            })
                            .expect("answered")
                            .expect("found");
                        assert_eq!(got.0.key_hash, hash, "each read gets its own key");
                        let started: u64 = got.0.name.parse().expect("stamp");
                        assert!(
                            started > asked,
                            "answered by a statement begun before it asked"
                        );
                    }
                });
            }
        });
        let (statements, keys) = reads.counts();
        assert_eq!(keys, 16 * 200);
        assert!(statements < keys, "concurrent reads shared statements");
    }

    #[test]
    fn a_failed_statement_fails_each_of_its_reads_and_the_next_read_runs() {
        let reads = KeyReads::default();
        let failed = reads.read("k", |_| {
            Err(DomainError::Unavailable {
                retry_after_secs: 7,
            })
        });
        assert_eq!(
            failed.err(),
            Some(DomainError::Unavailable {
                retry_after_secs: 7
            })
        );
        let found = reads
            .read("k", |h| Ok(h.iter().map(|h| rows(h, 1)).collect()))
            .expect("answered");
        assert!(found.is_some());
    }

    #[test]
    fn a_panicking_statement_answers_its_waiters_and_passes_the_lead_on() {
        let reads = KeyReads::with_statements_at_once(1);
        let (release, hold) = mpsc::channel::<()>();
        let hold = Mutex::new(hold);
        std::thread::scope(|s| {
            let first = s.spawn(|| {
                reads.read("k0", |_| {
                    hold.lock().recv().expect("released");
                    Ok(vec![rows("k0", 0)])
                })
            });
            while reads.queue.lock().leaders == 0 {
                std::thread::yield_now();
            }
            // Two reads queue; the one handed the lead panics in its statement.
            let waiters: Vec<_> = ["k1", "k2"]
                .into_iter()
                .map(|h| {
                    let reads = &reads;
                    s.spawn(move || {
                        reads.read(h, |_| -> DomainResult<Vec<KeyRows>> {
                            panic!("statement panicked")
                        })
                    })
                })
                .collect();
            until_queued(&reads, 2);
            release.send(()).expect("first read waits");
            assert!(first.join().expect("first").expect("answered").is_some());
            let outcomes: Vec<_> = waiters.into_iter().map(|w| w.join()).collect();
            // The leader's thread panicked; the other got `Unavailable`, none hangs.
            assert_eq!(outcomes.iter().filter(|o| o.is_err()).count(), 1);
            for answered in outcomes.into_iter().flatten() {
                assert!(matches!(answered, Err(DomainError::Unavailable { .. })));
            }
        });
        assert_eq!(reads.queue.lock().leaders, 0);
        let after = reads
            .read("k3", |h| Ok(h.iter().map(|h| rows(h, 1)).collect()))
            .expect("answered");
        assert!(after.is_some(), "reads run after a panic");
    }

    /// A tenant, a member and two keys of theirs (`hash-a`, `hash-b`), in SQL both backends run.
    const FIXTURE: &str = "\
        INSERT INTO tenants (id, name, status, region, ai_enabled, created_at) VALUES \
          ('00000000-0000-4000-8000-000000000001', 'T', 'active', 'AIHK', TRUE, 0); \
        INSERT INTO users (id, email, name, role, status, tenant_id, password_hash, created_at) \
          VALUES ('00000000-0000-4000-8000-000000000002', 'm@example.com', 'M', 'member', \
          'active', '00000000-0000-4000-8000-000000000001', 'x', 0); \
        INSERT INTO api_keys (id, tenant_id, user_id, name, scopes, hint, key_hash, created_at) \
          VALUES ('00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-000000000001', \
          '00000000-0000-4000-8000-000000000002', 'a', 'run', 'a', 'hash-a', 0), \
          ('00000000-0000-4000-8000-00000000000b', '00000000-0000-4000-8000-000000000001', \
          '00000000-0000-4000-8000-000000000002', 'b', 'run', 'b', 'hash-b', 0);";

    /// On both databases: reads from many threads each get their own key (or none), and a
    /// revocation committed through another store (another node) is seen by the next read.
    fn shared_reads_answer_each_caller_and_see_a_revocation_at_once(url: &str) {
        use diesel::connection::SimpleConnection;
        let node_a = crate::store::open(url, crate::store::PoolOptions::default()).unwrap();
        node_a.migrate().unwrap();
        let node_b = crate::store::open(url, crate::store::PoolOptions::default()).unwrap();
        node_a.conn().unwrap().batch_execute(FIXTURE).unwrap();
        std::thread::scope(|s| {
            for t in 0..16 {
                let node_a = &node_a;
                s.spawn(move || {
                    for i in 0..25 {
                        let hash = ["hash-a", "hash-b", "hash-none"][(t + i) % 3];
                        let got = node_a.read_key_context(hash).unwrap();
                        match got {
                            Some(ctx) => {
                                assert_eq!(ctx.key.key_hash, hash);
                                assert_eq!(ctx.user.name, "M");
                                assert_eq!(ctx.tenant.map(|t| t.name), Some("T".to_owned()));
                            }
                            None => assert_eq!(hash, "hash-none"),
                        }
                    }
                });
            }
        });
        for _ in 0..3 {
            let ctx = node_a.read_key_context("hash-a").unwrap().unwrap();
            assert!(ctx.key.revoked_at.is_none());
            node_b
                .conn()
                .unwrap()
                .batch_execute("UPDATE api_keys SET revoked_at = 1 WHERE key_hash = 'hash-a'")
                .unwrap();
            let ctx = node_a.read_key_context("hash-a").unwrap().unwrap();
            assert!(
                ctx.key.revoked_at.is_some(),
                "the revocation holds at the next read"
            );
            node_b
                .conn()
                .unwrap()
                .batch_execute("UPDATE api_keys SET revoked_at = NULL WHERE key_hash = 'hash-a'")
                .unwrap();
        }
        if node_a.backend() == "postgres" {
            let (statements, keys) = node_a.key_reads.counts();
            assert_eq!(
                keys,
                16 * 25 + 6,
                "every read went through the shared reads"
            );
            assert!(statements <= keys);
        }
    }

    #[test]
    fn shared_reads_on_sqlite() {
        let (url, _dir) = crate::testing::fresh_sqlite_url();
        shared_reads_answer_each_caller_and_see_a_revocation_at_once(&url);
    }

    #[test]
    fn shared_reads_on_postgres() {
        let Some(db) = crate::testing::postgres_or_skip("shared key reads") else {
            return;
        };
        shared_reads_answer_each_caller_and_see_a_revocation_at_once(db.url());
    }
}
