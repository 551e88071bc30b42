//! Issue 31: the same provisioning as an admin, through the real `gc-server admin` binary with
//! `--json` (tenant, region key, limits, member, workspace key), then a run through the real
//! server against a mock upstream succeeds. On SQLite, and on PostgreSQL when it answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::Duration;

use gc_persistence::testing::{fresh_sqlite_url, postgres_or_skip};
use serde_json::{json, Value};

mod common;
use common::{free_port, run_with_stdin, wait_for_health, CREATE_ACME};

const UPSTREAM_SECRET: &str = "sk-provisioned-by-cli-XYZ9";
const MEMBER_PASSWORD: &str = "member-password-123";

/// `gc-server` on `url` with `upstream` as region AIHK's gateway.
fn base_command(url: &str, upstream: &str) -> Command {
    let mut cmd = common::base_command(url);
    cmd.env("GC_GATEWAY_AIHK_URL", upstream);
    cmd
}

/// `gc-server admin --json ARGS` with `stdin`; (exit code, stdout, stderr).
fn admin(
    url: &str,
    upstream: &str,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    run_with_stdin(
        base_command(url, upstream)
            .arg("admin")
            .arg("--json")
            .args(args)
            .envs(env.iter().copied()),
        stdin.as_bytes(),
    )
}

fn json_ok(result: (i32, String, String)) -> Value {
    assert_eq!(result.0, 0, "stdout: {}\nstderr: {}", result.1, result.2);
    serde_json::from_str(&result.1).unwrap_or_else(|e| panic!("{e}: {}", result.1))
}

async fn provision_with_the_cli_then_run(url: &str) {
    let (_, upstream) = gc_gateway::mock::MockUpstream::start().await.unwrap();
    let up = upstream.base_url();
    let cli = |args: &[&str], stdin: &str| admin(url, &up, args, stdin, &[]);
    // A command written as one line (arguments without spaces), with nothing on stdin.
    let line = |command: &str| cli(&command.split_whitespace().collect::<Vec<_>>(), "");

    let tenant = json_ok(cli(&CREATE_ACME, ""));
    let tenant_id = tenant["id"].as_str().unwrap().to_owned();
    assert_eq!(tenant["ai_access"], "not_ready", "{tenant}");

    // The secret comes from standard input, never an argument; it is probed at once.
    let key = json_ok(cli(
        &[
            "ai-keys", "add", "--tenant", &tenant_id, "--region", "AIHK", "--label", "main",
        ],
        &format!("{UPSTREAM_SECRET}\n"),
    ));
    assert_eq!(key["status"], "ready", "{key}");
    assert!(!key.to_string().contains(UPSTREAM_SECRET));
    assert!(upstream
        .requests()
        .iter()
        .any(|r| r.bearer() == Some(UPSTREAM_SECRET)));
    // No secret at all: refused, nothing stored.
    let (code, _, err) = cli(
        &["ai-keys", "add", "--tenant", &tenant_id, "--region", "AIHK"],
        "",
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no secret"), "{err}");
    let keys = json_ok(cli(&["ai-keys", "list", "--tenant", &tenant_id], ""));
    assert_eq!(keys["data"].as_array().unwrap().len(), 1, "{keys}");

    let limited = json_ok(line(&format!(
        "limits tenant {tenant_id} --requests-per-minute 100 --monthly-tokens none"
    )));
    assert_eq!(limited["limits"]["requests_per_minute"], 100, "{limited}");
    // The domain's rules: a limit must be a positive integer.
    let (code, _, err) = line(&format!("limits tenant {tenant_id} --tokens-per-minute 0"));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("validation_failed"), "{err}");

    let member = json_ok(admin(
        url,
        &up,
        &[
            "users",
            "create",
            "--email",
            "dev@acme.test",
            "--name",
            "Dev",
            "--tenant",
            &tenant_id,
        ],
        "",
        &[("GC_ADMIN_PASSWORD", MEMBER_PASSWORD)],
    ));
    assert_eq!(member["tenant_id"], tenant_id.as_str(), "{member}");
    assert_eq!(member["role"], "member", "{member}");

    let created = json_ok(line(
        "keys create --member dev@acme.test --name ci --scope run",
    ));
    let workspace_key = created["key"].as_str().unwrap().to_owned();
    assert!(workspace_key.starts_with("gc_"), "{created}");
    assert_eq!(created["scopes"], json!(["run"]), "{created}");

    // A run through the real server with that key.
    let port = free_port();
    let mut server = base_command(url, &up)
        .env("GC_BIND", format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let client = reqwest::Client::new();
    wait_for_health(&client, &base).await;
    let run = client
        .post(format!("{base}/run"))
        .bearer_auth(&workspace_key)
        .json(&json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}]}))
        .send()
        .await
        .unwrap();
    let status = run.status();
    let body = run.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        upstream.chat_requests().last().unwrap().bearer(),
        Some(UPSTREAM_SECRET)
    );

    // Usage from the database, once the server's writer has stored the run.
    let mut usage = Value::Null;
    for _ in 0..100 {
        usage = json_ok(cli(&["usage", "--tenant", &tenant_id], ""));
        if usage["data"][0]["requests"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(usage["data"][0]["requests"], 1, "{usage}");
    assert_eq!(usage["data"][0]["tenant_id"], tenant_id.as_str(), "{usage}");

    let diag = json_ok(cli(&["diagnostics", "--region", "AIHK"], ""));
    assert_eq!(diag["gateways"][0]["configured"], true, "{diag}");
    assert_eq!(diag["keys"][0]["status"], "ready", "{diag}");

    // An admin token made by the CLI works on /admin/** without a cookie; a member gets none.
    json_ok(admin(
        url,
        &up,
        &[
            "users",
            "create",
            "--email",
            "ops@acme.test",
            "--name",
            "Ops",
            "--admin",
        ],
        "",
        &[("GC_ADMIN_PASSWORD", "amber-falcon-tundra-31")],
    ));
    let token = json_ok(line(
        "tokens create --admin ops@acme.test --name terraform --scope admin:read",
    ));
    let secret = token["token"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("gca_"), "{token}");
    // The tenants' list, asked for with the token.
    let with_token = || {
        client
            .get(format!("{base}/admin/tenants"))
            .bearer_auth(&secret)
            .send()
    };
    assert_eq!(with_token().await.unwrap().status(), 200);
    let listed = json_ok(cli(&["tokens", "list", "--admin", "ops@acme.test"], ""));
    assert_eq!(listed["data"][0]["name"], "terraform", "{listed}");
    assert!(!listed.to_string().contains(&secret));
    // The token's audit trail without SQL: the use above, for its admin only.
    let token_id = token["id"].as_str().unwrap().to_owned();
    let uses = json_ok(line(&format!(
        "tokens uses --admin ops@acme.test {token_id}"
    )));
    assert_eq!(
        uses["data"][0]["route"], "GET /api/v1/admin/tenants",
        "{uses}"
    );
    assert_eq!(uses["data"][0]["token_name"], "terraform", "{uses}");
    let (code, _, err) = line(&format!("tokens uses --admin dev@acme.test {token_id}"));
    assert_eq!(code, 1, "another admin's token's uses are refused: {err}");
    let (code, _, err) = line("tokens uses --admin ops@acme.test not-a-uuid");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not a token id"), "{err}");
    let (code, _, err) = line(&format!(
        "tokens uses --admin ops@acme.test {token_id} --limit 0"
    ));
    assert_ne!(code, 0, "a limit outside 1..=10000 is refused: {err}");
    let (code, _, err) = line("tokens create --admin dev@acme.test --name x");
    assert_eq!(code, 1, "{err}");
    json_ok(line(&format!(
        "tokens revoke --admin ops@acme.test {token_id}"
    )));
    assert_eq!(with_token().await.unwrap().status(), 401);

    // A suspended member gets no key: the member's own rules hold.
    json_ok(cli(&["users", "suspend", "dev@acme.test"], ""));
    let (code, _, err) = line("keys create --member dev@acme.test --name x --scope run");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("member_suspended"), "{err}");

    let listed = json_ok(cli(&["tenants", "list"], ""));
    assert_eq!(listed["data"][0]["id"], tenant_id.as_str(), "{listed}");
    let key_id = key["id"].as_str().unwrap();
    let removed = json_ok(line(&format!(
        "ai-keys remove --tenant {tenant_id} {key_id}"
    )));
    assert_eq!(removed["deleted"], true);

    server.kill().unwrap();
    server.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_provisions_a_tenant_to_a_working_run_on_sqlite() {
    let (url, _dir) = fresh_sqlite_url();
    provision_with_the_cli_then_run(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_provisions_a_tenant_to_a_working_run_on_postgres() {
    let Some(db) = postgres_or_skip("cli_provisioning") else {
        return;
    };
    provision_with_the_cli_then_run(db.url()).await;
}
