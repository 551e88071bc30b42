//! `POST /guard/scan` and its description: pasted content or an exact public GitHub repository.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Utc;
use gc_domain::workspace::{KeyScope, NewActivity};
use gc_domain::{DomainError, ErrorCode};
use gc_guard::executor::{Caller, ScanError};
use gc_guard::fetch::FetchError;
use gc_guard::{parse_target, sarif, ScanResult, Target, TargetError, TargetInfo};
use serde::Deserialize;
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;
use crate::extract::{client_ip, Body, MaybeAuth};
use crate::state::AppState;

/// Modes, limits and rules of the scanner.
#[utoipa::path(get, path = "/api/v1/guard/scan", tag = "guard",
    responses((status = 200, description = "{modes: [\"skill\"], limits: {...}, rules: [{id, severity, title}]}")))]
pub async fn describe() -> HttpResponse {
    HttpResponse::Ok().json(gc_guard::guard_info())
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScanBody {
    /// Pasted content, or exactly `https://github.com/OWNER/REPO` (optional trailing `/` or `.git`).
    pub target: String,
    /// Only `skill`.
    pub mode: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ScanQuery {
    /// `json` (default) or `sarif` (SARIF 2.1.0).
    pub format: Option<String>,
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

/// Scans pasted content or an exact public GitHub repository for dangerous agent-skill
/// content. Works without credentials (throttled per client IP); with a session or a key
/// (scope `guard:scan`) the scan is recorded in the tenant's activity feed.
#[utoipa::path(post, path = "/api/v1/guard/scan", tag = "guard", request_body = ScanBody, params(ScanQuery),
    responses((status = 200, description = "{verdict, mode, target, findings, stats}, or SARIF 2.1.0 with ?format=sarif"),
        (status = 404, description = "repository_not_found"),
        (status = 422, description = "unsupported_mode, target_not_allowed, archive_not_accepted, redirect_not_followed, repository_too_large"),
        (status = 429, description = "rate_limited (anonymous allowance, or the caller's share of concurrent scans)"), (status = 502, description = "upstream_error"),
        (status = 503, description = "scanner_busy (Retry-After)"),
        (status = 504, description = "upstream_timeout")))]
pub async fn scan(
    state: web::Data<AppState>,
    req: HttpRequest,
    MaybeAuth(principal): MaybeAuth,
    query: web::Query<ScanQuery>,
    body: Body<ScanBody>,
) -> Result<HttpResponse, ApiError> {
    let sarif_out = match query.format.as_deref() {
        None | Some("json") => false,
        Some("sarif") => true,
        Some(_) => {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                "format must be json or sarif",
            ))
        }
    };
    // Who is scanning: a tenant's member or key (recorded), or an anonymous caller (throttled).
    let caller = match &principal {
        None => Caller::Anonymous(
            client_ip(&req, &state).unwrap_or(std::net::IpAddr::from([0, 0, 0, 0])),
        ),
        Some(p) => Caller::Account(p.tenant().map_or_else(
            || format!("user:{}", p.user().id),
            |t| format!("tenant:{}", t.id),
        )),
    };
    let scope = match &principal {
        None => {
            if let Caller::Anonymous(ip) = caller {
                if let Err(wait) = state.guard.admit_anonymous(ip) {
                    return Err(ApiError::from(DomainError::RateLimited {
                        retry_after_secs: wait,
                    }));
                }
            }
            None
        }
        Some(p) => match p.read_scope(KeyScope::GuardScan) {
            Ok(scope) if !scope.is_shadow() => Some(scope),
            Ok(_) => None,
            // A platform admin without a tenant scans unrecorded.
            Err(DomainError::MemberUnassigned) if p.user().is_platform_admin() => None,
            Err(e) => return Err(e.into()),
        },
    };
    let body = body.into_inner()?;
    if body.mode != gc_guard::MODE_SKILL {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMode,
            "mode: only \"skill\" is supported",
        ));
    }
    let target = parse_target(&body.target).map_err(target_error)?;
    let executor = &state.guard.executor;
    let result: ScanResult = match target {
        Target::Content(text) => {
            let report = executor
                .scan_content(&caller, text)
                .await
                .map_err(scan_error)?;
            ScanResult::new(TargetInfo::Content, report)
        }
        Target::Repository { owner, repo } => executor
            .scan_repository(&caller, &owner, &repo)
            .await
            .map_err(scan_error)?
            .into_result(),
    };
    state.metrics.guard_scan(result.verdict.as_str());
    if let Some(scope) = scope {
        let (kind, owner, repo) = match &result.target {
            TargetInfo::Content => ("content", None, None),
            TargetInfo::Repository { owner, repo, .. } => {
                ("repository", Some(owner.clone()), Some(repo.clone()))
            }
        };
        state.recorder.record(NewActivity::read(
            &scope,
            Utc::now(),
            "guard.scan",
            json!({
                "target": kind,
                "owner": owner,
                "repo": repo,
                "verdict": result.verdict,
                "findings": result.findings.len(),
            }),
        ));
    }
    if sarif_out {
        let report = gc_guard::ScanReport {
            findings: result.findings,
            stats: result.stats,
        };
        return Ok(HttpResponse::Ok()
            .content_type("application/sarif+json")
            .json(sarif::to_sarif(&report, &result.target)));
    }
    Ok(HttpResponse::Ok().json(result))
}
