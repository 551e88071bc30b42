//! gc-guard: a scanner for dangerous agent-skill content, and a strict GitHub fetcher.
//!
//! The crate has no web-framework dependency so other tools can reuse it.
//!
//! - [`parse_target`] applies the allow-list of contract section 7 (pure, no network).
//! - [`Scanner`] compiles the rule catalog ([`rules::RULES`]) once and scans texts in one
//!   keyword pass; [`Scanner::scan_files`] scans a set of files with stats.
//! - [`ScanResult`] is the JSON body of `POST /guard/scan`; [`sarif::to_sarif`] the SARIF one;
//!   [`guard_info`] the body of `GET /guard/scan`.
//! - `fetch` (cargo feature `fetch`, on by default) downloads a public repository's default
//!   branch from GitHub within the [`Limits`]; `executor` runs scans on the Guard's own
//!   bounded threads (concurrency, wait queue, per-caller caps, single flight, memory budget,
//!   cancellation at the time-out).
//! - [`cli`] is the engine of `gc-server guard scan PATH|-`.
//! - [`coverage`]: what a scan could not read whole (over-size files, files past the count
//!   limit, executables, archives, binaries, encodings) is reported as `scan.incomplete`, so
//!   such a verdict is never `pass`; `partial` reads over-size files in part, streamed.
//! - `capabilities`: the skill's capability inventory (what it executes, reads, sends,
//!   downloads, persists, which supply chain it changes; whether each file runs or is only
//!   carried), verdicts from combinations across files (`combo.*`), and findings in carried
//!   files weighed one step lower.

mod capabilities;
mod checks;
pub mod cli;
mod code;
mod context;
pub mod coverage;
mod decode;
pub mod eval;
mod filters;
mod flow;
mod intent;
mod model;
mod normalize;
mod partial;
pub mod rules;
pub mod sarif;
mod scanner;
mod target;

#[cfg(feature = "fetch")]
pub mod executor;
#[cfg(feature = "fetch")]
pub mod fetch;

pub use model::{
    Capability, Category, Finding, GuardInfo, Inventory, Limits, Role, RuleSummary, ScanReport,
    ScanResult, ScanStats, Severity, TargetInfo, Verdict,
};
pub use scanner::{is_binary, FilesScan, RuleError, Scanner, MAX_PER_RULE_PER_SCAN, MAX_PER_SCAN};
pub use target::{parse_target, valid_owner, valid_repo, Target, TargetError};

/// The only scan mode.
pub const MODE_SKILL: &str = "skill";

/// The hand-set part of [`rules_version`]: raise it when the scanner's code (checks,
/// capabilities, filters, weights) changes what it finds without a change to the catalog.
pub const RULES_EPOCH: &str = "2026.12.7";

/// The version of the rules a verdict was made under: `RULES_EPOCH` and a fingerprint of the
/// catalog (every rule's id, category, severity, title and pattern), so a catalog change is a
/// new version without anyone raising the epoch. Stored with every skill verdict; a verdict
/// stored under another version is shown as stale.
pub fn rules_version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        // FNV-1a, 64 bits: stable across builds and platforms (std's hasher is not).
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |text: &str| {
            for byte in text.bytes().chain([0]) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        for rule in rules::RULES {
            feed(rule.id);
            feed(rule.category.as_str());
            feed(rule.severity.as_str());
            feed(rule.title);
            match rule.detector {
                rules::Detector::Regex(d) => feed(d.pattern),
                rules::Detector::Native => feed("native"),
            }
        }
        format!("{RULES_EPOCH}+{hash:016x}")
    })
}

/// `{id, severity, title}` of every rule, for `GET /guard/scan`.
pub fn rules() -> Vec<RuleSummary> {
    rules::RULES
        .iter()
        .map(|r| RuleSummary {
            id: r.id,
            severity: r.severity,
            title: r.title,
        })
        .collect()
}

/// The body of `GET /guard/scan`: `{modes, limits, rules}`.
pub fn guard_info() -> GuardInfo {
    GuardInfo {
        modes: vec![MODE_SKILL],
        limits: Limits::CONTRACT,
        rules: rules(),
    }
}

#[cfg(test)]
mod capability_tests;
#[cfg(test)]
mod case_file;
#[cfg(test)]
mod category_tests;
#[cfg(test)]
mod coverage_tests;
#[cfg(test)]
mod generalisation_tests;
#[cfg(test)]
mod public_fp_tests;
#[cfg(test)]
mod tests;
