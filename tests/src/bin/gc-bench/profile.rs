//! `gc-bench <gc-server> --profile N`: instruction counts per request, independent of load.
//!
//! The database is set up by a native server (sign-ins are slow under valgrind), then the
//! server is started again under the command in `GC_BENCH_WRAP` (for example
//! `valgrind --tool=callgrind --callgrind-out-file=/tmp/gc.cg.%p`). Each phase warms up with 50
//! requests per sender at its own concurrency, then sends N requests: key-authenticated `GET /workspace/skills` one at a time, then `POST /run`
//! to the mock one at a time, then N `/run`s 16 at a time (`run-16`: the run recorder's
//! batches hold several runs, as under load), then N streamed `/run`s one at a time
//! (`run-stream`: the mock's 3-chunk stream, read to its end), then `POST /run` one at a time with the tenant's
//! three limits set (`run-limited`), and 16 at a time with them (`run-limited-16`), then the
//! same two with a key that has per-minute limits of its own as well (`run-key-limited`,
//! `run-key-limited-16`: the bench's "tenant + key" configuration). Each phase
//! prints the server's CPU time per request (user + system, from `/proc`): without a wrapper,
//! that is the native cost of each kind of request. When the wrapper is callgrind, the counters are zeroed before a phase and
//! dumped after it (`callgrind_control`), so each dump holds exactly N requests; read them with
//! `callgrind_annotate`.

use std::process::Command;
use std::time::{Duration, Instant};

use gc_gateway::mock::MockUpstream;
use serde_json::json;

use crate::{free_port, set_up, spawn_server, spawn_wrapped, wait_healthy, wait_healthy_within};

fn callgrind(args: &[&str], pid: u32) {
    let status = Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("callgrind_control {args:?} failed: {status:?}");
    }
}

pub(crate) async fn run(bin: &str, n: usize) {
    let wrapper: Vec<String> = std::env::var("GC_BENCH_WRAP")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let is_callgrind = wrapper.iter().any(|w| w.contains("callgrind"));
    let dir = std::env::temp_dir().join(format!("gc-bench-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("gc.db").display().to_string();
    let client = reqwest::Client::new();
    let (_, mock) = MockUpstream::start_for_bench().await.unwrap();

    let native = spawn_server(bin, &db, free_port(), Some(&mock.base_url()));
    wait_healthy(&client, &native.base).await;
    let fixture = set_up(&client, &native.base).await;
    // A second key of the same member with its own per-minute limits (high enough never to
    // refuse), for the `run-key-limited` phases.
    let limited_key = crate::post(
        &client,
        format!("{}/workspace/api-keys", native.base),
        &fixture.member,
        json!({"name": "profile-limited", "scopes": ["run"],
               "limits": {"requests_per_minute": 1_000_000_000i64, "tokens_per_minute": 1_000_000_000_000i64}}),
    )
    .await["key"]
        .as_str()
        .expect("a new key is shown once")
        .to_owned();
    drop(native);

    let server = spawn_wrapped(&wrapper, bin, &db, free_port(), Some(&mock.base_url()));
    wait_healthy_within(&client, &server.base, Duration::from_secs(600)).await;
    let pid = server.child.id();
    let base = server.base.clone();
    let key = fixture.key.clone();
    let read = || {
        client
            .get(format!("{base}/workspace/skills"))
            .bearer_auth(&key)
    };
    let chat = json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}]});
    let run_with = |key: &str| {
        client
            .post(format!("{base}/run"))
            .bearer_auth(key)
            .json(&chat)
    };
    let run = || run_with(&key);
    // The same run streamed (the mock's 3-chunk stream): the path to a stream's first byte.
    let streamed = json!({"model": "auto", "stream": true,
        "messages": [{"role": "user", "content": "hello"}]});
    let run_stream = || {
        client
            .post(format!("{base}/run"))
            .bearer_auth(&key)
            .json(&streamed)
    };
    let run_key_limited = || run_with(&limited_key);
    // (phase, request, how many at a time): 16 at a time, the run recorder's batches hold
    // several runs, as under load.
    for (phase, make, at_once) in [
        ("reads", &read as &dyn Fn() -> reqwest::RequestBuilder, 1),
        ("run", &run, 1),
        ("run-16", &run, 16),
        ("run-stream", &run_stream, 1),
        ("run-limited", &run, 1),
        ("run-limited-16", &run, 16),
        ("run-key-limited", &run_key_limited, 1),
        ("run-key-limited-16", &run_key_limited, 16),
    ] {
        if phase == "run-limited" {
            // The tenant's three limits, high enough never to refuse: what the quota check
            // adds to a run (issue 10).
            let r = client
                .patch(format!("{base}/admin/tenants/{}", fixture.tid))
                .header("cookie", &fixture.admin)
                .header("origin", "http://127.0.0.1:8080")
                .json(&json!({"limits": {"requests_per_minute": 1_000_000_000i64,
                    "tokens_per_minute": 1_000_000_000_000i64, "monthly_tokens": 1_000_000_000_000i64}}))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "limits: {}", r.status());
        }
        // Warm up at the phase's own concurrency, 50 requests per sender: leases grown (a
        // changed limit or a new key starts them from one request), and the database pools
        // opened to what the phase needs (a connection opened inside a phase would be counted
        // in it: its pragmas, its schema read and its first statements).
        send_all(make, at_once, 50 * at_once, phase).await;
        if is_callgrind {
            callgrind(&["-z"], pid);
        }
        let t = Instant::now();
        let ticks = crate::cpu_ticks(pid);
        send_all(make, at_once, n, phase).await;
        let took = t.elapsed();
        // Let the run recorder write its batch inside this phase.
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Clock ticks of 10 ms, so per request in µs: ticks * 10,000 / n.
        let cpu_us = crate::cpu_ticks(pid).saturating_sub(ticks) as f64 * 10_000.0 / n as f64;
        if is_callgrind {
            callgrind(&["-d", phase], pid);
        }
        println!(
            "{phase}: {n} requests in {:.2} s ({:.0} µs each; server CPU {cpu_us:.1} µs each)",
            took.as_secs_f64(),
            took.as_secs_f64() * 1e6 / n as f64
        );
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends `total` requests made by `make`, `at_once` at a time (the first `total % at_once`
/// senders send one more), and reads every answer, which must be a success.
async fn send_all(
    make: &dyn Fn() -> reqwest::RequestBuilder,
    at_once: usize,
    total: usize,
    phase: &'static str,
) {
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..at_once {
        let each = total / at_once + usize::from(i < total % at_once);
        let send = make();
        sends.spawn(async move {
            for _ in 0..each {
                let req = send.try_clone().expect("a JSON request can be cloned");
                let res = req.send().await.unwrap();
                assert!(res.status().is_success(), "{phase}: {}", res.status());
                let _ = res.bytes().await;
            }
        });
    }
    while let Some(done) = sends.join_next().await {
        done.unwrap();
    }
}
