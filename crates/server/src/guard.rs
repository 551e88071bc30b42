//! The Guard's adapter: `gc-guard`'s executor (its own bounded threads, with the GitHub
//! fetcher) and the anonymous throttle, as the HTTP layer's [`Guard`] port (which it wraps as its `GuardService`). The mode and target
//! checks and the mapping of the Guard's refusals to error codes live here; the decisions (who
//! scans, in whose share, what is recorded) are `gc_domain::services::{guard_scan, skill_scan}`.

use std::net::IpAddr;

use gc_domain::services::guard_scan::{ScanCaller, ScanRequest, ScanSummary, ScannedTarget};
use gc_domain::services::skill_scan::{FindingSummary, GuardVerdict, NotScanned, SkillScan};
use gc_domain::{DomainError, ErrorCode};
use gc_guard::executor::{Caller, ScanError, ScanExecutor};
use gc_guard::fetch::FetchError;
use gc_guard::{parse_target, sarif, ScanResult, Target, TargetError, TargetInfo, Verdict};
use gc_http_api::error::ApiError;
use gc_http_api::guard::{Guard, GuardFuture, GuardReport};
use gc_http_api::throttle::IpThrottle;
use uuid::Uuid;

/// The Guard's executor and the anonymous throttle, shared by every worker. Scans never run on
/// the HTTP workers or on the blocking pool that serves the database.
pub struct GuardAdapter {
    /// Scans run here; the rules compile on the first scan (their automata take several MiB,
    /// which a server that never scans should not carry).
    pub executor: ScanExecutor,
    /// Anonymous scans per client IP: a bounded table (see [`IpThrottle`]); when it is full of
    /// active clients, newcomers share one overflow allowance.
    anonymous: IpThrottle,
}

impl GuardAdapter {
    /// `anonymous_per_minute` scans per client IP for callers without credentials, with at most
    /// `max_clients` client IPs remembered.
    pub fn new(executor: ScanExecutor, anonymous_per_minute: u32, max_clients: usize) -> Self {
        Self {
            executor,
            anonymous: IpThrottle::new(anonymous_per_minute, 1, max_clients),
        }
    }

    async fn scan_request(
        &self,
        caller: &ScanCaller,
        request: ScanRequest,
    ) -> Result<Box<dyn GuardReport>, ApiError> {
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
        let result = match target {
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
        };
        Ok(Box::new(Report(result)))
    }

    /// On the Guard's executor, in the tenant's share (the one its members' scans use), within
    /// its bounds and time-out.
    async fn scan_skill_content(&self, tenant: Uuid, content: String) -> SkillScan {
        let caller = Caller::Account(format!("tenant:{tenant}"));
        match self.executor.scan_content(&caller, content).await {
            Ok(report) => SkillScan::Done {
                verdict: match report.verdict() {
                    Verdict::Pass => GuardVerdict::Pass,
                    Verdict::Warn => GuardVerdict::Warn,
                    Verdict::Fail => GuardVerdict::Fail,
                },
                truncated: report.stats.findings_truncated,
                findings: report
                    .findings
                    .into_iter()
                    .map(|f| FindingSummary {
                        rule_id: f.rule_id,
                        severity: f.severity.as_str().to_owned(),
                        title: f.title,
                        message: f.message,
                        path: f.path,
                        line: f.line,
                    })
                    .collect(),
            },
            Err(ScanError::Busy { .. } | ScanError::Fetch(FetchError::Busy)) => {
                SkillScan::NotScanned(NotScanned::Busy)
            }
            Err(ScanError::OverShare { .. }) => SkillScan::NotScanned(NotScanned::OverShare),
            Err(ScanError::Fetch(FetchError::Timeout | FetchError::Cancelled)) => {
                SkillScan::NotScanned(NotScanned::Timeout)
            }
            Err(e) => {
                tracing::error!(error = %e, "skill scan failed");
                SkillScan::NotScanned(NotScanned::Failed)
            }
        }
    }
}

impl Guard for GuardAdapter {
    fn info(&self) -> Vec<u8> {
        serde_json::to_vec(&gc_guard::guard_info()).unwrap_or_default()
    }

    fn admit_anonymous(&self, ip: IpAddr) -> Result<(), u64> {
        self.anonymous.check(ip)
    }

    fn scan<'a>(
        &'a self,
        caller: &'a ScanCaller,
        request: ScanRequest,
    ) -> GuardFuture<'a, Result<Box<dyn GuardReport>, ApiError>> {
        Box::pin(self.scan_request(caller, request))
    }

    fn rules_version(&self) -> &str {
        gc_guard::rules_version()
    }

    fn scan_skill(&self, tenant: Uuid, content: String) -> GuardFuture<'_, SkillScan> {
        Box::pin(self.scan_skill_content(tenant, content))
    }
}

/// A scan's report, rendered when the caller's format is known.
struct Report(ScanResult);

impl GuardReport for Report {
    fn summary(&self) -> ScanSummary {
        let report = &self.0;
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

    fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).unwrap_or_default()
    }

    fn into_sarif(self: Box<Self>) -> Vec<u8> {
        let result = self.0;
        let report = gc_guard::ScanReport {
            findings: result.findings,
            stats: result.stats,
        };
        serde_json::to_vec(&sarif::to_sarif(&report, &result.target)).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_http_layers_mode_is_the_guards() {
        assert_eq!(gc_http_api::guard::MODE_SKILL, gc_guard::MODE_SKILL);
    }
}
