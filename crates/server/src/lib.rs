//! gc-server: configuration, wiring and start-up. Thin by design: it builds the adapters,
//! hands them to the HTTP layer and starts actix-web.

pub mod admin_cli;
pub mod cli;
pub mod config;
pub mod guard;
pub mod key_recheck;
pub mod protocol;
pub mod upstream;

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use actix_web::dev::ServerHandle;
use actix_web::{middleware::from_fn, web, App, HttpServer};
use anyhow::{bail, Context};
use chrono::{Duration, Utc};
use gc_auth::{BcryptHasher, Credentials, MasterKey, Sealer};
use gc_domain::model::Role;
use gc_domain::policy::runs::RunEvent;
use gc_domain::ports::Store;
use gc_domain::services::accounts::{create_account, AccountPolicy, PasswordHasher, Signup};
use gc_domain::services::{run_records, Storage};
use gc_domain::values::Region;
use gc_gateway::Gateways;
use gc_gateway::{GatewayConfig, RegionGateway};
use gc_guard::executor::{ExecutorConfig, ScanExecutor};
use gc_guard::fetch::{FetchConfig, GitHubFetcher};
use gc_guard::Limits;
use gc_http_api::gateway::RunRecorder;
use gc_http_api::guard::GuardService;
use gc_http_api::state::Adapters;
use gc_http_api::{AppState, HttpSettings};
use gc_persistence::{owner_only, DbStore, PoolOptions};
use tokio::sync::mpsc;

pub use config::Config;

/// Opens the database and applies pending migrations.
pub fn open_store(config: &Config) -> anyhow::Result<DbStore> {
    let default_size = if config.database_url.starts_with("sqlite") {
        8
    } else {
        16
    };
    private_data_dir(config)?;
    let store = gc_persistence::open(
        &config.database_url,
        PoolOptions {
            max_size: config.db_pool_size.unwrap_or(default_size),
            connection_timeout: std::time::Duration::from_secs(3),
            ..PoolOptions::default()
        },
    )
    .context("opening the database")?;
    let applied = store.migrate().context("migrating the database")?;
    if !applied.is_empty() {
        tracing::info!(migrations = ?applied, backend = store.backend(), "applied migrations");
    }
    Ok(store)
}

/// The password hasher at the configured cost (a warning below 10).
pub fn hasher(config: &Config) -> anyhow::Result<BcryptHasher> {
    if !(4..=31).contains(&config.bcrypt_cost) {
        bail!("GC_BCRYPT_COST must be between 4 and 31");
    }
    if config.bcrypt_cost < 10 {
        tracing::warn!(
            cost = config.bcrypt_cost,
            "bcrypt cost below 10: for tests only"
        );
    }
    BcryptHasher::new(config.bcrypt_cost).context("preparing bcrypt")
}

/// The master key from `GC_MASTER_KEY`, or from `master.key` in the data folder, generated
/// (mode 0600) on first start with a warning.
pub fn master_key(config: &Config) -> anyhow::Result<MasterKey> {
    if let Some(raw) = &config.master_key {
        return MasterKey::from_base64(raw).context("GC_MASTER_KEY");
    }
    let path = config.data_dir().join("master.key");
    if let Ok(raw) = std::fs::read_to_string(&path) {
        return MasterKey::from_base64(&raw).with_context(|| format!("{}", path.display()));
    }
    private_data_dir(config)?;
    let key = MasterKey::generate();
    write_secret_file(&path, &key.to_base64())?;
    tracing::warn!(
        path = %path.display(),
        "GC_MASTER_KEY is not set: generated a master key; back it up, or set GC_MASTER_KEY"
    );
    Ok(key)
}

/// The default data folder, `data` in the working directory (that of the default
/// `GC_DATABASE_URL`, and of the generated master key), is made owner-only (0700) on Unix when
/// others may enter it, with a warning (gc creates its folders 0700 itself). A folder the
/// operator chose (the parent of another SQLite path) is left as it is: it may be `/tmp`; the
/// files gc writes there are 0600 anyway.
pub fn private_data_dir(config: &Config) -> anyhow::Result<()> {
    let dir = config.data_dir();
    // `data` or `./data`.
    let default = dir
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .eq(Path::new(DEFAULT_DATA_DIR).components());
    if !default {
        return Ok(());
    }
    owner_only::tighten(&dir, owner_only::Kind::Folder, "the data folder");
    Ok(())
}

/// The data folder when the configuration names no other.
const DEFAULT_DATA_DIR: &str = "data";

/// Writes `content` into the new file `path`, mode 0600 on Unix, creating its folder and the
/// missing parents 0700.
fn write_secret_file(path: &Path, content: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        owner_only::create_folder(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut file =
        owner_only::create_file(path).with_context(|| format!("creating {}", path.display()))?;
    file.write_all(content.as_bytes())?;
    Ok(())
}

/// Creates the bootstrap admin of `GC_BOOTSTRAP_ADMIN_EMAIL` when it does not exist.
pub fn bootstrap_admin(
    config: &Config,
    store: &dyn Store,
    hasher: &dyn PasswordHasher,
) -> anyhow::Result<()> {
    let (Some(email), Some(password)) = (
        &config.bootstrap_admin_email,
        &config.bootstrap_admin_password,
    ) else {
        if config.bootstrap_admin_email.is_some() {
            bail!("GC_BOOTSTRAP_ADMIN_EMAIL is set without GC_BOOTSTRAP_ADMIN_PASSWORD");
        }
        return Ok(());
    };
    // An existing admin is left alone before the password is checked: a password set before
    // the password policy (decision 0026) must not stop the server from starting.
    let existing = gc_domain::values::Email::parse("email", email)
        .map_err(|e| anyhow::anyhow!("bootstrap admin: {e}"))?;
    if store
        .find_user_by_email(&existing)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .is_some()
    {
        return Ok(());
    }
    let signup = Signup::parse(email, password.clone(), "Administrator")
        .map_err(|e| anyhow::anyhow!("bootstrap admin: {e}"))?;
    create_account(
        store,
        hasher,
        &signup,
        Role::PlatformAdmin,
        None,
        Utc::now(),
    )
    .map_err(|e| anyhow::anyhow!("bootstrap admin: {e}"))?;
    tracing::info!(email = %signup.email.as_str(), "created the bootstrap admin");
    Ok(())
}

/// The region gateways whose URLs are configured.
pub fn gateways(config: &Config) -> anyhow::Result<HashMap<Region, RegionGateway>> {
    let mut out = HashMap::new();
    for (region, url, model, models) in [
        (
            Region::Aihk,
            &config.gateway_aihk_url,
            &config.gateway_aihk_model,
            &config.gateway_aihk_models,
        ),
        (
            Region::Aica,
            &config.gateway_aica_url,
            &config.gateway_aica_model,
            &config.gateway_aica_models,
        ),
    ] {
        let Some(url) = url.as_deref().filter(|u| !u.trim().is_empty()) else {
            continue;
        };
        let gateway = RegionGateway::new(GatewayConfig {
            base_url: url.trim().to_owned(),
            default_model: model.clone(),
            timeout: std::time::Duration::from_secs(config.gateway_timeout_s.max(1)),
            connect_timeout: std::time::Duration::from_secs(
                config.gateway_connect_timeout_s.max(1),
            ),
            models: models.clone(),
        })
        .with_context(|| format!("GC_GATEWAY_{}_URL", region.as_str()))?;
        out.insert(region, gateway);
    }
    Ok(out)
}

/// The sealer for upstream keys: the current master key, and older ones for opening.
pub fn sealer(config: &Config) -> anyhow::Result<Sealer> {
    let current = master_key(config)?;
    let previous = config
        .master_key_previous
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(MasterKey::from_base64)
        .collect::<Result<Vec<_>, _>>()
        .context("GC_MASTER_KEY_PREVIOUS")?;
    Ok(Sealer::new(&current, &previous))
}

/// The Guard's GitHub fetch settings (also used by `gc-server guard scan URL`).
pub fn fetch_config(config: &Config) -> FetchConfig {
    FetchConfig {
        api_base: config.github_api_url.trim_end_matches('/').to_owned(),
        codeload_base: config.github_codeload_url.trim_end_matches('/').to_owned(),
        token: config.github_token.clone().filter(|t| !t.trim().is_empty()),
        limits: Limits {
            timeout_ms: config.guard_timeout_s.max(1).saturating_mul(1000),
            ..Limits::CONTRACT
        },
        ..FetchConfig::default()
    }
}

/// The Guard: its bounded executor with the GitHub fetcher, and the anonymous throttle
/// (rules compile on the first scan).
pub fn guard(config: &Config) -> anyhow::Result<guard::GuardAdapter> {
    let fetcher = GitHubFetcher::new(fetch_config(config))
        .context("GC_GITHUB_API_URL / GC_GITHUB_CODELOAD_URL")?;
    let defaults = ExecutorConfig::default();
    let concurrency = config
        .guard_concurrency
        .unwrap_or(defaults.concurrency)
        .max(1);
    let executor = ScanExecutor::new(
        fetcher,
        ExecutorConfig {
            concurrency,
            queue: config.guard_queue.unwrap_or(2 * concurrency),
            per_account: config.guard_per_caller.max(1),
            per_anonymous: config.guard_per_anon_ip.max(1),
            anonymous_percent: config.guard_anon_share.min(100),
            memory_bytes: config.guard_memory_mib.max(1).saturating_mul(1024 * 1024),
        },
    )
    .context("starting the Guard's executor")?;
    Ok(guard::GuardAdapter::new(
        executor,
        config.guard_anon_per_min,
        config.per_ip_clients_max.max(1),
    ))
}

/// The state and the run-record writer that goes with it.
pub struct Prepared {
    pub state: AppState,
    store: Arc<dyn Store>,
    runs: mpsc::Receiver<RunEvent>,
}

/// Everything the HTTP layer needs, built from configuration.
pub fn build_state(config: &Config) -> anyhow::Result<Prepared> {
    build_state_with(config, open_store(config)?)
}

/// `GC_USAGE_REPORTS_MAX`, or a quarter of the database pool; never more than half of it (and
/// at least one), so usage reports can never hold every connection (decision 0027).
fn usage_reports_max(config: &Config) -> usize {
    let sqlite = config.database_url.starts_with("sqlite");
    let pool = config.db_pool_size.unwrap_or(if sqlite { 8 } else { 16 }) as usize;
    config
        .usage_reports_max
        .unwrap_or(pool / 4)
        .clamp(1, (pool / 2).max(1))
}

/// [`build_state`] on a store opened (and migrated) by the caller.
pub fn build_state_with(config: &Config, store: DbStore) -> anyhow::Result<Prepared> {
    let hasher = hasher(config)?;
    bootstrap_admin(config, &store, &hasher)?;
    key_recheck::note_gateway_urls(config, &store);
    let gateways = Arc::new(Gateways::new(gateways(config)?));
    let sealer = sealer(config)?;
    let (recorder, runs) = RunRecorder::channel(config.run_queue_test_size.unwrap_or(RUN_QUEUE));
    let policy = AccountPolicy {
        session_idle: Duration::hours(config.session_idle_hours.max(1)),
        session_absolute: Duration::days(config.session_max_days.max(1)),
        ..AccountPolicy::default()
    };
    let http = HttpSettings {
        public_origin: config.public_origin.trim_end_matches('/').to_owned(),
        signup_open: config.signup == "open",
        chat_completions: config.chat_completions,
        trusted_proxies: config.trusted_proxies.clone(),
        body_timeout: std::time::Duration::from_secs(config.body_timeout_s.max(1)),
        hash_queue: config.hash_queue,
        hash_reserved: config.hash_reserved,
        auth_per_ip_per_min: config.auth_per_ip_per_min.max(1),
        auth_per_ip_in_flight: config.auth_per_ip_in_flight.max(1),
        per_ip_clients_max: config.per_ip_clients_max.max(1),
        metrics_on_main: config.metrics && config.metrics_bind.is_none(),
        usage_reports_per_tenant: config.usage_reports_per_tenant.max(1),
        usage_reports_max: usage_reports_max(config),
        usage_report_hold: std::time::Duration::from_millis(config.usage_report_test_hold_ms),
        ..HttpSettings::default()
    };
    let hasher = Arc::new(hasher);
    // The dummy hash for unknown emails costs as much as a real one: make it in the
    // background so start-up does not wait for it.
    let warm = Arc::clone(&hasher);
    std::thread::spawn(move || {
        warm.dummy_hash();
    });
    let pool = store.clone();
    let store: Arc<dyn Store> = Arc::new(store);
    let adapters = Adapters {
        store: Arc::clone(&store),
        hasher,
        credentials: Arc::new(Credentials),
        sealer: Arc::new(sealer),
        checks: Arc::new(upstream::GatewayChecks(Arc::clone(&gateways))),
        upstream: gateways,
    };
    let guard = Arc::new(GuardService::new(Arc::new(guard(config)?)));
    let state = AppState::new(adapters, policy, http, recorder, guard);
    state
        .quotas()
        .set_completion_default(config.reserve_completion_tokens);
    state.quotas().set_catalog(config.model_catalog()?);
    state.metrics.set_pool_probe(move || {
        let (in_use, idle) = pool.pool_stats();
        gc_http_api::metrics::PoolStats { in_use, idle }
    });
    Ok(Prepared { state, store, runs })
}

/// Places in the run-record queue (decision 0033). Each run takes one before it is admitted
/// and holds it until its record is sent (a stream: until it ends), so this bounds the runs in
/// flight plus the records waiting for the writer; a full queue refuses new runs with 503
/// `busy` and `Retry-After: 1` instead of losing records. Streams may hold half of the places
/// (8,192; issue 33 asks for 1,000 at once), so short runs always keep the other half. A held
/// place costs nothing until its record is sent (tokio allocates slots in blocks as records
/// arrive); a waiting record is its activity and usage lines, a few hundred bytes, so a full
/// queue is a few MiB. At 19,000 runs a second it holds more than 0.8 s of a stalled writer
/// before callers are asked to retry.
const RUN_QUEUE: usize = 16_384;

/// The run-record queue's receiving end, as the writer's [`run_records::RunQueue`].
struct QueueEnd(mpsc::Receiver<RunEvent>);

impl run_records::RunQueue for QueueEnd {
    async fn recv(&mut self) -> Option<RunEvent> {
        self.0.recv().await
    }
    fn try_recv(&mut self) -> Option<RunEvent> {
        self.0.try_recv().ok()
    }
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// The store on actix's blocking pool, as the writer's [`Storage`]: a pool that is gone
/// answers `Unavailable` (retried as a database that is down).
struct Blocking(Arc<dyn Store>);

impl Storage for Blocking {
    type Store = dyn Store;

    async fn run<T, F>(&self, work: F) -> gc_domain::DomainResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store) -> gc_domain::DomainResult<T> + Send + 'static,
    {
        let store = Arc::clone(&self.0);
        match web::block(move || work(store.as_ref())).await {
            Ok(answer) => answer,
            Err(_) => Err(gc_domain::DomainError::Unavailable {
                retry_after_secs: 1,
            }),
        }
    }
}

/// Tokio's timer, as the writer's [`run_records::Timer`].
struct Tokio;

impl run_records::Timer for Tokio {
    async fn sleep(&self, wait: std::time::Duration) {
        tokio::time::sleep(wait).await;
    }
}

/// The OpenAPI document as committed in `docs/openapi.json`.
pub fn openapi_document() -> String {
    gc_http_api::openapi::document()
}

/// A started server.
pub struct Running {
    pub addr: SocketAddr,
    pub handle: ServerHandle,
    pub server: actix_web::dev::Server,
    /// The run-record writer; ends once the server has stopped and the queue is flushed.
    pub writer: tokio::task::JoinHandle<()>,
    /// The metrics-only listener (`GC_METRICS_BIND`), when configured.
    pub metrics_addr: Option<SocketAddr>,
    metrics_handle: Option<ServerHandle>,
}

impl Running {
    /// Serves until stopped, then flushes the run-record queue.
    pub async fn wait(self) -> anyhow::Result<()> {
        self.server.await.context("server")?;
        if let Some(metrics) = self.metrics_handle {
            metrics.stop(true).await;
        }
        if self.writer.await.is_err() {
            tracing::error!("the run-record writer failed");
        }
        Ok(())
    }
}

/// Binds and starts the server (not yet awaited). With `handle_signals`, SIGTERM and SIGINT
/// stop it gracefully: in-flight requests finish.
/// Must be called from within an actix (tokio) runtime.
pub fn start(config: &Config, prepared: Prepared, handle_signals: bool) -> anyhow::Result<Running> {
    let Prepared { state, store, runs } = prepared;
    let writer = actix_web::rt::spawn(run_records::write_runs(
        Blocking(store),
        QueueEnd(runs),
        state.token_reads(),
        Tokio,
        std::time::Duration::from_millis(config.run_writer_test_hold_ms),
    ));
    let data = web::Data::new(state);
    // Keys judged under another gateway configuration are probed again, in the background.
    key_recheck::spawn(config, data.clone())?;
    let workers = config
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let max_connections = connection_cap(config);
    let (metrics_addr, metrics_handle) = match config.metrics_bind.filter(|_| config.metrics) {
        Some(bind) => {
            let (addr, handle) = start_metrics(bind, data.clone(), handle_signals)?;
            (Some(addr), Some(handle))
        }
        None => (None, None),
    };
    // Slow clients: headers must arrive in time (else 408 and close; bodies have their own
    // deadline in `request_context`), idle connections are closed, and the open connections
    // stay below the file-descriptor limit. This is `HttpServer`'s own assembly (actix-web
    // 4.18, `HttpServer::listen`), with one difference: each connection is wrapped in
    // [`protocol::Checked`], so the request heads actix-http would refuse with a bare
    // 400/431 are answered with the API's JSON error and a request id.
    let listener = listen(config.bind).with_context(|| format!("binding {}", config.bind))?;
    let addr = listener.local_addr().context("the server has no address")?;
    let header_timeout = std::time::Duration::from_secs(config.header_timeout_s.max(1));
    let keep_alive = std::time::Duration::from_secs(config.keep_alive_s.max(1));
    let mut builder = actix_server::Server::build();
    let shutdown_signal = builder.graceful_shutdown_signal();
    builder = builder
        .shutdown_timeout(30)
        .max_concurrent_connections(max_connections.div_ceil(workers).max(1))
        .workers(workers)
        // Few blocking threads per worker: database work waits for a pooled connection
        // anyway, and every extra thread costs memory (stacks, allocator arenas).
        .worker_max_blocking_threads(config.blocking_threads.max(1));
    if !handle_signals {
        builder = builder.disable_signals();
    }
    let builder = builder
        .listen("gc-http", listener, move || {
            use actix_service::ServiceFactoryExt;
            let data = data.clone();
            let app = App::new()
                .wrap(from_fn(gc_http_api::request_context))
                .configure(move |cfg| gc_http_api::configure(cfg, data))
                .configure(gc_console::config)
                // Last, so every registered route wins: the console's pages, else the JSON 404.
                .default_service(web::to(fallback));
            let app = actix_service::IntoServiceFactory::into_factory(app)
                .map_err(|e: actix_web::Error| e.error_response());
            let signal = shutdown_signal.clone();
            let http = actix_http::HttpService::build()
                .graceful_shutdown_signal(move || {
                    let signal = signal.clone();
                    async move { signal.notified().await }
                })
                .keep_alive(keep_alive)
                // The first head's deadline is `protocol::Checked`'s (a JSON 408).
                .client_request_timeout(std::time::Duration::ZERO)
                .client_disconnect_timeout(std::time::Duration::from_secs(1))
                .h1_allow_half_closed(true)
                .local_addr(addr)
                .finish(actix_service::map_config(app, |()| {
                    actix_web::dev::AppConfig::default()
                }));
            actix_service::fn_service(move |io: actix_web::rt::net::TcpStream| async move {
                // A stream's small writes (its head, then each event) go out at once: with
                // Nagle, a write waits while an earlier one is unacknowledged. actix-http sets
                // this only through its own `.tcp()` builder, which this assembly does not use.
                if let Err(e) = io.set_nodelay(true) {
                    tracing::debug!(error = %e, "TCP_NODELAY not set on an accepted socket");
                }
                let peer = io.peer_addr().ok();
                Ok::<_, actix_http::error::DispatchError>((
                    protocol::Checked::new(io, header_timeout),
                    actix_http::Protocol::Http1,
                    peer,
                ))
            })
            .and_then(http)
        })
        .with_context(|| format!("serving {addr}"))?;
    let server = builder.run();
    Ok(Running {
        addr,
        handle: server.handle(),
        server,
        writer,
        metrics_addr,
        metrics_handle,
    })
}

/// A listening socket as `HttpServer::bind` makes it: address reuse, a backlog of 1024.
fn listen(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)?.into_std()
}

/// What answers a path no route claims: the console's HTML shell for the console's own pages
/// (`gc_console::is_console_path`), the API's JSON 404 (written by the request-context
/// middleware) for every other path, under `/api` or not.
async fn fallback(req: actix_web::HttpRequest) -> actix_web::HttpResponse {
    if gc_console::is_console_path(req.path()) {
        gc_console::page(req).await
    } else {
        gc_http_api::middleware::not_found().await
    }
}

/// Descriptors kept for everything but client connections: the database pool, upstream and
/// GitHub connections, files, the listener.
const RESERVED_FDS: u64 = 256;

/// Raises the soft limit on open files to the hard limit (logged), and returns the soft limit
/// in force.
pub fn raise_fd_limit() -> u64 {
    #[cfg(unix)]
    {
        match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(limit) => {
                tracing::debug!(limit, "open-file limit");
                limit
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read or raise the open-file limit");
                1024
            }
        }
    }
    #[cfg(not(unix))]
    {
        8192
    }
}

/// Open client connections at most: `GC_MAX_CONNECTIONS`, never above the open-file limit less
/// [`RESERVED_FDS`].
pub fn connection_cap(config: &Config) -> usize {
    let fd_room = raise_fd_limit().saturating_sub(RESERVED_FDS).max(64);
    let room = usize::try_from(fd_room).unwrap_or(usize::MAX);
    config.max_connections.map_or(room, |m| m.clamp(1, room))
}

/// A one-worker listener that serves only `GET /metrics` (`GC_METRICS_BIND`).
fn start_metrics(
    bind: SocketAddr,
    data: web::Data<AppState>,
    handle_signals: bool,
) -> anyhow::Result<(SocketAddr, ServerHandle)> {
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .configure(gc_http_api::metrics::config)
    })
    .workers(1)
    .bind(bind)
    .with_context(|| format!("binding GC_METRICS_BIND {bind}"))?;
    if !handle_signals {
        server = server.disable_signals();
    }
    let addr = server
        .addrs()
        .first()
        .copied()
        .context("the metrics listener has no address")?;
    let server = server.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    Ok((addr, handle))
}

/// Sets up tracing as configured. Request logs carry method, path, status and request id;
/// never bodies, cookies or authorization headers.
///
/// Text lines carry colour codes only when standard error is a terminal (and `NO_COLOR` is
/// unset): a log written to a file or a pipe is plain text.
pub fn init_tracing(config: &Config) {
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    init_tracing_with(config, std::io::stderr, ansi);
}

/// [`init_tracing`] writing to `writer` (tests capture the lines).
///
/// Client protocol errors (bad header bytes, a duplicate `Content-Length`, a reset
/// connection) are the client's doing, yet actix-http reports them at ERROR as
/// `actix_http::h1::dispatcher` "stream error". ERROR is kept for gc's own faults: those events
/// are written again at DEBUG under the target `gc_server::client_protocol` instead, so no client
/// can flood the error log.
pub fn init_tracing_to<W>(config: &Config, writer: W)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    init_tracing_with(config, writer, false);
}

/// [`init_tracing_to`], with colour codes in text lines when `ansi`.
fn init_tracing_with<W>(config: &Config, writer: W, ansi: bool)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let filter = tracing_subscriber::EnvFilter::try_new(&config.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = if config.log_format == "json" {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(writer)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(writer)
            .boxed()
    };
    let not_client_protocol =
        tracing_subscriber::filter::filter_fn(|meta| !is_client_protocol_error(meta));
    // The level filter is global and outermost, not one layer's filter: a callsite it turns
    // off is then never asked about again, and its level is the process's maximum, so a
    // disabled `trace!` in actix-http or hyper costs one comparison. As one layer's filter it
    // made every such event ask the filters each time (2-3 % of a `/run`'s instructions,
    // issue 14). Both layers see only what it lets through, as before: the client protocol
    // errors it passes are ERROR, and their DEBUG copies pass it only when configured.
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(not_client_protocol))
        .with(
            ClientProtocolErrors.with_filter(tracing_subscriber::filter::filter_fn(
                is_client_protocol_error,
            )),
        )
        .with(filter)
        .try_init();
}

/// actix-http's report of a connection that failed on the client's side.
fn is_client_protocol_error(meta: &tracing::Metadata<'_>) -> bool {
    *meta.level() == tracing::Level::ERROR
        && meta.target().starts_with("actix_http::h1::dispatcher")
}

/// Writes actix-http's client protocol errors again at DEBUG (see [`init_tracing_to`]).
struct ClientProtocolErrors;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ClientProtocolErrors {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut message = MessageText(String::new());
        event.record(&mut message);
        tracing::debug!(
            target: "gc_server::client_protocol",
            error = %message.0,
            "client protocol error"
        );
    }
}

/// The `message` field of an event.
struct MessageText(String);

impl tracing::field::Visit for MessageText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}
