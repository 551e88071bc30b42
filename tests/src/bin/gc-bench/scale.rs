//! `gc-bench --scale` (issue 33): PostgreSQL against SQLite in the same run, two nodes on one
//! PostgreSQL, and streams measured with a raw-socket client.
//!
//! - **PostgreSQL**: the same `/run` load (zero-delay mock, 16 connections) against a server on
//!   a fresh SQLite file and one on a fresh PostgreSQL database (`GC_TEST_POSTGRES_URL`, default
//!   `postgres://postgres@127.0.0.1:5432/postgres`), without and with the tenant's limits
//!   set; then two servers on the one PostgreSQL database, 8 connections each. Each row
//!   reports CPU per run of the server, of the database's backends (PostgreSQL on this host)
//!   and of this process (load generator and mock), and context switches per run; with
//!   `GC_BENCH_PG_LOG=<PostgreSQL's server log>`, statements and round trips per run are
//!   counted from that log ([`count_statements`], decision 0043).
//! - **Streams**: a mock streaming 20 chunks; a new connection per request written on a raw
//!   socket (no client library between the bytes and the clock), time to the first `data:`
//!   byte and to `[DONE]`, direct to the mock and through gc's `/run`, at 1 stream (interleaved
//!   samples) and 64 at once; then the server's peak RSS while 1,000 streams are open at once
//!   (the mock spacing 20 chunks over about 2 s), and whether every one ended with `[DONE]`.
//!
//! Nothing here asserts on time; `docs/benchmarks.md` records the figures with the command.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gc_gateway::mock::{Behavior, MockUpstream};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{
    cpu_ticks, free_port, load, rss_kib, rss_split_kib, set_up, set_up_with, spawn_server,
    split_mib, wait_healthy, Server, Stats,
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
    /// CPU of the database's PostgreSQL backends per run (PostgreSQL rows only).
    pg_cpu_us: Option<f64>,
    /// CPU of this process (load generator and mock) per run.
    bench_cpu_us: f64,
    /// Context switches per run: the server's threads, and the database's backends.
    switches: (f64, Option<f64>),
    /// The deepest run-record queue seen during the measurement, and the runs refused
    /// `busy` meanwhile (`/metrics`; `None` when not sampled).
    queue: Option<(f64, Option<f64>)>,
}

/// Context switches (voluntary and not) of every thread of process `pid` so far (`/proc`).
fn switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// This process's CPU ticks (the load generator and the mock run here).
fn own_ticks() -> u64 {
    cpu_ticks(std::process::id())
}

async fn measure(
    name: &str,
    server: &Server,
    pg: Option<&str>,
    conns: usize,
    secs: f64,
    send: impl Fn() -> reqwest::RequestBuilder + Send + Sync + Clone + 'static,
) -> Row {
    load(conns, 0.5, send.clone()).await;
    let before = cpu_ticks(server.child.id());
    let own = own_ticks();
    let backends = pg.map(pg_backend_ticks);
    let server_switches = switches(server.child.id());
    let pg_switches: Option<u64> = backends
        .as_ref()
        .map(|b| b.iter().map(|(pid, _)| switches(*pid)).sum());
    let busy_before = metric(&server.base, "gc_runs_refused_busy_total").await;
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = tokio::spawn(deepest_queue(server.base.clone(), sampling.clone()));
    let stats = load(conns, secs, send).await;
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let deepest = sampler.await.unwrap_or(0.0);
    let busy = metric(&server.base, "gc_runs_refused_busy_total")
        .await
        .zip(busy_before)
        .map(|(a, b)| a - b);
    let ticks = cpu_ticks(server.child.id()).saturating_sub(before);
    let server_switches = switches(server.child.id()).saturating_sub(server_switches);
    let own = own_ticks().saturating_sub(own);
    let n = stats.latencies_us.len().max(1) as f64;
    // Backends that served throughout (a backend opened during the load is not counted).
    let pg_switches = backends.as_ref().zip(pg_switches).map(|(b, before)| {
        let after: u64 = b.iter().map(|(pid, _)| switches(*pid)).sum();
        after.saturating_sub(before) as f64 / n
    });
    let pg_cpu_us = backends.map(|before| {
        let ticks: u64 = before
            .iter()
            .map(|(pid, t)| cpu_ticks(*pid).saturating_sub(*t))
            .sum();
        ticks as f64 * 10_000.0 / n
    });
    Row {
        name: name.to_owned(),
        cpu_us: ticks as f64 * 10_000.0 / n,
        pg_cpu_us,
        bench_cpu_us: own as f64 * 10_000.0 / n,
        switches: (server_switches as f64 / n, pg_switches),
        stats,
        queue: Some((deepest, busy)),
    }
}

/// A value of the server's `/metrics` page (the first sample of that name), if it answers.
async fn metric(base: &str, name: &str) -> Option<f64> {
    // `/metrics` is at the root, beside the API's `/api/v1`.
    let root = base.strip_suffix("/api/v1").unwrap_or(base);
    let text = client()
        .get(format!("{root}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(name))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The deepest run-record queue (`gc_run_record_queue_depth`: records waiting for the
/// writer and places held by runs in flight) seen every 100 ms while `on`: a writer that
/// falls behind fills the queue, and then runs are refused 503 `busy` (decision 0033).
async fn deepest_queue(base: String, on: std::sync::Arc<std::sync::atomic::AtomicBool>) -> f64 {
    let mut deepest: f64 = 0.0;
    while on.load(std::sync::atomic::Ordering::Relaxed) {
        if let Some(d) = metric(&base, "gc_run_record_queue_depth").await {
            deepest = deepest.max(d);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    deepest
}

fn print_rows(rows: &[Row]) {
    println!("| | req/s | p50 ms | p99 ms | errors | server CPU µs per run | PostgreSQL CPU µs per run | bench (client + mock) CPU µs per run | context switches per run: server, PostgreSQL |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.0} | {:.3} | {:.3} | {} | {:.0} | {} | {:.0} | {:.2}, {} |",
            r.name,
            r.stats.rate(),
            r.stats.pct(0.5),
            r.stats.pct(0.99),
            r.stats.errors(),
            r.cpu_us,
            r.pg_cpu_us.map_or("–".into(), |c| format!("{c:.0}")),
            r.bench_cpu_us,
            r.switches.0,
            r.switches.1.map_or("–".into(), |c| format!("{c:.2}"))
        );
    }
    println!();
    let queues: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let (deepest, busy) = r.queue?;
            Some(format!(
                "{} {deepest:.0} ({} refused busy)",
                r.name,
                busy.map_or("?".into(), |b| format!("{b:.0}"))
            ))
        })
        .collect();
    if !queues.is_empty() {
        println!(
            "deepest run-record queue (of 16,384 places): {}\n",
            queues.join("; ")
        );
    }
    for r in rows.iter().filter(|r| r.stats.errors() > 0) {
        println!("errors in {}:\n{}\n", r.name, r.stats.error_summary());
    }
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
                None,
                16,
                secs,
                runs(&client, &lite.base, &lite_fx.key),
            )
            .await;
            let p = measure(
                &format!("PostgreSQL, {label} (round {})", round + 1),
                &pg,
                Some(db.name()),
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
    // On two cores shared by everything, the rate follows the CPU all processes spend per run:
    // the ratio of those sums is what PostgreSQL/SQLite would be if the work were CPU-bound.
    let cpu = |db: &str, label: &str| {
        let rows: Vec<&Row> = rows
            .iter()
            .filter(|r| r.name.starts_with(db) && r.name.contains(label))
            .collect();
        let n = rows.len().max(1) as f64;
        rows.iter()
            .map(|r| r.cpu_us + r.pg_cpu_us.unwrap_or(0.0) + r.bench_cpu_us)
            .sum::<f64>()
            / n
    };
    for label in ["no limits", "tenant limits set"] {
        let (l, p) = (cpu("SQLite", label), cpu("PostgreSQL", label));
        println!(
            "CPU per run, all processes ({label}): SQLite {l:.0} µs, PostgreSQL {p:.0} µs: a CPU-bound ratio of {:.2}\n",
            l / p
        );
    }
    drop(lite);

    // Two nodes on the one PostgreSQL database, 8 connections each, against one node at 16.
    let second = spawn_server(bin, db.url(), free_port(), Some(&mock.base_url()));
    wait_healthy(&client, &second.base).await;
    let one = measure(
        "one node, 16 connections",
        &pg,
        Some(db.name()),
        16,
        secs,
        runs(&client, &pg.base, &pg_fx.key),
    )
    .await;
    let a = runs(&client, &pg.base, &pg_fx.key);
    let b = runs(&client, &second.base, &pg_fx.key);
    // Warmed up together first, so that both nodes' PostgreSQL connections are open (and
    // counted) before the measurement, as `measure` does for one node.
    tokio::join!(load(8, 0.5, a.clone()), load(8, 0.5, b.clone()));
    let nodes = [pg.child.id(), second.child.id()];
    let node_ticks = || nodes.iter().map(|&pid| cpu_ticks(pid)).sum::<u64>();
    let node_switches = || nodes.iter().map(|&pid| switches(pid)).sum::<u64>();
    let before = (node_ticks(), node_switches(), own_ticks());
    let backends = pg_backend_ticks(db.name());
    let (sa, sb) = tokio::join!(load(8, secs, a), load(8, secs, b));
    let ticks = node_ticks().saturating_sub(before.0);
    let n = (sa.latencies_us.len() + sb.latencies_us.len()).max(1) as f64;
    let per_run = |ticks: u64| ticks as f64 * 10_000.0 / n;
    let two_switches = node_switches().saturating_sub(before.1) as f64 / n;
    let own = own_ticks().saturating_sub(before.2);
    let pg_ticks: u64 = backends
        .iter()
        .map(|(pid, t)| cpu_ticks(*pid).saturating_sub(*t))
        .sum();
    let mut all: Vec<u64> = sa
        .latencies_us
        .iter()
        .chain(&sb.latencies_us)
        .copied()
        .collect();
    all.sort_unstable();
    let mut both = Stats {
        latencies_us: all,
        error_kinds: Default::default(),
        elapsed: sa.elapsed.max(sb.elapsed),
    };
    both.add_errors(&sa.error_kinds);
    both.add_errors(&sb.error_kinds);
    println!("## Two nodes on one PostgreSQL\n");
    print_rows(&[
        one,
        Row {
            name: "two nodes, 8 connections each".into(),
            cpu_us: per_run(ticks),
            pg_cpu_us: Some(per_run(pg_ticks)),
            bench_cpu_us: per_run(own),
            switches: (two_switches, None),
            stats: both,
            queue: None,
        },
    ]);
    set_limits(&client, &pg.base, &pg_fx.admin, &pg_fx.tid, false).await;
    drop(second);
    drop(pg);
    if let Ok(log) = std::env::var("GC_BENCH_PG_LOG") {
        count_statements(bin, &db, &log, &mock.base_url(), &pg_fx, secs).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `psql -Atc sql` on `url`; its output, or `None` when psql failed.
fn psql(url: &str, sql: &str) -> Option<String> {
    let out = std::process::Command::new("psql")
        .arg(url)
        .arg("-Atc")
        .arg(sql)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// CPU ticks of the PostgreSQL backends serving database `name` (their pids from
/// `pg_stat_activity`, their times from `/proc`: PostgreSQL on this host only).
fn pg_backend_ticks(name: &str) -> Vec<(u32, u64)> {
    psql(
        &gc_persistence::testing::postgres_admin_url(),
        &format!("select pid from pg_stat_activity where datname = '{name}'"),
    )
    .unwrap_or_default()
    .lines()
    .filter_map(|l| l.trim().parse().ok())
    .map(|pid| (pid, cpu_ticks(pid)))
    .collect()
}

/// What one kind of statement costs per run in the counted window, from the server log.
#[derive(Default)]
struct Counted {
    /// Statements executed (extended protocol `execute`, or a simple `statement:`).
    executed: u64,
    /// Named statements prepared (a round trip of their own, once per connection).
    prepared: u64,
    /// The backend's CPU (user + system) in this statement's protocol messages (parse, bind,
    /// execute, or a simple query), µs, from `log_statement_stats`: what the backend spends
    /// between reading a message and logging it, so each message also counts the writing of
    /// its two log lines. The socket's wait and read outside a message are not in it.
    cpu_us: f64,
}

/// Issue 33, deterministic: statements and round trips per `/run` on PostgreSQL, counted in
/// the server's log (`GC_BENCH_PG_LOG`, the PostgreSQL server log file, readable by the bench;
/// PostgreSQL on this host). The database is set to log every statement
/// (`log_min_duration_statement = 0`, this database only), a new server is started on it (its
/// connections take the setting), and each measurement is framed by two marker statements
/// sent with psql; everything the database logged between them from gc's connections is
/// counted, grouped by statement. Round trips: one per statement executed (diesel sends
/// parse/bind/execute of an unnamed statement in one flight, and bind/execute of a prepared
/// one), plus one per named statement prepared. Logging slows PostgreSQL, so these runs' rate
/// means nothing; the counts per run are the point (the writer's batches are per 50 ms, so
/// their share per run depends on the rate).
async fn count_statements(
    bin: &str,
    db: &gc_persistence::testing::PostgresTestDatabase,
    log: &str,
    mock: &str,
    fx: &crate::Fixture,
    secs: f64,
) {
    println!("## PostgreSQL statements per run (server log, 16 connections)\n");
    let admin = gc_persistence::testing::postgres_admin_url();
    if psql(
        &admin,
        &format!(
            "ALTER DATABASE \"{}\" SET log_min_duration_statement = 0",
            db.name()
        ),
    )
    .is_none()
    {
        println!("not counted: could not set log_min_duration_statement\n");
        return;
    }
    // Each message's CPU (`getrusage`) logged after it: the backend's time per statement.
    let cpu_logged = psql(
        &admin,
        &format!(
            "ALTER DATABASE \"{}\" SET log_statement_stats = on",
            db.name()
        ),
    )
    .is_some();
    let client = client();
    let server = spawn_server(bin, db.url(), free_port(), Some(mock));
    wait_healthy(&client, &server.base).await;
    for on in [false, true] {
        set_limits(&client, &server.base, &fx.admin, &fx.tid, on).await;
        load(16, 0.5, runs(&client, &server.base, &fx.key)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
        let mark = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let _ = psql(db.url(), &format!("SELECT 'gc-bench-start-{mark}'"));
        let backends = pg_backend_ticks(db.name());
        let stats = load(16, secs, runs(&client, &server.base, &fx.key)).await;
        let backend_ticks: u64 = backends
            .iter()
            .map(|(pid, t)| cpu_ticks(*pid).saturating_sub(*t))
            .sum();
        // The writer's last batch of these runs (its window is 50 ms).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = psql(db.url(), &format!("SELECT 'gc-bench-end-{mark}'"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let text = std::fs::read(log)
            .map(|b| String::from_utf8_lossy(&b[(start as usize).min(b.len())..]).into_owned())
            .unwrap_or_default();
        let runs_n = stats.latencies_us.len().max(1) as f64;
        let by_kind = count_log(&text, db.name(), &mark);
        let (mut executed, mut prepared, mut tx) = (0, 0, 0);
        println!(
            "{} ({} runs, {} errors):\n",
            if on { "tenant limits set" } else { "no limits" },
            stats.latencies_us.len(),
            stats.errors()
        );
        println!("| statement | executed per run | prepared per run | backend CPU µs per run (its messages, logging included) |");
        println!("|---|---|---|---|");
        let mut cpu = 0.0;
        for (sql, c) in &by_kind {
            executed += c.executed;
            prepared += c.prepared;
            cpu += c.cpu_us;
            if sql == "BEGIN" {
                tx += c.executed;
            }
            println!(
                "| `{}` | {:.3} | {:.4} | {} |",
                sql.chars().take(90).collect::<String>(),
                c.executed as f64 / runs_n,
                c.prepared as f64 / runs_n,
                if cpu_logged {
                    format!("{:.1}", c.cpu_us / runs_n)
                } else {
                    "–".into()
                }
            );
        }
        println!(
            "\nper run: {:.3} statements, {:.3} round trips, {:.3} explicit transactions; backend CPU in messages {}, all of the backends' CPU (`/proc`, logging included) {:.0} µs\n",
            executed as f64 / runs_n,
            (executed + prepared) as f64 / runs_n,
            tx as f64 / runs_n,
            if cpu_logged {
                format!("{:.1} µs", cpu / runs_n)
            } else {
                "not logged".into()
            },
            backend_ticks as f64 * 10_000.0 / runs_n
        );
    }
    set_limits(&client, &server.base, &fx.admin, &fx.tid, false).await;
    drop(server);
    for setting in ["log_min_duration_statement", "log_statement_stats"] {
        let _ = psql(
            &admin,
            &format!("ALTER DATABASE \"{}\" RESET {setting}", db.name()),
        );
    }
}

/// Counts, per statement text (the first 120 characters), the statements database `name`
/// logged between the markers `gc-bench-start-<mark>` and `gc-bench-end-<mark>`, markers
/// excluded. Log lines look like `… [pid] user@db LOG:  duration: 0.012 ms  execute
/// __diesel_stmt_3: SELECT …` (also `parse`, `bind`, and `statement: BEGIN` for simple
/// queries). With `log_statement_stats`, each message is followed by `… [pid] user@db LOG:
/// EXECUTE MESSAGE STATISTICS` and its detail lines (no prefix), one of them `!\t0.000011 s
/// user, 0.000002 s system, …`: that CPU goes to the statement the same backend logged last.
fn count_log(text: &str, name: &str, mark: &str) -> BTreeMap<String, Counted> {
    let mut out: BTreeMap<String, Counted> = BTreeMap::new();
    let tag = format!("@{name} ");
    let mut inside = false;
    // The statement each backend (its `[pid]`) logged last, and the backend whose
    // statistics' detail lines come next.
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut stats_of: Option<String> = None;
    for line in text.lines() {
        if !line.contains(&tag) {
            if let (Some(pid), true) = (&stats_of, inside) {
                if let Some(us) = usage_us(line) {
                    if let Some(key) = last.get(pid) {
                        out.entry(key.clone()).or_default().cpu_us += us;
                    }
                    stats_of = None;
                }
            }
            continue;
        }
        // The statistics' first detail line carries the prefix; the numbers come after it.
        if line.contains(" DETAIL:  ") {
            continue;
        }
        stats_of = None;
        if line.contains(&format!("gc-bench-start-{mark}")) {
            inside = true;
            continue;
        }
        if line.contains(&format!("gc-bench-end-{mark}")) {
            break;
        }
        if !inside {
            continue;
        }
        let pid = line
            .split_once(" [")
            .and_then(|(_, r)| r.split_once(']'))
            .map(|(p, _)| p.to_owned())
            .unwrap_or_default();
        if line.contains("STATISTICS") {
            stats_of = Some(pid);
            continue;
        }
        let Some((_, rest)) = line.split_once(" ms  ") else {
            continue;
        };
        let (kind, sql) = if let Some(sql) = rest.strip_prefix("statement: ") {
            ("statement", sql)
        } else if let Some((head, sql)) = rest.split_once(": ") {
            (head, sql)
        } else {
            continue;
        };
        let key: String = sql.trim().chars().take(120).collect();
        last.insert(pid, key.clone());
        let entry = out.entry(key).or_default();
        if kind == "statement" || kind.starts_with("execute") {
            entry.executed += 1;
        } else if kind.starts_with("parse") && !kind.contains("<unnamed>") {
            entry.prepared += 1;
        }
    }
    out
}

/// User + system µs of a `log_statement_stats` detail line (`!\t0.000011 s user, 0.000002 s
/// system, 0.000013 s elapsed`); `None` for any other line.
fn usage_us(line: &str) -> Option<f64> {
    let rest = line.trim_start_matches(['\t', '!', ' ']);
    let (user, rest) = rest.split_once(" s user, ")?;
    let (system, _) = rest.split_once(" s system")?;
    Some((user.trim().parse::<f64>().ok()? + system.trim().parse::<f64>().ok()?) * 1e6)
}

/// `count_log` on a log excerpt in PostgreSQL 15's format: statements between the markers,
/// each message's CPU given to the statement its backend logged last.
#[cfg(test)]
#[test]
fn statements_and_their_cpu_are_read_from_the_log() {
    let p = "2026-11-28 03:25:06.024 UTC";
    let stats = |pid: u32, what: &str, user: &str, system: &str| {
        format!(
            "{p} [{pid}] postgres@db LOG:  {what} MESSAGE STATISTICS\n{p} [{pid}] postgres@db DETAIL:  ! system usage stats:\n\t!\t{user} s user, {system} s system, 0.000020 s elapsed\n\t!\t[0.100000 s user, 0.200000 s system total]\n\t!\t0/0 [5/1] voluntary/involuntary context switches\n"
        )
    };
    let log = [
        format!(
            "{p} [1] postgres@db LOG:  duration: 0.010 ms  execute __diesel_stmt_0: SELECT early\n"
        ),
        stats(1, "EXECUTE", "0.000500", "0.000000"),
        format!(
            "{p} [9] postgres@db LOG:  duration: 0.1 ms  statement: SELECT 'gc-bench-start-m'\n"
        ),
        format!("{p} [1] postgres@db LOG:  duration: 0.010 ms  bind __diesel_stmt_0: SELECT key\n"),
        stats(1, "BIND", "0.000004", "0.000001"),
        format!(
            "{p} [2] postgres@db LOG:  duration: 0.010 ms  parse __diesel_stmt_1: INSERT batch\n"
        ),
        format!(
            "{p} [1] postgres@db LOG:  duration: 0.010 ms  execute __diesel_stmt_0: SELECT key\n"
        ),
        format!(
            "{p} [2] postgres@db LOG:  duration: 0.010 ms  execute __diesel_stmt_1: INSERT batch\n"
        ),
        stats(1, "EXECUTE", "0.000010", "0.000000"),
        stats(2, "EXECUTE", "0.000300", "0.000100"),
        format!("{p} [3] postgres@other LOG:  duration: 0.010 ms  execute x: SELECT elsewhere\n"),
        format!("{p} [9] postgres@db LOG:  duration: 0.1 ms  statement: SELECT 'gc-bench-end-m'\n"),
        format!(
            "{p} [1] postgres@db LOG:  duration: 0.010 ms  execute __diesel_stmt_0: SELECT late\n"
        ),
    ]
    .concat();
    let counted = count_log(&log, "db", "m");
    let keys: Vec<&str> = counted.keys().map(String::as_str).collect();
    assert_eq!(keys, ["INSERT batch", "SELECT key"]);
    let key = &counted["SELECT key"];
    assert_eq!((key.executed, key.prepared), (1, 0));
    assert!((key.cpu_us - 15.0).abs() < 1e-6, "{}", key.cpu_us);
    let batch = &counted["INSERT batch"];
    assert_eq!((batch.executed, batch.prepared), (1, 1));
    assert!((batch.cpu_us - 400.0).abs() < 1e-6, "{}", batch.cpu_us);
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

/// Minor page faults of the process so far (`/proc/<pid>/stat`, the 10th field); 0 when
/// unreadable.
fn minor_faults(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // After the command name (which may hold spaces): state is the first field,
            // minflt the 8th.
            let rest = s.rsplit_once(')')?.1;
            rest.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
}

/// The process's peak RSS so far (`VmHWM`), KiB; 0 when unreadable.
fn high_water_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let v = s.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
            v.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
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
    // No skills: their Guard scans would compile the Guard's rules in the background in the
    // middle of the phase, and its RSS figures would be the rules' (docs/benchmarks.md, issue
    // 33, twelfth session).
    let fx = set_up_with(&client, &server.base, 0).await;
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
    let rss_set_up = rss_kib(server.child.id());
    let connections_before = mock.connections();
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
    // Each direct stream opens one connection to the mock; the rest are gc's.
    let gc_connections = mock
        .connections()
        .saturating_sub(connections_before + 50 + samples);
    let rss_one = rss_kib(server.child.id());
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
    let mut per_stream = String::new();
    for (name, addr, req) in [
        ("mock, direct", &mock_addr, &direct_req),
        ("gc `/run`", &gc_addr, &gc_req),
    ] {
        let pid = server.child.id();
        let (ticks, faults) = (cpu_ticks(pid), minor_faults(pid));
        let (mut f, mut d, bad) = stream_load(64, secs, addr, req).await;
        let n = f.len();
        if addr == &gc_addr && n > 0 {
            // The allocator's purging shows here: a page given back is faulted in again.
            per_stream = format!(
                "server at 64 streams: {:.0} µs CPU and {:.2} minor page faults per stream",
                cpu_ticks(pid).saturating_sub(ticks) as f64 * 10_000.0 / n as f64,
                minor_faults(pid).saturating_sub(faults) as f64 / n as f64
            );
        }
        println!(
            "| 64 | {name} | {:.3} | {:.3} | {:.3} | {:.3} | {n} | {bad} |",
            pct(&mut f, 0.5),
            pct(&mut f, 0.99),
            pct(&mut d, 0.5),
            pct(&mut d, 0.99)
        );
    }
    println!("\nfirst byte through gc − direct at 1, p50: {gap:.3} ms (target ≤ 0.2 ms)\n");
    println!("{per_stream}\n");
    println!(
        "gc opened {gc_connections} upstream connections for {} streams one at a time; server RSS after set-up {:.1} MiB, after the streams one at a time {:.1} MiB, after the 64-stream phases {:.1} MiB\n",
        50 + samples,
        rss_set_up as f64 / 1024.0,
        rss_one as f64 / 1024.0,
        rss_kib(server.child.id()) as f64 / 1024.0
    );

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
            let mut peak = [0; 3];
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                let now = rss_split_kib(pid);
                if now[0] > peak[0] {
                    peak = now;
                }
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
    let peak = peak.await.unwrap_or([0; 3]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "1,000 concurrent streams through gc (20 chunks, 100 ms apart): {complete} ended with `[DONE]`; server RSS before {:.1} MiB, peak {}, 1 s after {:.1} MiB (target: peak < 64 MiB); the process's high-water mark (`VmHWM`, not sampled) {:.1} MiB\n",
        idle as f64 / 1024.0,
        split_mib(peak),
        rss_kib(pid) as f64 / 1024.0,
        high_water_kib(pid) as f64 / 1024.0
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
