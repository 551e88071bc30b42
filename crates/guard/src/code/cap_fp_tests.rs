//! False positives of the capability inventory on public honest skill folders (issue 29,
//! held-out batch 3): a `case` arm label and a path a script only reads taken for agent-settings
//! changes, a multi-line string's continuation taken for a command, an OS package named `wget`
//! taken for a download, a credential file in a unit folder taken for a unit, and a Run key
//! listed taken for an autorun. One case per general cause: the honest form stays below
//! `medium` and the attack look-alikes of the same thing are flagged. Written for this project,
//! not copied from the public folders.

use crate::case_file::{as_refs, cases, check_cases, scan, scanner};
use crate::{Finding, Severity};

#[test]
fn capability_look_alikes_stay_below_medium_and_attacks_are_flagged() {
    check_cases("cap_fp_cases.txt", include_str!("cap_fp_cases.txt"), 6);
}

/// A Run key that is only listed is lowered with the reason, not the generic "context".
#[test]
fn a_listed_run_key_says_why_it_is_low() {
    let s = scanner();
    let case = cases("cap_fp_cases.txt", include_str!("cap_fp_cases.txt"))
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
