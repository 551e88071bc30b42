//! Result types shared by the scanner, the SARIF writer, the command line and the HTTP layer.
//!
//! Every type here serialises with the lowercase strings of contract section 7.

use serde::Serialize;
use std::fmt;

/// `as_str` (the name used in JSON, SARIF and the text output) and `Display` for a fieldless
/// enum, from one table of names.
macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The name used in JSON, SARIF and the text output.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// How bad a finding is. Ordered: `Info < Low < Medium < High < Critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
    Critical,
}

names!(Severity {
    Info => "info",
    Low => "low",
    Medium => "medium",
    High => "high",
    Critical => "critical",
});

/// The overall outcome of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Warn,
    Fail,
}

impl Verdict {
    /// `fail` when any finding is high or critical, `warn` when any is medium, else `pass`.
    pub fn from_findings(findings: &[Finding]) -> Verdict {
        let worst = findings.iter().map(|f| f.severity).max();
        match worst {
            Some(Severity::High | Severity::Critical) => Verdict::Fail,
            Some(Severity::Medium) => Verdict::Warn,
            _ => Verdict::Pass,
        }
    }
}

names!(Verdict {
    Pass => "pass",
    Warn => "warn",
    Fail => "fail",
});

/// The family a rule belongs to (used in docs, SARIF tags and the rule listing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    PromptInjection,
    Concealment,
    ToolPoisoning,
    HiddenText,
    Homoglyph,
    Secret,
    FetchExecute,
    DecodeExecute,
    CodeExecution,
    Destructive,
    ReverseShell,
    Persistence,
    Exfiltration,
    Miner,
    SuspiciousUrl,
    ResourceAbuse,
    SupplyChain,
    Skill,
    Coverage,
}

names!(Category {
    PromptInjection => "prompt_injection",
    Concealment => "concealment",
    ToolPoisoning => "tool_poisoning",
    HiddenText => "hidden_text",
    Homoglyph => "homoglyph",
    Secret => "secret",
    FetchExecute => "fetch_execute",
    DecodeExecute => "decode_execute",
    CodeExecution => "code_execution",
    Destructive => "destructive",
    ReverseShell => "reverse_shell",
    Persistence => "persistence",
    Exfiltration => "exfiltration",
    Miner => "miner",
    SuspiciousUrl => "suspicious_url",
    ResourceAbuse => "resource_abuse",
    SupplyChain => "supply_chain",
    Skill => "skill",
    Coverage => "coverage",
});

/// One thing the scanner found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule_id: String,
    pub severity: Severity,
    pub title: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// 1-based line number.
    pub line: u32,
    /// 1-based column, counted in Unicode scalar values.
    pub column: u32,
    /// A short excerpt of the line, with secrets redacted and invisible characters made visible.
    pub excerpt: String,
}

/// Whether a capability sits in code that runs at install time, in code that runs when the
/// skill is used, or in a file the skill only carries (tests, documentation, CI, locale).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Install,
    Runs,
    Carried,
}

impl Role {
    /// The lowercase name used in JSON and the text output.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Install => "install",
            Role::Runs => "runs",
            Role::Carried => "carried",
        }
    }
}

/// One item of the capability inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    /// What it does ("downloads", "pipes into an interpreter", "npm postinstall hook").
    pub what: String,
    /// The line (shortened, secrets redacted).
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub line: u32,
    pub role: Role,
    /// Why the file runs or is carried.
    pub why: String,
}

/// What a skill can do, from every file (see `capabilities`): what it executes, what
/// sensitive data it reads, where it sends data, what it downloads, what it persists and what
/// supply chain it changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Inventory {
    pub executes: Vec<Capability>,
    pub reads: Vec<Capability>,
    pub sends: Vec<Capability>,
    pub downloads: Vec<Capability>,
    pub persists: Vec<Capability>,
    pub supply_chain: Vec<Capability>,
    /// Obfuscation: decoded, decompressed or decrypted data that runs, strings built from
    /// character codes or XOR, long encoded blobs in code (decision 0034).
    pub obfuscation: Vec<Capability>,
    /// Some items were left out (at most 40 per list).
    pub truncated: bool,
}

impl Inventory {
    /// Every list with its JSON name.
    pub fn lists(&self) -> [(&'static str, &[Capability]); 7] {
        [
            ("executes", &self.executes),
            ("reads", &self.reads),
            ("sends", &self.sends),
            ("downloads", &self.downloads),
            ("persists", &self.persists),
            ("supply_chain", &self.supply_chain),
            ("obfuscation", &self.obfuscation),
        ]
    }

    /// No capability found.
    pub fn is_empty(&self) -> bool {
        self.lists().iter().all(|(_, l)| l.is_empty())
    }
}

/// Counters of one scan (`stats` in the contract).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScanStats {
    pub files_scanned: u64,
    pub files_skipped: u64,
    pub bytes_scanned: u64,
    pub duration_ms: u64,
    /// Findings left out by the caps (per rule and per file, per rule and in total per scan),
    /// so an answer stays small.
    pub findings_truncated: u64,
    /// The capability inventory of the scan. It rides with the counters so that a report
    /// rebuilt from a result's `findings` and `stats` keeps it; [`ScanResult`] shows it as the
    /// top-level `inventory`.
    #[serde(skip)]
    pub inventory: Inventory,
}

/// Findings and counters of a scan over one text or a set of files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScanReport {
    pub findings: Vec<Finding>,
    pub stats: ScanStats,
}

impl ScanReport {
    /// The verdict of these findings.
    pub fn verdict(&self) -> Verdict {
        Verdict::from_findings(&self.findings)
    }
}

/// What was scanned (`target` in the contract's result).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TargetInfo {
    Content,
    Repository {
        owner: String,
        repo: String,
        /// The commit SHA that was scanned.
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        git_ref: Option<String>,
    },
}

/// The body of a `200` answer to `POST /guard/scan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScanResult {
    pub verdict: Verdict,
    pub mode: &'static str,
    pub target: TargetInfo,
    pub findings: Vec<Finding>,
    pub stats: ScanStats,
    /// What the skill can do (see [`Inventory`]).
    pub inventory: Inventory,
}

impl ScanResult {
    /// Wraps a report for the given target in mode `skill`.
    pub fn new(target: TargetInfo, report: ScanReport) -> ScanResult {
        ScanResult {
            verdict: report.verdict(),
            mode: crate::MODE_SKILL,
            target,
            findings: report.findings,
            inventory: report.stats.inventory.clone(),
            stats: report.stats,
        }
    }
}

/// The contract's limits on repository scans (and on local folder scans by the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Compressed bytes read from the network, at most.
    pub max_download_bytes: u64,
    /// Decompressed bytes read from the archive, at most.
    pub max_unpacked_bytes: u64,
    /// Files scanned with every rule, at most; more are counted, given a keyword pass and
    /// reported as `scan.incomplete`.
    pub max_files: u64,
    /// Larger files are read in part (streamed), counted as skipped and reported as
    /// `scan.incomplete`.
    pub max_file_bytes: u64,
    /// The whole fetch, at most.
    pub timeout_ms: u64,
}

impl Limits {
    /// 25 MiB download.
    pub const MAX_DOWNLOAD_BYTES: u64 = 25 * 1024 * 1024;
    /// 100 MiB unpacked.
    pub const MAX_UNPACKED_BYTES: u64 = 100 * 1024 * 1024;
    /// 5,000 files.
    pub const MAX_FILES: u64 = 5_000;
    /// 1 MiB per file.
    pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
    /// 20 s.
    pub const TIMEOUT_MS: u64 = 20_000;

    /// The limits of contract section 7.
    pub const CONTRACT: Limits = Limits {
        max_download_bytes: Self::MAX_DOWNLOAD_BYTES,
        max_unpacked_bytes: Self::MAX_UNPACKED_BYTES,
        max_files: Self::MAX_FILES,
        max_file_bytes: Self::MAX_FILE_BYTES,
        timeout_ms: Self::TIMEOUT_MS,
    };

    /// The overall time-out as a `Duration`.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::CONTRACT
    }
}

/// One entry of the rule listing (`GET /guard/scan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleSummary {
    pub id: &'static str,
    pub severity: Severity,
    pub title: &'static str,
}

/// The body of `GET /guard/scan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuardInfo {
    pub modes: Vec<&'static str>,
    pub limits: Limits,
    pub rules: Vec<RuleSummary>,
}
