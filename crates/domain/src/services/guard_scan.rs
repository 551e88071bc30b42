//! The Guard scan: who is scanning, whether they may (an anonymous allowance per client IP, or
//! a tenant scope with `guard:scan`), in whose share of the scanner, and whether the scan is
//! recorded in the tenant's activity feed.

use std::future::Future;
use std::net::IpAddr;

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::error::DomainError;
use crate::model::workspace::{KeyScope, NewActivity};
use crate::policy::access::{Principal, TenantScope};
use crate::policy::runs::{RunEvent, RunSink};

/// Whose share of the scanner's concurrent scans a scan takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanCaller {
    /// A tenant (`tenant:<id>`: its members and keys share one share) or an account without a
    /// tenant (`user:<id>`).
    Account(String),
    /// A caller without credentials, by client IP.
    Anonymous(IpAddr),
}

/// A scan as the caller asked for it.
#[derive(Debug, Clone)]
pub struct ScanRequest {
    /// Pasted content or a repository address, as sent.
    pub target: String,
    pub mode: String,
}

/// What was scanned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScannedTarget {
    Content,
    Repository { owner: String, repo: String },
}

/// The facts of a report the service records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanSummary {
    /// `pass`, `warn` or `fail`.
    pub verdict: &'static str,
    pub target: ScannedTarget,
    pub findings: usize,
}

/// The Guard: its scanner (own bounded threads, shares per caller, the GitHub fetcher) and the
/// allowance of anonymous scans. The HTTP layer's `GuardService` implements it over the
/// binary's Guard adapter (`gc-guard`). Its reports and errors are its own types: the service
/// passes them through.
pub trait GuardScanner {
    /// A scan's full report, as the caller receives it.
    type Report;
    /// What the scanner says about itself (modes, limits, rules).
    type Info;
    /// The scanner's refusals (mode, target, fetch, capacity), and the domain's.
    type Error: From<DomainError>;
    fn info(&self) -> Self::Info;
    /// Takes one anonymous scan from `ip`'s allowance; `Err(seconds to wait)` when it is used.
    fn admit_anonymous(&self, ip: IpAddr) -> Result<(), u64>;
    /// Checks the mode and the target (only pasted content or an exact public repository) and
    /// scans it in `caller`'s share.
    fn scan(
        &self,
        caller: &ScanCaller,
        request: ScanRequest,
    ) -> impl Future<Output = Result<Self::Report, Self::Error>>;
    fn summary(report: &Self::Report) -> ScanSummary;
}

/// A finished scan: the report, its summary, and whether it went to a tenant's feed.
#[derive(Debug)]
pub struct ScanOutcome<R> {
    pub report: R,
    pub summary: ScanSummary,
    pub recorded: bool,
}

/// The scanner's description (`GET /guard/scan`).
pub fn describe<G: GuardScanner + ?Sized>(guard: &G) -> G::Info {
    guard.info()
}

/// Scans for `principal` (or an anonymous caller at `ip`).
///
/// Anonymous callers take one scan from their IP's allowance first (`rate_limited` with the
/// wait when it is used). Signed-in callers and keys need a read scope with `guard:scan`; a
/// platform admin without a tenant, or in a Shadow view, scans unrecorded. The scan runs in the
/// caller's tenant's share (or the account's, or the IP's). `request` is the body as the
/// transport read it: a refusal of it is answered only after the caller was admitted, so a
/// caller who may not scan hears that first. A scan with a scope is recorded as a
/// `guard.scan` line in the tenant's feed, through `sink`, off the request path.
pub async fn scan<G, S>(
    guard: &G,
    sink: &S,
    principal: Option<&Principal>,
    ip: IpAddr,
    request: Result<ScanRequest, G::Error>,
    now: DateTime<Utc>,
) -> Result<ScanOutcome<G::Report>, G::Error>
where
    G: GuardScanner + ?Sized,
    S: RunSink + ?Sized,
{
    let (caller, scope) = admit(guard, principal, ip)?;
    let report = guard.scan(&caller, request?).await?;
    let summary = G::summary(&report);
    let recorded = scope.is_some();
    if let Some(scope) = scope {
        sink.send(RunEvent::Activity(activity(&scope, &summary, now)));
    }
    Ok(ScanOutcome {
        report,
        summary,
        recorded,
    })
}

/// Who is scanning and, for a tenant's member or key, the scope the scan is recorded under.
fn admit<G: GuardScanner + ?Sized>(
    guard: &G,
    principal: Option<&Principal>,
    ip: IpAddr,
) -> Result<(ScanCaller, Option<TenantScope>), DomainError> {
    let Some(p) = principal else {
        guard
            .admit_anonymous(ip)
            .map_err(|wait| DomainError::RateLimited {
                retry_after_secs: wait,
            })?;
        return Ok((ScanCaller::Anonymous(ip), None));
    };
    let caller = ScanCaller::Account(p.tenant().map_or_else(
        || format!("user:{}", p.user().id),
        |t| format!("tenant:{}", t.id),
    ));
    let scope = match p.read_scope(KeyScope::GuardScan) {
        Ok(scope) if !scope.is_shadow() => Some(scope),
        Ok(_) => None,
        // A platform admin without a tenant scans unrecorded.
        Err(DomainError::MemberUnassigned) if p.user().is_platform_admin() => None,
        Err(e) => return Err(e),
    };
    Ok((caller, scope))
}

/// The `guard.scan` line: what was scanned and what was found, never the content.
fn activity(scope: &TenantScope, summary: &ScanSummary, now: DateTime<Utc>) -> NewActivity {
    let (kind, owner, repo) = match &summary.target {
        ScannedTarget::Content => ("content", None, None),
        ScannedTarget::Repository { owner, repo } => ("repository", Some(owner), Some(repo)),
    };
    NewActivity::read(
        scope,
        now,
        "guard.scan",
        json!({
            "target": kind,
            "owner": owner,
            "repo": repo,
            "verdict": summary.verdict,
            "findings": summary.findings,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{ready, FakeGuard, FakeSink};
    use crate::model::{Role, Status};
    use crate::policy::access::tests::{active_member, session, tenant, user};
    use crate::policy::access::Credential;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 9));

    fn request(target: &str) -> Result<ScanRequest, DomainError> {
        Ok(ScanRequest {
            target: target.into(),
            mode: "skill".into(),
        })
    }

    fn bad_body() -> Result<ScanRequest, DomainError> {
        Err(DomainError::invalid("body", "not JSON"))
    }

    fn lines(sink: &FakeSink) -> Vec<NewActivity> {
        sink.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| match e {
                RunEvent::Activity(a) => a.clone(),
                other => panic!("unexpected event {other:?}"),
            })
            .collect()
    }

    fn run(
        guard: &FakeGuard,
        sink: &FakeSink,
        p: Option<&Principal>,
        req: Result<ScanRequest, DomainError>,
    ) -> Result<ScanOutcome<ScanSummary>, DomainError> {
        ready(scan(guard, sink, p, IP, req, Utc::now()))
    }

    #[test]
    fn anonymous_scans_take_the_ip_allowance_first_and_are_not_recorded() {
        let guard = FakeGuard::default();
        let sink = FakeSink::default();
        let out = run(&guard, &sink, None, request("echo hi")).unwrap();
        assert!(!out.recorded);
        assert_eq!(out.summary.target, ScannedTarget::Content);
        assert_eq!(
            *guard.scans.lock().unwrap(),
            vec![(ScanCaller::Anonymous(IP), "echo hi".to_owned())]
        );
        // The allowance is used: refused with the wait, before the body is looked at.
        for req in [request("echo hi"), bad_body()] {
            assert_eq!(
                run(&guard, &sink, None, req).unwrap_err(),
                DomainError::RateLimited {
                    retry_after_secs: 42
                }
            );
        }
        assert_eq!(guard.scans.lock().unwrap().len(), 1);
        assert!(lines(&sink).is_empty());
    }

    #[test]
    fn a_refused_body_still_takes_an_anonymous_scan() {
        let guard = FakeGuard::default();
        let sink = FakeSink::default();
        assert_eq!(
            run(&guard, &sink, None, bad_body())
                .unwrap_err()
                .code()
                .as_str(),
            "validation_failed"
        );
        assert_eq!(*guard.allowance.lock().unwrap(), 0);
        assert!(guard.scans.lock().unwrap().is_empty());
    }

    #[test]
    fn a_members_scan_runs_in_the_tenants_share_and_is_recorded() {
        let (t, p) = active_member();
        let guard = FakeGuard {
            verdict: "fail",
            findings: 3,
            ..FakeGuard::default()
        };
        let sink = FakeSink::default();
        let out = run(
            &guard,
            &sink,
            Some(&p),
            request("https://github.com/acme/skills"),
        )
        .unwrap();
        assert!(out.recorded);
        assert_eq!(
            guard.scans.lock().unwrap()[0].0,
            ScanCaller::Account(format!("tenant:{}", t.id))
        );
        let recorded = lines(&sink);
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].tenant_id(), t.id);
        assert_eq!(recorded[0].action(), "guard.scan");
        assert_eq!(
            recorded[0].detail(),
            json!({"target": "repository", "owner": "acme", "repo": "skills",
                   "verdict": "fail", "findings": 3})
        );
        // Members never spend the anonymous allowance.
        assert_eq!(*guard.allowance.lock().unwrap(), 1);
        run(&guard, &sink, Some(&p), request("text")).unwrap();
        assert_eq!(
            lines(&sink)[1].detail(),
            json!({"target": "content", "owner": null, "repo": null,
                   "verdict": "fail", "findings": 3})
        );
    }

    #[test]
    fn admins_without_a_tenant_or_in_a_shadow_view_scan_unrecorded_in_their_own_share() {
        let t = tenant(Status::Active);
        let admin = user(Role::PlatformAdmin, Status::Active, None);
        let admin_id = admin.id;
        let guard = FakeGuard::default();
        let sink = FakeSink::default();
        for p in [
            session(admin.clone(), None, None),
            session(admin, None, Some(t)),
        ] {
            let out = run(&guard, &sink, Some(&p), request("text")).unwrap();
            assert!(!out.recorded);
        }
        let callers: Vec<_> = guard
            .scans
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.0.clone())
            .collect();
        assert_eq!(
            callers,
            vec![ScanCaller::Account(format!("user:{admin_id}")); 2]
        );
        assert!(lines(&sink).is_empty());
    }

    #[test]
    fn refused_callers_are_told_so_before_the_body_and_scan_nothing() {
        let t = tenant(Status::Active);
        let key = crate::policy::access::Principal::new(
            user(Role::Member, Status::Active, Some(&t)),
            Some(t.clone()),
            Credential::ApiKey {
                key_id: uuid::Uuid::now_v7(),
                name: "ci".into(),
                scopes: vec![KeyScope::WorkspaceRead],
                limits: crate::policy::quota::KeyLimits::default(),
            },
        );
        let suspended = session(
            user(Role::Member, Status::Suspended, Some(&t)),
            Some(t.clone()),
            None,
        );
        let unassigned = session(user(Role::Member, Status::Active, None), None, None);
        let guard = FakeGuard::default();
        let sink = FakeSink::default();
        for (p, code) in [
            (key, "insufficient_scope"),
            (suspended, "member_suspended"),
            (unassigned, "member_unassigned"),
        ] {
            let err = run(&guard, &sink, Some(&p), bad_body()).unwrap_err();
            assert_eq!(err.code().as_str(), code);
        }
        assert!(guard.scans.lock().unwrap().is_empty());
        assert!(lines(&sink).is_empty());
    }

    #[test]
    fn a_scanner_refusal_records_nothing() {
        let (_, p) = active_member();
        let guard = FakeGuard::default();
        let sink = FakeSink::default();
        let req = Ok(ScanRequest {
            target: "text".into(),
            mode: "mcp".into(),
        });
        assert!(run(&guard, &sink, Some(&p), req).is_err());
        assert!(lines(&sink).is_empty());
        assert_eq!(describe(&guard), "fake guard");
    }
}
