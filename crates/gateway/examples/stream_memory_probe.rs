//! Measures what an open stream holds on gc's upstream side (issue 33: 1,000 concurrent
//! streams under 64 MiB): RSS while `N` streams wait for their next chunk, against
//! the mock upstream alone holding `N` such streams for a raw-socket client.
//!
//! ```text
//! cargo run --release -p gc-gateway --features mock --example stream_memory_probe -- 1000
//! ```
//!
//! It allocates with jemalloc as `gc-server` does (same built-in settings).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures_util::StreamExt;
use gc_gateway::mock::{Behavior, MockUpstream};
use gc_gateway::{ChatOutcome, GatewayConfig, RegionGateway, Secret};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn rss_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

const BODY: &str = r#"{"messages":[{"role":"user","content":"hello"}],"stream":true}"#;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let (addr, mock) = MockUpstream::start_for_bench().await.unwrap();
    mock.set_behavior(Behavior::StreamThenHang { after: 1 });

    // The mock alone: n raw connections, each with its first chunk read.
    let base = rss_kib();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer sk-probe\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let mut raw = Vec::new();
    for _ in 0..n {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut buf = [0u8; 4096];
        let mut got = Vec::new();
        while !String::from_utf8_lossy(&got).contains("chunk-0") {
            let k = s.read(&mut buf).await.unwrap();
            assert!(k > 0);
            got.extend_from_slice(&buf[..k]);
        }
        raw.push(s);
    }
    let mock_alone = rss_kib() - base;
    drop(raw);
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The same through the gateway (the mock's share as above).
    let gw = RegionGateway::new(GatewayConfig {
        base_url: mock.base_url(),
        default_model: "gpt-4o-mini".into(),
        timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(2),
        models: Vec::new(),
    })
    .unwrap();
    let secret = Secret::new("sk-probe");
    let body: serde_json::Value = serde_json::from_str(BODY).unwrap();
    let base = rss_kib();
    let mut open = Vec::new();
    for _ in 0..n {
        let Ok(ChatOutcome::Stream(mut s)) = gw.chat(&secret, body.clone()).await else {
            panic!("no stream");
        };
        let frame = s.next().await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&frame).contains("chunk-0"));
        open.push(s);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let through = rss_kib() - base;
    println!(
        "{n} open streams: mock alone {} KiB ({} B a stream); mock and gateway {} KiB: the gateway's side {} B a stream",
        mock_alone,
        mock_alone * 1024 / n as i64,
        through,
        (through - mock_alone) * 1024 / n as i64
    );
    drop(open);
}
