//! `/guard/scan`: the skill scanner over HTTP, with or without credentials. The handlers call
//! `gc_domain::services::guard_scan`; [`GuardService`] is the Guard port it runs on, over
//! `gc-guard`'s executor, with the anonymous throttle, and turns the Guard's refusals into
//! API errors.

use std::net::IpAddr;

use gc_domain::services::guard_scan::{
    GuardScanner, ScanCaller, ScanRequest, ScanSummary, ScannedTarget,
};
use gc_domain::{DomainError, ErrorCode};
use gc_guard::executor::{Caller, ScanError, ScanExecutor};
use gc_guard::fetch::FetchError;
use gc_guard::{parse_target, sarif, GuardInfo, ScanResult, Target, TargetError, TargetInfo};

use crate::error::ApiError;
use crate::throttle::IpThrottle;

pub mod scan;

/// The Guard's executor (its own bounded threads, with the GitHub fetcher) and the anonymous
/// throttle, shared by every worker. Scans never run on the HTTP workers or on the blocking
/// pool that serves the database.
pub struct GuardService {
    /// Scans run here; the rules compile on the first scan (their automata take several MiB,
    /// which a server that never scans should not carry).
    pub executor: ScanExecutor,
    /// Anonymous scans per client IP: a bounded table (see [`IpThrottle`]); when it is full of
    /// active clients, newcomers share one overflow allowance.
    anonymous: IpThrottle,
}

impl GuardService {
    /// `anonymous_per_minute` scans per client IP for callers without credentials, with at most
    /// `max_clients` client IPs remembered.
    pub fn new(executor: ScanExecutor, anonymous_per_minute: u32, max_clients: usize) -> Self {
        Self {
            executor,
            anonymous: IpThrottle::new(anonymous_per_minute, 1, max_clients),
        }
    }

    /// A report as SARIF 2.1.0 (the `?format=sarif` presentation).
    pub fn sarif(result: ScanResult) -> serde_json::Value {
        let report = gc_guard::ScanReport {
            findings: result.findings,
            stats: result.stats,
        };
        sarif::to_sarif(&report, &result.target)
    }
}

impl GuardScanner for GuardService {
    type Report = ScanResult;
    type Info = GuardInfo;
    type Error = ApiError;

    fn info(&self) -> GuardInfo {
        gc_guard::guard_info()
    }

    /// `Err(seconds to wait)` when this IP has used its anonymous allowance.
    fn admit_anonymous(&self, ip: IpAddr) -> Result<(), u64> {
        self.anonymous.check(ip)
    }

    async fn scan(
        &self,
        caller: &ScanCaller,
        request: ScanRequest,
    ) -> Result<ScanResult, ApiError> {
        if request.mode != gc_guard::MODE_SKILL {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMode,
                "mode: only \"skill\" is supported",
            ));
        }
        let target = parse_target(&request.target).map_err(target_error)?;
        let caller = match caller {
            ScanCaller::Anonymous(ip) => Caller::Anonymous(*ip),
            ScanCaller::Account(share) => Caller::Account(share.clone()),
        };
        Ok(match target {
            Target::Content(text) => {
                let report = self
                    .executor
                    .scan_content(&caller, text)
                    .await
                    .map_err(scan_error)?;
                ScanResult::new(TargetInfo::Content, report)
            }
            Target::Repository { owner, repo } => self
                .executor
                .scan_repository(&caller, &owner, &repo)
                .await
                .map_err(scan_error)?
                .into_result(),
        })
    }

    fn summary(report: &ScanResult) -> ScanSummary {
        ScanSummary {
            verdict: report.verdict.as_str(),
            target: match &report.target {
                TargetInfo::Content => ScannedTarget::Content,
                TargetInfo::Repository { owner, repo, .. } => ScannedTarget::Repository {
                    owner: owner.clone(),
                    repo: repo.clone(),
                },
            },
            findings: report.findings.len(),
        }
    }
}

fn target_error(e: TargetError) -> ApiError {
    match e {
        TargetError::NotAllowed => ApiError::new(
            ErrorCode::TargetNotAllowed,
            "target: only pasted content or exactly https://github.com/OWNER/REPO is accepted",
        ),
        TargetError::Archive => ApiError::new(
            ErrorCode::ArchiveNotAccepted,
            "target: ZIP archives are not accepted; paste the files' text instead",
        ),
        TargetError::Empty => DomainError::invalid("target", "must not be empty").into(),
    }
}

fn scan_error(e: ScanError) -> ApiError {
    match e {
        ScanError::Busy { retry_after_secs } => ApiError::new(
            ErrorCode::ScannerBusy,
            "the scanner is at capacity; try again shortly",
        )
        .with_retry_after(retry_after_secs),
        ScanError::OverShare { retry_after_secs } => ApiError::new(
            ErrorCode::RateLimited,
            "you already have the most scans in flight at once; wait for one to finish",
        )
        .with_retry_after(retry_after_secs),
        ScanError::Fetch(e) => fetch_error(&e),
        ScanError::Rules(e) => {
            DomainError::Internal(format!("the Guard rules do not compile: {e}")).into()
        }
    }
}

fn fetch_error(e: &FetchError) -> ApiError {
    match e {
        FetchError::NotFound => ApiError::new(ErrorCode::RepositoryNotFound, "no such public repository"),
        FetchError::Redirect => ApiError::new(
            ErrorCode::RedirectNotFollowed,
            "the code host answered with a redirect, which is never followed (was the repository moved or renamed?)",
        ),
        FetchError::TooLarge(what) => ApiError::new(
            ErrorCode::RepositoryTooLarge,
            format!("the repository is over the scan limits: {what}"),
        ),
        FetchError::Timeout | FetchError::Cancelled => ApiError::new(
            ErrorCode::UpstreamTimeout,
            "the scan took too long and was stopped",
        ),
        FetchError::Busy => ApiError::new(
            ErrorCode::ScannerBusy,
            "the scanner has no memory to spare now; try again shortly",
        )
        .with_retry_after(2),
        FetchError::Upstream(status) => ApiError::new(
            ErrorCode::UpstreamError,
            format!("the code host answered {status}"),
        ),
        FetchError::InvalidArchive => ApiError::new(ErrorCode::UpstreamError, "the repository archive is not readable"),
        FetchError::Transport(_) => ApiError::new(ErrorCode::UpstreamError, "the code host could not be reached"),
        FetchError::Config(cause) => {
            tracing::error!(cause = %cause, "guard fetcher misconfigured");
            ApiError::new(ErrorCode::InternalError, "internal error")
        }
    }
}
