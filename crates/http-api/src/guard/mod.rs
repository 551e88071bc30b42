//! `/guard/scan`: the skill scanner over HTTP, with or without credentials. The Guard is a
//! port here, [`Guard`], which the binary implements over `gc-guard` (its executor, target
//! checks and refusals: `gc_server::guard::GuardAdapter`); this module hands it to the domain's
//! services as their `GuardScanner` (the scan route) and `SkillScanner` (stored skills). http-api
//! itself never names `gc-guard`.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use gc_domain::services::guard_scan::{GuardScanner, ScanCaller, ScanRequest, ScanSummary};
use gc_domain::services::skill_scan::{SkillScan, SkillScanner};
use uuid::Uuid;

use crate::error::ApiError;

pub mod scan;

/// The only scan mode (`gc_guard::MODE_SKILL`; the server's tests hold them equal).
pub const MODE_SKILL: &str = "skill";

/// A future the Guard port answers with (one allocation per scan, which takes milliseconds).
pub type GuardFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A finished scan's report, kept by the Guard adapter in its own types: the summary the domain
/// records and the two renderings a caller may ask for.
pub trait GuardReport {
    fn summary(&self) -> ScanSummary;
    /// `{verdict, mode, target, findings, stats}` as JSON.
    fn to_json(&self) -> Vec<u8>;
    /// The report as SARIF 2.1.0 (`?format=sarif`).
    fn into_sarif(self: Box<Self>) -> Vec<u8>;
}

/// The Guard: its description, the anonymous allowance, scans of a request in a caller's
/// share, and scans of a stored skill's content. Implemented by the binary over `gc-guard`.
pub trait Guard: Send + Sync {
    /// Modes, limits and rules, as JSON.
    fn info(&self) -> Vec<u8>;
    /// Takes one anonymous scan from `ip`'s allowance; `Err(seconds to wait)` when used.
    fn admit_anonymous(&self, ip: IpAddr) -> Result<(), u64>;
    /// Checks the mode and the target and scans it in `caller`'s share; a refusal keeps the
    /// Guard's own code and message.
    fn scan<'a>(
        &'a self,
        caller: &'a ScanCaller,
        request: ScanRequest,
    ) -> GuardFuture<'a, Result<Box<dyn GuardReport>, ApiError>>;
    /// The version of the rules scans are made under now.
    fn rules_version(&self) -> &str;
    /// Scans a skill's content in `tenant`'s share (never an error: see `SkillScan`).
    fn scan_skill(&self, tenant: Uuid, content: String) -> GuardFuture<'_, SkillScan>;
}

/// The Guard's description, as the JSON the adapter wrote.
pub struct GuardInfo(pub Vec<u8>);

/// The Guard port as the state holds it, and as the domain's services take it.
pub struct GuardService(Arc<dyn Guard>);

impl GuardService {
    pub fn new(guard: Arc<dyn Guard>) -> Self {
        Self(guard)
    }
}

impl GuardScanner for GuardService {
    type Report = Box<dyn GuardReport>;
    type Info = GuardInfo;
    type Error = ApiError;

    fn info(&self) -> GuardInfo {
        GuardInfo(self.0.info())
    }

    fn admit_anonymous(&self, ip: IpAddr) -> Result<(), u64> {
        self.0.admit_anonymous(ip)
    }

    async fn scan(
        &self,
        caller: &ScanCaller,
        request: ScanRequest,
    ) -> Result<Box<dyn GuardReport>, ApiError> {
        self.0.scan(caller, request).await
    }

    fn summary(report: &Box<dyn GuardReport>) -> ScanSummary {
        report.summary()
    }
}

impl SkillScanner for GuardService {
    fn rules_version(&self) -> &str {
        self.0.rules_version()
    }

    async fn scan_skill(&self, tenant: Uuid, content: String) -> SkillScan {
        self.0.scan_skill(tenant, content).await
    }
}
