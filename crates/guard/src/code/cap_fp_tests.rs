//! False positives of the capability inventory on public honest skill folders (issue 29,
//! held-out batch 3): a `case` arm label and a path a script only reads taken for agent-settings
//! changes, a multi-line string's continuation taken for a command, an OS package named `wget`
//! taken for a download, a credential file in a unit folder taken for a unit, and a Run key
//! listed taken for an autorun. One case per general cause: the honest form stays below
//! `medium` and the attack look-alikes of the same thing are flagged. Written for this project,
//! not copied from the public folders.

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

/// The cases of `cap_fp_cases.txt` (written for this project, not copied from the public
/// folders): `@@@ case NAME` starts a case, `@@@ GROUP md` or
/// `@@@ GROUP file PATH` a file of one of its folders, and the lines up to the next `@@@ ` are
/// the file's text. GROUP is `honest` or `flaggedN` (the Nth malicious folder); an `md` file is
/// a SKILL.md body, given a name and a description (see [`skill`]).
fn cases() -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();
    // What stands before the first `@@@ ` is the file's preamble.
    for chunk in include_str!("cap_fp_cases.txt").split("@@@ ").skip(1) {
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
            _ => panic!("cap_fp_cases.txt: bad header {head:?}"),
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
fn capability_look_alikes_stay_below_medium_and_attacks_are_flagged() {
    let s = scanner();
    let all = cases();
    assert!(all.len() >= 6, "every case of cap_fp_cases.txt is read");
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

/// A Run key that is only listed is lowered with the reason, not the generic "context".
#[test]
fn a_listed_run_key_says_why_it_is_low() {
    let s = scanner();
    let case = cases()
        .into_iter()
        .find(|c| c.name == "a_run_key_listed_is_not_an_autorun")
        .expect("the Run-key case is in cap_fp_cases.txt");
    let findings = scan(&s, &as_refs(&case.honest));
    let autorun: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.rule_id == "persist.windows-autorun")
        .collect();
    assert!(
        !autorun.is_empty(),
        "the listed Run key is still reported: {findings:?}"
    );
    for f in autorun {
        assert!(
            f.severity < Severity::Medium && f.message.contains("only named or read"),
            "{f:?}"
        );
    }
}
