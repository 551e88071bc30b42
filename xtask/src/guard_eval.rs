//! `cargo xtask guard-eval [DIR]`: runs the Guard's evaluation, which lives in gc-guard
//! (`gc_guard::eval`, binary `guard-eval`), in release mode, so that xtask stays light and does
//! not link the scanner. It evaluates DIR (the development corpus, `../shared/guard-corpus` by
//! default), the Guard's own development set `crates/guard/eval/dev` and its held-out sets
//! `crates/guard/eval/heldout` and `crates/guard/eval/heldout2` (figures only), the capability
//! cases `crates/guard/tests/cases` (per family; every attack flagged), the held-out round
//! `crates/guard/tests/cases/h9` (figures only), then the throughput
//! on the 10 MiB benchmark, and prints every issue-13 target as met or missed.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Runs `cargo run --release -p gc-guard --bin guard-eval -- DIR dev heldout:heldout
/// heldout:heldout2 cases heldout:cases/h9`.
pub fn run(dir: &Path) -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask lives in the workspace")?;
    let own = root.join("crates/guard/eval");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "run",
        "--release",
        "-p",
        "gc-guard",
        "--bin",
        "guard-eval",
        "--",
    ])
    .arg(dir)
    .arg(own.join("dev"))
    .arg(format!("heldout:{}", own.join("heldout").display()))
    .arg(format!("heldout:{}", own.join("heldout2").display()))
    .arg(root.join("crates/guard/tests/cases"))
    .arg(format!(
        "heldout:{}",
        root.join("crates/guard/tests/cases/h9").display()
    ));
    eprintln!("xtask: running {cmd:?}");
    let status = cmd.status().with_context(|| format!("{cmd:?}"))?;
    if !status.success() {
        bail!("guard-eval failed: {status}");
    }
    Ok(())
}
