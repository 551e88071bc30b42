//! False positives found on public honest skill folders (issue 29's "at most 1 % of public
//! honest skill folders flagged"), one test per general cause: the honest form stays below
//! `medium`, the malicious form of the same thing is still `medium` or higher, and a finding
//! that context lowered says why. The examples are written for this project, not copied from
//! the public folders.

use crate::case_file::{assert_flagged, assert_honest, check_cases, scan, scanner};
use crate::Severity;

#[test]
fn honest_forms_stay_below_medium_and_malicious_forms_are_flagged() {
    check_cases(
        "public_fp_cases.txt",
        include_str!("public_fp_cases.txt"),
        16,
    );
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
