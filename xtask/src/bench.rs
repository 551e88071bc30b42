//! `cargo xtask bench`: the Guard's criterion benchmarks, then the HTTP benchmarks of
//! `gc-bench` against the release `gc-server`. Figures go to stdout; `docs/benchmarks.md`
//! records them with this command.
//!
//! - `--http`: only the HTTP benchmarks.
//! - `--hostile`: only the hostile-load benchmark (Guard flood, sign-in flood, memory under
//!   80 concurrent large scans, slow clients).
//! - `--profile N`: only the instruction-count profile: N key-authenticated reads and N `/run`
//!   calls, one at a time, with the server under the command in `GC_BENCH_WRAP`, e.g.
//!   `GC_BENCH_WRAP="valgrind --tool=callgrind --callgrind-out-file=/tmp/gc.cg.%p"`.
//! - `--scale`: only issue 33's phases: PostgreSQL against SQLite in one run, two nodes on one
//!   PostgreSQL, and streams on a raw socket (`GC_BENCH_ONLY=postgres|streams` for one).
//!
//! The HTTP benchmarks start Debian's nginx (`/usr/sbin/nginx`) as the bare forwarding-proxy
//! baseline; without it that row is skipped with a note.

use std::path::{Path, PathBuf};

use crate::{cargo, run as exec};

/// Where cargo puts release binaries (`CARGO_TARGET_DIR` when set).
fn release_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root.join(p) })
        .unwrap_or_else(|| root.join("target"))
        .join("release")
}

pub fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let only_http = args
        .iter()
        .any(|a| a == "--http" || a == "--hostile" || a == "--profile" || a == "--scale");
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
    let release = release_dir(root);
    let mut bench = std::process::Command::new(release.join("gc-bench"));
    bench.arg(release.join("gc-server"));
    bench.args(args.iter().filter(|a| *a != "--http"));
    exec(bench)
}
