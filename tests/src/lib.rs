//! Test harness for the end-to-end tests: the real server on a fresh database, and actors
//! (admins, members, keys) that talk HTTP to it.
//!
//! Every test runs on SQLite and on PostgreSQL through [`both_backends!`]. The PostgreSQL
//! leg is skipped with a printed line when the server does not answer, unless
//! `GC_REQUIRE_POSTGRES=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod browser;
pub mod console;

use std::net::SocketAddr;

use gc_gateway::mock::{MockHandle, MockUpstream};
use gc_persistence::testing::{
    fresh_sqlite_url, postgres_or_skip, PostgresTestDatabase, TempDirGuard,
};
use gc_server::Config;
pub use reqwest::{Method, StatusCode};
pub use serde_json::{json, Value};

pub const ADMIN_EMAIL: &str = "root@gc.test";
pub const ADMIN_PASSWORD: &str = "admin-password-123";
pub const PASSWORD: &str = "member-password-123";
pub const ORIGIN: &str = "http://127.0.0.1:8080";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Keeps a test database alive for the test's duration.
pub enum DbGuard {
    Sqlite(TempDirGuard),
    Postgres(PostgresTestDatabase),
    /// A second node on a database another `TestApp` keeps alive.
    Shared,
}

/// A running server on its own database.
pub struct TestApp {
    pub addr: SocketAddr,
    pub base: String,
    pub client: reqwest::Client,
    pub config: Config,
    handle: actix_web::dev::ServerHandle,
    _db: DbGuard,
}

/// A fresh database URL for `backend`, or `None` when PostgreSQL is skipped.
pub fn fresh_database(backend: Backend, label: &str) -> Option<(String, DbGuard)> {
    match backend {
        Backend::Sqlite => {
            let (url, guard) = fresh_sqlite_url();
            Some((url, DbGuard::Sqlite(guard)))
        }
        Backend::Postgres => {
            let db = postgres_or_skip(label)?;
            Some((db.url().to_owned(), DbGuard::Postgres(db)))
        }
    }
}

/// The configuration tests start from: fast bcrypt, a bootstrap admin, a fixed master key.
pub fn test_config(database_url: &str) -> Config {
    let mut config = Config::with_database(database_url);
    config.bcrypt_cost = 4;
    config.workers = Some(2);
    config.bootstrap_admin_email = Some(ADMIN_EMAIL.into());
    config.bootstrap_admin_password = Some(ADMIN_PASSWORD.into());
    config.master_key = Some("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=".into());
    config.log = "warn".into();
    // Tests sign in often from one address and never flood: the per-IP limit and the hashing
    // queue have their own tests with their own settings.
    config.auth_per_ip_per_min = 100_000;
    config.auth_per_ip_in_flight = 1_000;
    config.hash_queue = 1_000;
    config
}

impl TestApp {
    /// Starts the app on a fresh database; `None` when the backend is skipped.
    pub async fn start(backend: Backend, label: &str) -> Option<Self> {
        Self::start_with(backend, label, |_| {}).await
    }

    pub async fn start_with(
        backend: Backend,
        label: &str,
        tweak: impl FnOnce(&mut Config),
    ) -> Option<Self> {
        let (url, db) = fresh_database(backend, label)?;
        let mut config = test_config(&url);
        tweak(&mut config);
        Some(Self::start_on(config, db))
    }

    /// Starts the app with this exact configuration.
    pub fn start_on(config: Config, db: DbGuard) -> Self {
        let state = gc_server::build_state(&config).expect("state");
        let running = gc_server::start(&config, state, false).expect("start");
        let handle = running.handle.clone();
        actix_web::rt::spawn(running.server);
        let addr = running.addr;
        Self {
            addr,
            base: format!("http://{addr}"),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            config,
            handle,
            _db: db,
        }
    }

    /// A second node on this app's database (same configuration, its own process state), as
    /// a multi-node deployment sharing one PostgreSQL database runs. Keep `self` alive longer.
    pub fn second_node(&self) -> Self {
        Self::start_on(self.config.clone(), DbGuard::Shared)
    }

    /// Stops the server gracefully and hands back its database (for restart tests).
    pub async fn stop(self) -> (Config, DbGuard) {
        self.handle.stop(true).await;
        (self.config, self._db)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1{}", self.base, path)
    }

    /// An anonymous caller.
    pub fn anon(&self) -> Actor {
        Actor {
            app: self.clone_ref(),
            auth: Auth::None,
            id: String::new(),
            email: String::new(),
        }
    }

    fn clone_ref(&self) -> AppRef {
        AppRef {
            base: self.base.clone(),
            client: self.client.clone(),
            origin: self.config.public_origin.clone(),
        }
    }

    /// Signs in and returns an actor carrying the session cookie.
    pub async fn signin(&self, email: &str, password: &str) -> Actor {
        let res = self
            .client
            .post(self.url("/auth/signin"))
            .json(&json!({"email": email, "password": password}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "sign-in of {email}");
        let cookie = session_cookie(&res).expect("session cookie");
        let body: Value = res.json().await.unwrap();
        Actor {
            app: self.clone_ref(),
            auth: Auth::Cookie(cookie),
            id: body["id"].as_str().unwrap().to_owned(),
            email: email.to_owned(),
        }
    }

    /// The bootstrap platform admin, signed in.
    pub async fn admin(&self) -> Actor {
        self.signin(ADMIN_EMAIL, ADMIN_PASSWORD).await
    }

    /// Creates a tenant through the admin API; returns its JSON.
    pub async fn tenant(&self, admin: &Actor, name: &str, region: &str) -> Value {
        let res = admin
            .post(
                "/admin/tenants",
                json!({"name": name, "region": region, "ai_enabled": true}),
            )
            .await;
        assert_eq!(res.status, 201, "{}", res.body);
        res.body
    }

    /// Creates a member of `tenant` through the admin API and signs it in.
    pub async fn member_of(&self, admin: &Actor, tenant: &Value) -> Actor {
        let email = format!("m{}@gc.test", unique());
        let res = admin
            .post(
                "/admin/users",
                json!({"email": email, "name": "Member", "password": PASSWORD,
                       "tenant_id": tenant["id"]}),
            )
            .await;
        assert_eq!(res.status, 201, "{}", res.body);
        self.signin(&email, PASSWORD).await
    }
}

/// A short unique suffix.
pub fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{}{}", N.fetch_add(1, Ordering::Relaxed), nanos)
}

/// The `gc_session` value from a response's `Set-Cookie`.
pub fn session_cookie(res: &reqwest::Response) -> Option<String> {
    res.headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("gc_session="))
        .map(|v| v.split(';').next().unwrap_or_default().to_owned())
        .filter(|v| !v.is_empty())
}

#[derive(Clone)]
pub struct AppRef {
    pub base: String,
    pub client: reqwest::Client,
    /// The configured public origin, sent as `Origin` on cookie requests.
    pub origin: String,
}

#[derive(Clone, Debug)]
pub enum Auth {
    None,
    Cookie(String),
    Bearer(String),
}

/// Someone calling the API.
#[derive(Clone)]
pub struct Actor {
    pub app: AppRef,
    pub auth: Auth,
    pub id: String,
    pub email: String,
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    /// `error.code` of an error body.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Actor {
    /// Creates a workspace key with these scopes (through this actor's session) and returns the
    /// secret.
    pub async fn new_key(&self, scopes: &[&str]) -> String {
        let r = self
            .post(
                "/workspace/api-keys",
                json!({"name": format!("k{}", unique()), "scopes": scopes}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.body["key"].as_str().unwrap().to_owned()
    }

    /// The same person acting through a new workspace key with these scopes.
    pub async fn keyed(&self, scopes: &[&str]) -> Actor {
        self.with_key(&self.new_key(scopes).await)
    }

    /// The same person with a workspace key instead of the cookie.
    pub fn with_key(&self, key: &str) -> Actor {
        Actor {
            auth: Auth::Bearer(key.to_owned()),
            ..self.clone()
        }
    }

    pub fn cookie(&self) -> Option<&str> {
        match &self.auth {
            Auth::Cookie(c) => Some(c),
            _ => None,
        }
    }

    /// A request builder with credentials and, for cookies, the service's Origin.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut rb = self
            .app
            .client
            .request(method, format!("{}/api/v1{}", self.app.base, path));
        match &self.auth {
            Auth::None => {}
            Auth::Cookie(c) => {
                rb = rb
                    .header("cookie", format!("gc_session={c}"))
                    .header("origin", &self.app.origin);
            }
            Auth::Bearer(k) => rb = rb.bearer_auth(k),
        }
        rb
    }

    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Reply {
        read(rb.send().await.unwrap()).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(self.request(Method::POST, path).json(&body))
            .await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Reply {
        self.send(self.request(Method::PATCH, path).json(&body))
            .await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(self.request(Method::DELETE, path)).await
    }
}

pub async fn read(res: reqwest::Response) -> Reply {
    let status = res.status();
    let headers = res.headers().clone();
    let text = res.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
    }
}

/// Asserts an error reply: status, code, and the uniform body with a request id.
#[track_caller]
pub fn assert_error(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.text);
    assert_eq!(reply.code(), code, "{}", reply.text);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        reply.text
    );
    let rid = reply.body["error"]["request_id"]
        .as_str()
        .unwrap_or_default();
    assert!(!rid.is_empty(), "{}", reply.text);
    assert_eq!(reply.header("x-request-id"), Some(rid));
}

/// Runs an async test body `fn(app: TestApp)` on SQLite and on PostgreSQL as two tests.
#[macro_export]
macro_rules! both_backends {
    ($(async fn $name:ident($app:ident : TestApp) $body:block)*) => {
        $(
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                async fn body($app: $crate::TestApp) $body

                #[actix_web::test]
                async fn sqlite() {
                    if let Some(app) = $crate::TestApp::start($crate::Backend::Sqlite, stringify!($name)).await {
                        body(app).await;
                    }
                }

                #[actix_web::test]
                async fn postgres() {
                    if let Some(app) = $crate::TestApp::start($crate::Backend::Postgres, stringify!($name)).await {
                        body(app).await;
                    }
                }
            }
        )*
    };
}

/// [`both_backends!`] with a configuration tweak:
/// `async fn name(app: TestApp) with |c: &mut Config| { ... }; { body }`.
#[macro_export]
macro_rules! both_backends_with {
    ($(async fn $name:ident($app:ident : TestApp) with $tweak:expr; $body:block)*) => {
        $(
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                async fn body($app: $crate::TestApp) $body

                #[actix_web::test]
                async fn sqlite() {
                    if let Some(app) = $crate::TestApp::start_with($crate::Backend::Sqlite, stringify!($name), $tweak).await {
                        body(app).await;
                    }
                }

                #[actix_web::test]
                async fn postgres() {
                    if let Some(app) = $crate::TestApp::start_with($crate::Backend::Postgres, stringify!($name), $tweak).await {
                        body(app).await;
                    }
                }
            }
        )*
    };
}

/// Polls `f` every 50 ms until it answers true, for at most 5 s (the run-record writer
/// batches for 50 ms); panics when it never does.
pub async fn eventually(mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..100 {
        if f().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the condition did not hold in time");
}

/// The world of the gateway tests: an app whose two regions are mock OpenAI-compatible
/// upstreams on loopback (AIHK `hk`, AICA `ca`, a 2 s gateway timeout), and a tenant of AIHK
/// with AI enabled and a member.
pub struct GatewayWorld {
    pub app: TestApp,
    pub hk: MockHandle,
    pub ca: MockHandle,
    pub admin: Actor,
    pub tenant: Value,
    pub member: Actor,
}

impl GatewayWorld {
    /// Starts the world on `backend`, `tweak` applied last to the configuration; `None` when
    /// the backend is skipped.
    pub async fn start(
        backend: Backend,
        label: &str,
        tweak: impl FnOnce(&mut Config),
    ) -> Option<Self> {
        let (_, hk) = MockUpstream::start().await.unwrap();
        let (_, ca) = MockUpstream::start().await.unwrap();
        let (hk_url, ca_url) = (hk.base_url(), ca.base_url());
        let app = TestApp::start_with(backend, label, |c| {
            c.gateway_aihk_url = Some(hk_url);
            c.gateway_aica_url = Some(ca_url);
            c.gateway_timeout_s = 2;
            tweak(c);
        })
        .await?;
        let admin = app.admin().await;
        let tenant = app.tenant(&admin, "Acme", "AIHK").await;
        let member = app.member_of(&admin, &tenant).await;
        Some(Self {
            app,
            hk,
            ca,
            admin,
            tenant,
            member,
        })
    }

    pub fn tenant_id(&self) -> &str {
        self.tenant["id"].as_str().unwrap()
    }

    /// Gives the tenant an AI key (label `main`) through the admin API; the answer never
    /// holds the secret.
    pub async fn add_key(&self, region: &str, secret: &str, chat_enabled: bool) -> Value {
        let r = self
            .admin
            .post(
                &format!("/admin/tenants/{}/ai-keys", self.tenant_id()),
                json!({"region": region, "secret": secret, "label": "main", "chat_enabled": chat_enabled}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert!(
            !r.text.contains(secret),
            "the secret must never be returned"
        );
        r.body
    }

    /// Sets the tenant's quotas (`PATCH /admin/tenants/{id}` with `{"limits": limits}`);
    /// returns the tenant.
    pub async fn limit_tenant(&self, limits: Value) -> Value {
        let r = self
            .admin
            .patch(
                &format!("/admin/tenants/{}", self.tenant_id()),
                json!({ "limits": limits }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.body
    }

    /// Waits until the member's usage (this month, by day) counts `n` runs: the run-record
    /// writer has stored them, and their tokens count toward the quotas.
    pub async fn runs_recorded(&self, n: u64) {
        let member = self.member.clone();
        eventually(async || member.get("/workspace/usage").await.body["data"][0]["requests"] == n)
            .await;
    }
}

/// Runs async test bodies `fn(s: World)` on SQLite and on PostgreSQL as two tests each, the
/// world made by `setup(backend, label, tweak) -> Option<World>` (`None`: skipped), `tweak`
/// a configuration change (none here):
/// `on_both_backends! { setup -> World; async fn name(s) { ... } ... }`.
#[macro_export]
macro_rules! on_both_backends {
    ($setup:ident -> $world:ty; $(async fn $name:ident($s:ident) $body:block)*) => {
        $(
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                async fn body($s: $world) $body

                #[actix_web::test]
                async fn sqlite() {
                    if let Some(s) = $setup($crate::Backend::Sqlite, stringify!($name), |_| {}).await {
                        body(s).await;
                    }
                }

                #[actix_web::test]
                async fn postgres() {
                    if let Some(s) = $setup($crate::Backend::Postgres, stringify!($name), |_| {}).await {
                        body(s).await;
                    }
                }
            }
        )*
    };
}

/// What the process's log lines say, for the tests that read them: [`CapturedLogs::install`]
/// sets the server's own subscriber (`gc_server::init_tracing_to`) to write here. The
/// subscriber is global: a test that reads the logs has its own test binary.
#[derive(Clone, Default)]
pub struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLogs {
    /// Installs the server's subscriber at `filter` (an `EnvFilter`, e.g. `trace`), text
    /// lines without colours, writing to the returned capture.
    pub fn install(filter: &str) -> Self {
        let logs = Self::default();
        let writer = logs.clone();
        let mut config = Config::with_database("");
        config.log = filter.into();
        config.log_format = "text".into();
        gc_server::init_tracing_to(&config, move || writer.clone());
        logs
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned()
    }
}

/// The Python of a virtualenv `<target>/<venv>` holding `package` at `version`, made when
/// missing (`python3 -m venv`, then pip from PyPI, once per target folder). `Err` says what
/// could not be done; the caller decides whether that skips its test or fails it.
pub fn python_with(venv: &str, package: &str, version: &str) -> Result<std::path::PathBuf, String> {
    use std::process::Command;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        std::path::PathBuf::from,
    );
    let venv = target.join(venv);
    let python = venv.join("bin/python");
    // One maker at a time in this process: a test's SQLite and PostgreSQL cases run at once,
    // and two `venv`/`pip install` into one folder break each other's install.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _making = MAKING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let has = || {
        Command::new(&python)
            .args([
                "-c",
                &format!(
                    "import sys, importlib.metadata as m; sys.exit(m.version({package:?}) != {version:?})"
                ),
            ])
            .status()
            .is_ok_and(|s| s.success())
    };
    if has() {
        return Ok(python);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status();
    let installed = made.as_ref().is_ok_and(|s| s.success())
        && Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", &format!("{package}=={version}")])
            .status()
            .is_ok_and(|s| s.success());
    if installed && has() {
        return Ok(python);
    }
    Err(format!(
        "{package} {version} could not be installed into {} ({made:?})",
        venv.display()
    ))
}
