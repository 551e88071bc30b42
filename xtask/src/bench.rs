//! `cargo xtask bench`: see `docs/benchmarks.md`.

use std::path::Path;

pub fn run(_root: &Path, _args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("benchmarks are not wired yet")
}
