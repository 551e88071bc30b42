//! gc behind Debian's nginx, configured from `deploy/nginx.conf`: streams pass through
//! unbuffered, the client IP gc records is the one nginx puts in `X-Forwarded-For`, a forged
//! `X-Forwarded-For` is believed neither through nginx nor from an untrusted peer, and nginx
//! keeps its connections to gc alive.
//!
//! The nginx configuration is generated from the sample itself (its `upstream` block and its
//! HTTPS `server` block, with the TLS lines dropped and the addresses replaced), so a change to
//! the sample is tested here. nginx runs unprivileged-style, in one foreground process
//! (`master_process off`), on a free loopback port with every path in a temporary folder.
//!
//! The client reaches nginx from `127.0.0.2` and nginx reaches gc from `127.0.0.1`, the only
//! trusted proxy, so "the IP gc saw" tells the two apart.
//!
//! When `/usr/sbin/nginx` is missing the test prints a loud SKIPPED line, unless
//! `GC_REQUIRE_NGINX=1` (CI sets it), in which case it fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gc_gateway::mock::{Behavior, MockUpstream};
use gc_persistence::testing::TempDirGuard;
use gc_tests::*;

const NGINX: &str = "/usr/sbin/nginx";
const SECRET: &str = "sk-upstream-secret-PROXY1111";
/// The address the test's client connects from; nginx passes it on in `X-Forwarded-For`.
const CLIENT_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// An untrusted peer that talks to gc directly.
const STRANGER_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
const FORGED: &str = "203.0.113.66";

fn nginx_required() -> bool {
    std::env::var("GC_REQUIRE_NGINX").is_ok_and(|v| v.trim() == "1")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The block that starts at `start` (an index into `text`, at or before its `{`), through its
/// closing brace.
fn block_at(text: &str, start: usize) -> &str {
    let open = start + text[start..].find('{').expect("a block");
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[start..=open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces in deploy/nginx.conf");
}

/// The `http` contents for nginx from the sample: its upstream pointed at `gc`, and its HTTPS
/// server listening in plain HTTP on `listen`.
fn config_from_sample(sample: &str, gc: &str, listen: &str) -> String {
    let text: String = sample
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let upstream = block_at(
        &text,
        text.find("upstream gc").expect("an upstream gc block"),
    );
    let tls = text.find("ssl_certificate").expect("an HTTPS server block");
    let server_start = text[..tls].rfind("server {").expect("server {");
    let server = block_at(&text, server_start);

    let mut out = String::new();
    for line in upstream.lines() {
        let t = line.trim();
        if t.starts_with("server ") {
            out.push_str(&format!("    server {gc};\n"));
        } else if !t.is_empty() {
            out.push_str(line);
            out.push('\n');
        }
    }
    for line in server.lines() {
        let t = line.trim();
        // TLS, HTTP/2 (`http2 on` needs nginx 1.25.1; Debian 12 has 1.22) and names are the
        // deployment's; the rest is what is tested.
        let deployment = ["listen ", "ssl_", "http2 ", "server_name "];
        if deployment.iter().any(|p| t.starts_with(p)) {
            continue;
        }
        if !t.is_empty() {
            out.push_str(line);
            out.push('\n');
        }
        if t == "server {" {
            out.push_str(&format!("    listen {listen};\n"));
        }
    }
    out
}

/// nginx in the foreground, stopped (and its folder removed) on drop.
struct Nginx {
    child: Child,
    base: String,
    _dir: TempDirGuard,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    fn start(gc: &str) -> Option<Self> {
        if !Path::new(NGINX).is_file() {
            let line = format!(
                "proxy test: {NGINX} is not installed (apt-get install nginx); \
                 the reverse-proxy section of docs/operations.md is untested"
            );
            if nginx_required() {
                panic!("{line}, and GC_REQUIRE_NGINX=1");
            }
            eprintln!("\n!!!!!!!! SKIPPED: {line} !!!!!!!!\n");
            return None;
        }
        let sample_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/nginx.conf");
        let sample = std::fs::read_to_string(&sample_path).expect("deploy/nginx.conf");
        // The essentials this test relies on are in the sample, not added here.
        for needed in [
            "proxy_buffering off;",
            "proxy_set_header X-Forwarded-For $remote_addr;",
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";",
            "keepalive ",
        ] {
            assert!(sample.contains(needed), "deploy/nginx.conf lacks {needed}");
        }
        let dir = TempDirGuard::new("gc-nginx").unwrap();
        let d = dir.path().display().to_string();
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let http = config_from_sample(&sample, gc, &listen);
        let conf = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n\
             access_log off;\n\
             client_body_temp_path {d}/body;\nproxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\nuwsgi_temp_path {d}/uwsgi;\nscgi_temp_path {d}/scgi;\n\
             {http}}}\n"
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, &conf).unwrap();
        let check = Command::new(NGINX)
            .args(["-t", "-q", "-p"])
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .output()
            .expect("nginx -t");
        assert!(
            check.status.success(),
            "nginx refuses the configuration generated from deploy/nginx.conf:\n{}\n{conf}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(&listen).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen on {listen}: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Self {
            child,
            base: format!("http://{listen}"),
            _dir: dir,
        })
    }
}

/// An HTTP client whose connections come from `ip`.
fn client_from(ip: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip)
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `actor` as seen through `base` with `client`.
fn via(actor: &Actor, base: &str, client: &reqwest::Client) -> Actor {
    Actor {
        app: AppRef {
            base: base.to_owned(),
            client: client.clone(),
            origin: actor.app.origin.clone(),
        },
        ..actor.clone()
    }
}

/// Signs in at `base` with `client` (and this `X-Forwarded-For`, if any); returns the actor.
async fn signin_at(
    app: &TestApp,
    base: &str,
    client: &reqwest::Client,
    forwarded: Option<&str>,
) -> Actor {
    let mut rb = client
        .post(format!("{base}/api/v1/auth/signin"))
        .json(&json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}));
    if let Some(f) = forwarded {
        rb = rb.header("x-forwarded-for", f);
    }
    let res = rb.send().await.unwrap();
    assert_eq!(res.status(), 200, "sign-in at {base}");
    let cookie = session_cookie(&res).expect("session cookie");
    let mut actor = app.anon();
    actor.auth = Auth::Cookie(cookie);
    via(&actor, base, client)
}

/// The IP gc recorded for `actor`'s own session.
async fn recorded_ip(actor: &Actor) -> String {
    let r = actor.get("/auth/sessions").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let current = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["current"] == true)
        .cloned()
        .unwrap_or_else(|| panic!("no current session in {}", r.text));
    current["ip"].as_str().unwrap().to_owned()
}

/// Connections that process `pid` holds open (ESTABLISHED) to local port `port`, matched
/// through `/proc/<pid>/fd` and `/proc/net/tcp`.
fn established_from(pid: u32, port: u16) -> usize {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.display().to_string();
                    let inode = l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned();
                    Some(inode)
                })
                .collect()
        })
        .unwrap_or_default();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let remote_port = cols
                .get(2)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            remote_port == Some(port)
                && cols.get(3) == Some(&"01")
                && cols.get(9).is_some_and(|i| inodes.iter().any(|n| n == i))
        })
        .count()
}

#[actix_web::test]
async fn gc_behind_nginx_streams_unbuffered_and_believes_only_its_proxy() {
    let (_, hk) = MockUpstream::start().await.unwrap();
    let hk_url = hk.base_url();
    let Some(app) = TestApp::start_with(Backend::Sqlite, "proxy", |c| {
        c.gateway_aihk_url = Some(hk_url);
        c.gateway_timeout_s = 10;
        // GC_TRUSTED_PROXIES=127.0.0.1/32, parsed as the server parses it.
        c.trusted_proxies = vec!["127.0.0.1/32".parse().unwrap()];
    })
    .await
    else {
        return;
    };
    let Some(nginx) = Nginx::start(&app.addr.to_string()) else {
        return;
    };
    let client = client_from(CLIENT_IP);

    // The client IP: through nginx, gc records the client's address from X-Forwarded-For.
    let admin = signin_at(&app, &nginx.base, &client, None).await;
    assert_eq!(recorded_ip(&admin).await, CLIENT_IP.to_string());
    // A header the client forges is replaced by nginx, so gc still records the client.
    let forged = signin_at(&app, &nginx.base, &client, Some(FORGED)).await;
    assert_eq!(recorded_ip(&forged).await, CLIENT_IP.to_string());
    // An untrusted peer talking to gc directly is not believed either: its own address counts.
    let stranger = client_from(STRANGER_IP);
    let direct = signin_at(&app, &app.base, &stranger, Some(FORGED)).await;
    assert_eq!(recorded_ip(&direct).await, STRANGER_IP.to_string());

    // A tenant with a ready AI key and a member who streams a run through nginx.
    let admin_direct = app.admin().await;
    let tenant = app.tenant(&admin_direct, "Proxied", "AIHK").await;
    let r = admin_direct
        .post(
            &format!("/admin/tenants/{}/ai-keys", tenant["id"].as_str().unwrap()),
            json!({"region": "AIHK", "secret": SECRET, "label": "main", "chat_enabled": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let member = via(
        &app.member_of(&admin_direct, &tenant).await,
        &nginx.base,
        &client,
    );

    // The mock sends each chunk only when released: the first must reach the client through
    // nginx while the upstream still holds the rest back.
    hk.set_behavior(Behavior::StreamGated { chunks: 3 });
    hk.release(1);
    let body =
        json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let mut res = member
        .request(Method::POST, "/run")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    // The mock's first chunk travels with its headers (which nginx always sends on at once);
    // the second, sent alone, must pass through too while the third is still held back.
    let mut seen = String::new();
    for (n, marker) in [(1, "chunk-0"), (2, "chunk-1")] {
        if n > 1 {
            hk.release(1);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !seen.contains(marker) {
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, res.chunk())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "{marker} did not pass nginx before the upstream sent the rest (buffered?)"
                    )
                })
                .unwrap()
                .expect("the stream ended early");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        assert_eq!(
            hk.chunks_sent(),
            n,
            "the upstream has sent {n} chunk(s) only"
        );
    }
    assert!(!seen.contains("chunk-2"), "{seen}");
    // Then the rest, and the stream ends with [DONE].
    hk.release(1);
    let mut later_chunks = 0;
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), res.chunk())
        .await
        .expect("the rest of the stream")
        .unwrap()
    {
        later_chunks += 1;
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(later_chunks >= 1);
    assert!(
        seen.contains("chunk-2") && seen.trim_end().ends_with("data: [DONE]"),
        "{seen}"
    );

    // Keep-alive: after those requests nginx still holds an idle connection to gc.
    assert!(
        established_from(nginx.child.id(), app.addr.port()) >= 1,
        "nginx keeps an idle connection to gc open (keepalive)"
    );
}
