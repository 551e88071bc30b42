//! `gc-api-check-fixture`: the world `cargo xtask api-check` tests the API document against.
//!
//! It starts the real `gc-server` binary as a child process on a fresh SQLite database, with
//! the mock upstream (region AIHK) and a fake GitHub (every repository unknown) on loopback,
//! and `/chat/completions` mounted. Through the API it creates a tenant with a ready AI key, a
//! member, and one workspace key per scope. It prints one JSON line with the base URL and the
//! credentials, then serves until its standard input closes, and stops the server.
//!
//! Usage: `gc-api-check-fixture <path to gc-server>`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gc_gateway::mock::MockUpstream;
use serde_json::{json, Value};

const ADMIN: &str = "api-check-admin@gc.test";
const PASSWORD: &str = "api-check-password-123";
const MASTER_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fake GitHub API and codeload: every repository is unknown (404).
fn fake_github() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            actix_web::HttpServer::new(|| {
                actix_web::App::new().default_service(actix_web::web::to(|| async {
                    actix_web::HttpResponse::NotFound()
                        .content_type("application/json")
                        .body(r#"{"message": "Not Found"}"#)
                }))
            })
            .workers(1)
            .listen(listener)
            .unwrap()
            .run()
            .await
            .unwrap();
        });
    });
    base
}

struct Api {
    client: reqwest::Client,
    base: String,
    origin: String,
}

impl Api {
    async fn signin(&self, email: &str) -> String {
        let r = self
            .client
            .post(format!("{}/auth/signin", self.base))
            .json(&json!({"email": email, "password": PASSWORD}))
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "sign-in of {email}: {}",
            r.status()
        );
        r.headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("gc_session="))
            .map(|v| v.split(';').next().unwrap().to_owned())
            .expect("session cookie")
    }

    async fn post(&self, path: &str, cookie: &str, body: Value) -> Value {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .header("cookie", format!("gc_session={cookie}"))
            .header("origin", &self.origin)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert!(status.is_success(), "POST {path}: {status} {body}");
        body
    }
}

#[tokio::main]
async fn main() {
    let bin = std::env::args()
        .nth(1)
        .expect("usage: gc-api-check-fixture <gc-server>");
    let dir = std::env::temp_dir().join(format!("gc-api-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_, mock) = MockUpstream::start_for_bench().await.unwrap();
    let github = fake_github();
    let port = free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let server = Server(
        Command::new(&bin)
            .env(
                "GC_DATABASE_URL",
                format!("sqlite://{}", dir.join("gc.db").display()),
            )
            .env("GC_BIND", format!("127.0.0.1:{port}"))
            .env("GC_PUBLIC_ORIGIN", &origin)
            .env("GC_LOG", "warn")
            .env("GC_BCRYPT_COST", "4")
            .env("GC_BOOTSTRAP_ADMIN_EMAIL", ADMIN)
            .env("GC_BOOTSTRAP_ADMIN_PASSWORD", PASSWORD)
            .env("GC_MASTER_KEY", MASTER_KEY)
            .env("GC_GATEWAY_AIHK_URL", mock.base_url())
            .env("GC_GATEWAY_TIMEOUT_S", "10")
            .env("GC_CHAT_COMPLETIONS", "true")
            .env("GC_GITHUB_API_URL", &github)
            .env("GC_GITHUB_CODELOAD_URL", &github)
            .env("GC_GUARD_ANON_PER_MIN", "100000")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("gc-server starts"),
    );
    let api = Api {
        client: reqwest::Client::new(),
        base: format!("{origin}/api/v1"),
        origin: origin.clone(),
    };
    let started = Instant::now();
    loop {
        if let Ok(r) = api.client.get(format!("{}/health", api.base)).send().await {
            if r.status().is_success() {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "gc-server did not come up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let admin = api.signin(ADMIN).await;
    let tenant = api
        .post(
            "/admin/tenants",
            &admin,
            json!({"name": "API check", "region": "AIHK", "ai_enabled": true}),
        )
        .await;
    let tid = tenant["id"].as_str().unwrap().to_owned();
    let key = api
        .post(
            &format!("/admin/tenants/{tid}/ai-keys"),
            &admin,
            json!({"region": "AIHK", "secret": "sk-api-check-0001", "chat_enabled": true}),
        )
        .await;
    assert_eq!(key["status"], "ready", "{key}");
    let member_email = "api-check-member@gc.test";
    api.post(
        "/admin/users",
        &admin,
        json!({"email": member_email, "name": "Member", "password": PASSWORD, "tenant_id": tid}),
    )
    .await;
    let member = api.signin(member_email).await;
    // A second session of the member for the routes that end or revoke sessions.
    let disposable = api.signin(member_email).await;
    let mut keys = serde_json::Map::new();
    for scope in ["workspace:read", "workspace:write", "guard:scan", "run"] {
        let k = api
            .post(
                "/workspace/api-keys",
                &member,
                json!({"name": format!("api-check {scope}"), "scopes": [scope]}),
            )
            .await;
        keys.insert(scope.to_owned(), k["key"].clone());
    }
    println!(
        "{}",
        json!({
            "base": origin,
            "origin": origin,
            "admin_cookie": admin,
            "member_cookie": member,
            "disposable_cookie": disposable,
            "keys": keys,
            "tenant_id": tid,
        })
    );
    // Serve until the caller closes our standard input.
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await;
    drop(server);
    drop(mock);
    let _ = std::fs::remove_dir_all(&dir);
}
