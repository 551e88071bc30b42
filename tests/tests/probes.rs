//! Probes (issue 31): `/api/v1/health` is liveness, `/api/v1/ready` readiness (the database
//! answers and takes writes, the run-record writer runs), paths neither the API nor the
//! console serves are 404s (never the console's page), and `/metrics` says which of the two
//! Prometheus text formats its body is, checked by the official Python client's parsers.
//!
//! The database stops answering the way it does in production: on SQLite another process
//! holds the write lock (`BEGIN IMMEDIATE` on our own connection to the file); on PostgreSQL
//! the database refuses connections (`ALLOW_CONNECTIONS false`) and the server's are
//! terminated.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::Connection;
use gc_tests::*;

async fn get(app: &TestApp, path: &str, accept: Option<&str>) -> Reply {
    let mut rb = app.client.get(format!("{}{path}", app.base));
    if let Some(accept) = accept {
        rb = rb.header("accept", accept);
    }
    read(rb.send().await.unwrap()).await
}

/// Makes the app's database stop answering until dropped.
enum Outage {
    /// Our own connection holding SQLite's write lock.
    Sqlite(diesel::SqliteConnection),
    /// The database's name on the PostgreSQL server, refusing connections.
    Postgres(String),
}

fn postgres_admin() -> diesel::PgConnection {
    diesel::PgConnection::establish(&gc_persistence::testing::postgres_admin_url()).unwrap()
}

impl Outage {
    fn start(app: &TestApp) -> Self {
        let url = app.config.database_url.clone();
        if let Some(path) = url.strip_prefix("sqlite://") {
            let mut conn = diesel::SqliteConnection::establish(path).unwrap();
            conn.batch_execute("BEGIN IMMEDIATE").unwrap();
            Outage::Sqlite(conn)
        } else {
            let name = url
                .split('?')
                .next()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned();
            postgres_admin()
                .batch_execute(&format!(
                    "ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS false; \
                     SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
                ))
                .unwrap();
            Outage::Postgres(name)
        }
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        match self {
            Outage::Sqlite(conn) => conn.batch_execute("ROLLBACK").unwrap(),
            Outage::Postgres(name) => postgres_admin()
                .batch_execute(&format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS true"))
                .unwrap(),
        }
    }
}

/// The readiness probe's database checks so far (every result), from `/metrics`.
async fn database_checks(app: &TestApp) -> u64 {
    get(app, "/metrics", None)
        .await
        .text
        .lines()
        .filter(|l| l.starts_with("gc_readiness_checks_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

both_backends! {
    async fn ready_and_live_while_the_database_answers(app: TestApp) {
        let before = database_checks(&app).await;
        let r = get(&app, "/api/v1/ready", None).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("content-type"), Some("application/json"), "{}", r.text);
        assert_eq!(r.header("cache-control"), Some("no-store"));
        assert_eq!(r.body["status"], "ready", "{}", r.text);
        assert_eq!(r.body["checks"]["database"]["status"], "ok");
        assert!(r.body["checks"]["database"]["latency_ms"].is_u64());
        assert_eq!(r.body["checks"]["run_records"]["status"], "ok");
        assert_eq!(r.body["checks"]["run_records"]["queued"], 0);
        assert!(r.body["checks"]["run_records"]["capacity"].as_u64().unwrap() > 0);
        // Kept for a second: the next probe gets the same answer, no new check.
        let again = get(&app, "/api/v1/ready", None).await;
        assert_eq!(again.body["checked_at"], r.body["checked_at"]);
        assert_eq!(database_checks(&app).await, before + 1);
        let live = get(&app, "/api/v1/health", None).await;
        assert_eq!(live.status, 200);
        assert_eq!(live.body, json!({"status": "ok"}));
    }

    async fn not_ready_while_the_database_does_not_answer(app: TestApp) {
        let before = database_checks(&app).await;
        let outage = Outage::start(&app);
        let started = Instant::now();
        // A flood of probes: one check reaches the database, the others wait for its answer.
        let probes: Vec<_> = (0..20)
            .map(|_| {
                let client = app.client.clone();
                let url = format!("{}/api/v1/ready", app.base);
                actix_web::rt::spawn(async move { read(client.get(url).send().await.unwrap()).await })
            })
            .collect();
        for probe in probes {
            let r = probe.await.unwrap();
            assert_eq!(r.status, 503, "{}", r.text);
            assert_eq!(r.header("content-type"), Some("application/json"), "{}", r.text);
            assert_eq!(r.body["status"], "not_ready", "{}", r.text);
            let db = &r.body["checks"]["database"];
            assert!(db["status"] == "timeout" || db["status"] == "failed", "{}", r.text);
            assert!(db["message"].is_string(), "{}", r.text);
            assert_eq!(r.body["checks"]["run_records"]["status"], "ok", "{}", r.text);
            assert!(r.body.get("error").is_none());
        }
        assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
        // Twenty probes, one database check: they did not pile up on the database.
        assert_eq!(database_checks(&app).await, before + 1);
        // Liveness does not ask the database: restarting would not bring it back.
        assert_eq!(get(&app, "/api/v1/health", None).await.status, 200);
        drop(outage);
        let back = Instant::now();
        loop {
            let r = get(&app, "/api/v1/ready", None).await;
            if r.status == 200 {
                assert_eq!(r.body["status"], "ready");
                break;
            }
            assert!(back.elapsed() < Duration::from_secs(8), "still not ready: {}", r.text);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn paths_nobody_serves_are_404s_never_the_console(app: TestApp) {
        for path in [
            "/healthz", "/readyz", "/nope.php", "/wp-login.php", "/.env", "/index.html",
            "/skills/extra", "/admin/tenants/a/b", "/api/v1/nope", "/api/v1/healthz", "/api/v1/ready/x",
        ] {
            let r = get(&app, path, Some("text/html")).await;
            assert_error(&r, 404, "not_found");
            assert!(r.header("content-type").unwrap_or_default().starts_with("application/json"), "{path}");
            assert!(r.header("content-security-policy").is_none(), "{path}: the console answered");
        }
        let r = read(app.client.post(format!("{}/nope", app.base)).body("x").send().await.unwrap()).await;
        assert_error(&r, 404, "not_found");
        // Every page of the console's router still reloads, deep links included.
        let app_js = include_str!("../../crates/console/assets/js/app.js");
        let pages: Vec<String> = app_js
            .lines()
            .skip_while(|l| !l.starts_with("const ROUTES = ["))
            .skip(1)
            .take_while(|l| !l.starts_with(']'))
            .filter_map(|l| l.trim_start().strip_prefix("['")?.split('\'').next())
            .map(|p| p.split('/').map(|s| if s.starts_with(':') { "0190f0f0-0000-7000-8000-000000000000" } else { s }).collect::<Vec<_>>().join("/"))
            .collect();
        assert!(pages.len() >= 15, "{pages:?}");
        for page in pages.iter().chain(&["/skills/".to_owned()]) {
            let r = get(&app, page, Some("text/html")).await;
            assert_eq!(r.status, 200, "{page}");
            assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"), "{page}");
        }
    }

    async fn metrics_say_which_text_format_they_are(app: TestApp) {
        get(&app, "/api/v1/ready", None).await;
        // Prometheus asks for OpenMetrics first.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        let open = get(&app, "/metrics", Some(prometheus)).await;
        assert_eq!(open.status, 200);
        assert_eq!(open.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
        assert!(open.text.ends_with("# EOF\n"), "{}", open.text);
        assert!(open.text.contains("# TYPE gc_http_requests counter\n"));
        // Anyone else (curl, promtool's pipe) gets the classic format.
        let plain = get(&app, "/metrics", None).await;
        assert_eq!(plain.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
        assert!(!plain.text.contains("# EOF"));
        assert!(plain.text.contains("# TYPE gc_http_requests_total counter\ngc_http_requests_total{"), "{}", plain.text);
        let families = open.text.matches("# TYPE ").count();
        assert_eq!(plain.text.matches("# TYPE ").count(), families);
        if let Some(python) = parser_python() {
            assert_eq!(parse(&python, "openmetrics", &open.text), families, "{}", open.text);
            assert_eq!(parse(&python, "classic", &plain.text), families, "{}", plain.text);
        }
    }
}

// ---- The official Python client's parsers ---------------------------------------------------

/// The Python client's version, installed from PyPI into `target/prometheus-parser-venv`.
const PROMETHEUS_CLIENT: &str = "0.26.0";

/// Reads a page from stdin with the classic or the OpenMetrics parser; prints the number of
/// families; fails on a family without type (`unknown`: a sample its `# TYPE` does not name)
/// or without samples.
const PARSE: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families as classic
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
parse = openmetrics if sys.argv[1] == "openmetrics" else classic
families = list(parse(sys.stdin.read()))
bad = [(f.name, f.type) for f in families if f.type in ("unknown", "untyped") or not f.samples]
if bad:
    sys.exit(f"untyped or empty families: {bad}")
print(len(families))
"#;

/// Whether a missing parser must fail the run: CI (`CI=true`) or `GC_REQUIRE_PROMETHEUS_PARSER=1`.
fn parser_required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("GC_REQUIRE_PROMETHEUS_PARSER").is_ok_and(|v| v.trim() == "1")
}

/// The Python of a virtualenv holding `prometheus-client` at [`PROMETHEUS_CLIENT`], made when
/// missing. `None` (after a note) when that cannot be done here and it is not required.
fn parser_python() -> Option<std::path::PathBuf> {
    match python_with(
        "prometheus-parser-venv",
        "prometheus-client",
        PROMETHEUS_CLIENT,
    ) {
        Ok(python) => Some(python),
        Err(line) => {
            assert!(
                !parser_required(),
                "{line}, and the parser is required (CI)"
            );
            eprintln!("\n!!!!!!!! SKIPPED: {line}; the metrics pages were not parsed by Prometheus' Python client !!!!!!!!\n");
            None
        }
    }
}

/// The number of families `mode`'s parser reads in `page` (panics on a parse failure).
fn parse(python: &std::path::Path, mode: &str, page: &str) -> usize {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(python)
        .args(["-c", PARSE, mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{mode} parser: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}
