//! The README's first run, performed: its shell block runs in a fresh folder against a mock
//! OpenAI-compatible upstream, with only these changes, each of which must still match the
//! README (so an edit that breaks the path fails here): the endpoint URL is the mock's, the
//! release build is this test's `gc-server`, and port 8080 is a free port. Then the SDK block
//! runs with the official OpenAI Python SDK when one is installed (see `python_with_openai`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};

mod common;
use common::{free_port, BIN};

/// The first fenced block after the line holding `marker`.
fn block_after(readme: &str, marker: &str) -> String {
    let at = readme
        .find(marker)
        .unwrap_or_else(|| panic!("README.md has no {marker:?} marker"));
    let rest = &readme[at..];
    let open = rest
        .find("```sh\n")
        .expect("a ```sh block after the marker")
        + "```sh\n".len();
    let len = rest[open..].find("\n```").expect("the block's end");
    rest[open..open + len + 1].to_owned()
}

/// `text` with `from` replaced by `to`; `from` must be there.
fn swap(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the README's first run no longer contains {from:?}:\n{text}"
    );
    text.replace(from, to)
}

/// A Python with the `openai` package: the black-box tests' virtualenv, or `GC_TEST_PYTHON`.
fn python_with_openai() -> Option<String> {
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/../../target", env!("CARGO_MANIFEST_DIR")));
    let candidates = [
        std::env::var("GC_TEST_PYTHON").ok(),
        Some(format!("{target}/openai-sdk-venv/bin/python")),
        Some("python3".to_owned()),
    ];
    let has_openai = |python: &String| {
        Command::new(python)
            .args(["-c", "import openai"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if let Some(found) = candidates.into_iter().flatten().find(has_openai) {
        return Some(found);
    }
    // None yet (this test may run before tests/tests/gateway.rs made the virtualenv): make it
    // the same way, with the same pinned SDK (`OPENAI_SDK` there).
    let venv = format!("{target}/openai-sdk-venv");
    let made = Command::new("python3")
        .args(["-m", "venv", &venv])
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(format!("{venv}/bin/pip"))
            .args(["install", "--quiet", "openai==3.57.0"])
            .status()
            .is_ok_and(|s| s.success());
    let python = format!("{venv}/bin/python");
    (made && has_openai(&python)).then_some(python)
}

/// Kills the server the script left running (its pid), when dropped.
struct StopOnDrop(Option<String>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = &self.0 {
            let _ = Command::new("kill").arg(pid).status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_first_run_streams_an_answer_and_serves_the_openai_sdk() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let (_, upstream) = gc_gateway::mock::MockUpstream::start().await.unwrap();
    let port = free_port();
    let local = format!("127.0.0.1:{port}");

    let script = block_after(&readme, "<!-- first-run:");
    let script = swap(&script, "https://api.openai.com/v1", &upstream.base_url());
    let script = swap(
        &script,
        "cargo build --release && GC=./target/release/gc-server",
        &format!("GC={BIN}"),
    );
    let script = swap(&script, "127.0.0.1:8080", &local);
    // The server's own output goes to a file: an inherited standard output would keep the
    // script's open after it ends.
    let script = swap(&script, "\n$GC &\n", "\n$GC >server.log 2>&1 &\n");
    // The server keeps running for the SDK block; its pid is printed for the test to stop it.
    let script = format!("{script}\necho \"gc-server-pid $!\"\necho \"gc-key $GC_KEY\"\n");

    let sdk = block_after(&readme, "<!-- first-run-sdk:");
    let sdk = swap(&sdk, "pip install openai\n", "");
    let sdk = swap(&sdk, "127.0.0.1:8080", &local);

    let dir = std::env::temp_dir().join(format!("gc-readme-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(&dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &dir)
        .env("OPENAI_API_KEY", "sk-readme-upstream-key")
        // What the README leaves to defaults, made quick and local for a test.
        .env("GC_BCRYPT_COST", "4")
        .env("GC_LOG", "warn")
        .env("GC_BIND", &local)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let pid = stdout
        .lines()
        .find_map(|l| l.strip_prefix("gc-server-pid "))
        .map(str::to_owned);
    // Stops the server however the test ends.
    let _server = StopOnDrop(pid);
    if !out.status.success() {
        panic!("the README's first run failed:\nstdout: {stdout}\nstderr: {stderr}");
    }
    // The upstream key was checked and is ready; the run streamed to its end.
    assert!(stdout.contains("\tready\t"), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("data: ") && stdout.contains("data: [DONE]"),
        "no streamed answer:\n{stdout}\n{stderr}"
    );
    assert!(upstream
        .chat_requests()
        .iter()
        .any(|r| r.bearer() == Some("sk-readme-upstream-key")));
    // The .env was read from the working directory: the database and master key are there.
    assert!(dir.join("data/master.key").exists());

    let key = stdout
        .lines()
        .find_map(|l| l.strip_prefix("gc-key "))
        .filter(|k| k.starts_with("gc_"))
        .map(str::to_owned);
    let sdk_result = match python_with_openai() {
        Some(python) => {
            let sdk = swap(&sdk, "python3 - <<", &format!("{python} - <<"));
            let sdk_out = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &sdk])
                .current_dir(&dir)
                .env("GC_KEY", key.clone().unwrap_or_default())
                .output()
                .unwrap();
            Some(sdk_out)
        }
        None => None,
    };
    // Without the SDK, the request it would make: /chat/completions is mounted by the .env.
    let chat = reqwest::Client::new()
        .post(format!("http://{local}/api/v1/chat/completions"))
        .header(
            "authorization",
            format!("Bearer {}", key.clone().unwrap_or_default()),
        )
        .json(
            &serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    let chat_status = chat.status();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        key.is_some(),
        "the workspace key was not printed:\n{stdout}"
    );
    assert_eq!(chat_status, 200, "/chat/completions is not served");
    match sdk_result {
        Some(o) => assert!(
            o.status.success(),
            "the README's SDK call failed:\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        None => {
            assert!(
                std::env::var("GC_REQUIRE_OPENAI_SDK").as_deref() != Ok("1"),
                "no Python with the openai package (GC_REQUIRE_OPENAI_SDK=1)"
            );
            eprintln!(
                "SKIPPED: the README's OpenAI SDK block (no Python with `openai`; the tests' \
                 virtualenv is made by tests/tests/gateway.rs)"
            );
        }
    }
}
