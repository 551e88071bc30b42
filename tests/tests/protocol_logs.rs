//! Client protocol errors (a malformed request line or header, a duplicate `Content-Length`,
//! `Content-Length` with `Transfer-Encoding`, too many or too large headers) are answered with
//! 400 or 431 carrying the API's JSON error and an `x-request-id`, the connection is closed,
//! and they are logged below ERROR: ERROR is for gc's own faults, and no client can flood it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gc_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn send_raw(app: &TestApp, request: &[u8]) -> String {
    let mut conn = TcpStream::connect(app.addr).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[actix_web::test]
async fn client_protocol_errors_are_not_errors_of_ours() {
    let captured = Captured::default();
    let writer = captured.clone();
    let Some((url, db)) = fresh_database(Backend::Sqlite, "protocol_logs") else {
        return;
    };
    let mut config = test_config(&url);
    // Info for everything, and the demoted client errors made visible to prove they happen.
    config.log = "info,gc_server::client_protocol=debug".into();
    gc_server::init_tracing_to(&config, move || writer.clone());
    // The configured filter bounds the whole process: a disabled `trace!` in actix-http or
    // hyper is skipped at its level check, never asked about per event (issue 14).
    assert_eq!(
        tracing::level_filters::LevelFilter::current(),
        tracing::level_filters::LevelFilter::DEBUG
    );
    let app = TestApp::start_on(config, db);

    let bad_bytes = send_raw(
        &app,
        b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\nX-Bad: a\x01b\r\n\r\n",
    )
    .await;
    assert!(bad_bytes.starts_with("HTTP/1.1 400"), "{bad_bytes}");
    let twice = send_raw(
        &app,
        b"POST /api/v1/auth/signin HTTP/1.1\r\nHost: gc\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    )
    .await;
    assert!(twice.starts_with("HTTP/1.1 400"), "{twice}");
    let given = answers(twice.as_bytes())[0]
        .header("x-request-id")
        .unwrap()
        .to_owned();

    let mut logs = String::new();
    for _ in 0..100 {
        logs = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
        if logs.matches("client protocol error").count() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        logs.matches("client protocol error").count() >= 2,
        "both mistakes are logged (at DEBUG): {logs}"
    );
    for line in logs.lines() {
        assert!(
            !line.contains("ERROR"),
            "a client's mistake was logged as an error: {line}"
        );
    }
    // The line names the request id the client was given, so the two can be matched.
    assert!(
        logs.lines()
            .any(|l| l.contains("client protocol error") && l.contains(&given)),
        "{given} not in {logs}"
    );
    // gc's own request lines still flow at INFO.
    app.anon().get("/health").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let logs = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    assert!(logs.contains("INFO"), "{logs}");
}

/// An HTTP/1.1 answer read off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Splits `raw` into the answers it holds (each framed by its Content-Length).
fn answers(mut raw: &[u8]) -> Vec<Answer> {
    let mut out = Vec::new();
    while !raw.is_empty() {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no head end in {:?}", String::from_utf8_lossy(raw)));
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap();
                (n.trim().to_owned(), v.trim().to_owned())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, v)| v.parse().unwrap());
        let body = raw[end + 4..end + 4 + len].to_vec();
        raw = &raw[end + 4 + len..];
        out.push(Answer {
            status,
            headers,
            body,
        });
    }
    out
}

/// Sends `request` on a new connection and reads until the server closes it (within 5 s:
/// a protocol error must close the connection, never leave it open).
async fn exchange(app: &TestApp, request: &[u8]) -> Vec<Answer> {
    let mut conn = TcpStream::connect(app.addr).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut raw = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut raw)).await;
    assert!(
        read.is_ok(),
        "the connection was left open: {}",
        String::from_utf8_lossy(&raw)
    );
    answers(&raw)
}

/// The answer is the API's error: `status`, JSON `code`, and the same request id in the
/// `x-request-id` header and the body; the connection is closed.
fn assert_protocol_error(answer: &Answer, status: u16, code: &str) -> String {
    assert_eq!(answer.status, status, "{answer:?}");
    assert!(
        answer
            .header("content-type")
            .unwrap()
            .starts_with("application/json"),
        "{answer:?}"
    );
    assert_eq!(answer.header("connection"), Some("close"), "{answer:?}");
    let body: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        !body["error"]["message"].as_str().unwrap().is_empty(),
        "{body}"
    );
    let id = answer
        .header("x-request-id")
        .expect("x-request-id")
        .to_owned();
    assert_eq!(body["error"]["request_id"], id.as_str(), "{body}");
    id
}

both_backends! {
    async fn protocol_errors_carry_the_json_error_and_a_request_id(app: TestApp) {
        let many_headers = {
            let mut r = b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\n".to_vec();
            for i in 0..100 {
                r.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
            }
            r.extend_from_slice(b"\r\n");
            r
        };
        // A head still unfinished at 128 KiB (all of it sent, so the server reads it all).
        let huge_header = {
            let mut r = b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\nX-Big: ".to_vec();
            r.resize(128 * 1024, b'a');
            r
        };
        let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
            ("bad request line", b"GET /api/v1/health HTTP/1.1 junk\r\nHost: gc\r\n\r\n".to_vec(), 400, "bad_request"),
            ("bad version", b"GET /api/v1/health HTTP/7.0\r\nHost: gc\r\n\r\n".to_vec(), 400, "bad_request"),
            ("bad header bytes", b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\nX-Bad: a\x01b\r\n\r\n".to_vec(), 400, "bad_request"),
            ("duplicate Content-Length", b"POST /api/v1/auth/signin HTTP/1.1\r\nHost: gc\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}".to_vec(), 400, "bad_request"),
            ("Content-Length and Transfer-Encoding", b"POST /api/v1/auth/signin HTTP/1.1\r\nHost: gc\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n".to_vec(), 400, "bad_request"),
            ("no Host", b"GET /api/v1/health HTTP/1.1\r\n\r\n".to_vec(), 400, "bad_request"),
            ("too many headers", many_headers, 431, "headers_too_large"),
            ("headers too large", huge_header, 431, "headers_too_large"),
        ];
        for (what, request, status, code) in cases {
            let got = exchange(&app, &request).await;
            assert_eq!(got.len(), 1, "{what}: {got:?}");
            assert_protocol_error(&got[0], status, code);
        }

        // The caller's sane request id is echoed when the head got that far.
        let got = exchange(&app, b"POST /api/v1/auth/signin HTTP/1.1\r\nHost: gc\r\nX-Request-Id: proto-test-1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}").await;
        assert_eq!(assert_protocol_error(&got[0], 400, "bad_request"), "proto-test-1");

        // On a kept-alive connection, the requests before the bad head are answered (a GET,
        // then a POST with a body), then the error, then the connection is closed.
        let signin = br#"{"email":"nobody@gc.test","password":"not-the-password-1"}"#;
        let mut pipelined = b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\n\r\n".to_vec();
        pipelined.extend_from_slice(format!("POST /api/v1/auth/signin HTTP/1.1\r\nHost: gc\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", signin.len()).as_bytes());
        pipelined.extend_from_slice(signin);
        pipelined.extend_from_slice(b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx");
        let got = exchange(&app, &pipelined).await;
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].status, 200, "{got:?}");
        assert_eq!(got[1].status, 401, "{got:?}");
        assert_protocol_error(&got[2], 400, "bad_request");

        // A good connection is unaffected: keep-alive, two requests, still open.
        let mut conn = TcpStream::connect(app.addr).await.unwrap();
        for _ in 0..2 {
            conn.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\n\r\n").await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await.unwrap().unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
        }
    }
}
