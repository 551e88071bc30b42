//! `cargo xtask mutants`: cargo-mutants over the code that decides access, installed with
//! `cargo install cargo-mutants --locked` when missing.
//!
//! Two runs, each with the tests that can catch its mutants:
//! - the domain's access, accounts, admin, gateway (`RunScope`), quota, run (refusal order,
//!   key failover, records), workspace-scope and workspace-service code, and the services
//!   that decide access themselves (`services::{guard_scan, diagnostics, run, skill_scan,
//!   ai_keys}`), tested by `gc-domain`'s unit tests (in-memory fakes of every port);
//! - the HTTP extractors (`crates/http-api/src/extract.rs`), tested by the route × caller
//!   end-to-end test (`tests/tests/access.rs`, which also checks the Bearer scheme, the Origin
//!   of cookie writes, the Shadow header and the recorded client address) on SQLite, and by the
//!   trusted-proxy test in `tests/tests/guard.rs` (the forwarded client address).
//!
//! Results land in `target/mutants/{domain,extractors}/mutants.out`; the figures and every
//! survivor's explanation are in `docs/quality.md`. `--domain` or `--extractors` runs one.

use std::process::Command;

use anyhow::Context;

use crate::{cargo, run as run_cmd};

/// The domain files whose mutants must be caught.
const DOMAIN_FILES: &[&str] = &[
    "crates/domain/src/policy/access.rs",
    "crates/domain/src/services/accounts.rs",
    "crates/domain/src/policy/accounts.rs",
    "crates/domain/src/services/admin.rs",
    // Admin tokens (decision 0036): shape, expiry, audit line, token management by session.
    "crates/domain/src/policy/admin_tokens.rs",
    "crates/domain/src/services/admin_tokens.rs",
    "crates/domain/src/policy/ai_access.rs",
    "crates/domain/src/policy/quota.rs",
    // The leasing quota gate (decision 0046): leases, refills and token reads that speed up the
    // rule in quota.rs must never admit more than it.
    "crates/domain/src/policy/quota/leasing.rs",
    "crates/domain/src/policy/runs.rs",
    // Feature services that decide access themselves (issue 30): who may scan and in whose
    // share, whether a scan is recorded; the admin check before any gateway is probed.
    "crates/domain/src/services/guard_scan.rs",
    "crates/domain/src/services/diagnostics.rs",
    // The run service (decision 0041): authenticate, then every refusal before the upstream
    // (with quota refusals counted), the answer or failure with the quotas that applied, the
    // lease refills started in the background.
    "crates/domain/src/services/run.rs",
    // Skills' Guard verdicts: nothing scanned for a caller who may not write; the retries of
    // an update or re-scan that lost a race.
    "crates/domain/src/services/skill_scan.rs",
    "crates/domain/src/policy/skill_verdicts.rs",
    // Tenant AI keys: the admin check before any probe, the probe-to-status decision (which
    // keys count for AI access), the start-up re-check.
    "crates/domain/src/services/ai_keys.rs",
    "crates/domain/src/model/workspace.rs",
    "crates/domain/src/services/workspace.rs",
    "crates/domain/src/services/api_keys.rs",
];

pub fn run(args: &[String]) -> anyhow::Result<()> {
    ensure_installed()?;
    let only_domain = args.iter().any(|a| a == "--domain");
    let only_extractors = args.iter().any(|a| a == "--extractors");
    let mut failures = Vec::new();
    if !only_extractors {
        let mut cmd = mutants("domain");
        cmd.args(["--package", "gc-domain"]);
        for file in DOMAIN_FILES {
            cmd.args(["--file", file]);
        }
        if let Err(e) = run_cmd(cmd) {
            failures.push(format!("domain: {e}"));
        }
    }
    if !only_domain {
        let mut cmd = mutants("extractors");
        cmd.args([
            "--package",
            "gc-http-api",
            "--file",
            "crates/http-api/src/extract.rs",
            // cargo-mutants 27 runs its baseline with the mutated package's tests, ignoring
            // `--test-package`, so the baseline would look for `--test access` in gc-http-api
            // and fail. The unmutated tree passes this test in `cargo xtask test`.
            "--baseline",
            "skip",
            "--build-timeout",
            "900",
            "--test-package",
            "gc-tests",
            // Build and run only these two test binaries of gc-tests (not all of its tests).
            "--cargo-arg=--test=access",
            "--cargo-arg=--test=guard",
            // A Shadow view's refused run must carry its header (`Caller::authenticated`,
            // since the run service authenticates itself).
            "--cargo-arg=--test=workspace_shadow",
            "--",
            "--",
            "every_route_refuses_every_caller_it_should_sqlite",
            "trusted_proxies_give_the_forwarded_client_ip",
            "an_admin_reads_in_the_shadow_view_and_writes_nothing::sqlite",
        ]);
        if let Err(e) = run_cmd(cmd) {
            failures.push(format!("extractors: {e}"));
        }
    }
    if failures.is_empty() {
        eprintln!("xtask: every mutant was caught (or unviable)");
        Ok(())
    } else {
        anyhow::bail!(
            "mutants survived or the run failed (see target/mutants/*/mutants.out/missed.txt): {}",
            failures.join("; ")
        )
    }
}

/// `cargo mutants` with the settings both runs share.
fn mutants(name: &str) -> Command {
    let out = format!("target/mutants/{name}");
    // cargo-mutants creates `mutants.out` inside, not the directory itself.
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("xtask: cannot create {out}: {e}");
    }
    let mut cmd = cargo();
    cmd.args(["mutants", "--no-shuffle", "--jobs", "1", "--timeout", "300"])
        .args(["--output", &out]);
    cmd
}

fn ensure_installed() -> anyhow::Result<()> {
    let installed = cargo()
        .args(["mutants", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if installed {
        return Ok(());
    }
    eprintln!(
        "xtask: cargo-mutants is missing; installing it (cargo install cargo-mutants --locked)"
    );
    let mut install = cargo();
    install.args(["install", "cargo-mutants", "--locked"]);
    run_cmd(install).context("installing cargo-mutants")
}
