//! `gc-bench --scale` (issue 33): PostgreSQL against SQLite in the same run, two nodes on one
//! PostgreSQL, and streams measured with a raw-socket client.
//!
//! - **PostgreSQL**: the same `/run` load (zero-delay mock, 16 connections) against a server on
//!   a fresh SQLite file and one on a fresh PostgreSQL database (`GC_TEST_POSTGRES_URL`, default
//!   `postgres://postgres@127.0.0.1:5432/postgres`), without and with the tenant's limits
//!   set; then two servers on the one PostgreSQL database, 8 connections each.
//! - **Streams**: a mock streaming 20 chunks; a new connection per request written on a raw
//!   socket (no client library between the bytes and the clock), time to the first `data:`
//!   byte and to `[DONE]`, direct to the mock and through gc's `/run`, at 1 stream (interleaved
//!   samples) and 64 at once; then the server's peak RSS while 1,000 streams are open at once
//!   (the mock spacing 20 chunks over about 2 s), and whether every one ended with `[DONE]`.
//!
//! Nothing here asserts on time; `docs/benchmarks.md` records the figures with the command.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gc_gateway::mock::{Behavior, MockUpstream};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{
    cpu_ticks, free_port, load, rss_kib, set_up, spawn_server, wait_healthy, Server, Stats,
};

const LIMITS_ON: &str = r#"{"requests_per_minute": 1000000000, "tokens_per_minute": 1000000000000, "monthly_tokens": 1000000000000}"#;

pub(crate) async fn run(bin: &str, secs: f64) {
    println!("# gc-bench --scale ({secs} s per measurement, 2 cores shared by load generator, servers, mock and PostgreSQL)\n");
    println!("load average at start: {}\n", load_average());
    // `GC_BENCH_ONLY=postgres` or `=streams` runs one phase.
    let only = std::env::var("GC_BENCH_ONLY").unwrap_or_default();
    if only != "streams" {
        postgres(bin, secs).await;
    }
    if only != "postgres" {
        streams(bin, secs).await;
    }
    println!("load average at end: {}\n", load_average());
}

/// `pg_stat_database` counters of one database (psql, as the administrator's URL).
fn pg_stats(name: &str) -> Option<Vec<u64>> {
    let url = gc_persistence::testing::postgres_admin_url();
    let out = std::process::Command::new("psql")
        .arg(url)
        .arg("-Atc")
        .arg(format!(
            "select xact_commit + xact_rollback, tup_inserted, tup_updated, tup_fetched, tup_returned \
             from pg_stat_database where datname = '{name}'"
        ))
        .output()
        .ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .trim()
        .split('|')
        .map(|v| v.parse().ok())
        .collect()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client")
}

async fn set_limits(client: &reqwest::Client, base: &str, admin: &str, tid: &str, on: bool) {
    let limits: serde_json::Value = if on {
        serde_json::from_str(LIMITS_ON).expect("limits")
    } else {
        json!({"requests_per_minute": null, "tokens_per_minute": null, "monthly_tokens": null})
    };
    let r = client
        .patch(format!("{base}/admin/tenants/{tid}"))
        .header("cookie", admin)
        .header("origin", "http://127.0.0.1:8080")
        .json(&json!({ "limits": limits }))
        .send()
        .await
        .expect("patch");
    assert!(r.status().is_success(), "{}", r.status());
}

fn runs(
    client: &reqwest::Client,
    base: &str,
    key: &str,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + Clone + 'static {
    let (c, b, k) = (client.clone(), base.to_owned(), key.to_owned());
    let body = json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}]});
    move || c.post(format!("{b}/run")).bearer_auth(&k).json(&body)
}

struct Row {
    name: String,
    stats: Stats,
    cpu_us: f64,
}

async fn measure(
    name: &str,
    server: &Server,
    conns: usize,
    secs: f64,
    send: impl Fn() -> reqwest::RequestBuilder + Send + Sync + Clone + 'static,
) -> Row {
    load(conns, 0.5, send.clone()).await;
    let before = cpu_ticks(server.child.id());
    let stats = load(conns, secs, send).await;
    let ticks = cpu_ticks(server.child.id()).saturating_sub(before);
    Row {
        name: name.to_owned(),
        cpu_us: ticks as f64 * 10_000.0 / stats.latencies_us.len().max(1) as f64,
        stats,
    }
}

fn print_rows(rows: &[Row]) {
    println!("| | req/s | p50 ms | p99 ms | errors | server CPU µs per run |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.0} | {:.3} | {:.3} | {} | {:.0} |",
            r.name,
            r.stats.rate(),
            r.stats.pct(0.5),
            r.stats.pct(0.99),
            r.stats.errors,
            r.cpu_us
        );
    }
    println!();
}

async fn postgres(bin: &str, secs: f64) {
    println!("## PostgreSQL against SQLite: `/run`, 16 connections, zero-delay mock\n");
    let db = match gc_persistence::testing::fresh_postgres_database() {
        Ok(Some(db)) => db,
        Ok(None) | Err(_) => {
            println!("PostgreSQL phase skipped: no PostgreSQL answers at GC_TEST_POSTGRES_URL\n");
            return;
        }
    };
    let client = client();
    let (_, mock) = MockUpstream::start_for_bench().await.expect("mock");
    let dir = std::env::temp_dir().join(format!("gc-bench-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sqlite = dir.join("gc.db").display().to_string();

    let lite = spawn_server(bin, &sqlite, free_port(), Some(&mock.base_url()));
    let pg = spawn_server(bin, db.url(), free_port(), Some(&mock.base_url()));
    wait_healthy(&client, &lite.base).await;
    wait_healthy(&client, &pg.base).await;
    let lite_fx = set_up(&client, &lite.base).await;
    let pg_fx = set_up(&client, &pg.base).await;

    let mut rows = Vec::new();
    // Interleaved: SQLite, PostgreSQL, SQLite, PostgreSQL with limits off, then on.
    for on in [false, true] {
        set_limits(&client, &lite.base, &lite_fx.admin, &lite_fx.tid, on).await;
        set_limits(&client, &pg.base, &pg_fx.admin, &pg_fx.tid, on).await;
        let label = if on { "tenant limits set" } else { "no limits" };
        for round in 0..2 {
            let l = measure(
                &format!("SQLite, {label} (round {})", round + 1),
                &lite,
                16,
                secs,
                runs(&client, &lite.base, &lite_fx.key),
            )
            .await;
            let p = measure(
                &format!("PostgreSQL, {label} (round {})", round + 1),
                &pg,
                16,
                secs,
                runs(&client, &pg.base, &pg_fx.key),
            )
            .await;
            rows.push(l);
            rows.push(p);
        }
    }
    print_rows(&rows);
    // What a run costs PostgreSQL: transactions and rows per run from `pg_stat_database`
    // (psql), around one more measurement with the limits set and one without.
    for on in [false, true] {
        set_limits(&client, &pg.base, &pg_fx.admin, &pg_fx.tid, on).await;
        load(16, 0.5, runs(&client, &pg.base, &pg_fx.key)).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let before = pg_stats(db.name());
        let stats = load(16, secs, runs(&client, &pg.base, &pg_fx.key)).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let after = pg_stats(db.name());
        if let (Some(b), Some(a)) = (before, after) {
            let n = stats.latencies_us.len().max(1) as f64;
            let per: Vec<String> = [
                "transactions",
                "rows inserted",
                "rows updated",
                "rows fetched",
                "rows returned",
            ]
            .iter()
            .zip(a.iter().zip(b.iter()))
            .map(|(name, (a, b))| format!("{:.2} {name}", a.saturating_sub(*b) as f64 / n))
            .collect();
            println!(
                "PostgreSQL per run ({}, {} runs): {}\n",
                if on { "tenant limits set" } else { "no limits" },
                stats.latencies_us.len(),
                per.join(", ")
            );
        }
    }
    set_limits(&client, &pg.base, &pg_fx.admin, &pg_fx.tid, false).await;
    let ratio = |on: bool| {
        let label = if on { "tenant limits set" } else { "no limits" };
        let rate = |db: &str| {
            rows.iter()
                .filter(|r| r.name.starts_with(db) && r.name.contains(label))
                .map(|r| r.stats.rate())
                .sum::<f64>()
        };
        rate("PostgreSQL") / rate("SQLite")
    };
    println!(
        "PostgreSQL / SQLite rate (both rounds): no limits {:.2}, tenant limits set {:.2} (target ≥ 0.5, PostgreSQL p99 < 10 ms)\n",
        ratio(false),
        ratio(true)
    );
    drop(lite);

    // Two nodes on the one PostgreSQL database, 8 connections each, against one node at 16.
    let second = spawn_server(bin, db.url(), free_port(), Some(&mock.base_url()));
    wait_healthy(&client, &second.base).await;
    let one = measure(
        "one node, 16 connections",
        &pg,
        16,
        secs,
        runs(&client, &pg.base, &pg_fx.key),
    )
    .await;
    let a = runs(&client, &pg.base, &pg_fx.key);
    let b = runs(&client, &second.base, &pg_fx.key);
    let before = (cpu_ticks(pg.child.id()), cpu_ticks(second.child.id()));
    let (sa, sb) = tokio::join!(load(8, secs, a), load(8, secs, b));
    let ticks = cpu_ticks(pg.child.id()) - before.0 + cpu_ticks(second.child.id()) - before.1;
    let n = sa.latencies_us.len() + sb.latencies_us.len();
    let mut all: Vec<u64> = sa
        .latencies_us
        .iter()
        .chain(&sb.latencies_us)
        .copied()
        .collect();
    all.sort_unstable();
    let both = Stats {
        latencies_us: all,
        errors: sa.errors + sb.errors,
        elapsed: sa.elapsed.max(sb.elapsed),
    };
    println!("## Two nodes on one PostgreSQL\n");
    print_rows(&[
        one,
        Row {
            name: "two nodes, 8 connections each".into(),
            cpu_us: ticks as f64 * 10_000.0 / n.max(1) as f64,
            stats: both,
        },
    ]);
    set_limits(&client, &pg.base, &pg_fx.admin, &pg_fx.tid, false).await;
    drop(second);
    drop(pg);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One streamed request on a new connection: the time to the first `data:` byte of the body
/// and to `[DONE]`, or `None` when the answer was not a complete stream.
async fn one_stream(addr: &str, request: Arc<Vec<u8>>) -> Option<(u64, u64)> {
    let t = Instant::now();
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.set_nodelay(true).ok()?;
    s.write_all(&request).await.ok()?;
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    let mut first = None;
    let mut body_at = None;
    loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if body_at.is_none() {
            body_at = find(&buf, b"\r\n\r\n").map(|i| i + 4);
            if let Some(at) = body_at {
                if !buf.starts_with(b"HTTP/1.1 200") {
                    let _ = at;
                    return None;
                }
            }
        }
        if let Some(at) = body_at {
            if first.is_none() && find(&buf[at..], b"data:").is_some() {
                first = Some(t.elapsed().as_micros() as u64);
            }
            if find(&buf[at..], b"[DONE]").is_some() {
                return Some((first?, t.elapsed().as_micros() as u64));
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn request(path: &str, host: &str, key: &str, body: &[u8]) -> Arc<Vec<u8>> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    Arc::new(r)
}

fn pct(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64 / 1000.0
}

/// `conns` tasks send streams one after another for `secs`; the first-byte and `[DONE]` times
/// and the count of incomplete streams.
async fn stream_load(
    conns: usize,
    secs: f64,
    addr: &str,
    req: &Arc<Vec<u8>>,
) -> (Vec<u64>, Vec<u64>, usize) {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (addr, req) = (addr.to_owned(), Arc::clone(req));
        tasks.push(tokio::spawn(async move {
            let (mut first, mut done, mut bad) = (Vec::new(), Vec::new(), 0);
            while Instant::now() < deadline {
                match one_stream(&addr, Arc::clone(&req)).await {
                    Some((f, d)) => {
                        first.push(f);
                        done.push(d);
                    }
                    None => bad += 1,
                }
            }
            (first, done, bad)
        }));
    }
    let (mut first, mut done, mut bad) = (Vec::new(), Vec::new(), 0);
    for t in tasks {
        let (f, d, b) = t.await.expect("task");
        first.extend(f);
        done.extend(d);
        bad += b;
    }
    (first, done, bad)
}

async fn streams(bin: &str, secs: f64) {
    println!("## Streams: a mock streaming 20 chunks, a new connection per request (raw socket)\n");
    let client = client();
    let (mock_addr, mock) = MockUpstream::start_for_bench().await.expect("mock");
    mock.set_behavior(Behavior::Stream {
        chunks: 20,
        delay: Duration::ZERO,
    });
    let dir = std::env::temp_dir().join(format!("gc-bench-streams-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = dir.join("gc.db").display().to_string();
    let server = spawn_server(bin, &db, free_port(), Some(&mock.base_url()));
    wait_healthy(&client, &server.base).await;
    let fx = set_up(&client, &server.base).await;
    let gc_addr = server
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/api/v1")
        .to_owned();
    let body = serde_json::to_vec(&json!({"model": "auto", "stream": true,
        "messages": [{"role": "user", "content": "hello"}]}))
    .expect("body");
    let direct_req = request(
        "/v1/chat/completions",
        &mock_addr.to_string(),
        "sk-bench-0001",
        &body,
    );
    let gc_req = request("/api/v1/run", &gc_addr, &fx.key, &body);
    let mock_addr = mock_addr.to_string();

    // One at a time, interleaved: direct, gc, direct, gc, ...
    for _ in 0..50 {
        let _ = one_stream(&mock_addr, Arc::clone(&direct_req)).await;
        let _ = one_stream(&gc_addr, Arc::clone(&gc_req)).await;
    }
    let samples = ((secs * 150.0) as usize).max(200);
    let (mut df, mut dd, mut gf, mut gd, mut bad) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), 0);
    for _ in 0..samples {
        match one_stream(&mock_addr, Arc::clone(&direct_req)).await {
            Some((f, d)) => {
                df.push(f);
                dd.push(d);
            }
            None => bad += 1,
        }
        match one_stream(&gc_addr, Arc::clone(&gc_req)).await {
            Some((f, d)) => {
                gf.push(f);
                gd.push(d);
            }
            None => bad += 1,
        }
    }
    println!("| streams at once | target | first `data:` p50 ms | p99 ms | `[DONE]` p50 ms | p99 ms | streams | incomplete |");
    println!("|---|---|---|---|---|---|---|---|");
    let (n_direct, n_gc) = (df.len(), gf.len());
    let one = [
        (
            "mock, direct",
            pct(&mut df, 0.5),
            pct(&mut df, 0.99),
            pct(&mut dd, 0.5),
            pct(&mut dd, 0.99),
            n_direct,
        ),
        (
            "gc `/run`",
            pct(&mut gf, 0.5),
            pct(&mut gf, 0.99),
            pct(&mut gd, 0.5),
            pct(&mut gd, 0.99),
            n_gc,
        ),
    ];
    for (name, f50, f99, d50, d99, n) in one {
        println!("| 1 | {name} | {f50:.3} | {f99:.3} | {d50:.3} | {d99:.3} | {n} | {bad} |");
    }
    let gap = one[1].1 - one[0].1;
    for (name, addr, req) in [
        ("mock, direct", &mock_addr, &direct_req),
        ("gc `/run`", &gc_addr, &gc_req),
    ] {
        let (mut f, mut d, bad) = stream_load(64, secs, addr, req).await;
        let n = f.len();
        println!(
            "| 64 | {name} | {:.3} | {:.3} | {:.3} | {:.3} | {n} | {bad} |",
            pct(&mut f, 0.5),
            pct(&mut f, 0.99),
            pct(&mut d, 0.5),
            pct(&mut d, 0.99)
        );
    }
    println!("\nfirst byte through gc − direct at 1, p50: {gap:.3} ms (target ≤ 0.2 ms)\n");

    // 1,000 streams open at once, each about 2 s long; the server's RSS sampled every 20 ms.
    mock.set_behavior(Behavior::Stream {
        chunks: 20,
        delay: Duration::from_millis(100),
    });
    let idle = rss_kib(server.child.id());
    let pid = server.child.id();
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let peak = {
        let sampling = Arc::clone(&sampling);
        tokio::spawn(async move {
            let mut peak = 0;
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            peak
        })
    };
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let (addr, req) = (gc_addr.clone(), Arc::clone(&gc_req));
        tasks.push(tokio::spawn(async move {
            one_stream(&addr, req).await.is_some()
        }));
    }
    let mut complete = 0;
    for t in tasks {
        if t.await.unwrap_or(false) {
            complete += 1;
        }
    }
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let peak = peak.await.unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "1,000 concurrent streams through gc (20 chunks, 100 ms apart): {complete} ended with `[DONE]`; server RSS before {:.1} MiB, peak {:.1} MiB, 1 s after {:.1} MiB (target: peak < 64 MiB)\n",
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
        rss_kib(pid) as f64 / 1024.0
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
