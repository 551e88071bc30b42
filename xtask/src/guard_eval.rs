//! `cargo xtask guard-eval [DIR]`: runs the Guard's corpus evaluation, which lives in gc-guard
//! (`gc_guard::eval`, binary `guard-eval`), in release mode, so that xtask stays light and does
//! not link the scanner.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Runs `cargo run --release -p gc-guard --bin guard-eval -- DIR`.
pub fn run(dir: &Path) -> Result<()> {
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
    .arg(dir);
    eprintln!("xtask: running {cmd:?}");
    let status = cmd.status().with_context(|| format!("{cmd:?}"))?;
    if !status.success() {
        bail!("guard-eval failed: {status}");
    }
    Ok(())
}
