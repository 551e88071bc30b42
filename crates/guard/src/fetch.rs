//! The GitHub repository fetcher (cargo feature `fetch`).
//!
//! Flow: `GET {api}/repos/{owner}/{repo}` must answer 200 with `"private": false` (else
//! `NotFound`); its `default_branch` is resolved to a commit SHA with
//! `GET {api}/repos/{owner}/{repo}/commits/{branch}` (`Accept: application/vnd.github.sha`);
//! the tarball comes straight from `GET {codeload}/{owner}/{repo}/tar.gz/{sha}`.
//!
//! Architecture Invariant: no redirect is ever followed (any 3xx is `FetchError::Redirect`),
//! and every limit is enforced on the bytes actually read, never on announced sizes: the
//! download stops at `max_download_bytes`, decompression at `max_unpacked_bytes`, the archive at
//! `max_files` regular files; files over `max_file_bytes` are skipped and counted. Path
//! traversal, absolute paths, links and other non-regular entries are ignored. The whole fetch
//! is bounded by `timeout_ms`.
//!
//! Caching: scan reports are cached by `(owner, repo, sha)` and repository metadata by
//! `(owner, repo)`, both for a short time in a bounded map, so a repeated scan of an unchanged
//! repository costs one API call (the SHA lookup) and no download.

use crate::model::{Limits, ScanReport, ScanResult, TargetInfo};
use crate::scanner::Scanner;
use crate::target::{valid_owner, valid_repo};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::cell::Cell;
use std::collections::HashMap;
use std::io::Read;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Stops a scan: checked between archive entries, while decompressing and between files.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// Asks the work to stop at its next check.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Bytes held in memory by one scan, counted against a budget shared by every scan (a
/// semaphore whose permits are KiB). Grows as data arrives; never waits: when the budget has
/// no room the scan fails with [`FetchError::Busy`]. Released when dropped.
pub struct MemoryReservation {
    budget: Option<Arc<Semaphore>>,
    held: Option<OwnedSemaphorePermit>,
    kib: u32,
}

impl MemoryReservation {
    /// A reservation against `budget` (`None`: unlimited, nothing is counted).
    pub fn new(budget: Option<Arc<Semaphore>>) -> Self {
        Self {
            budget,
            held: None,
            kib: 0,
        }
    }

    /// Makes sure at least `bytes` are reserved.
    pub fn reserve_total(&mut self, bytes: u64) -> Result<(), FetchError> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        let want = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX);
        if want <= self.kib {
            return Ok(());
        }
        let more = Arc::clone(budget)
            .try_acquire_many_owned(want - self.kib)
            .map_err(|_| FetchError::Busy)?;
        match &mut self.held {
            Some(held) => held.merge(more),
            None => self.held = Some(more),
        }
        self.kib = want;
        Ok(())
    }

    /// Reserves `bytes` more than now.
    pub fn reserve_more(&mut self, bytes: u64) -> Result<(), FetchError> {
        self.reserve_total(u64::from(self.kib) * 1024 + bytes)
    }
}
/// Why a repository could not be fetched (`gc-http-api` maps each to an `ErrorCode`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// Missing, private, empty, or not visible (`repository_not_found`, 404).
    #[error("repository not found or not public")]
    NotFound,
    /// The upstream answered with a redirect, which is never followed (`redirect_not_followed`).
    #[error("the upstream answered with a redirect, which is not followed")]
    Redirect,
    /// A limit was reached while downloading or unpacking.
    #[error("repository exceeds the {0} limit")]
    TooLarge(&'static str),
    /// The fetch took longer than the time-out.
    #[error("the repository fetch timed out")]
    Timeout,
    /// An unexpected upstream status (rate limits are 403/429).
    #[error("upstream answered {0}")]
    Upstream(u16),
    /// The tarball could not be read.
    #[error("the repository archive is invalid")]
    InvalidArchive,
    /// A connection or protocol failure.
    #[error("transport error: {0}")]
    Transport(String),
    /// The memory budget shared by every scan has no room for this one now
    /// (`scanner_busy`, 503).
    #[error("the scanner has no memory to spare for this scan now")]
    Busy,
    /// The scan was stopped at its time-out (download, unpacking and scanning stop).
    #[error("the scan was cancelled at its time-out")]
    Cancelled,
    /// The fetcher was configured wrongly.
    #[error("invalid fetcher configuration: {0}")]
    Config(String),
}

/// Fetcher configuration. Both base URLs are configurable for tests; plain `http` is accepted
/// only for loopback hosts.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// GitHub REST API base, default `https://api.github.com`.
    pub api_base: String,
    /// Codeload base, default `https://codeload.github.com`.
    pub codeload_base: String,
    /// Optional token (`GC_GITHUB_TOKEN`), sent to the API only.
    pub token: Option<String>,
    /// The User-Agent header (GitHub requires one).
    pub user_agent: String,
    pub limits: Limits,
    /// How long a scan result for one commit stays cached.
    pub report_ttl: Duration,
    /// How long a repository's visibility and default branch stay cached.
    pub metadata_ttl: Duration,
    /// Cached entries of each kind, at most.
    pub cache_capacity: usize,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            api_base: "https://api.github.com".into(),
            codeload_base: "https://codeload.github.com".into(),
            token: None,
            user_agent: concat!("gc-guard/", env!("CARGO_PKG_VERSION")).into(),
            limits: Limits::CONTRACT,
            report_ttl: Duration::from_secs(600),
            metadata_ttl: Duration::from_secs(300),
            cache_capacity: 256,
        }
    }
}

/// `(path inside the repository, content)` of regular files.
pub type RepoFiles = Vec<(String, Vec<u8>)>;

/// The regular files of a repository snapshot.
#[derive(Debug, Clone)]
pub struct RepoSnapshot {
    pub owner: String,
    pub repo: String,
    /// The commit SHA of the default branch that was downloaded.
    pub sha: String,
    /// `(path inside the repository, content)`.
    pub files: RepoFiles,
    /// Files skipped while unpacking (over the per-file limit).
    pub skipped: u64,
}

/// A scanned repository.
#[derive(Debug, Clone)]
pub struct RepoScan {
    pub owner: String,
    pub repo: String,
    pub sha: String,
    pub report: ScanReport,
    /// True when the report came from the cache.
    pub cached: bool,
}

impl RepoScan {
    /// The contract's result body.
    pub fn into_result(self) -> ScanResult {
        ScanResult::new(
            TargetInfo::Repository {
                owner: self.owner,
                repo: self.repo,
                git_ref: Some(self.sha),
            },
            self.report,
        )
    }
}

/// The report cache's key: a commit of a repository (names compared without case).
fn report_key(owner: &str, repo: &str, sha: &str) -> (String, String, String) {
    (
        owner.to_ascii_lowercase(),
        repo.to_ascii_lowercase(),
        sha.to_string(),
    )
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

struct Cached<T> {
    at: Instant,
    value: T,
}

#[derive(Default)]
struct Caches {
    reports: HashMap<(String, String, String), Cached<Arc<ScanReport>>>,
    branches: HashMap<(String, String), Cached<String>>,
}

fn insert_bounded<K: std::hash::Hash + Eq + Clone, V>(
    map: &mut HashMap<K, Cached<V>>,
    key: K,
    value: V,
    cap: usize,
    ttl: Duration,
) {
    map.retain(|_, v| v.at.elapsed() < ttl);
    while map.len() >= cap.max(1) {
        let Some(oldest) = map.iter().min_by_key(|(_, v)| v.at).map(|(k, _)| k.clone()) else {
            break;
        };
        map.remove(&oldest);
    }
    map.insert(
        key,
        Cached {
            at: Instant::now(),
            value,
        },
    );
}

/// Downloads public GitHub repositories within the limits. Cheap to share (`Arc`).
pub struct GitHubFetcher {
    client: HttpsClient,
    config: FetchConfig,
    caches: Mutex<Caches>,
}

impl std::fmt::Debug for GitHubFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubFetcher")
            .field("api_base", &self.config.api_base)
            .field("codeload_base", &self.config.codeload_base)
            .finish()
    }
}

fn check_base(name: &str, base: &str) -> Result<String, FetchError> {
    let base = base.trim_end_matches('/');
    let uri: hyper::Uri = base
        .parse()
        .map_err(|_| FetchError::Config(format!("{name} is not a URL")))?;
    let host = uri.host().unwrap_or("");
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1") => {}
        _ => {
            return Err(FetchError::Config(format!(
                "{name} must be https (http only on loopback)"
            )))
        }
    }
    if uri.query().is_some() {
        return Err(FetchError::Config(format!("{name} must not have a query")));
    }
    Ok(base.to_string())
}

/// Percent-encodes a branch name for a URL path (keeps `/`).
fn encode_ref(r: &str) -> String {
    let mut out = String::with_capacity(r.len());
    for b in r.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn is_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl GitHubFetcher {
    /// Builds the client (rustls with the webpki roots, HTTP/1.1, no redirects).
    pub fn new(mut config: FetchConfig) -> Result<GitHubFetcher, FetchError> {
        config.api_base = check_base("api base", &config.api_base)?;
        config.codeload_base = check_base("codeload base", &config.codeload_base)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(5)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| FetchError::Config(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(https);
        Ok(GitHubFetcher {
            client,
            config,
            caches: Mutex::new(Caches::default()),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Fetches and scans a repository, answering from the cache when the default branch still
    /// points at a commit scanned within `report_ttl`.
    pub async fn scan_repository(
        &self,
        scanner: Arc<Scanner>,
        owner: &str,
        repo: &str,
    ) -> Result<RepoScan, FetchError> {
        let started = Instant::now();
        let limits = self.config.limits;
        let cancel = CancelFlag::default();
        let work = async {
            let (owner, repo) = validated(owner, repo)?;
            let sha = self.head_sha(&owner, &repo).await?;
            if let Some(scan) = self.cached_scan(&owner, &repo, &sha) {
                return Ok(scan);
            }
            let tarball = self.download_tarball(&owner, &repo, &sha).await?;
            let cancel = cancel.clone();
            let report = tokio::task::spawn_blocking(move || {
                scan_tarball(&scanner, &tarball, &limits, &cancel)
            })
            .await
            .map_err(|e| FetchError::Transport(format!("scan task failed: {e}")))??;
            Ok(self.remember_scan(owner, repo, sha, report))
        };
        within_deadline(&limits, &cancel, started, work).await
    }

    /// Downloads and unpacks the default branch of a repository (no scan, no report cache).
    pub async fn fetch_repository(
        &self,
        owner: &str,
        repo: &str,
    ) -> Result<RepoSnapshot, FetchError> {
        let limits = self.config.limits;
        let work = async {
            let (owner, repo) = validated(owner, repo)?;
            let sha = self.head_sha(&owner, &repo).await?;
            let tarball = self.download_tarball(&owner, &repo, &sha).await?;
            let (files, skipped) = tokio::task::spawn_blocking(move || unpack(&tarball, &limits))
                .await
                .map_err(|e| FetchError::Transport(format!("unpack task failed: {e}")))??;
            Ok(RepoSnapshot {
                owner,
                repo,
                sha,
                files,
                skipped,
            })
        };
        tokio::time::timeout(limits.timeout(), work)
            .await
            .map_err(|_| FetchError::Timeout)?
    }

    /// Keeps a fresh scan's report in the bounded, short-lived cache and answers the scan.
    pub(crate) fn remember_scan(
        &self,
        owner: String,
        repo: String,
        sha: String,
        report: ScanReport,
    ) -> RepoScan {
        if let Ok(mut caches) = self.caches.lock() {
            let (cap, ttl) = (self.config.cache_capacity, self.config.report_ttl);
            if cap > 0 && !ttl.is_zero() {
                let key = report_key(&owner, &repo, &sha);
                insert_bounded(&mut caches.reports, key, Arc::new(report.clone()), cap, ttl);
            }
        }
        RepoScan {
            owner,
            repo,
            sha,
            report,
            cached: false,
        }
    }

    /// The scan of this commit still in the cache (within `report_ttl`).
    pub(crate) fn cached_scan(&self, owner: &str, repo: &str, sha: &str) -> Option<RepoScan> {
        let caches = self.caches.lock().ok()?;
        let report = caches
            .reports
            .get(&report_key(owner, repo, sha))
            .filter(|c| c.at.elapsed() < self.config.report_ttl)
            .map(|c| Arc::clone(&c.value))?;
        Some(RepoScan {
            owner: owner.to_string(),
            repo: repo.to_string(),
            sha: sha.to_string(),
            report: (*report).clone(),
            cached: true,
        })
    }

    /// The default branch's commit SHA (metadata cached for `metadata_ttl`).
    pub(crate) async fn head_sha(&self, owner: &str, repo: &str) -> Result<String, FetchError> {
        let key = (owner.to_ascii_lowercase(), repo.to_ascii_lowercase());
        let cached = self.caches.lock().ok().and_then(|c| {
            c.branches
                .get(&key)
                .filter(|b| b.at.elapsed() < self.config.metadata_ttl)
                .map(|b| b.value.clone())
        });
        let branch = match cached {
            Some(b) => b,
            None => {
                let branch = self.default_branch(owner, repo).await?;
                if let Ok(mut caches) = self.caches.lock() {
                    let (cap, ttl) = (self.config.cache_capacity, self.config.metadata_ttl);
                    insert_bounded(&mut caches.branches, key, branch.clone(), cap, ttl);
                }
                branch
            }
        };
        let url = format!(
            "{}/repos/{owner}/{repo}/commits/{}",
            self.config.api_base,
            encode_ref(&branch)
        );
        let (status, body) = self
            .get(&url, "application/vnd.github.sha", true, 4096)
            .await?;
        match status.as_u16() {
            200 => {}
            404 | 409 | 410 | 422 | 451 => return Err(FetchError::NotFound),
            s => return Err(FetchError::Upstream(s)),
        }
        let sha = String::from_utf8_lossy(&body).trim().to_ascii_lowercase();
        if is_sha(&sha) {
            Ok(sha)
        } else {
            Err(FetchError::Upstream(502))
        }
    }

    async fn default_branch(&self, owner: &str, repo: &str) -> Result<String, FetchError> {
        let url = format!("{}/repos/{owner}/{repo}", self.config.api_base);
        let (status, body) = self
            .get(&url, "application/vnd.github+json", true, 1 << 20)
            .await?;
        match status.as_u16() {
            200 => {}
            404 | 410 | 451 => return Err(FetchError::NotFound),
            s => return Err(FetchError::Upstream(s)),
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&body).map_err(|_| FetchError::Upstream(502))?;
        if meta.get("private") != Some(&serde_json::Value::Bool(false)) {
            return Err(FetchError::NotFound);
        }
        if meta
            .get("visibility")
            .and_then(|v| v.as_str())
            .is_some_and(|v| v != "public")
        {
            return Err(FetchError::NotFound);
        }
        let branch = meta
            .get("default_branch")
            .and_then(|b| b.as_str())
            .unwrap_or("");
        if branch.is_empty()
            || branch.len() > 255
            || branch.chars().any(|c| c.is_control() || c == ' ')
        {
            return Err(FetchError::Upstream(502));
        }
        Ok(branch.to_string())
    }

    async fn download_tarball(
        &self,
        owner: &str,
        repo: &str,
        sha: &str,
    ) -> Result<Vec<u8>, FetchError> {
        self.download_counted(owner, repo, sha, &mut MemoryReservation::new(None))
            .await
    }

    /// Downloads the tarball of `sha`, counting its bytes against `memory`.
    pub(crate) async fn download_counted(
        &self,
        owner: &str,
        repo: &str,
        sha: &str,
        memory: &mut MemoryReservation,
    ) -> Result<Vec<u8>, FetchError> {
        let url = format!("{}/{owner}/{repo}/tar.gz/{sha}", self.config.codeload_base);
        let max = self.config.limits.max_download_bytes;
        let (status, body) = self
            .get_counted(&url, "application/x-gzip", false, max, memory)
            .await?;
        match status.as_u16() {
            200 => Ok(body),
            404 | 410 | 451 => Err(FetchError::NotFound),
            s => Err(FetchError::Upstream(s)),
        }
    }

    /// One GET; 3xx is an error; the body is read up to `max` bytes (more is `TooLarge`).
    async fn get(
        &self,
        url: &str,
        accept: &str,
        api: bool,
        max: u64,
    ) -> Result<(StatusCode, Vec<u8>), FetchError> {
        self.get_counted(url, accept, api, max, &mut MemoryReservation::new(None))
            .await
    }

    /// [`Self::get`], counting the body's buffer against `memory` as it grows.
    async fn get_counted(
        &self,
        url: &str,
        accept: &str,
        api: bool,
        max: u64,
        memory: &mut MemoryReservation,
    ) -> Result<(StatusCode, Vec<u8>), FetchError> {
        let mut req = Request::get(url)
            .header(USER_AGENT, &self.config.user_agent)
            .header(ACCEPT, accept);
        if api {
            req = req.header("X-GitHub-Api-Version", "2022-11-28");
            if let Some(token) = &self.config.token {
                let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| FetchError::Config("token is not a valid header value".into()))?;
                value.set_sensitive(true);
                req = req.header(AUTHORIZATION, value);
            }
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| FetchError::Transport(e.to_string()))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| FetchError::Transport(e.to_string()))?;
        let status = resp.status();
        if status.is_redirection() {
            return Err(FetchError::Redirect);
        }
        if !status.is_success() {
            return Ok((status, Vec::new()));
        }
        let mut body = resp.into_body();
        let mut buf: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| FetchError::Transport(e.to_string()))?;
            if let Ok(data) = frame.into_data() {
                if (buf.len() + data.len()) as u64 > max {
                    return Err(FetchError::TooLarge(if api {
                        "metadata"
                    } else {
                        "download"
                    }));
                }
                buf.extend_from_slice(&data);
                memory.reserve_total(buf.capacity() as u64)?;
            }
        }
        Ok((status, buf))
    }
}

pub(crate) fn validated(owner: &str, repo: &str) -> Result<(String, String), FetchError> {
    if valid_owner(owner) && valid_repo(repo) {
        Ok((owner.to_string(), repo.to_string()))
    } else {
        Err(FetchError::NotFound)
    }
}

/// Stops reading after `remaining` bytes and records that the cap was hit.
struct CappedReader<R> {
    inner: R,
    remaining: u64,
    exceeded: Rc<Cell<bool>>,
    cancel: CancelFlag,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(std::io::Error::other("cancelled"));
        }
        if self.remaining == 0 {
            // Probe one byte: a stream that ends exactly at the cap is fine.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => {
                    self.exceeded.set(true);
                    Err(std::io::Error::other("unpacked size limit reached"))
                }
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let slice = buf.get_mut(..want).unwrap_or(&mut []);
        let n = self.inner.read(slice)?;
        self.remaining = self.remaining.saturating_sub(n as u64);
        Ok(n)
    }
}

/// The path of an archive entry inside the repository: the leading `{repo}-{sha}/` folder is
/// removed; `None` for traversal, absolute or empty paths. A name that is not UTF-8 is kept
/// (its invalid bytes shown as U+FFFD), so such a file is still scanned, never dropped.
fn entry_path(raw: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(raw);
    let s = s.as_ref();
    if s.starts_with('/') || s.contains('\\') || s.contains('\0') {
        return None;
    }
    let mut parts = s.split('/').filter(|p| !p.is_empty() && *p != ".");
    parts.next()?; // the top-level folder
    let rest: Vec<&str> = parts.collect();
    if rest.is_empty() || rest.contains(&"..") {
        return None;
    }
    Some(rest.join("/"))
}

/// One regular file of an archive, as [`unpack_each`] hands it over.
pub enum EntryData<'a> {
    /// The content, within the per-file limit.
    Whole(Vec<u8>),
    /// Over the per-file limit: its first `max_file_bytes + 1` bytes, and a reader of the
    /// rest (bounded by the unpacked-size cap and the cancellation flag like everything else).
    Oversized {
        head: Vec<u8>,
        rest: &'a mut dyn Read,
    },
}

/// Unpacks a `.tar.gz` within the limits: `(files, skipped)`. More than `max_files` files is
/// [`FetchError::TooLarge`]; files over the per-file limit are skipped and counted.
pub fn unpack(tarball: &[u8], limits: &Limits) -> Result<(RepoFiles, u64), FetchError> {
    let mut files = Vec::new();
    let mut skipped = 0u64;
    let mut count = 0u64;
    let result = unpack_each(tarball, limits, &CancelFlag::default(), |path, data| {
        count += 1;
        if count > limits.max_files {
            return Err(std::io::Error::other("file count"));
        }
        match data {
            EntryData::Whole(data) => files.push((path, data)),
            EntryData::Oversized { .. } => skipped += 1,
        }
        Ok(())
    });
    if count > limits.max_files {
        return Err(FetchError::TooLarge("file count"));
    }
    result?;
    Ok((files, skipped))
}

/// Unpacks and scans a `.tar.gz` one file at a time, so only one file (and the bounded
/// buffers of a partial scan) is held besides the archive. Files past the count limit are
/// still listed, counted and given the keyword pass (see `coverage`); a file over the size
/// limit is streamed through the partial scan. Stops with [`FetchError::Cancelled`] when
/// `cancel` is set.
pub fn scan_tarball(
    scanner: &Scanner,
    tarball: &[u8],
    limits: &Limits,
    cancel: &CancelFlag,
) -> Result<ScanReport, FetchError> {
    let mut scan = scanner.files_scan(limits);
    unpack_each(tarball, limits, cancel, |path, data| {
        match data {
            EntryData::Whole(data) => scan.add(&path, &data),
            EntryData::Oversized { head, rest } => scan.add_oversized(&path, &head, rest)?,
        }
        Ok(())
    })?;
    Ok(scan.finish())
}

/// Calls `visit(path, data)` for each regular file of a `.tar.gz`, in archive order, within
/// the unpacked-size cap (every file, also past `max_files`: the visitor decides). Checks
/// `cancel` before every entry and while decompressing. An error of `visit` (or of reading an
/// over-size file's rest) ends the walk as the cap, the cancellation or an invalid archive.
pub fn unpack_each(
    tarball: &[u8],
    limits: &Limits,
    cancel: &CancelFlag,
    mut visit: impl FnMut(String, EntryData<'_>) -> std::io::Result<()>,
) -> Result<(), FetchError> {
    let exceeded = Rc::new(Cell::new(false));
    let reader = CappedReader {
        inner: flate2::read::GzDecoder::new(tarball),
        remaining: limits.max_unpacked_bytes,
        exceeded: Rc::clone(&exceeded),
        cancel: cancel.clone(),
    };
    let mut archive = tar::Archive::new(reader);
    let fail = |exceeded: &Rc<Cell<bool>>| {
        if cancel.is_cancelled() {
            FetchError::Cancelled
        } else if exceeded.get() {
            FetchError::TooLarge("unpacked size")
        } else {
            FetchError::InvalidArchive
        }
    };
    let entries = archive.entries().map_err(|_| fail(&exceeded))?;
    for entry in entries {
        if cancel.is_cancelled() {
            return Err(FetchError::Cancelled);
        }
        let mut entry = entry.map_err(|_| fail(&exceeded))?;
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind == tar::EntryType::Continuous) {
            continue;
        }
        let Some(path) = entry_path(&entry.path_bytes()) else {
            continue;
        };
        let mut data = Vec::new();
        (&mut entry)
            .take(limits.max_file_bytes + 1)
            .read_to_end(&mut data)
            .map_err(|_| fail(&exceeded))?;
        let visited = if data.len() as u64 > limits.max_file_bytes {
            visit(
                path,
                EntryData::Oversized {
                    head: data,
                    rest: &mut entry,
                },
            )
        } else {
            visit(path, EntryData::Whole(data))
        };
        visited.map_err(|_| fail(&exceeded))?;
    }
    if exceeded.get() {
        return Err(FetchError::TooLarge("unpacked size"));
    }
    Ok(())
}

/// Runs a repository scan under the scan time-out: past it the work is dropped (the download
/// stops) and `cancel` stops unpacking and scanning at their next check. Stamps the duration.
pub(crate) async fn within_deadline(
    limits: &Limits,
    cancel: &CancelFlag,
    started: Instant,
    work: impl std::future::Future<Output = Result<RepoScan, FetchError>>,
) -> Result<RepoScan, FetchError> {
    let mut scan = match tokio::time::timeout(limits.timeout(), work).await {
        Ok(scan) => scan?,
        Err(_) => {
            cancel.cancel();
            return Err(FetchError::Timeout);
        }
    };
    scan.report.stats.duration_ms =
        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_paths() {
        assert_eq!(
            entry_path(b"repo-abc/SKILL.md").as_deref(),
            Some("SKILL.md")
        );
        assert_eq!(entry_path(b"repo-abc/a/./b.py").as_deref(), Some("a/b.py"));
        assert_eq!(entry_path(b"repo-abc/../../etc/passwd"), None);
        assert_eq!(entry_path(b"/etc/passwd"), None);
        assert_eq!(entry_path(b"repo-abc/"), None);
        assert_eq!(entry_path(b"repo-abc/a\\..\\b"), None);
        assert_eq!(
            entry_path(b"repo-abc/scripts/\xffrun.sh").as_deref(),
            Some("scripts/\u{fffd}run.sh")
        );
    }

    #[test]
    fn a_cancelled_unpack_stops_before_the_next_entry() {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        for i in 0..10 {
            let mut header = tar::Header::new_gnu();
            header.set_size(5);
            header.set_mode(0o644);
            header.set_cksum();
            builder
                .append_data(&mut header, format!("r-abc/f{i}.txt"), &b"hello"[..])
                .unwrap();
        }
        let tarball = builder.into_inner().unwrap().finish().unwrap();
        let cancel = CancelFlag::default();
        let mut seen = 0;
        let result = unpack_each(&tarball, &Limits::CONTRACT, &cancel, |_, _| {
            seen += 1;
            if seen == 3 {
                cancel.cancel();
            }
            Ok(())
        });
        assert_eq!(result, Err(FetchError::Cancelled));
        assert_eq!(seen, 3, "no entry is visited after the flag is set");
        let scanner = Scanner::new().unwrap();
        assert_eq!(
            scan_tarball(&scanner, &tarball, &Limits::CONTRACT, &cancel),
            Err(FetchError::Cancelled)
        );
    }

    #[test]
    fn memory_reservations_never_exceed_the_budget() {
        let budget = Arc::new(Semaphore::new(100));
        let mut a = MemoryReservation::new(Some(Arc::clone(&budget)));
        a.reserve_total(60 * 1024).unwrap();
        let mut b = MemoryReservation::new(Some(Arc::clone(&budget)));
        assert_eq!(b.reserve_total(50 * 1024), Err(FetchError::Busy));
        b.reserve_total(40 * 1024).unwrap();
        assert_eq!(budget.available_permits(), 0);
        drop(a);
        assert_eq!(budget.available_permits(), 60);
        b.reserve_more(1024).unwrap();
        assert_eq!(budget.available_permits(), 59);
    }

    #[test]
    fn refs_and_shas() {
        assert_eq!(encode_ref("feature/x y#?"), "feature/x%20y%23%3F");
        assert!(is_sha(&"a".repeat(40)));
        assert!(!is_sha("main"));
    }

    #[test]
    fn bases_must_be_https_or_loopback_http() {
        assert!(check_base("api", "https://api.github.com/").is_ok());
        assert!(check_base("api", "http://127.0.0.1:8080").is_ok());
        assert!(check_base("api", "http://example.com").is_err());
        assert!(check_base("api", "ftp://example.com").is_err());
    }
}
