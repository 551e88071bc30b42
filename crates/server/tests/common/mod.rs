//! What the `gc-server` binary's tests share: the binary with a clean environment, a free
//! port, waiting for a started server, a sign-in's cookie, and a finished command's output.
#![allow(dead_code)] // each test binary uses some of these

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_gc-server");

/// `gc-server admin` arguments that create tenant Acme in region AIHK with AI enabled.
pub const CREATE_ACME: [&str; 7] = [
    "tenants",
    "create",
    "--name",
    "Acme",
    "--region",
    "AIHK",
    "--ai-enabled",
];

/// `gc-server` with only these variables: the database `url`, fast bcrypt, warnings only, a
/// fixed master key.
pub fn base_command(url: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("GC_DATABASE_URL", url)
        .env("GC_BCRYPT_COST", "4")
        .env("GC_LOG", "warn")
        .env(
            "GC_MASTER_KEY",
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        );
    cmd
}

/// A loopback port nothing listens on (just now).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `{base}/health` answers (`base` ends in `/api/v1`); fails after 20 s.
pub async fn wait_for_health(client: &reqwest::Client, base: &str) {
    let started = Instant::now();
    while client.get(format!("{base}/health")).send().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Signs in; the session cookie as `name=value`.
pub async fn signin_cookie(
    client: &reqwest::Client,
    base: &str,
    email: &str,
    password: &str,
) -> String {
    let signin = client
        .post(format!("{base}/auth/signin"))
        .json(&serde_json::json!({"email": email, "password": password}))
        .send()
        .await
        .unwrap();
    assert_eq!(signin.status(), 200, "sign-in of {email}");
    signin.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// Bytes a command wrote, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A finished command: (exit code, or -1 after a signal; stdout; stderr).
pub fn outcome(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// Runs `cmd` and fails the test, showing its standard error, unless it exits with 0; its
/// output.
#[track_caller]
pub fn succeeded(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

/// Runs `cmd` with `stdin` on its standard input; its [`outcome`].
pub fn run_with_stdin(cmd: &mut Command, stdin: &[u8]) -> (i32, String, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    outcome(child.wait_with_output().unwrap())
}
