//! `cargo xtask bench`: the Guard's criterion benchmarks, then the HTTP benchmarks of
//! `gc-bench` against the release `gc-server`. Figures go to stdout; `docs/benchmarks.md`
//! records them with this command.

use std::path::Path;

use crate::{cargo, run as exec};

pub fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let only_http = args.iter().any(|a| a == "--http");
    if !only_http {
        let mut guard = cargo();
        guard.args(["bench", "-p", "gc-guard"]);
        exec(guard)?;
    }
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "-p",
        "gc-server",
        "-p",
        "gc-tests",
        "--bin",
        "gc-server",
        "--bin",
        "gc-bench",
    ]);
    exec(build)?;
    let mut bench = std::process::Command::new(root.join("target/release/gc-bench"));
    bench.arg(root.join("target/release/gc-server"));
    bench.args(args.iter().filter(|a| *a != "--http"));
    exec(bench)
}
