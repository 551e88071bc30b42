//! The harness of the false-positive case files (`public_fp_cases.txt`,
//! `code/cap_fp_cases.txt`): a case is an honest skill folder that must stay below `medium`
//! (a finding that context lowered must say why) and the malicious folders of the same thing,
//! each of which must be flagged.

use crate::{Finding, ScanResult, Scanner, Severity, TargetInfo};

pub(crate) fn scanner() -> Scanner {
    Scanner::new().unwrap()
}

/// The findings of a skill folder given as (path, text) pairs, combinations included.
pub(crate) fn scan(s: &Scanner, files: &[(&str, &str)]) -> Vec<Finding> {
    let report = s.scan_files(files.iter().map(|(p, t)| (*p, t.as_bytes())));
    ScanResult::new(TargetInfo::Content, report).findings
}

fn worst(findings: &[Finding]) -> Option<Severity> {
    findings.iter().map(|f| f.severity).max()
}

/// No finding of medium or higher, and every finding below its rule's severity says why.
pub(crate) fn assert_honest(s: &Scanner, name: &str, files: &[(&str, &str)]) {
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
pub(crate) fn assert_flagged(s: &Scanner, name: &str, files: &[(&str, &str)]) {
    let f = scan(s, files);
    assert!(
        worst(&f).is_some_and(|w| w >= Severity::Medium),
        "{name}: malicious form not flagged: {files:?}: {f:?}"
    );
}

/// Wraps a body in a SKILL.md with a name and a description.
pub(crate) fn skill(body: &str) -> String {
    format!("---\nname: sample-skill\ndescription: A sample skill for the tests.\n---\n\n{body}")
}

/// A file of a case: its path and text.
pub(crate) type File = (String, String);

/// One general cause of a false positive: the honest skill folder stays below `medium` (a
/// lowered finding says why), and each malicious folder of the same thing is flagged.
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) honest: Vec<File>,
    pub(crate) flagged: Vec<Vec<File>>,
}

/// The cases of the case file `source` whose text is `cases` (written for this project, not
/// copied from the public folders): `@@@ case NAME` starts a case, `@@@ GROUP md` or
/// `@@@ GROUP file PATH` a file of one of its folders, and the lines up to the next `@@@ ` are
/// the file's text. GROUP is `honest` or `flaggedN` (the Nth malicious folder); an `md` file is
/// a SKILL.md body, given a name and a description (see [`skill`]).
pub(crate) fn cases(source: &str, cases: &str) -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();
    // What stands before the first `@@@ ` is the file's preamble.
    for chunk in cases.split("@@@ ").skip(1) {
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
            _ => panic!("{source}: bad header {head:?}"),
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

pub(crate) fn as_refs(files: &[File]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect()
}

/// Every case of the case file `source` whose text is `text` (at least `at_least` of them):
/// its honest folder stays below `medium` (a lowered finding says why) and each of its
/// malicious folders is flagged.
pub(crate) fn check_cases(source: &str, text: &str, at_least: usize) {
    let s = scanner();
    let all = cases(source, text);
    assert!(all.len() >= at_least, "every case of {source} is read");
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
