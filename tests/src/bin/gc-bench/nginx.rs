//! The bare forwarding-proxy baseline: Debian's nginx as a keep-alive reverse proxy to the
//! mock upstream, started as an unprivileged child with a generated configuration in a
//! temporary folder. It does what a proxy must (parse, forward over a pooled upstream
//! connection, relay the answer) and nothing else, so gc's `/run` is measured against it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian installs nginx.
pub(crate) const NGINX: &str = "/usr/sbin/nginx";

/// A running nginx; stopped (and its folder removed) when dropped.
pub(crate) struct Nginx {
    child: Child,
    dir: PathBuf,
    /// `http://127.0.0.1:PORT/v1`, the mock's base URL through the proxy.
    pub(crate) base: String,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // `nginx -s stop` (SIGTERM to the master, which stops its workers): killing the
        // master alone would leave its workers running, idle, after every bench.
        let stopped = Command::new(NGINX)
            .arg("-p")
            .arg(&self.dir)
            .arg("-c")
            .arg(self.dir.join("nginx.conf"))
            .args(["-s", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !stopped {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The configuration: one master-less process with two workers' worth of connections, no
/// access log, HTTP/1.1 with a pool of 128 idle keep-alive connections to the upstream.
fn config(dir: &Path, port: u16, upstream: &str, workers: usize) -> String {
    let d = dir.display();
    format!(
        "daemon off;
worker_processes {workers};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 1000000;
    upstream mock {{
        server {upstream};
        keepalive 128;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering on;
        }}
    }}
}}
"
    )
}

/// Starts nginx in front of `upstream` (`host:port`) on `port`, with `workers` worker
/// processes; `Err` says why it could not (missing binary, refused configuration).
pub(crate) async fn start(
    client: &reqwest::Client,
    port: u16,
    upstream: &str,
    workers: usize,
) -> Result<Nginx, String> {
    if !Path::new(NGINX).exists() {
        return Err(format!("{NGINX} is not installed"));
    }
    let dir = std::env::temp_dir().join(format!("gc-bench-nginx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config(&dir, port, upstream, workers)).map_err(|e| e.to_string())?;
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{NGINX} did not start: {e}"))?;
    let mut nginx = Nginx {
        child,
        dir,
        base: format!("http://127.0.0.1:{port}/v1"),
    };
    let t = Instant::now();
    loop {
        if let Ok(Some(status)) = nginx.child.try_wait() {
            let log = std::fs::read_to_string(nginx.dir.join("error.log")).unwrap_or_default();
            return Err(format!("nginx exited ({status}): {}", log.trim()));
        }
        // Any HTTP answer means nginx listens (the mock answers 404 on `/`).
        if client
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .is_ok()
        {
            return Ok(nginx);
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = nginx.child.kill();
            return Err("nginx did not listen within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
