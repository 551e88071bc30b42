//! `cargo xtask api-check`: tests the running server against its own OpenAPI document.
//!
//! 1. Builds `gc-server` and `gc-api-check-fixture` (debug).
//! 2. Installs `openapi-spec-validator` and Schemathesis into `target/api-check-venv` when
//!    they are missing (pinned versions, Python 3.9 or later).
//! 3. Starts the fixture: the real `gc-server` on a fresh SQLite database, the mock upstream,
//!    a fake GitHub, a tenant with a ready AI key, a member and one key per scope.
//! 4. Validates the served `/api/v1/openapi.json` with `openapi-spec-validator`.
//! 5. Runs Schemathesis (`--checks all`, bounded examples, a fixed seed) as a platform admin's
//!    session, a member's session (with `Origin`), and a key of each scope, then the routes that
//!    end sessions with a session of their own. Any failure (a 5xx, an undocumented status, a
//!    response that breaks its schema, a schema-valid request refused) fails the task.
//!
//! Set `GC_API_CHECK_EXAMPLES` to change the examples per operation (default 8).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use crate::{cargo, run};

const SCHEMATHESIS: &str = "schemathesis==4.32.5";
const SPEC_VALIDATOR: &str = "openapi-spec-validator==0.9.0";
const SEED: &str = "20261121";

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// The virtualenv with the two tools, created when missing.
fn venv(root: &Path) -> anyhow::Result<PathBuf> {
    let dir = root.join("target/api-check-venv");
    let bin = dir.join("bin");
    if bin.join("st").exists() && bin.join("openapi-spec-validator").exists() {
        return Ok(bin);
    }
    let mut create = Command::new("python3");
    create.args(["-m", "venv"]).arg(&dir);
    run(create)?;
    let mut pip = Command::new(bin.join("pip"));
    pip.args(["install", "--quiet", SCHEMATHESIS, SPEC_VALIDATOR]);
    run(pip)?;
    Ok(bin)
}

/// The schemathesis configuration: the one refusal of schema-valid data the document states
/// but a generator cannot avoid (a wrong `current_password` is 422).
const CONFIG: &str = r#"
[[operations]]
include-path = "/api/v1/auth/change-password"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429", "5xx"]
"#;

pub fn run_check(root: &Path) -> anyhow::Result<()> {
    let mut build = cargo();
    build.args([
        "build",
        "-p",
        "gc-server",
        "-p",
        "gc-tests",
        "--bin",
        "gc-server",
        "--bin",
        "gc-api-check-fixture",
    ]);
    run(build)?;
    let bins = target_dir(root).join("debug");
    let tools = venv(root)?;
    let work = root.join("target/api-check");
    std::fs::create_dir_all(&work)?;
    let config = work.join("schemathesis.toml");
    std::fs::write(&config, CONFIG)?;

    eprintln!("xtask: starting the api-check fixture");
    let mut fixture = Command::new(bins.join("gc-api-check-fixture"))
        .arg(bins.join("gc-server"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("gc-api-check-fixture")?;
    let line = {
        let stdout = fixture.stdout.take().context("fixture stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        line
    };
    let result = check(&tools, &config, &line);
    // Closing its standard input stops the fixture and its server.
    drop(fixture.stdin.take());
    let _ = fixture.wait();
    result
}

fn check(tools: &Path, config: &Path, line: &str) -> anyhow::Result<()> {
    let world: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("fixture said {line:?}"))?;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let base = text(&world["base"]);
    let origin = text(&world["origin"]);
    let schema = format!("{base}/api/v1/openapi.json");

    let mut validator = Command::new(tools.join("openapi-spec-validator"));
    validator.arg(&schema);
    run(validator)?;

    let examples = std::env::var("GC_API_CHECK_EXAMPLES").unwrap_or_else(|_| "8".into());
    let session_enders = "^/api/v1/auth/(signout|change-password|sessions)$";
    let st = |label: &str, headers: &[String], include: &str, exclude: Option<&str>| {
        eprintln!("xtask: schemathesis as {label}");
        let mut cmd = Command::new(tools.join("st"));
        cmd.arg("--config-file").arg(config).args([
            "run",
            &schema,
            "--checks",
            "all",
            "--max-examples",
            &examples,
            "--seed",
            SEED,
            "--phases",
            "examples,coverage,fuzzing",
            "--workers",
            "2",
            "--request-timeout",
            "20",
            "--generation-database",
            "none",
            "--include-path-regex",
            include,
        ]);
        if let Some(exclude) = exclude {
            cmd.args(["--exclude-path-regex", exclude]);
        }
        for h in headers {
            cmd.args(["-H", h]);
        }
        cmd.env("NO_COLOR", "1");
        run(cmd)
    };
    let cookie = |name: &str| {
        vec![
            format!("Cookie: gc_session={}", text(&world[name])),
            format!("Origin: {origin}"),
        ]
    };
    let mut failed = Vec::new();
    let mut attempt = |label: String, result: anyhow::Result<()>| {
        if let Err(e) = result {
            eprintln!("xtask: api-check FAILED as {label}: {e}");
            failed.push(label);
        }
    };
    attempt(
        "anonymous caller".into(),
        st(
            "an anonymous caller",
            &[],
            "^/api/v1/(health|openapi\\.json|guard/scan|auth/signup|auth/signin)$",
            None,
        ),
    );
    attempt(
        "platform admin session".into(),
        st(
            "a platform admin's session",
            &cookie("admin_cookie"),
            "^/api/v1/(auth|admin)/",
            Some(session_enders),
        ),
    );
    attempt(
        "member session".into(),
        st(
            "a member's session",
            &cookie("member_cookie"),
            "^/api/v1/(workspace|guard|run|chat)",
            None,
        ),
    );
    if let Some(keys) = world["keys"].as_object() {
        for (scope, key) in keys {
            attempt(
                format!("key {scope}"),
                st(
                    &format!("a `{scope}` key"),
                    &[format!("Authorization: Bearer {}", text(key))],
                    "^/api/v1/(workspace|guard|run|chat)",
                    Some("^/api/v1/workspace/api-keys"),
                ),
            );
        }
    }
    attempt(
        "session-ending routes".into(),
        st(
            "a disposable session",
            &cookie("disposable_cookie"),
            session_enders,
            None,
        ),
    );
    if !failed.is_empty() {
        bail!("api-check failed as: {}", failed.join(", "));
    }
    eprintln!("xtask: api-check passed");
    Ok(())
}
