//! Record lists kept per node and served again while the tenant's records are unchanged
//! (decisions 0019, 0046): the caching adapter in front of the records port. The list handlers
//! make one call, [`record_list`]; the domain states when a kept answer may be served
//! (`gc_domain::services::workspace::list_records_kept`, behind its `KeptLists` port) and this
//! module makes it fast: it keeps the rendered bodies, bounded, and renders and offers a page
//! read from the database.
//!
//! A list's answer is a pure function of the tenant's records and the query. The database
//! keeps one version per tenant that a trigger raises in the same transaction as every insert,
//! change or delete of one of its records, on any node. A list request still authenticates
//! against the database and reads that version (one indexed row); when this node kept the
//! answer to the same query under the same version, it sends those bytes instead of reading,
//! converting and writing the page again. The version is read *before* the records, so a kept
//! answer is never older than the version it is kept under. An answer is kept the second time
//! its query is read under one version, so queries asked once cost no memory.
//!
//! Bounded: at most [`MAX_ENTRIES`] queries and [`MAX_BYTES`] of bodies; the least recently
//! used goes first when either is full, and an answer larger than an eighth of the bytes is
//! never kept.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use gc_domain::model::workspace::RecordKind;
use gc_domain::page::PageRequest;
use gc_domain::services::skill_scan::SkillScanner;
pub use gc_domain::services::workspace::ListKey;
use gc_domain::services::workspace::{self as service, KeptLists};
use lru::LruCache;
use uuid::Uuid;

use crate::cursor;
use crate::error::ApiError;
use crate::extract::Caller;
use crate::state::AppState;

/// The body of a page of the caller's records of `kind` (under `parent` for memory sources):
/// this node's kept answer when the domain says it is current, else the page read now,
/// rendered (`records::record_page`) and offered to the node's [`ListCache`]. Counts which of
/// the two it was (`gc_record_lists_total`). `page` is the query as parsed: its error is
/// answered only to a caller who may list.
///
/// The read may run twice (inline, then again on the blocking pool), so rendering and the
/// offer, which counts (the second offer under one version is the one kept), come after it,
/// once per request.
pub(crate) async fn record_list(
    state: &AppState,
    caller: Caller,
    kind: RecordKind,
    parent: Option<Uuid>,
    page: Result<PageRequest, ApiError>,
) -> Result<Bytes, ApiError> {
    let lists = Arc::clone(&state.lists);
    let listed = caller
        .read(state, move |ports, p| {
            service::list_records_kept(ports, lists.as_ref(), p, kind, parent, &page)
        })
        .await??;
    state.metrics.record_list(listed.was_kept());
    // A kept answer holds `guard.stale` against this process's rules version, which never
    // changes while it runs (the kept answers are this process's own).
    let rules = state.guard.rules_version();
    Ok(listed.answer(state.lists.as_ref(), |page| {
        super::records::record_page(&page.items, page.next.map(cursor::encode), rules)
            .map(Bytes::from)
    })?)
}

/// Most answers kept.
pub const MAX_ENTRIES: usize = 512;
/// Most bytes of bodies kept.
pub const MAX_BYTES: usize = 4 * 1024 * 1024;

struct Kept {
    /// The tenant's record version read before the records of `body`.
    version: i64,
    /// `None` when the query was asked once under `version`: nothing kept yet.
    body: Option<Bytes>,
}

impl Kept {
    fn size(&self) -> usize {
        self.body.as_ref().map_or(0, Bytes::len)
    }
}

struct Inner {
    answers: LruCache<ListKey, Kept>,
    bytes: usize,
}

/// The node's kept list answers; see the module documentation.
pub struct ListCache {
    inner: Mutex<Inner>,
    max_entries: usize,
    max_bytes: usize,
}

impl Default for ListCache {
    fn default() -> Self {
        Self::new(MAX_ENTRIES, MAX_BYTES)
    }
}

impl ListCache {
    /// A cache of at most `max_entries` answers and `max_bytes` of bodies (0 keeps nothing).
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            // Bounded by entries and bytes together in `put`, so built unbounded.
            inner: Mutex::new(Inner {
                answers: LruCache::unbounded(),
                bytes: 0,
            }),
            max_entries,
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map is consistent after every statement that can panic, so a poisoned lock
        // still holds a usable cache.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The answer kept for `key` when it was kept under exactly `version`.
    pub fn get(&self, key: &ListKey, version: i64) -> Option<Bytes> {
        let mut inner = self.lock();
        match inner.answers.get(key) {
            Some(kept) if kept.version == version => kept.body.clone(),
            _ => None,
        }
    }

    /// Keeps `body` as the answer to `key` under `version` if the same query was already
    /// asked under this version; the first time only remembers that it was asked (no bytes),
    /// so queries asked once (every page of a long scroll, a bot's unique cursors) never fill
    /// the memory. Never replaces an answer under a later version (a slow request).
    pub fn put(&self, key: ListKey, version: i64, body: Bytes) {
        if body.len() > self.max_bytes / 8 || self.max_entries == 0 {
            return;
        }
        let mut inner = self.lock();
        let asked_before = match inner.answers.peek(&key) {
            Some(kept) if kept.version > version => return,
            Some(kept) => kept.version == version,
            None => false,
        };
        let body = asked_before.then_some(body);
        let size = body.as_ref().map_or(0, Bytes::len);
        if let Some(old) = inner.answers.put(key, Kept { version, body }) {
            inner.bytes -= old.size();
        }
        inner.bytes += size;
        while inner.bytes > self.max_bytes || inner.answers.len() > self.max_entries {
            let Some((_, gone)) = inner.answers.pop_lru() else {
                break;
            };
            inner.bytes -= gone.size();
        }
    }

    /// `(answers, bytes)` kept now.
    pub fn size(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.answers.len(), inner.bytes)
    }
}

/// The adapter behind the domain's port: the domain decides when a kept answer may be served
/// (`gc_domain::services::workspace::list_records_kept`); this keeps the bodies, bounded.
impl KeptLists for ListCache {
    type Answer = Bytes;

    fn kept(&self, key: &ListKey, version: i64) -> Option<Bytes> {
        self.get(key, version)
    }

    fn offer(&self, key: ListKey, version: i64, answer: Bytes) {
        self.put(key, version, answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gc_domain::model::workspace::RecordKind;
    use uuid::Uuid;

    fn key(tenant: u128, limit: u32) -> ListKey {
        ListKey {
            tenant: Uuid::from_u128(tenant),
            kind: RecordKind::Skill,
            parent: None,
            before: None,
            limit,
        }
    }

    fn body(len: usize) -> Bytes {
        Bytes::from(vec![b'x'; len])
    }

    /// Asks `key` twice under `version`: the second time keeps the answer.
    fn keep(cache: &ListCache, key: ListKey, version: i64, body: Bytes) {
        cache.put(key, version, body.clone());
        cache.put(key, version, body);
    }

    #[test]
    fn an_answer_is_served_only_under_the_version_it_was_kept_under() {
        let cache = ListCache::new(8, 1024);
        keep(&cache, key(1, 50), 3, Bytes::from_static(b"three"));
        assert_eq!(cache.get(&key(1, 50), 3).as_deref(), Some(&b"three"[..]));
        assert_eq!(cache.get(&key(1, 50), 4), None);
        assert_eq!(cache.get(&key(1, 50), 2), None);
        // Another tenant, another page size: other answers.
        assert_eq!(cache.get(&key(2, 50), 3), None);
        assert_eq!(cache.get(&key(1, 10), 3), None);
    }

    #[test]
    fn an_answer_is_kept_the_second_time_it_is_read_under_one_version() {
        let cache = ListCache::new(8, 1024);
        cache.put(key(1, 50), 3, Bytes::from_static(b"three"));
        assert_eq!(cache.get(&key(1, 50), 3), None);
        assert_eq!(cache.size(), (1, 0));
        // Asked again under another version: still the first time for that one.
        cache.put(key(1, 50), 4, Bytes::from_static(b"four"));
        assert_eq!(cache.get(&key(1, 50), 4), None);
        cache.put(key(1, 50), 4, Bytes::from_static(b"four"));
        assert_eq!(cache.get(&key(1, 50), 4).as_deref(), Some(&b"four"[..]));
        assert_eq!(cache.size(), (1, 4));
    }

    #[test]
    fn a_later_answer_replaces_an_earlier_one_never_the_reverse() {
        let cache = ListCache::new(8, 1024);
        keep(&cache, key(1, 50), 5, Bytes::from_static(b"five"));
        keep(&cache, key(1, 50), 4, Bytes::from_static(b"four"));
        assert_eq!(cache.get(&key(1, 50), 5).as_deref(), Some(&b"five"[..]));
        assert_eq!(cache.get(&key(1, 50), 4), None);
        keep(&cache, key(1, 50), 6, Bytes::from_static(b"six"));
        assert_eq!(cache.get(&key(1, 50), 6).as_deref(), Some(&b"six"[..]));
        assert_eq!(cache.size(), (1, 3));
    }

    #[test]
    fn the_least_recently_used_answer_goes_first_when_entries_or_bytes_are_full() {
        let cache = ListCache::new(3, 800);
        for t in 1..=3 {
            keep(&cache, key(t, 50), 1, body(100));
        }
        // Using tenant 1's answer makes tenant 2's the least recently used.
        assert!(cache.get(&key(1, 50), 1).is_some());
        keep(&cache, key(4, 50), 1, body(100));
        assert_eq!(cache.size(), (3, 300));
        assert!(cache.get(&key(2, 50), 1).is_none());
        assert!(cache.get(&key(1, 50), 1).is_some());
        // Bytes: ten 100-byte answers in 800 bytes keep the last eight.
        let cache = ListCache::new(100, 800);
        for t in 1..=10 {
            keep(&cache, key(t, 50), 1, body(100));
        }
        assert_eq!(cache.size(), (8, 800));
        assert!(cache.get(&key(1, 50), 1).is_none());
        assert!(cache.get(&key(2, 50), 1).is_none());
        assert!(cache.get(&key(10, 50), 1).is_some());
        // Queries asked once take an entry each but no bytes.
        let cache = ListCache::new(4, 800);
        for t in 1..=10 {
            cache.put(key(t, 50), 1, body(100));
        }
        assert_eq!(cache.size(), (4, 0));
    }

    #[test]
    fn an_answer_over_an_eighth_of_the_bytes_is_never_kept() {
        let cache = ListCache::new(8, 800);
        keep(&cache, key(1, 50), 1, body(101));
        assert_eq!(cache.size(), (0, 0));
        keep(&cache, key(1, 50), 1, body(100));
        assert_eq!(cache.size(), (1, 100));
        let off = ListCache::new(0, 800);
        keep(&off, key(1, 50), 1, body(10));
        assert_eq!(off.size(), (0, 0));
    }
}
