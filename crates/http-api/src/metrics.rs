//! Prometheus metrics (`GET /metrics`), every name starting with `gc_`.
//!
//! The page comes in the format the scraper asks for (`Accept`): OpenMetrics 1.0.0
//! (`application/openmetrics-text; version=1.0.0`, what Prometheus asks for first, ending in
//! `# EOF`), else the classic text format 0.0.4 (`text/plain; version=0.0.4`, what `curl` and
//! `promtool check metrics` read). The registry encodes OpenMetrics; [`classic`] rewrites it.
//!
//! Labels are bounded sets only: route templates (never raw paths), methods, statuses,
//! regions, outcomes and refusal reasons. No tenant, member or key id is ever a label.
//! The database pool and the run-record queue are read when the page is scraped.

use std::sync::{Arc, OnceLock};

use actix_web::http::header::CONTENT_TYPE;
use actix_web::{web, HttpResponse};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::state::AppState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: &'static str,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    region: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RegionLabels {
    region: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    region: &'static str,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    state: &'static str,
}

/// The database pool as the binary sees it: connections in use and idle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub in_use: u32,
    pub idle: u32,
}

type PoolProbe = Box<dyn Fn() -> PoolStats + Send + Sync>;
type QueueProbe = Box<dyn Fn() -> usize + Send + Sync>;

/// Every metric of the service. Cheap to update from any thread.
pub struct Metrics {
    registry: Registry,
    http_requests: Family<HttpLabels, Counter>,
    runs: Family<RunLabels, Counter>,
    upstream_latency: Family<RegionLabels, Histogram>,
    added_latency: Family<RouteLabels, Histogram>,
    tokens: Family<TokenLabels, Counter>,
    quota_refusals: Family<ReasonLabels, Counter>,
    guard_scans: Family<VerdictLabels, Counter>,
    db_pool: Family<PoolLabels, Gauge>,
    readiness_checks: Family<ResultLabels, Counter>,
    /// Record lists answered from this node's kept answers and read from the database.
    lists_kept: Counter,
    lists_read: Counter,
    run_queue_depth: Gauge,
    /// Runs refused 503 `busy` for want of a place in the run writer's queue (decision 0033).
    runs_busy: Counter,
    /// Key verdicts and activity lines dropped because the run writer's queue was full.
    run_records_dropped: Counter,
    /// The run series of each region and route, kept from their first use.
    kept: KeptSeries,
    pool_probe: OnceLock<PoolProbe>,
    queue_probe: OnceLock<QueueProbe>,
}

/// The routes every run names, in the order of [`KeptSeries`]' slots (regions are in the
/// order of `Region::ALL`).
const RUN_ROUTES: [&str; 2] = ["/run", "/chat/completions"];

fn regions() -> [&'static str; 2] {
    gc_domain::values::Region::ALL.map(gc_domain::values::Region::as_str)
}

/// The series every run updates, resolved from their families at first use and kept (each
/// shares its family's value): a family lookup hashes its labels and takes the family's lock,
/// six times per run (issue 14). Kept from first use, not created up front, so `/metrics`
/// shows a series only once something was counted in it, as before. Labels outside these
/// fixed sets (an outcome other than `ok`) are looked up in their family each time.
#[derive(Default)]
struct KeptSeries {
    /// Per region: runs with outcome `ok`, prompt and completion tokens, upstream latency.
    ok_runs: [OnceLock<Counter>; 2],
    prompt_tokens: [OnceLock<Counter>; 2],
    completion_tokens: [OnceLock<Counter>; 2],
    upstream_latency: [OnceLock<Histogram>; 2],
    /// Per route: gc's added latency.
    added_latency: [OnceLock<Histogram>; 2],
}

/// Updates, with `update`, the series of `labels` in `family`: the one kept in `slots` for
/// `key`'s place in `keys` (resolved from the family at first use), or, for a key outside
/// `keys`, the family's own, looked up now.
fn update_kept<L, M, C>(
    family: &Family<L, M, C>,
    labels: &L,
    slots: &[OnceLock<M>; 2],
    (keys, key): ([&str; 2], &str),
    update: impl FnOnce(&M),
) where
    L: Clone + std::hash::Hash + Eq,
    M: Clone,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    let slot = keys
        .iter()
        .position(|k| *k == key)
        .and_then(|i| slots.get(i));
    match slot {
        Some(slot) => update(slot.get_or_init(|| family.get_or_create(labels).clone())),
        None => update(&family.get_or_create(labels)),
    }
}

fn latency_histogram() -> Histogram {
    // 1 ms to ~16 s.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.001, 2.0, 15,
    ))
}

fn added_histogram() -> Histogram {
    // 0.1 ms to ~0.4 s: gc's own work is small.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0001, 2.0, 13,
    ))
}

/// Registers `metric` under `name` with its help text and hands it back (the registry keeps a
/// clone that reads the same values).
fn registered<M>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M
where
    M: prometheus_client::registry::Metric + Clone,
{
    registry.register(name, help, metric.clone());
    metric
}

/// Registers each metric of the table in `registry`, in the table's order (the page's), under
/// its name and help text, and binds it to the name before `=` (the registry keeps a clone
/// that reads the same values): one row a metric, `name = "gc_…", "help", metric;`.
macro_rules! register {
    ($registry:ident; $( $var:ident = $name:literal, $help:literal, $metric:expr; )*) => {
        $( let $var = registered(&mut $registry, $name, $help, $metric); )*
    };
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        register! { registry;
            http_requests = "gc_http_requests", "HTTP requests by method, route template and status", Family::<HttpLabels, Counter>::default();
            runs = "gc_runs", "Runs (/run and /chat/completions) that reached the upstream, by region and outcome", Family::<RunLabels, Counter>::default();
            upstream_latency = "gc_upstream_latency_seconds", "Time from sending a run upstream to its response (headers, for streams), retries included", Family::<RegionLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
            added_latency = "gc_added_latency_seconds", "Time gc itself adds to a run before its response starts (authentication, quotas, keys)", Family::<RouteLabels, Histogram>::new_with_constructor(added_histogram as fn() -> Histogram);
            tokens = "gc_tokens", "Tokens reported by the upstream, by region and kind (prompt, completion)", Family::<TokenLabels, Counter>::default();
            quota_refusals = "gc_quota_refusals", "Runs refused by a quota before any upstream call, by reason", Family::<ReasonLabels, Counter>::default();
            guard_scans = "gc_guard_scans", "Guard scans by verdict", Family::<VerdictLabels, Counter>::default();
            db_pool = "gc_db_pool_connections", "Database pool connections by state (in_use, idle)", Family::<PoolLabels, Gauge>::default();
            readiness_checks = "gc_readiness_checks", "Database checks of the readiness probe, by result (ok, timeout, failed; busy: the previous check was still waiting, none was started)", Family::<ResultLabels, Counter>::default();
            lists = "gc_record_lists", "Record lists answered, by source: kept (this node's answer, the tenant's record version unchanged) or read", Family::<SourceLabels, Counter>::default();
            run_queue_depth = "gc_run_record_queue_depth", "Places taken in the run-record queue: records and key verdicts waiting for the writer, and places held by runs in flight", Gauge::default();
            runs_busy = "gc_runs_refused_busy", "Runs refused with 503 busy before admission: the run-record queue had no free place (the writer is behind)", Counter::default();
            run_records_dropped = "gc_run_records_dropped", "Key verdicts and activity lines dropped because the run-record queue was full (runs' own records always have a place)", Counter::default();
        }
        let lists_kept = lists
            .get_or_create(&SourceLabels { source: "kept" })
            .clone();
        let lists_read = lists
            .get_or_create(&SourceLabels { source: "read" })
            .clone();
        Self {
            registry,
            http_requests,
            runs,
            upstream_latency,
            added_latency,
            tokens,
            quota_refusals,
            guard_scans,
            db_pool,
            readiness_checks,
            lists_kept,
            lists_read,
            run_queue_depth,
            runs_busy,
            run_records_dropped,
            kept: KeptSeries::default(),
            pool_probe: OnceLock::new(),
            queue_probe: OnceLock::new(),
        }
    }

    /// Where the pool's state is read at scrape time (set once by the binary).
    pub fn set_pool_probe(&self, probe: impl Fn() -> PoolStats + Send + Sync + 'static) {
        let _ = self.pool_probe.set(Box::new(probe));
    }

    /// Where the run-record queue's depth is read at scrape time.
    pub(crate) fn set_queue_probe(&self, probe: impl Fn() -> usize + Send + Sync + 'static) {
        let _ = self.queue_probe.set(Box::new(probe));
    }

    /// One HTTP request; `route` is the matched template (`/api/v1/workspace/skills/{id}`) or
    /// `unmatched`.
    pub fn http_request(&self, method: &str, route: String, status: u16) {
        let method = match method {
            "GET" => "GET",
            "POST" => "POST",
            "PATCH" => "PATCH",
            "PUT" => "PUT",
            "DELETE" => "DELETE",
            "HEAD" => "HEAD",
            "OPTIONS" => "OPTIONS",
            _ => "other",
        };
        self.http_requests
            .get_or_create(&HttpLabels {
                method,
                route,
                status,
            })
            .inc();
    }

    /// A finished run: its outcome (`ok`, `cancelled`, an error code) and tokens.
    pub fn run_finished(
        &self,
        region: &'static str,
        outcome: &'static str,
        prompt: u64,
        completion: u64,
    ) {
        let labels = RunLabels { region, outcome };
        // Only `ok` is kept: the slot must never be resolved for another outcome.
        if outcome == "ok" {
            let slots = &self.kept.ok_runs;
            update_kept(&self.runs, &labels, slots, (regions(), region), |c| {
                c.inc();
            });
        } else {
            self.runs.get_or_create(&labels).inc();
        }
        for (n, kind, slots) in [
            (prompt, "prompt", &self.kept.prompt_tokens),
            (completion, "completion", &self.kept.completion_tokens),
        ] {
            if n > 0 {
                let labels = TokenLabels { region, kind };
                update_kept(&self.tokens, &labels, slots, (regions(), region), |c| {
                    c.inc_by(n);
                });
            }
        }
    }

    /// The upstream's share and gc's own share of a run's time to its response.
    pub fn run_latency(
        &self,
        region: &'static str,
        route: &'static str,
        upstream_s: f64,
        added_s: f64,
    ) {
        let (upstream, slots) = (RegionLabels { region }, &self.kept.upstream_latency);
        update_kept(
            &self.upstream_latency,
            &upstream,
            slots,
            (regions(), region),
            |h| {
                h.observe(upstream_s);
            },
        );
        let (added, slots) = (RouteLabels { route }, &self.kept.added_latency);
        update_kept(
            &self.added_latency,
            &added,
            slots,
            (RUN_ROUTES, route),
            |h| {
                h.observe(added_s);
            },
        );
    }

    /// A run refused by a quota: `requests_per_minute`, `tokens_per_minute`, `monthly_tokens`.
    pub fn quota_refused(&self, reason: &'static str) {
        self.quota_refusals
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// A finished Guard scan and its verdict (`pass`, `warn`, `fail`), counted once by the
    /// `/guard/scan` handler; refused or failed scans have no verdict and are not counted.
    pub fn guard_scan(&self, verdict: &'static str) {
        self.guard_scans
            .get_or_create(&VerdictLabels { verdict })
            .inc();
    }

    /// One database check of the readiness probe: `ok`, `timeout`, `failed` or `busy`.
    pub fn readiness_check(&self, result: &'static str) {
        self.readiness_checks
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// A run refused `busy`: no place in the run-record queue.
    pub fn run_refused_busy(&self) {
        self.runs_busy.inc();
    }

    /// The count of key verdicts and activity lines dropped because the run-record queue was
    /// full, for the recorder to add to.
    pub fn run_records_dropped(&self) -> Counter {
        self.run_records_dropped.clone()
    }

    /// A record list answered: from a kept answer (`kept`) or read from the database.
    pub fn record_list(&self, kept: bool) {
        if kept {
            self.lists_kept.inc();
        } else {
            self.lists_read.inc();
        }
    }

    /// The page in the OpenMetrics text format (ending in `# EOF`).
    pub fn render(&self) -> String {
        if let Some(probe) = self.pool_probe.get() {
            let stats = probe();
            self.db_pool
                .get_or_create(&PoolLabels { state: "in_use" })
                .set(i64::from(stats.in_use));
            self.db_pool
                .get_or_create(&PoolLabels { state: "idle" })
                .set(i64::from(stats.idle));
        }
        if let Some(probe) = self.queue_probe.get() {
            self.run_queue_depth
                .set(i64::try_from(probe()).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            tracing::error!("encoding the metrics failed");
        }
        out
    }
}

/// The OpenMetrics content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic Prometheus text format's content type.
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an `Accept` header prefers OpenMetrics: an `application/openmetrics-text` range
/// with a quality above zero and not below that of any `text/plain` or `*/*` range.
pub fn wants_openmetrics(accept: &str) -> bool {
    let mut open = 0.0_f32;
    let mut classic = 0.0_f32;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let kind = parts.next().unwrap_or_default().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
            .find_map(|v| v.parse::<f32>().ok())
            .unwrap_or(1.0);
        match kind.as_str() {
            "application/openmetrics-text" => open = open.max(q),
            "text/plain" | "text/*" | "*/*" => classic = classic.max(q),
            _ => {}
        }
    }
    open > 0.0 && open >= classic
}

/// The classic text format 0.0.4 of an OpenMetrics page as the registry encodes it. A counter
/// family `x` (samples `x_total`) is named `x_total` in its `# HELP` and `# TYPE` lines, as
/// the classic parser looks families up by sample name; `x_created` samples, `# UNIT`
/// lines, exemplars, timestamps and `# EOF` are left out; `unknown` is `untyped`; `info`
/// families become gauges named `x_info`; gauge histograms and state sets, which the
/// classic format lacks, become `untyped`. Nothing else changes: label and help escaping are
/// the same in both formats.
pub fn classic(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<(&str, &str)> = None;
    // The family being written and the sample suffix its type drops (`_created` of counters).
    let mut family = String::new();
    let mut counter = false;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (raw, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (name, kind) = match kind {
                "counter" => (format!("{raw}_total"), "counter"),
                "gauge" | "histogram" | "summary" => (raw.to_owned(), kind),
                "info" => (format!("{raw}_info"), "gauge"),
                _ => (raw.to_owned(), "untyped"),
            };
            if let Some((_, text)) = help.take().filter(|(n, _)| *n == raw) {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            counter = kind == "counter";
            family = name;
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        // A sample: name, optional {labels}, value, then maybe a timestamp and an exemplar.
        let labels_end = match line.find(['{', ' ']) {
            Some(i) if line.as_bytes().get(i) == Some(&b'{') => label_set_end(line, i),
            Some(i) => Some(i),
            None => None,
        };
        let Some(head_end) = labels_end else { continue };
        let (head, rest) = line.split_at(head_end);
        let value = rest.split_whitespace().next().unwrap_or_default();
        let name = head.split('{').next().unwrap_or_default();
        if counter
            && name
                .strip_suffix("_created")
                .is_some_and(|f| format!("{f}_total") == family)
        {
            continue;
        }
        out.push_str(head);
        out.push(' ');
        out.push_str(value);
        out.push('\n');
    }
    out
}

/// The index just past the `}` closing the label set that opens at `open`, quotes and
/// backslash escapes respected.
fn label_set_end(line: &str, open: usize) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, b) in line.bytes().enumerate().skip(open) {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b'}' if !quoted => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// `GET /metrics`: the Prometheus page, in OpenMetrics or the classic format as `Accept` asks.
/// Public and low-cardinality on the main listener, or on its own address
/// (`GC_METRICS_BIND`); see `docs/decisions/0008-metrics.md`.
pub async fn serve(req: actix_web::HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let accept = req
        .headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let page = state.metrics.render();
    let (content_type, body) = if wants_openmetrics(accept) {
        (OPENMETRICS, page)
    } else {
        (CLASSIC, classic(&page))
    };
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, content_type))
        .insert_header((actix_web::http::header::VARY, "Accept"))
        .body(body)
}

/// Mounts `GET /metrics` (for the main app and for a metrics-only listener).
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/metrics").route(web::get().to(serve)));
}

/// Shared handle, as kept in [`AppState`].
pub type SharedMetrics = Arc<Metrics>;

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(page: &'a str, series: &str) -> Option<&'a str> {
        page.lines().find(|l| l.starts_with(series))
    }

    #[test]
    fn prometheus_asks_for_openmetrics_curl_gets_the_classic_format() {
        // Prometheus 2.x and 3.x defaults.
        assert!(wants_openmetrics("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"));
        assert!(wants_openmetrics(
            "application/openmetrics-text; version=1.0.0"
        ));
        assert!(!wants_openmetrics(""));
        assert!(!wants_openmetrics("*/*"));
        assert!(!wants_openmetrics("text/plain;version=0.0.4"));
        assert!(!wants_openmetrics(
            "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5"
        ));
        assert!(!wants_openmetrics("application/openmetrics-text;q=0"));
    }

    #[test]
    fn the_classic_page_names_each_family_by_its_samples() {
        let m = Metrics::new();
        m.run_finished("AIHK", "ok", 3, 2);
        m.run_latency("AIHK", "/run", 0.5, 0.001);
        m.http_request("GET", "/api/v1/health".into(), 200);
        let open = m.render();
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert!(
            open.contains("# TYPE gc_runs counter\ngc_runs_total{"),
            "{open}"
        );
        let page = classic(&open);
        assert!(
            !page.contains("# EOF") && !page.contains("# UNIT"),
            "{page}"
        );
        // Every sample belongs to the family its `# TYPE` line names (as the classic parser
        // reads it: the name itself, or a histogram's _bucket/_sum/_count).
        let mut family: Option<(String, String)> = None;
        let mut help: Option<String> = None;
        let mut families = 0;
        for line in page.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                assert_eq!(help.take().as_deref(), Some(name), "# HELP before {line}");
                family = Some((name.to_owned(), kind.to_owned()));
                families += 1;
                continue;
            }
            if let Some(rest) = line.strip_prefix("# HELP ") {
                help = Some(rest.split(' ').next().unwrap().to_owned());
                continue;
            }
            let (name, kind) = family.clone().unwrap_or_else(|| panic!("untyped: {line}"));
            let sample = line.split(['{', ' ']).next().unwrap();
            let ok = match kind.as_str() {
                "histogram" => [
                    name.clone() + "_bucket",
                    name.clone() + "_sum",
                    name.clone() + "_count",
                ]
                .contains(&sample.to_owned()),
                _ => sample == name,
            };
            assert!(ok, "{sample} under # TYPE {name} {kind}");
            assert!(
                line.rsplit(' ').next().unwrap().parse::<f64>().is_ok(),
                "{line}"
            );
        }
        assert_eq!(families, open.matches("# TYPE ").count());
        assert!(page.contains("# HELP gc_runs_total Runs"), "{page}");
        assert!(
            page.contains(
                "# TYPE gc_runs_total counter\ngc_runs_total{region=\"AIHK\",outcome=\"ok\"} 1\n"
            ),
            "{page}"
        );
        // Exemplars, timestamps and _created go; label sets with braces and spaces stay whole.
        let page = classic("# HELP a_seconds A.\n# TYPE a_seconds counter\n# UNIT a_seconds seconds\na_seconds_total{l=\"x} y\\\"\"} 1 123.5 # {id=\"1\"} 1.0\na_seconds_created 17.5\n# EOF\n");
        assert_eq!(page, "# HELP a_seconds_total A.\n# TYPE a_seconds_total counter\na_seconds_total{l=\"x} y\\\"\"} 1\n");
    }

    #[test]
    fn kept_series_count_in_their_own_labels_whatever_comes_first() {
        let m = Metrics::new();
        // Nothing counted yet: no run series on the page.
        assert!(line(&m.render(), "gc_runs_total{").is_none());
        // A failed run first: the kept `ok` series must not become this one.
        m.run_finished("AIHK", "upstream_error", 0, 0);
        m.run_finished("AIHK", "ok", 3, 0);
        m.run_finished("AIHK", "ok", 2, 5);
        m.run_finished("AICA", "ok", 1, 1);
        // A label outside the kept sets is still counted, in its family.
        m.run_finished("ELSEWHERE", "ok", 4, 0);
        m.run_latency("AIHK", "/chat/completions", 0.5, 0.001);
        m.run_latency("AIHK", "/run", 0.5, 0.001);
        m.run_latency("AIHK", "/run", 0.5, 0.001);
        m.run_latency("ELSEWHERE", "/other", 0.5, 0.001);
        let page = m.render();
        for (series, value) in [
            (
                r#"gc_runs_total{region="AIHK",outcome="upstream_error"}"#,
                "1",
            ),
            (r#"gc_runs_total{region="AIHK",outcome="ok"}"#, "2"),
            (r#"gc_runs_total{region="AICA",outcome="ok"}"#, "1"),
            (r#"gc_runs_total{region="ELSEWHERE",outcome="ok"}"#, "1"),
            (r#"gc_tokens_total{region="AIHK",kind="prompt"}"#, "5"),
            (r#"gc_tokens_total{region="AIHK",kind="completion"}"#, "5"),
            (r#"gc_tokens_total{region="AICA",kind="completion"}"#, "1"),
            (r#"gc_tokens_total{region="ELSEWHERE",kind="prompt"}"#, "4"),
            (r#"gc_upstream_latency_seconds_count{region="AIHK"}"#, "3"),
            (
                r#"gc_upstream_latency_seconds_count{region="ELSEWHERE"}"#,
                "1",
            ),
            (r#"gc_added_latency_seconds_count{route="/run"}"#, "2"),
            (
                r#"gc_added_latency_seconds_count{route="/chat/completions"}"#,
                "1",
            ),
            (r#"gc_added_latency_seconds_count{route="/other"}"#, "1"),
        ] {
            let found = line(&page, series).unwrap_or_else(|| panic!("{series} in {page}"));
            assert_eq!(found, format!("{series} {value}"), "{page}");
        }
        assert!(line(
            &page,
            r#"gc_tokens_total{region="ELSEWHERE",kind="completion"}"#
        )
        .is_none());
    }
}
