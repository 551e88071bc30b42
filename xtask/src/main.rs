//! `cargo xtask`: the project's automation, in Rust.
//!
//! - `test`: formatting check, clippy with `-D warnings`, then every test on SQLite and
//!   PostgreSQL (the PostgreSQL leg is skipped, loudly, when no server answers, unless
//!   `GC_REQUIRE_POSTGRES=1`).
//! - `lint`: the first two steps only.
//! - `openapi`: writes `docs/openapi.json` from `gc-server openapi` (xtask links no service
//!   crate: it stays quick to build).
//! - `api-check`: the running server against its OpenAPI document (openapi-spec-validator and
//!   Schemathesis, installed into `target/api-check-venv` when missing); see `api_check.rs`.
//! - `bench`: the benchmarks (see `docs/benchmarks.md`).
//! - `guard-eval DIR`: the Guard's recall and false positives on a labelled corpus.
//! - `mutants`: cargo-mutants over the access-deciding code (installed if missing); see
//!   `docs/quality.md`.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};

mod api_check;
mod bench;
mod guard_eval;
mod mutants;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = root();
    std::env::set_current_dir(&root)?;
    match args.first().map(String::as_str) {
        Some("test") => {
            lint()?;
            test(&args[1..])
        }
        Some("lint") => lint(),
        Some("openapi") => openapi(&root),
        Some("api-check") => api_check::run_check(&root),
        Some("bench") => bench::run(&root, &args[1..]),
        Some("mutants") => mutants::run(&args[1..]),
        Some("guard-eval") => {
            let dir = args
                .get(1)
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("../shared/guard-corpus"));
            guard_eval::run(&dir)
        }
        _ => {
            eprintln!(
                "usage: cargo xtask <test|lint|openapi|api-check|bench|mutants|guard-eval DIR>"
            );
            bail!("unknown command")
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

pub(crate) fn run(mut cmd: Command) -> anyhow::Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd.status().with_context(|| format!("{cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn lint() -> anyhow::Result<()> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run(fmt)?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy)
}

/// `host:port` of the test PostgreSQL URL.
fn postgres_address() -> String {
    let url = std::env::var("GC_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let rest = url.split("://").nth(1).unwrap_or_default();
    let host_port = rest.split('/').next().unwrap_or_default();
    let host_port = host_port.rsplit('@').next().unwrap_or_default();
    if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    }
}

fn postgres_answers() -> bool {
    postgres_address()
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .is_some_and(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok())
}

fn test(extra: &[String]) -> anyhow::Result<()> {
    let required = std::env::var("GC_REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
    if postgres_answers() {
        eprintln!(
            "xtask: PostgreSQL answers at {}: running the PostgreSQL leg",
            postgres_address()
        );
    } else if required {
        bail!(
            "GC_REQUIRE_POSTGRES=1 but PostgreSQL does not answer at {}",
            postgres_address()
        );
    } else {
        eprintln!(
            "xtask: WARNING: PostgreSQL does not answer at {}: the PostgreSQL leg of every test is SKIPPED \
             (set GC_TEST_POSTGRES_URL, or GC_REQUIRE_POSTGRES=1 to make this a failure)",
            postgres_address()
        );
    }
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--all-targets"])
        .args(extra);
    run(cmd)?;
    let mut doc = cargo();
    doc.args(["test", "--workspace", "--doc"]);
    run(doc)
}

/// Writes `docs/openapi.json` from `gc-server openapi`, so that xtask itself links none of the
/// service's crates.
fn openapi(root: &Path) -> anyhow::Result<()> {
    let mut cmd = cargo();
    cmd.args(["run", "--quiet", "-p", "gc-server", "--", "openapi"])
        // The document must not depend on the caller's configuration.
        .env_remove("GC_LOG")
        .current_dir(root);
    eprintln!("xtask: running {cmd:?}");
    let out = cmd.output().with_context(|| format!("{cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let document = String::from_utf8(out.stdout).context("the document is not UTF-8")?;
    let parsed: serde_json::Value =
        serde_json::from_str(&document).context("gc-server openapi printed no JSON")?;
    if parsed.get("openapi").is_none() {
        bail!("gc-server openapi printed JSON without an `openapi` field");
    }
    let path = root.join("docs/openapi.json");
    std::fs::create_dir_all(root.join("docs"))?;
    std::fs::write(&path, document.trim_end().to_owned() + "\n")?;
    eprintln!("xtask: wrote {}", path.display());
    Ok(())
}
