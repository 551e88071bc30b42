//! The Guard's own bounded executor (cargo feature `fetch`): every scan served over the
//! network runs here, never on the threads of the program that embeds the Guard.
//!
//! Architecture Invariant: every queue here is bounded and says what happens when it is full.
//!
//! - **Work.** Scans run on a dedicated tokio runtime (one I/O thread, `gc-guard-io`) whose
//!   blocking pool (`gc-guard`) has `concurrency` threads for unpacking and scanning. At most
//!   `concurrency` scans run at once; `queue` more may wait for a slot. A scan that finds both
//!   full is refused at once ([`ScanError::Busy`]).
//! - **Callers.** Each caller (a tenant or account, an anonymous IP) has at most
//!   `per_account` / `per_anonymous` scans in flight; one more is refused at once
//!   ([`ScanError::OverShare`]).
//! - **Kept for signed-in callers.** Anonymous scans together may hold at most
//!   `anonymous_percent` of the admissions (running and waiting; beyond that
//!   [`ScanError::Busy`] at once) and of the running slots (they wait for one of theirs), and
//!   no more running slots than that share of the memory budget can hold at the largest
//!   download: the rest stays for tenants and accounts, whatever anonymous clients send
//!   ([`Shares`], decision 0026). A flight started by an anonymous caller stays anonymous when
//!   a signed-in caller joins it.
//! - **Single flight.** Concurrent scans of one repository share one flight: one metadata
//!   lookup, one download, one result (then the short result cache of the fetcher answers).
//! - **Memory.** Downloads and the scan's working set are counted against one budget shared
//!   by every scan (a semaphore of KiB); a scan that finds no room fails at once with
//!   [`FetchError::Busy`] rather than waiting (waiting while holding memory could deadlock).
//! - **Time-out.** A flight ends at its deadline (counted from admission, queue included):
//!   the download future is dropped and the [`CancelFlag`] stops unpacking and scanning at
//!   their next check; the slot and the memory are released when the work has stopped.
//! - **Priority.** Every thread of the executor runs at the lowest scheduling priority of the
//!   normal policy (nice 19 on Linux, [`lower_priority`]): when scans and the embedding
//!   program's request threads want the same cores, the request threads win, so a Guard flood
//!   does not slow sign-ins or reads (issue 9). Scans then get what is left; one that gets too
//!   little reaches its time-out like any other.

use crate::fetch::{
    scan_tarball, validated, CancelFlag, FetchError, GitHubFetcher, MemoryReservation, RepoScan,
};
use crate::model::ScanReport;
use crate::scanner::Scanner;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;
use tokio::runtime::Runtime;
use tokio::sync::{watch, Semaphore};

/// Bounds of the executor (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorConfig {
    /// Scans running at once (threads of the scanning pool).
    pub concurrency: usize,
    /// Scans waiting for a running slot, at most.
    pub queue: usize,
    /// Scans in flight per tenant or account, at most.
    pub per_account: usize,
    /// Scans in flight per anonymous client IP, at most.
    pub per_anonymous: usize,
    /// Percent of the admissions, running slots and memory anonymous scans may take
    /// together (at least one admission and one slot; below 100, at least one of each is
    /// kept for signed-in callers when there are two or more).
    pub anonymous_percent: u8,
    /// Bytes all scans together may hold (downloads and working sets).
    pub memory_bytes: u64,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            concurrency: cores,
            queue: 2 * cores,
            per_account: 4,
            per_anonymous: 2,
            anonymous_percent: 50,
            memory_bytes: 256 * 1024 * 1024,
        }
    }
}

/// What anonymous scans may hold together, worked out from an [`ExecutorConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Admissions (running and waiting).
    pub admissions: usize,
    /// Running slots.
    pub running: usize,
}

impl Shares {
    /// The shares of `config`, for scans that may each hold `per_scan_bytes` of memory.
    pub fn of(config: &ExecutorConfig, per_scan_bytes: u64) -> Self {
        let percent = config.anonymous_percent.min(100);
        let concurrency = config.concurrency.max(1);
        let admissions = share(concurrency + config.queue, percent);
        let by_memory = config.memory_bytes / 100 * u64::from(percent) / per_scan_bytes.max(1);
        let running = share(concurrency, percent)
            .min(usize::try_from(by_memory).unwrap_or(usize::MAX))
            .max(1);
        Self {
            admissions,
            running,
        }
    }
}

/// `percent` of `n`, at least 1; below 100 %, at most `n - 1` when `n` is 2 or more.
fn share(n: usize, percent: u8) -> usize {
    let part = n.saturating_mul(usize::from(percent)) / 100;
    if percent >= 100 {
        n.max(1)
    } else {
        part.min(n.saturating_sub(1)).max(1)
    }
}

/// Who asks for a scan, for the per-caller caps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// A tenant (members and keys of one tenant share its share) or an account without one.
    Account(String),
    /// A caller without credentials, by client IP.
    Anonymous(IpAddr),
}

/// Why a scan was not done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// Every running slot and every waiting place is taken (`scanner_busy`, 503).
    #[error("the scanner is at capacity")]
    Busy { retry_after_secs: u64 },
    /// The caller already has its share of scans in flight (`rate_limited`, 429).
    #[error("too many scans in flight for this caller")]
    OverShare { retry_after_secs: u64 },
    /// Fetching or scanning failed (including the time-out and a full memory budget).
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The rule catalog does not compile (a bug).
    #[error("the Guard rules do not compile: {0}")]
    Rules(String),
}

/// How long a refused caller should wait before trying again.
const RETRY_AFTER_SECS: u64 = 2;
/// Working memory counted for scanning one file besides the archive: the file (at most
/// `Limits::MAX_FILE_BYTES`) and its normalised view or decoded runs.
const SCAN_WORKING_SET: u64 = 2 * crate::model::Limits::MAX_FILE_BYTES;

type Outcome = Result<RepoScan, FetchError>;

struct Flight {
    id: u64,
    done: watch::Receiver<Option<Outcome>>,
}

struct Inner {
    fetcher: GitHubFetcher,
    config: ExecutorConfig,
    scanner: OnceLock<Arc<Scanner>>,
    /// Scans admitted (running or waiting).
    admitted: AtomicUsize,
    /// Anonymous scans admitted (running or waiting), part of `admitted`.
    anonymous_admitted: AtomicUsize,
    shares: Shares,
    slots: Arc<Semaphore>,
    /// Running slots anonymous scans may hold; taken before one of `slots`.
    anonymous_slots: Arc<Semaphore>,
    /// KiB.
    memory: Arc<Semaphore>,
    flights: Mutex<HashMap<(String, String), Flight>>,
    callers: Mutex<HashMap<Caller, usize>>,
    next_flight: AtomicU64,
    /// Downloads started (for tests and diagnostics).
    downloads: AtomicU64,
}

/// The Guard's executor. Cheap to share in an `Arc`; dropping it stops its threads.
pub struct ScanExecutor {
    inner: Arc<Inner>,
    runtime: Option<Runtime>,
}

impl std::fmt::Debug for ScanExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanExecutor")
            .field("config", &self.inner.config)
            .finish()
    }
}

impl Drop for ScanExecutor {
    fn drop(&mut self) {
        // May run inside another async runtime: do not block on the threads.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Releases an admission when the flight ends.
struct Admission {
    inner: Arc<Inner>,
    anonymous: bool,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.anonymous {
            self.inner.anonymous_admitted.fetch_sub(1, Ordering::AcqRel);
        }
        self.inner.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running slot, and for an anonymous scan its place in the anonymous share.
struct Slot {
    _anonymous: Option<tokio::sync::OwnedSemaphorePermit>,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

/// Releases a caller's place when its request ends.
struct Share {
    inner: Arc<Inner>,
    caller: Caller,
}

impl Drop for Share {
    fn drop(&mut self) {
        if let Ok(mut callers) = self.inner.callers.lock() {
            if let Some(n) = callers.get_mut(&self.caller) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    callers.remove(&self.caller);
                }
            }
        }
    }
}

impl Inner {
    fn admit_caller(self: &Arc<Self>, caller: &Caller) -> Result<Share, ScanError> {
        let cap = match caller {
            Caller::Account(_) => self.config.per_account,
            Caller::Anonymous(_) => self.config.per_anonymous,
        }
        .max(1);
        let mut callers = self
            .callers
            .lock()
            .map_err(|_| ScanError::Fetch(FetchError::Transport("lock poisoned".into())))?;
        let n = callers.entry(caller.clone()).or_insert(0);
        if *n >= cap {
            return Err(ScanError::OverShare {
                retry_after_secs: RETRY_AFTER_SECS,
            });
        }
        *n += 1;
        Ok(Share {
            inner: Arc::clone(self),
            caller: caller.clone(),
        })
    }

    /// Admits one flight, within the anonymous share for an anonymous one.
    fn admit(self: &Arc<Self>, anonymous: bool) -> Result<Admission, ScanError> {
        let busy = || ScanError::Busy {
            retry_after_secs: RETRY_AFTER_SECS,
        };
        let take = |counter: &AtomicUsize, max: usize| {
            counter
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < max).then_some(n + 1)
                })
                .is_ok()
        };
        if anonymous && !take(&self.anonymous_admitted, self.shares.admissions) {
            return Err(busy());
        }
        let max = self.config.concurrency.max(1) + self.config.queue;
        if !take(&self.admitted, max) {
            // Give back the anonymous place taken above.
            if anonymous {
                self.anonymous_admitted.fetch_sub(1, Ordering::AcqRel);
            }
            return Err(busy());
        }
        Ok(Admission {
            inner: Arc::clone(self),
            anonymous,
        })
    }

    /// Waits for a running slot: an anonymous scan first for one of the anonymous share, so
    /// it never waits in line for (or holds) a slot kept for signed-in callers.
    async fn slot(&self, anonymous: bool) -> Result<Slot, FetchError> {
        let stopped = |_| FetchError::Transport("the executor stopped".into());
        let anonymous = if anonymous {
            Some(
                Arc::clone(&self.anonymous_slots)
                    .acquire_owned()
                    .await
                    .map_err(stopped)?,
            )
        } else {
            None
        };
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(stopped)?;
        Ok(Slot {
            _anonymous: anonymous,
            _slot: slot,
        })
    }

    /// The compiled rules (the first call compiles them; call it on the scanning pool).
    fn scanner(&self) -> Result<Arc<Scanner>, FetchError> {
        if let Some(s) = self.scanner.get() {
            return Ok(Arc::clone(s));
        }
        let built =
            Arc::new(Scanner::new().map_err(|e| FetchError::Config(format!("rules: {e}")))?);
        Ok(Arc::clone(self.scanner.get_or_init(|| built)))
    }

    /// The compiled rules, compiled on the scanning pool the first time. A one-time cost of
    /// the process, not of a scan: it is not counted in the scan's time-out. (The keyword
    /// automata only: each rule's regex and the other languages' patterns compile at their
    /// first use, inside the scan that needs them: about 0.17 s once per process when a first
    /// scan meets most rules.)
    async fn compiled(self: &Arc<Self>) -> Result<Arc<Scanner>, FetchError> {
        if let Some(s) = self.scanner.get() {
            return Ok(Arc::clone(s));
        }
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || this.scanner())
            .await
            .map_err(|e| FetchError::Transport(format!("rule compilation failed: {e}")))?
    }

    /// One repository flight: metadata, the result cache, a running slot, the download and
    /// the scan, all within `deadline`.
    async fn repository_flight(
        self: Arc<Self>,
        owner: String,
        repo: String,
        anonymous: bool,
    ) -> Outcome {
        let scanner = self.compiled().await?;
        let started = Instant::now();
        let limits = self.fetcher.config().limits;
        let cancel = CancelFlag::default();
        let work = {
            let cancel = cancel.clone();
            let this = Arc::clone(&self);
            async move {
                let sha = this.fetcher.head_sha(&owner, &repo).await?;
                if let Some(scan) = this.fetcher.cached_scan(&owner, &repo, &sha) {
                    return Ok(scan);
                }
                let slot = this.slot(anonymous).await?;
                let mut memory = MemoryReservation::new(Some(Arc::clone(&this.memory)));
                this.downloads.fetch_add(1, Ordering::Relaxed);
                let tarball = this
                    .fetcher
                    .download_counted(&owner, &repo, &sha, &mut memory)
                    .await?;
                memory.reserve_more(SCAN_WORKING_SET)?;
                // The slot and the memory go with the work: they are released when it has
                // stopped, even after a time-out.
                let report = tokio::task::spawn_blocking(move || {
                    let _slot = slot;
                    let _memory = memory;
                    scan_tarball(&scanner, &tarball, &limits, &cancel)
                })
                .await
                .map_err(|e| FetchError::Transport(format!("scan task failed: {e}")))??;
                Ok(this.fetcher.remember_scan(owner, repo, sha, report))
            }
        };
        crate::fetch::within_deadline(&limits, &cancel, started, work).await
    }
}

/// Lowers the calling thread to the lowest priority of the normal scheduling policy (nice 19
/// on Linux). Lowering needs no privilege; when the system refuses anyway, the thread keeps
/// its priority and says so once in the log.
fn lower_priority() {
    use thread_priority::{set_current_thread_priority, ThreadPriority};
    if let Err(e) = set_current_thread_priority(ThreadPriority::Min) {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(error = ?e, "guard threads could not lower their priority");
        });
    }
}

impl ScanExecutor {
    /// Starts the executor's threads.
    pub fn new(fetcher: GitHubFetcher, config: ExecutorConfig) -> Result<Self, FetchError> {
        let concurrency = config.concurrency.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(concurrency)
            .thread_name("gc-guard")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()
            .map_err(|e| FetchError::Config(format!("guard runtime: {e}")))?;
        let memory_kib = usize::try_from(config.memory_bytes / 1024)
            .unwrap_or(Semaphore::MAX_PERMITS)
            .min(Semaphore::MAX_PERMITS);
        let per_scan = fetcher.config().limits.max_download_bytes + SCAN_WORKING_SET;
        let shares = Shares::of(&config, per_scan);
        Ok(Self {
            inner: Arc::new(Inner {
                fetcher,
                config,
                scanner: OnceLock::new(),
                admitted: AtomicUsize::new(0),
                anonymous_admitted: AtomicUsize::new(0),
                shares,
                slots: Arc::new(Semaphore::new(concurrency)),
                anonymous_slots: Arc::new(Semaphore::new(shares.running)),
                memory: Arc::new(Semaphore::new(memory_kib)),
                flights: Mutex::new(HashMap::new()),
                callers: Mutex::new(HashMap::new()),
                next_flight: AtomicU64::new(0),
                downloads: AtomicU64::new(0),
            }),
            runtime: Some(runtime),
        })
    }

    pub fn config(&self) -> &ExecutorConfig {
        &self.inner.config
    }

    /// What anonymous scans may hold together.
    pub fn shares(&self) -> Shares {
        self.inner.shares
    }

    pub fn fetcher(&self) -> &GitHubFetcher {
        &self.inner.fetcher
    }

    /// Tarball downloads started since the executor was made.
    pub fn downloads(&self) -> u64 {
        self.inner.downloads.load(Ordering::Relaxed)
    }

    /// Scans admitted and not yet finished (running or waiting).
    pub fn in_flight(&self) -> usize {
        self.inner.admitted.load(Ordering::Acquire)
    }

    fn runtime(&self) -> Result<&Runtime, ScanError> {
        self.runtime
            .as_ref()
            .ok_or_else(|| FetchError::Transport("the executor stopped".into()).into())
    }

    /// Scans a public repository's default branch, sharing the flight of a concurrent scan
    /// of the same repository.
    pub async fn scan_repository(
        &self,
        caller: &Caller,
        owner: &str,
        repo: &str,
    ) -> Result<RepoScan, ScanError> {
        let runtime = self.runtime()?;
        let _share = self.inner.admit_caller(caller)?;
        let (owner, repo) = validated(owner, repo)?;
        let key = (owner.to_ascii_lowercase(), repo.to_ascii_lowercase());
        let mut done = {
            let mut flights = self
                .inner
                .flights
                .lock()
                .map_err(|_| FetchError::Transport("lock poisoned".into()))?;
            match flights.get(&key) {
                Some(flight) => flight.done.clone(),
                None => {
                    let anonymous = matches!(caller, Caller::Anonymous(_));
                    let admission = self.inner.admit(anonymous)?;
                    let (tx, rx) = watch::channel(None);
                    let id = self.inner.next_flight.fetch_add(1, Ordering::Relaxed);
                    flights.insert(
                        key.clone(),
                        Flight {
                            id,
                            done: rx.clone(),
                        },
                    );
                    let inner = Arc::clone(&self.inner);
                    // The flight belongs to no caller: callers that go away do not cancel the
                    // scan others wait for; its own deadline ends it.
                    runtime.spawn(async move {
                        let outcome = Arc::clone(&inner)
                            .repository_flight(owner, repo, anonymous)
                            .await;
                        if let Ok(mut flights) = inner.flights.lock() {
                            if flights.get(&key).is_some_and(|f| f.id == id) {
                                flights.remove(&key);
                            }
                        }
                        // Give the place back before anyone hears the outcome, so a caller
                        // that asks again at once finds it free.
                        drop(admission);
                        let _ = tx.send(Some(outcome));
                    });
                    rx
                }
            }
        };
        let outcome = done
            .wait_for(Option::is_some)
            .await
            .map_err(|_| FetchError::Transport("the scan task failed".into()))?
            .clone();
        match outcome {
            Some(outcome) => Ok(outcome?),
            None => Err(FetchError::Transport("the scan task failed".into()).into()),
        }
    }

    /// Scans pasted content on the executor, within the same bounds (no single flight: the
    /// content is the request's own).
    pub async fn scan_content(
        &self,
        caller: &Caller,
        text: String,
    ) -> Result<ScanReport, ScanError> {
        let _share = self.inner.admit_caller(caller)?;
        let anonymous = matches!(caller, Caller::Anonymous(_));
        let admission = self.inner.admit(anonymous)?;
        let inner = Arc::clone(&self.inner);
        let timeout = inner.fetcher.config().limits.timeout();
        let task = self.runtime()?.spawn(async move {
            let _admission = admission;
            let scanner = inner.compiled().await?;
            let started = Instant::now();
            let slot = inner.slot(anonymous).await?;
            let mut memory = MemoryReservation::new(Some(Arc::clone(&inner.memory)));
            memory.reserve_total(text.len() as u64 + SCAN_WORKING_SET)?;
            let work = tokio::task::spawn_blocking(move || {
                let _slot = slot;
                let _memory = memory;
                scanner.scan_content(&text)
            });
            let remaining = timeout.saturating_sub(started.elapsed());
            match tokio::time::timeout(remaining, work).await {
                Ok(report) => {
                    report.map_err(|e| FetchError::Transport(format!("scan task failed: {e}")))
                }
                Err(_) => Err(FetchError::Timeout),
            }
        });
        task.await
            .map_err(|e| FetchError::Transport(format!("scan task failed: {e}")))?
            .map_err(ScanError::from)
    }

    /// Compiles the rules on the scanning pool now (otherwise the first scan does).
    pub async fn warm_up(&self) -> Result<(), ScanError> {
        let inner = Arc::clone(&self.inner);
        let task = self
            .runtime()?
            .spawn_blocking(move || inner.scanner().map(|_| ()));
        task.await
            .map_err(|e| FetchError::Transport(format!("warm-up failed: {e}")))?
            .map_err(|e| ScanError::Rules(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::FetchConfig;

    fn executor(config: ExecutorConfig) -> ScanExecutor {
        let fetcher = GitHubFetcher::new(FetchConfig {
            api_base: "http://127.0.0.1:9".into(),
            codeload_base: "http://127.0.0.1:9".into(),
            ..FetchConfig::default()
        })
        .unwrap();
        ScanExecutor::new(fetcher, config).unwrap()
    }

    /// The nice value of the calling thread (Linux: field 19 of its `stat`).
    #[cfg(target_os = "linux")]
    fn own_nice() -> i64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_executor_threads_yield_to_the_program_s_own() {
        let ex = executor(ExecutorConfig::default());
        let before = own_nice();
        let runtime = ex.runtime().unwrap();
        let (io, blocking) = runtime.block_on(async {
            let io = tokio::spawn(async { own_nice() }).await.unwrap();
            let blocking = tokio::task::spawn_blocking(own_nice).await.unwrap();
            (io, blocking)
        });
        assert_eq!(io, 19, "the executor's I/O thread");
        assert_eq!(blocking, 19, "a scanning thread");
        // The caller's own thread is untouched.
        assert_eq!(own_nice(), before);
    }

    #[test]
    fn callers_and_admissions_are_bounded() {
        let ex = executor(ExecutorConfig {
            concurrency: 1,
            queue: 1,
            per_account: 2,
            per_anonymous: 1,
            anonymous_percent: 100,
            memory_bytes: 1 << 20,
        });
        let ip = Caller::Anonymous(IpAddr::from([203, 0, 113, 1]));
        let first = ex.inner.admit_caller(&ip).unwrap();
        assert!(matches!(
            ex.inner.admit_caller(&ip),
            Err(ScanError::OverShare { .. })
        ));
        // Another client is not affected; the place comes back when the request ends.
        ex.inner
            .admit_caller(&Caller::Anonymous(IpAddr::from([203, 0, 113, 2])))
            .unwrap();
        drop(first);
        assert!(ex.inner.admit_caller(&ip).is_ok());
        assert!(
            ex.inner.callers.lock().unwrap().is_empty(),
            "no entry outlives its requests"
        );

        let a = ex.inner.admit(false).unwrap();
        let _b = ex.inner.admit(false).unwrap();
        assert!(matches!(ex.inner.admit(false), Err(ScanError::Busy { .. })));
        drop(a);
        assert!(ex.inner.admit(false).is_ok());
    }

    #[test]
    fn anonymous_scans_leave_their_share_to_signed_in_callers() {
        let ex = executor(ExecutorConfig {
            concurrency: 2,
            queue: 4,
            per_account: 10,
            per_anonymous: 10,
            anonymous_percent: 50,
            memory_bytes: 1 << 30,
        });
        assert_eq!(
            ex.shares(),
            Shares {
                admissions: 3,
                running: 1
            }
        );
        let anonymous: Vec<_> = (0..3).map(|_| ex.inner.admit(true).unwrap()).collect();
        assert!(matches!(ex.inner.admit(true), Err(ScanError::Busy { .. })));
        // A refused anonymous scan took nothing.
        assert_eq!(ex.in_flight(), 3);
        let mut signed_in: Vec<_> = (0..3).map(|_| ex.inner.admit(false).unwrap()).collect();
        assert!(matches!(ex.inner.admit(false), Err(ScanError::Busy { .. })));
        // Signed-in scans may take every place; an anonymous one is then refused and keeps
        // nothing of its share.
        drop(anonymous);
        signed_in.extend((0..3).map(|_| ex.inner.admit(false).unwrap()));
        assert!(matches!(ex.inner.admit(true), Err(ScanError::Busy { .. })));
        assert_eq!(ex.inner.anonymous_admitted.load(Ordering::Acquire), 0);
        drop(signed_in);
        assert_eq!(ex.in_flight(), 0);

        // One running slot for anonymous scans: the other stays free for signed-in ones.
        let runtime = ex.runtime().unwrap();
        runtime.block_on(async {
            let held = ex.inner.slot(true).await.unwrap();
            let waiting =
                tokio::time::timeout(std::time::Duration::from_millis(50), ex.inner.slot(true))
                    .await;
            assert!(waiting.is_err(), "a second anonymous scan waits");
            let signed_in = ex.inner.slot(false).await.unwrap();
            drop((held, signed_in));
        });
    }

    #[test]
    fn shares_round_down_and_keep_one_place_each_way() {
        let config = |concurrency, queue, anonymous_percent, memory_mib: u64| ExecutorConfig {
            concurrency,
            queue,
            per_account: 4,
            per_anonymous: 2,
            anonymous_percent,
            memory_bytes: memory_mib << 20,
        };
        let per_scan = 27 << 20;
        let of = |c: ExecutorConfig| {
            let s = Shares::of(&c, per_scan);
            (s.admissions, s.running)
        };
        assert_eq!(of(config(1, 0, 50, 256)), (1, 1));
        assert_eq!(of(config(1, 2, 50, 256)), (1, 1));
        assert_eq!(
            of(config(16, 32, 50, 256)),
            (24, 4),
            "memory caps the slots"
        );
        assert_eq!(of(config(4, 8, 99, 4096)), (11, 3));
        assert_eq!(of(config(4, 8, 100, 4096)), (12, 4));
        assert_eq!(of(config(4, 8, 0, 256)), (1, 1));
    }

    #[test]
    fn the_executor_can_be_dropped_inside_a_runtime() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let ex = executor(ExecutorConfig::default());
            drop(ex);
        });
    }
}
