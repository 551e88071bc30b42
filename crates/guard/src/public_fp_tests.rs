//! False positives found on public honest skill folders (issue 29's "at most 1 % of public
//! honest skill folders flagged"), one test per general cause: the honest form stays below
//! `medium`, the malicious form of the same thing is still `medium` or higher, and a finding
//! that context lowered says why. The examples are written for this project, not copied from
//! the public folders.

use crate::{Finding, ScanResult, Scanner, Severity, TargetInfo};

fn scanner() -> Scanner {
    Scanner::new().unwrap()
}

/// The findings of a skill folder given as (path, text) pairs, combinations included.
fn scan(s: &Scanner, files: &[(&str, &str)]) -> Vec<Finding> {
    let report = s.scan_files(files.iter().map(|(p, t)| (*p, t.as_bytes())));
    ScanResult::new(TargetInfo::Content, report).findings
}

fn worst(findings: &[Finding]) -> Option<Severity> {
    findings.iter().map(|f| f.severity).max()
}

/// No finding of medium or higher, and every finding below its rule's severity says why.
fn assert_honest(s: &Scanner, name: &str, files: &[(&str, &str)]) {
    let f = scan(s, files);
    assert!(
        worst(&f).is_none_or(|w| w < Severity::Medium),
        "{name}: honest form flagged: {files:?}: {f:?}"
    );
    for finding in &f {
        let Some(rule) = crate::rules::RULES.iter().find(|r| r.id == finding.rule_id) else {
            continue;
        };
        if finding.severity < rule.severity {
            assert!(
                finding.message.contains("instead of") || finding.message.contains("Lowered"),
                "{name}: lowered without a reason: {finding:?}"
            );
        }
    }
}

/// A finding of medium or higher.
fn assert_flagged(s: &Scanner, name: &str, files: &[(&str, &str)]) {
    let f = scan(s, files);
    assert!(
        worst(&f).is_some_and(|w| w >= Severity::Medium),
        "{name}: malicious form not flagged: {files:?}: {f:?}"
    );
}

/// Wraps a body in a SKILL.md with a name and a description.
fn skill(body: &str) -> String {
    format!("---\nname: sample-skill\ndescription: A sample skill for the tests.\n---\n\n{body}")
}

/// A file of a case: its path and text.
type File = (String, String);

/// One general cause of a false positive: the honest skill folder stays below `medium` (a
/// lowered finding says why), and each malicious folder of the same thing is flagged.
struct Case {
    name: String,
    honest: Vec<File>,
    flagged: Vec<Vec<File>>,
}

/// The cases of `public_fp_cases.txt` (written for this project, not copied from the public
/// folders): `@@@ case NAME` starts a case, `@@@ GROUP md` or
/// `@@@ GROUP file PATH` a file of one of its folders, and the lines up to the next `@@@ ` are
/// the file's text. GROUP is `honest` or `flaggedN` (the Nth malicious folder); an `md` file is
/// a SKILL.md body, given a name and a description (see [`skill`]).
fn cases() -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();
    // What stands before the first `@@@ ` is the file's preamble.
    for chunk in include_str!("public_fp_cases.txt").split("@@@ ").skip(1) {
        let (head, text) = chunk.split_once('\n').unwrap_or((chunk, ""));
        let words: Vec<&str> = head.split_whitespace().collect();
        if let ["case", name] = words.as_slice() {
            out.push(Case {
                name: (*name).to_string(),
                honest: Vec::new(),
                flagged: Vec::new(),
            });
            continue;
        }
        let case = out.last_mut().expect("a file comes after its case");
        let file = match words.as_slice() {
            [_, "md"] => ("SKILL.md".to_string(), skill(text)),
            [_, "file", path] => ((*path).to_string(), text.to_string()),
            _ => panic!("public_fp_cases.txt: bad header {head:?}"),
        };
        match words.first().copied() {
            Some("honest") => case.honest.push(file),
            group => {
                let n: usize = group
                    .and_then(|g| g.strip_prefix("flagged"))
                    .and_then(|n| n.parse().ok())
                    .expect("a group is honest or flaggedN");
                if case.flagged.len() < n {
                    case.flagged.resize_with(n, Vec::new);
                }
                case.flagged
                    .get_mut(n - 1)
                    .expect("resized to n")
                    .push(file);
            }
        }
    }
    out
}

fn as_refs(files: &[File]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect()
}

#[test]
fn honest_forms_stay_below_medium_and_malicious_forms_are_flagged() {
    let s = scanner();
    let all = cases();
    assert!(all.len() >= 16, "every case of public_fp_cases.txt is read");
    for c in all {
        assert!(
            !c.honest.is_empty() && !c.flagged.is_empty(),
            "{}: a case has an honest folder and a flagged one",
            c.name
        );
        assert_honest(&s, &c.name, &as_refs(&c.honest));
        for files in &c.flagged {
            assert_flagged(&s, &c.name, &as_refs(files));
        }
    }
}

#[test]
fn a_download_tool_grant_is_low_and_an_unrestricted_shell_is_not() {
    let s = scanner();
    let honest = "---\nname: api-probe\ndescription: Probes an API the user owns.\nallowed-tools: Bash(curl:*) Bash(jq:*) Read\n---\n# API probe\n";
    assert_honest(
        &s,
        "a_download_tool_grant_is_low_and_an_unrestricted_shell_is_not",
        &[("SKILL.md", honest)],
    );
    let f = scan(&s, &[("SKILL.md", honest)]);
    assert!(
        f.iter()
            .any(|f| f.rule_id == "skill.allowed-tools-broad" && f.severity == Severity::Low),
        "the grant is still shown: {f:?}"
    );
    for broad in ["Bash(*)", "Bash(sudo:*)", "Bash(rm:*)", "\"*\""] {
        let attack = format!(
            "---\nname: api-probe\ndescription: Probes an API the user owns.\nallowed-tools: {broad} Read\n---\n# API probe\n"
        );
        assert_flagged(
            &s,
            "a_download_tool_grant_is_low_and_an_unrestricted_shell_is_not",
            &[("SKILL.md", &attack)],
        );
    }
}
