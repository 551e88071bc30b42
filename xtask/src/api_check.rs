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
//!    end sessions with a session of their own. Keys run the fuzzing phase only, with 3
//!    examples per operation, which keeps the whole check within a few minutes. Any failure
//!    (a 5xx, an undocumented status, a response that breaks its schema, a schema-valid
//!    request refused) fails the task.
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

/// The Schemathesis configuration shared by every run.
///
/// - `POST /auth/change-password`: a wrong `current_password` is 422, and no generator knows the
///   right one.
/// - `POST /auth/signup`, `/auth/change-password` and `/admin/users`: a password the schema
///   allows may still be refused by the password policy (a common or repeated one, or one
///   holding the email; decision 0026), 422 `validation_failed`.
/// - Where the server's rule cannot be written in JSON Schema (a byte length, a trimmed value, a
///   parse), the document states a subset the server always accepts, so schema-*invalid* data
///   there may still be accepted: `negative_data_rejection` accepts a 2xx for those operations
///   only (a per-operation `enabled = false` did not take effect with `--checks all`).
/// - `POST /admin/ai-gateways/diagnostics` takes no body as `{}`, and serde reads a JSON array
///   of two nulls as that body too.
/// - `POST /admin/users` and `PATCH /admin/users/{id}/tenant`: a `tenant_id` that names no
///   tenant is 422 `validation_failed`, and no generator knows the tenants that exist.
/// - `GET /workspace/usage` and `GET /admin/usage`: `from` and `to` are each documented, but
///   their joint rule (`to` not before `from`, at most 400 days, a day that exists) cannot be
///   written as a schema of separate query parameters: it is 422 `validation_failed`, stated
///   on the operation. Their document states a subset for the dates and the cursor too.
const CONFIG: &str = r#"
[[operations]]
include-name-regex = "^GET /api/v1/(workspace|admin)/usage$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429", "5xx"]
checks.negative_data_rejection.expected-statuses = ["2xx", "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]

[[operations]]
include-name-regex = "^POST /api/v1/(auth/change-password|auth/signup|admin/users)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429", "5xx"]
checks.negative_data_rejection.expected-statuses = ["2xx", "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]

[[operations]]
include-name = "PATCH /api/v1/admin/users/{id}/tenant"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429", "5xx"]

[[operations]]
include-name-regex = "^POST /api/v1/(admin/ai-gateways/diagnostics|admin/tenants/\\{id\\}/ai-keys|workspace/api-keys|guard/scan|run|chat/completions|responses|embeddings)$"
checks.negative_data_rejection.expected-statuses = ["2xx", "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
"#;

/// The configuration of one run: [`CONFIG`] and, when given, the credential as a security
/// scheme of the document (so Schemathesis knows which requests are meant to lack it).
fn config_for(credential: Option<(&str, &str)>) -> String {
    match credential {
        None => CONFIG.to_owned(),
        Some(("session", cookie)) => {
            format!("[auth.openapi.session]\napi_key = \"{cookie}\"\n{CONFIG}")
        }
        Some((_, key)) => format!("[auth.openapi.workspace_key]\nbearer = \"{key}\"\n{CONFIG}"),
    }
}

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
    let result = check(&tools, &work, &line);
    // Closing its standard input stops the fixture and its server.
    drop(fixture.stdin.take());
    let _ = fixture.wait();
    result
}

fn check(tools: &Path, work: &Path, line: &str) -> anyhow::Result<()> {
    let world: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("fixture said {line:?}"))?;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let base = text(&world["base"]);
    let origin = text(&world["origin"]);
    let schema = format!("{base}/api/v1/openapi.json");

    // The validator reads files: fetch the served document first.
    let served = work.join("openapi.json");
    let mut fetch = Command::new(tools.join("python"));
    fetch.args([
        "-c",
        "import sys, urllib.request; open(sys.argv[2], 'wb').write(urllib.request.urlopen(sys.argv[1]).read())",
        &schema,
    ]);
    fetch.arg(&served);
    run(fetch)?;
    let mut validator = Command::new(tools.join("openapi-spec-validator"));
    validator.arg(&served);
    run(validator)?;

    let examples = std::env::var("GC_API_CHECK_EXAMPLES").unwrap_or_else(|_| "8".into());
    let session_enders = "^/api/v1/auth/(signout|change-password|sessions)$";
    // A key of each scope runs the fuzzing phase only, with few examples: the coverage phase
    // (every parameter's edge cases) already ran on the same operations as a member's session,
    // and what differs for a key is which credentials are refused, which any request shows.
    let key_examples = "3";
    let st =
        |label: &str, credential: Option<(&str, &str)>, include: &str, exclude: Option<&str>| {
            let key = matches!(credential, Some(("key", _)));
            let (examples, phases) = if key {
                (key_examples, "examples,fuzzing")
            } else {
                (examples.as_str(), "examples,coverage,fuzzing")
            };
            eprintln!("xtask: schemathesis as {label}");
            let config = work.join("schemathesis.toml");
            std::fs::write(&config, config_for(credential))?;
            let mut cmd = Command::new(tools.join("st"));
            cmd.arg("--config-file").arg(&config).args([
                "run",
                &schema,
                "--checks",
                "all",
                "--max-examples",
                examples,
                "--seed",
                SEED,
                "--phases",
                phases,
                // One worker: Hypothesis's lambda-source cache is not thread-safe on CPython 3.11
                // ("AST constructor recursion depth mismatch").
                "--workers",
                "1",
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
            // Cookie-authenticated writes must name the service's origin.
            if matches!(credential, Some(("session", _))) {
                cmd.args(["-H", &format!("Origin: {origin}")]);
            }
            // Schemathesis keeps its crash cache in `.schemathesis/` of its working directory.
            cmd.current_dir(work).env("NO_COLOR", "1");
            run(cmd)
        };
    let mut failed = Vec::new();
    let mut attempt = |label: &str, result: anyhow::Result<()>| {
        if let Err(e) = result {
            eprintln!("xtask: api-check FAILED as {label}: {e}");
            failed.push(label.to_owned());
        }
    };
    let public = "^/api/v1/(health|openapi\\.json|guard/scan|auth/signup|auth/signin)$";
    let tenant_routes = "^/api/v1/(workspace|guard|run|chat|responses|embeddings|models)";
    attempt(
        "an anonymous caller",
        st("an anonymous caller", None, public, None),
    );
    let admin = text(&world["admin_cookie"]);
    attempt(
        "a platform admin's session",
        st(
            "a platform admin's session",
            Some(("session", &admin)),
            "^/api/v1/(auth|admin)/",
            Some(session_enders),
        ),
    );
    let member = text(&world["member_cookie"]);
    attempt(
        "a member's session",
        st(
            "a member's session",
            Some(("session", &member)),
            tenant_routes,
            None,
        ),
    );
    if let Some(keys) = world["keys"].as_object() {
        for (scope, key) in keys {
            let label = format!("a `{scope}` key");
            let result = st(
                &label,
                Some(("key", &text(key))),
                tenant_routes,
                Some("^/api/v1/workspace/api-keys"),
            );
            attempt(&label, result);
        }
    }
    let disposable = text(&world["disposable_cookie"]);
    attempt(
        "a disposable session",
        st(
            "a disposable session",
            Some(("session", &disposable)),
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
