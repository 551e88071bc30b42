//! Skill verdicts (issue 29, contract section 11): what is stored of the Guard's scan of a
//! skill's content. A scan's findings are kept most severe first, at most
//! [`MAX_STORED_FINDINGS`] of them, each bounded; a scan that could not be done is verdict
//! `warn` with a `scan.incomplete` finding and no rules version, so it is never `pass` and
//! always stale. Scanning and storing is [`crate::services::skill_scan`].

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

/// Findings stored with a verdict, at most (the most severe first); the rest are counted in
/// `findings_omitted`.
pub const MAX_STORED_FINDINGS: usize = 20;
/// Characters kept of a stored finding's message (titles and paths are bounded the same way).
const MAX_MESSAGE_CHARS: usize = 300;
/// The Guard's verdict on a skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardVerdict {
    Pass,
    Warn,
    Fail,
}

impl GuardVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Warn => "warn",
            Self::Fail => "fail",
        }
    }
}

/// One finding as stored with a skill: what and where, never an excerpt of the content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingSummary {
    pub rule_id: String,
    /// `info`, `low`, `medium`, `high` or `critical`.
    pub severity: String,
    pub title: String,
    pub message: String,
    pub path: Option<String>,
    pub line: u32,
}

/// Why a scan was not done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotScanned {
    /// Every running slot and waiting place of the scanner was taken, or its memory.
    Busy,
    /// The tenant already had its share of scans in flight.
    OverShare,
    /// The scan was stopped at the Guard's time-out.
    Timeout,
    /// The scanner failed (its rules did not compile, its task failed).
    Failed,
}

impl NotScanned {
    fn message(self) -> &'static str {
        match self {
            Self::Busy => "The skill was not scanned: the scanner was at capacity. Scan it again.",
            Self::OverShare => {
                "The skill was not scanned: the workspace had its most scans in flight at once. \
                 Scan it again."
            }
            Self::Timeout => {
                "The skill was not scanned whole: the scan was stopped at the time-out."
            }
            Self::Failed => "The skill was not scanned: the scanner failed. Scan it again.",
        }
    }
}

/// What the scanner said about a skill's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillScan {
    Done {
        verdict: GuardVerdict,
        /// In the scanner's order; [`SkillGuard::from_scan`] keeps the most severe.
        findings: Vec<FindingSummary>,
        /// Findings the scanner itself left out (its per-rule and per-file caps).
        truncated: u64,
    },
    NotScanned(NotScanned),
}

/// A skill's stored Guard result: the JSON object
/// `{verdict, findings, findings_omitted, rules_version, scanned_at}` as stored (`stale` is
/// added when it is shown) and the rules version it was made under, kept apart so that showing
/// it needs no parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillGuard {
    json: String,
    rules_version: Option<String>,
}

impl SkillGuard {
    /// The stored result of a scan made under `rules_version` at `now`.
    pub fn from_scan(scan: SkillScan, rules_version: &str, now: DateTime<Utc>) -> Self {
        match scan {
            SkillScan::Done {
                verdict,
                mut findings,
                truncated,
            } => {
                // A stable sort: the scanner's order within a severity.
                findings.sort_by_key(|f| std::cmp::Reverse(severity_rank(&f.severity)));
                let omitted = findings.len().saturating_sub(MAX_STORED_FINDINGS) as u64;
                findings.truncate(MAX_STORED_FINDINGS);
                let findings: Vec<Value> = findings.iter().map(finding_json).collect();
                Self::make(
                    verdict,
                    findings,
                    omitted.saturating_add(truncated),
                    Some(rules_version),
                    Some(now),
                )
            }
            SkillScan::NotScanned(why) => Self::not_scanned(why.message()),
        }
    }

    /// The result shown for a skill that was never scanned (stored before skill verdicts).
    pub fn never_scanned() -> Self {
        Self::not_scanned("The skill was stored before skills were scanned. Scan it again.")
    }

    /// The result of a skill whose content was changed by a write that did not scan it.
    pub fn changed_unscanned() -> Self {
        Self::not_scanned("The skill's content changed without a scan. Scan it again.")
    }

    /// Verdict `warn` with a `scan.incomplete` finding, under no rules version: never `pass`,
    /// always stale.
    fn not_scanned(message: &str) -> Self {
        let finding = json!({
            "rule_id": "scan.incomplete",
            "severity": "medium",
            "title": "Not scanned",
            "message": message,
            "path": null,
            "line": 0,
        });
        Self::make(GuardVerdict::Warn, vec![finding], 0, None, None)
    }

    fn make(
        verdict: GuardVerdict,
        findings: Vec<Value>,
        omitted: u64,
        rules_version: Option<&str>,
        scanned_at: Option<DateTime<Utc>>,
    ) -> Self {
        let mut m = Map::new();
        m.insert("verdict".into(), json!(verdict.as_str()));
        m.insert("findings".into(), Value::Array(findings));
        m.insert("findings_omitted".into(), json!(omitted));
        m.insert("rules_version".into(), json!(rules_version));
        m.insert("scanned_at".into(), json!(scanned_at));
        Self {
            json: Value::Object(m).to_string(),
            rules_version: rules_version.map(str::to_owned),
        }
    }

    /// A result read back from the store (its two columns). `None` when the text is not a
    /// braced object, so a damaged row is an error, never a broken response.
    pub fn from_stored(json: String, rules_version: Option<String>) -> Option<Self> {
        let t = json.trim();
        (t.starts_with('{') && t.ends_with('}') && t.len() > 2).then_some(Self {
            json,
            rules_version,
        })
    }

    /// The stored object's text (without `stale`).
    pub fn as_str(&self) -> &str {
        &self.json
    }

    /// The rules version the verdict was made under; `None` when nothing was scanned.
    pub fn rules_version(&self) -> Option<&str> {
        self.rules_version.as_deref()
    }

    /// Whether the verdict was made under other rules than `current` (or under none).
    pub fn is_stale(&self, current: &str) -> bool {
        self.rules_version.as_deref() != Some(current)
    }

    /// The verdict's JSON as shown: the stored object with `stale` against `current`.
    pub fn write_shown(&self, out: &mut Vec<u8>, current: &str) {
        let text = self.json.trim_end();
        // Always a braced object (`make`, `from_stored`): the members, then `stale`.
        out.extend_from_slice(text.strip_suffix('}').unwrap_or(text).as_bytes());
        out.extend_from_slice(if self.is_stale(current) {
            b",\"stale\":true}"
        } else {
            b",\"stale\":false}"
        });
    }

    /// The stored verdict (`pass`, `warn`, `fail`), for activity lines and tests.
    pub fn verdict(&self) -> Option<String> {
        serde_json::from_str::<Value>(&self.json)
            .ok()?
            .get("verdict")?
            .as_str()
            .map(str::to_owned)
    }
}

fn severity_rank(severity: &str) -> u8 {
    match severity {
        "critical" => 4,
        "high" => 3,
        "medium" => 2,
        "low" => 1,
        _ => 0,
    }
}

/// At most `max` characters of `s`.
fn bounded(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_owned(),
    }
}

fn finding_json(f: &FindingSummary) -> Value {
    json!({
        "rule_id": bounded(&f.rule_id, 100),
        "severity": f.severity,
        "title": bounded(&f.title, 200),
        "message": bounded(&f.message, MAX_MESSAGE_CHARS),
        "path": f.path.as_deref().map(|p| bounded(p, 200)),
        "line": f.line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(g: &SkillGuard, current: &str) -> Value {
        let mut out = Vec::new();
        g.write_shown(&mut out, current);
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn a_scan_not_done_says_why_and_is_never_pass_nor_current() {
        let mut messages = std::collections::BTreeSet::new();
        for why in [
            NotScanned::Busy,
            NotScanned::OverShare,
            NotScanned::Timeout,
            NotScanned::Failed,
        ] {
            let g = SkillGuard::from_scan(SkillScan::NotScanned(why), "v1", Utc::now());
            let v = shown(&g, "v1");
            assert_eq!(v["verdict"], "warn");
            assert_eq!(v["stale"], true);
            assert_eq!(g.rules_version(), None);
            assert_eq!(g.verdict().as_deref(), Some("warn"));
            let finding = &v["findings"][0];
            assert_eq!(finding["rule_id"], "scan.incomplete");
            let message = finding["message"].as_str().unwrap();
            assert!(
                message.starts_with("The skill was not scanned"),
                "{message}"
            );
            assert!(
                messages.insert(message.to_owned()),
                "{why:?} says what another says"
            );
        }
    }

    #[test]
    fn findings_are_kept_most_severe_first_bounded_and_counted() {
        let finding = |severity: &str, n: usize| FindingSummary {
            rule_id: format!("r.{severity}.{n}"),
            severity: severity.into(),
            title: "t".into(),
            message: "m".repeat(n),
            path: Some("p".repeat(n)),
            line: 1,
        };
        let severities = ["info", "low", "medium", "high", "critical", "unknown"];
        let mut findings: Vec<_> = severities.iter().map(|s| finding(s, 1)).collect();
        findings.push(finding("high", 2));
        let g = SkillGuard::from_scan(
            SkillScan::Done {
                verdict: GuardVerdict::Fail,
                findings,
                truncated: 3,
            },
            "v",
            Utc::now(),
        );
        let v = shown(&g, "v");
        let kept: Vec<&str> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule_id"].as_str().unwrap())
            .collect();
        // Stable within a severity; `info` and unknown severities last, in the scanner's order.
        assert_eq!(
            kept,
            [
                "r.critical.1",
                "r.high.1",
                "r.high.2",
                "r.medium.1",
                "r.low.1",
                "r.info.1",
                "r.unknown.1"
            ]
        );
        assert_eq!(v["findings_omitted"], 3);
        // More than the stored maximum: the rest are counted, long texts are cut with an ellipsis.
        let many: Vec<_> = (0..MAX_STORED_FINDINGS + 5)
            .map(|i| finding(if i == 0 { "low" } else { "high" }, 400 + i))
            .collect();
        let g = SkillGuard::from_scan(
            SkillScan::Done {
                verdict: GuardVerdict::Warn,
                findings: many,
                truncated: 1,
            },
            "v",
            Utc::now(),
        );
        let v = shown(&g, "v");
        let kept = v["findings"].as_array().unwrap();
        assert_eq!(kept.len(), MAX_STORED_FINDINGS);
        assert_eq!(v["findings_omitted"], 6);
        assert!(
            kept.iter().all(|f| f["severity"] == "high"),
            "the low one is left out"
        );
        let message = kept[0]["message"].as_str().unwrap();
        assert_eq!(message, format!("{}…", "m".repeat(MAX_MESSAGE_CHARS)));
        let path = kept[0]["path"].as_str().unwrap();
        assert_eq!(path, format!("{}…", "p".repeat(200)));
        let short = SkillGuard::from_scan(
            SkillScan::Done {
                verdict: GuardVerdict::Warn,
                findings: vec![finding("low", 5)],
                truncated: 0,
            },
            "v",
            Utc::now(),
        );
        assert_eq!(shown(&short, "v")["findings"][0]["message"], "mmmmm");
    }

    #[test]
    fn a_stored_verdict_is_read_back_only_as_a_braced_object() {
        let g = SkillGuard::from_scan(
            SkillScan::Done {
                verdict: GuardVerdict::Fail,
                findings: Vec::new(),
                truncated: 0,
            },
            "v2",
            Utc::now(),
        );
        assert_eq!(g.rules_version(), Some("v2"));
        assert_eq!(g.verdict().as_deref(), Some("fail"));
        let text = g.as_str().to_owned();
        assert!(
            text.starts_with('{') && text.contains("\"verdict\":\"fail\""),
            "{text}"
        );
        let back = SkillGuard::from_stored(text.clone(), Some("v2".into())).unwrap();
        assert_eq!(back, g);
        assert_eq!(back.as_str(), text);
        assert!(!back.is_stale("v2"));
        assert!(back.is_stale("v3"));
        let spaced = SkillGuard::from_stored(format!(" {text}\n"), None).unwrap();
        assert_eq!(spaced.rules_version(), None);
        assert_eq!(spaced.verdict().as_deref(), Some("fail"));
        for bad in [
            "",
            "{}",
            "{",
            "}",
            "[1]",
            "x}",
            "{x",
            "null",
            "{\"a\":1}x",
            "x{\"a\":1}",
        ] {
            assert!(
                SkillGuard::from_stored(bad.into(), Some("v2".into())).is_none(),
                "{bad:?}"
            );
        }
        assert!(SkillGuard::from_stored("{\"a\":1}".into(), None).is_some());
        assert_eq!(
            SkillGuard::from_stored("{\"a\":1}".into(), None)
                .unwrap()
                .verdict(),
            None
        );
    }
}
