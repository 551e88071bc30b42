//! Context lowers severity, never hides: a detection inside a fenced example of a Markdown
//! document about security (teaching material that quotes vulnerable code or attack text) is
//! kept as `low`, with the reason appended to its message.
//!
//! A document is about security when it uses at least two distinct words of the security
//! vocabulary; a fence is an example when its info string, its first line or the four
//! non-empty lines before it carry an example marker ("vulnerable", "insecure", "bad",
//! "avoid", "attack", "❌" ...). Secrets, hidden text, look-alikes and skill metadata are never
//! lowered: they are real wherever they appear.

use crate::model::{Category, Severity};
use crate::rules::RULES;
use crate::scanner::Hit;

/// Words that mark a document as being about security.
const SECURITY_VOCABULARY: &[&str] = &[
    "security",
    "vulnerab",
    "exploit",
    "attack",
    "malicious",
    "injection",
    "threat",
    "pentest",
    "penetration test",
    "owasp",
    "cve-",
    "xss",
    "csrf",
    "ssrf",
    "sanitiz",
    "hardening",
    "secure coding",
    "red team",
    "audit",
    "cwe-",
    "untrusted",
    "jailbreak",
    "malware",
    "phishing",
    "adversarial",
    "guardrail",
    "incident",
    "forensic",
];

/// Words that mark a fence as an example of what not to do (or of what to detect).
const EXAMPLE_MARKERS: &[&str] = &[
    "vulnerable",
    "insecure",
    "unsafe",
    "bad",
    "avoid",
    "don't",
    "do not",
    "never",
    "wrong",
    "anti-pattern",
    "antipattern",
    "attack",
    "malicious",
    "payload",
    "exploit",
    "dangerous",
    "detect",
    "red flag",
    "❌",
    "⚠",
    "before:",
    "flagged",
    "suspicious",
    "injection",
    "example of",
    "e.g.",
    "for example",
    "such as",
    "noncompliant",
    "non-compliant",
    "incorrect",
];

pub(crate) fn is_markdown(path: Option<&str>) -> bool {
    path.is_some_and(|p| {
        let p = p.to_ascii_lowercase();
        p.ends_with(".md") || p.ends_with(".mdx") || p.ends_with(".markdown")
    })
}

fn about_security(text: &str) -> bool {
    let lower = text.to_lowercase();
    SECURITY_VOCABULARY
        .iter()
        .filter(|w| lower.contains(*w))
        .take(2)
        .count()
        >= 2
}

/// A Markdown list item (`- x`, `* x`, `+ x`, `1. x`, `2) x`).
fn is_list_item(t: &str) -> bool {
    if t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ") {
        return true;
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && t.get(digits..)
            .is_some_and(|r| r.starts_with(". ") || r.starts_with(") "))
}

/// Blocks that are examples: (start, end, marker, kind) in byte offsets of `text`. A fenced
/// block is one when its info string, first comment line or the four lines before carry an
/// example marker; a list is one when the line that introduces it ends with `:` and carries a
/// marker ("Flag a document when it contains patterns such as:").
fn example_blocks(text: &str) -> Vec<(usize, usize, &'static str, &'static str)> {
    let mut out = Vec::new();
    let mut recent: Vec<&str> = Vec::new();
    let mut open: Option<(usize, String, Option<&'static str>, bool)> = None;
    // An open list of examples: (start, end so far, marker).
    let mut list: Option<(usize, usize, &'static str)> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let t = line.trim();
        let fence = t.starts_with("```") || t.starts_with("~~~");
        if open.is_none() {
            if is_list_item(t) {
                if let Some(l) = list.as_mut() {
                    l.1 = pos;
                } else if let Some(lead) = recent.last().filter(|l| l.ends_with(':')) {
                    let lead = lead.to_lowercase();
                    if let Some(m) = EXAMPLE_MARKERS.iter().copied().find(|m| lead.contains(m)) {
                        list = Some((start, pos, m));
                    }
                }
            } else if !t.is_empty() {
                if let Some((s, e, m)) = list.take() {
                    out.push((s, e, m, "list of examples"));
                }
            }
        }
        match &mut open {
            None if fence => {
                let mut label = t.to_lowercase();
                for r in &recent {
                    label.push('\n');
                    label.push_str(&r.to_lowercase());
                }
                let marker = EXAMPLE_MARKERS.iter().copied().find(|m| label.contains(m));
                let token: String = t.chars().take_while(|&c| c == '`' || c == '~').collect();
                open = Some((start, token, marker, true));
            }
            None => {
                if !t.is_empty() {
                    recent.push(t);
                    if recent.len() > 4 {
                        recent.remove(0);
                    }
                }
            }
            Some((s, token, marker, first)) => {
                if fence
                    && t.starts_with(token.as_str())
                    && t.trim_start_matches(['`', '~']).is_empty()
                {
                    if let Some(m) = *marker {
                        out.push((*s, pos, m, "fenced example"));
                    }
                    open = None;
                    recent.clear();
                } else if *first {
                    *first = false;
                    let lt = t.to_lowercase();
                    if marker.is_none() && (lt.starts_with('#') || lt.starts_with("//")) {
                        *marker = EXAMPLE_MARKERS.iter().copied().find(|m| lt.contains(m));
                    }
                }
            }
        }
    }
    if let Some((s, e, m)) = list {
        out.push((s, e, m, "list of examples"));
    }
    out
}

/// Lowers detections inside fenced examples of security documents to `low`.
pub(crate) fn adjust(path: Option<&str>, text: &str, hits: &mut [Hit]) {
    if !is_markdown(path) {
        return;
    }
    let lowerable = |rule: usize| {
        RULES.get(rule).is_some_and(|r| {
            !matches!(
                r.category,
                Category::Secret | Category::HiddenText | Category::Homoglyph | Category::Skill
            )
        })
    };
    if !hits
        .iter()
        .any(|h| h.severity > Severity::Low && lowerable(h.rule))
    {
        return;
    }
    if !about_security(text) {
        return;
    }
    let blocks = example_blocks(text);
    for h in hits.iter_mut() {
        if h.severity <= Severity::Low || !lowerable(h.rule) {
            continue;
        }
        let Some((_, _, marker, kind)) = blocks
            .iter()
            .find(|(s, e, _, _)| h.start >= *s && h.start < *e)
        else {
            continue;
        };
        let base = h
            .message
            .take()
            .or_else(|| RULES.get(h.rule).map(|r| r.description.to_string()))
            .unwrap_or_default();
        h.message = Some(format!(
            "{base} Lowered from {} to low: inside a {kind} (\"{marker}\") of a document about security.",
            h.severity
        ));
        h.severity = Severity::Low;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_example_fences() {
        let text = "# Security review\n\nVulnerable example:\n\n```python\neval(x)\n```\n\nFixed:\n```python\nast.literal_eval(x)\n```\n";
        let f = example_blocks(text);
        assert_eq!(f.len(), 1);
        assert!(text[f[0].0..f[0].1].contains("eval(x)"));
        assert!(about_security(text));
        assert!(!about_security("# Weather\nFetches the forecast."));
    }
}
