//! The gateway against the mock OpenAI-compatible upstream on loopback.

// Test helpers (not only `#[test]` functions) panic on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use gc_gateway::mock::{Behavior, KeyForm, MockHandle, MockUpstream};
use gc_gateway::{
    ChatOutcome, GatewayConfig, KeyStatus, RegionGateway, RunReport, RunStatus, RunStream, Secret,
    UpstreamError, Usage,
};
use serde_json::{json, Value};
use tokio::sync::oneshot;

const KEY: &str = "sk-test-0123456789abcdef";
const LIMIT: Duration = Duration::from_secs(10);

fn gateway(base_url: String, timeout: Duration) -> RegionGateway {
    RegionGateway::new(GatewayConfig {
        base_url,
        default_model: "region-default".into(),
        timeout,
        connect_timeout: Duration::from_secs(2),
        models: Vec::new(),
    })
    .unwrap()
}

/// A gateway to a loopback port nothing listens on (just now).
fn gateway_to_nowhere() -> RegionGateway {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    gateway(
        format!("http://127.0.0.1:{port}/v1"),
        Duration::from_secs(2),
    )
}

async fn setup() -> (MockHandle, RegionGateway) {
    let (_, mock) = MockUpstream::start().await.unwrap();
    let gw = gateway(mock.base_url(), Duration::from_secs(5));
    (mock, gw)
}

fn secret() -> Secret {
    Secret::new(KEY)
}

/// The usage the mock reports for a prompt and a completion of these sizes.
fn usage(prompt_tokens: u64, completion_tokens: u64) -> Option<Usage> {
    Some(Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens + completion_tokens,
    })
}

fn messages() -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}]})
}

fn stream_body() -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}], "stream": true})
}

async fn chat(gw: &RegionGateway, body: Value) -> Result<ChatOutcome, UpstreamError> {
    tokio::time::timeout(LIMIT, gw.chat(&secret(), body))
        .await
        .unwrap()
}

async fn open_stream(gw: &RegionGateway, body: Value) -> (RunStream, oneshot::Receiver<RunReport>) {
    with_report(chat(gw, body).await)
}

/// A stream of `chunks` chunks the mock sends one at a time, each when released (the first
/// is released already), and its report once it ends.
async fn gated_stream(
    mock: &MockHandle,
    gw: &RegionGateway,
    chunks: usize,
) -> (RunStream, oneshot::Receiver<RunReport>) {
    mock.push_behavior(Behavior::StreamGated { chunks });
    mock.release(1);
    open_stream(gw, stream_body()).await
}

/// The stream of a call's answer, and its report once it ends.
fn with_report(
    answer: Result<ChatOutcome, UpstreamError>,
) -> (RunStream, oneshot::Receiver<RunReport>) {
    match answer {
        Ok(ChatOutcome::Stream(mut s)) => {
            let (tx, rx) = oneshot::channel();
            s.on_finish(move |r| {
                let _ = tx.send(r);
            });
            (s, rx)
        }
        other => panic!("expected a stream, got {other:?}"),
    }
}

async fn next_frame(s: &mut RunStream) -> Option<Bytes> {
    tokio::time::timeout(LIMIT, s.next())
        .await
        .unwrap()
        .map(|r| r.unwrap())
}

async fn collect(mut s: RunStream) -> String {
    let mut out = String::new();
    while let Some(frame) = next_frame(&mut s).await {
        out.push_str(std::str::from_utf8(&frame).unwrap());
    }
    out
}

/// The `data:` payloads of an SSE text.
fn payloads(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {e:?}"))
                .to_owned()
        })
        .collect()
}

fn assert_no_secret(err: &UpstreamError) {
    assert!(
        !format!("{err}").contains(KEY),
        "Display leaks the key: {err}"
    );
    assert!(
        !format!("{err:?}").contains(KEY),
        "Debug leaks the key: {err:?}"
    );
    assert_no_key_in_any_form(&format!("{err}"));
    assert_no_key_in_any_form(&format!("{err:?}"));
}

/// Base64 (standard or URL-safe, padded), written independently of the crate's encoder.
fn b64(data: &[u8], url_safe: bool) -> String {
    let table: Vec<char> = if url_safe {
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    }
    .chars()
    .collect();
    let mut bits = String::new();
    for b in data {
        bits.push_str(&format!("{b:08b}"));
    }
    while bits.len() % 6 != 0 {
        bits.push('0');
    }
    let mut out: String = bits
        .as_bytes()
        .chunks(6)
        .map(|c| table[usize::from_str_radix(std::str::from_utf8(c).unwrap(), 2).unwrap()])
        .collect();
    while out.len() % 4 != 0 {
        out.push('=');
    }
    out
}

/// Fails when `text` holds the key in any form: any case, split by non-alphanumerics, hex,
/// or base64 (the characters that depend only on the key, at each of the 3 alignments).
fn assert_no_key_in_any_form(text: &str) {
    let key = KEY.to_ascii_lowercase();
    let lower = text.to_ascii_lowercase();
    assert!(!lower.contains(&key), "the key (any case) in {text:?}");
    let squeezed: String = lower
        .replace("\\n", " ")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    assert!(!squeezed.contains(&key), "the key (split) in {text:?}");
    let hex: String = KEY.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(!squeezed.contains(&hex), "the key (hex) in {text:?}");
    let b64_squeezed: String = text
        .replace("\\n", " ")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "+/-_=".contains(*c))
        .collect();
    for offset in 0..3 {
        for url_safe in [false, true] {
            let mut data = vec![b'x'; offset];
            data.extend_from_slice(KEY.as_bytes());
            let encoded = b64(&data, url_safe);
            let core = &encoded[(8 * offset).div_ceil(6)..(8 * (offset + KEY.len())) / 6];
            assert!(
                !b64_squeezed.contains(core),
                "the key (base64 at {offset}) in {text:?}"
            );
        }
    }
}

#[test]
fn the_any_form_check_sees_every_form() {
    // The check itself must catch what the mock can send, or the tests below prove nothing.
    for form in KeyForm::all() {
        let text = format!("message: {} end", form.render(KEY));
        let caught = std::panic::catch_unwind(|| assert_no_key_in_any_form(&text));
        assert!(caught.is_err(), "{form:?} not caught in {text:?}");
    }
    assert_no_key_in_any_form("message: [redacted] end");
}

#[tokio::test]
async fn non_streamed_completion_is_passed_through() {
    let (mock, gw) = setup().await;
    let ChatOutcome::Complete(c) = chat(&gw, messages()).await.unwrap() else {
        panic!("expected a completion");
    };
    assert_eq!(c.status, 200);
    assert_eq!(c.model, "region-default");
    assert_eq!(c.usage, usage(5, 7));
    let body: Value = serde_json::from_slice(&c.body).unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello from the mock."
    );
    let report = c.report();
    assert_eq!(report.status, RunStatus::Ok);
    assert_eq!(report.usage, c.usage);

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(
        reqs[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[tokio::test]
async fn model_auto_resolves_to_the_default_and_other_fields_are_kept() {
    let (mock, gw) = setup().await;
    chat(&gw, json!({"model": "auto", "messages": [{"role": "user", "content": "x"}], "temperature": 0.2, "max_tokens": 9}))
        .await
        .unwrap();
    chat(&gw, json!({"messages": [{"role": "user", "content": "x"}]}))
        .await
        .unwrap();
    chat(
        &gw,
        json!({"model": "explicit-model", "messages": [{"role": "user", "content": "x"}]}),
    )
    .await
    .unwrap();
    let s = match chat(
        &gw,
        json!({"model": "auto", "messages": [], "stream": true, "stream_options": {"x": 1}}),
    )
    .await
    {
        Ok(ChatOutcome::Stream(s)) => s,
        other => panic!("{other:?}"),
    };
    collect(s).await;

    let bodies: Vec<Value> = mock
        .chat_requests()
        .iter()
        .map(|r| r.json().unwrap())
        .collect();
    assert_eq!(bodies[0]["model"], "region-default");
    assert_eq!(bodies[0]["temperature"], 0.2);
    assert_eq!(bodies[0]["max_tokens"], 9);
    assert_eq!(bodies[0]["messages"][0]["content"], "x");
    assert!(bodies[0].get("stream_options").is_none());
    assert_eq!(bodies[1]["model"], "region-default");
    assert_eq!(bodies[2]["model"], "explicit-model");
    assert_eq!(bodies[3]["model"], "region-default");
    assert_eq!(
        bodies[3]["stream_options"],
        json!({"x": 1, "include_usage": true})
    );
}

#[tokio::test]
async fn stream_is_passed_through_chunk_by_chunk() {
    let (mock, gw) = setup().await;
    let (mut s, report) = gated_stream(&mock, &gw, 3).await;

    for i in 0..3 {
        let frame = next_frame(&mut s).await.unwrap();
        let text = std::str::from_utf8(&frame).unwrap();
        assert!(
            text.starts_with("data: ") && text.contains(&format!("chunk-{i} ")),
            "{text}"
        );
        // The client has chunk i while the mock has not sent chunk i + 1 yet.
        assert_eq!(mock.chunks_sent(), i + 1);
        mock.release(1);
    }
    let rest = collect(s).await;
    let rest = payloads(&rest);
    assert_eq!(rest.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(rest.iter().filter(|p| *p == "[DONE]").count(), 1);

    let report = report.await.unwrap();
    assert_eq!(report.status, RunStatus::Ok);
    assert_eq!(report.usage, usage(5, 3));
    assert_eq!(report.model, "region-default");
    assert!(report.ttft_ms.is_some());
    assert!(report.ttft_ms <= Some(report.latency_ms));
}

/// An upstream that sends its head together with the first event: when the call returns, that
/// event is already in the stream's body, so the first poll hands it out at once and the web
/// layer writes gc's head and the first event in one write (issue 33: measured with strace,
/// decision 0052). It is parsed at that first poll, after `on_finish` and `count_relayed` were
/// registered, so its tokens count.
#[tokio::test]
async fn the_first_event_that_came_with_the_head_is_ready_at_the_first_poll() {
    use futures_util::FutureExt;
    let (mock, gw) = setup().await;
    let (mut s, report) = gated_stream(&mock, &gw, 2).await;
    s.count_relayed();
    let first = s
        .next()
        .now_or_never()
        .expect("the first event is ready at the first poll")
        .unwrap()
        .unwrap();
    let text = std::str::from_utf8(&first).unwrap();
    assert!(
        text.starts_with("data: ") && text.contains("chunk-0 "),
        "{text}"
    );
    mock.release(1);
    let rest = payloads(&collect(s).await);
    assert!(rest[0].contains("chunk-1 "), "{rest:?}");
    assert_eq!(rest.last().map(String::as_str), Some("[DONE]"));
    let report = report.await.unwrap();
    assert_eq!(report.status, RunStatus::Ok);
    let both = gc_gateway::tokens::count("region-default", "chunk-0 ")
        + gc_gateway::tokens::count("region-default", "chunk-1 ");
    assert_eq!(report.relayed_tokens, Some(both), "{report:?}");
}

/// The answer does not wait for the first event: an upstream that sends its head and then
/// nothing still gets its stream answered at once (gc's head goes out alone), and nothing is
/// passed on before an event comes (decision 0052: no wait for the first chunk is built).
#[tokio::test]
async fn a_late_first_event_does_not_hold_the_answer_back() {
    use futures_util::FutureExt;
    let (mock, gw) = setup().await;
    mock.push_behavior(Behavior::StreamThenHang { after: 0 });
    let started = std::time::Instant::now();
    let (mut s, report) = open_stream(&gw, stream_body()).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the call waited {:?} for an event that never came",
        started.elapsed()
    );
    assert!(s.next().now_or_never().is_none(), "nothing to pass on yet");
    drop(s);
    assert_eq!(report.await.unwrap().status, RunStatus::Cancelled);
}

#[tokio::test]
async fn done_is_sent_exactly_once_at_the_end() {
    let (_mock, gw) = setup().await;
    let (s, report) = open_stream(&gw, stream_body()).await;
    let text = collect(s).await;
    let events = payloads(&text);
    // The client did not ask for usage: gc asked upstream for its records and kept the
    // usage-only chunk to itself.
    assert_eq!(events.len(), 3 + 1, "{text}"); // chunks, [DONE]
    for chunk in &events[..3] {
        let v: Value = serde_json::from_str(chunk).unwrap();
        assert!(!v["choices"].as_array().unwrap().is_empty(), "{chunk}");
    }
    let mut asked = stream_body();
    asked["stream_options"] = json!({"include_usage": true});
    let (with_usage, _) = open_stream(&gw, asked).await;
    let text = collect(with_usage).await;
    let events = payloads(&text);
    assert_eq!(events.len(), 3 + 1 + 1, "{text}"); // chunks, usage, [DONE]
    assert_eq!(events.iter().filter(|p| p.contains("[DONE]")).count(), 1);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    for chunk in &events[..4] {
        let v: Value = serde_json::from_str(chunk).unwrap();
        assert_eq!(v["object"], "chat.completion.chunk");
    }
    assert_eq!(report.await.unwrap().status, RunStatus::Ok);
}

#[tokio::test]
async fn upstream_401_is_key_rejected_without_the_key() {
    let (mock, gw) = setup().await;
    mock.reject_key(KEY);
    // The mock echoes the key in its error message; it must come back redacted.
    for body in [messages(), stream_body()] {
        let err = chat(&gw, body).await.unwrap_err();
        match &err {
            UpstreamError::KeyRejected { status, message } => {
                assert_eq!(*status, 401);
                assert_eq!(message, "Incorrect API key provided: [redacted]");
            }
            other => panic!("{other:?}"),
        }
        assert!(err.is_key_rejected());
        assert_eq!(err.code(), "upstream_error");
        assert_eq!(err.upstream_status(), Some(401));
        assert_no_secret(&err);
    }
    mock.accept_key(KEY);
    // A 403 does not prove the key bad: it is a status error, passed on to the client.
    mock.push_behavior(Behavior::status(403, "forbidden for you"));
    let err = chat(&gw, messages()).await.unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Status {
            status: 403,
            code: None,
            kind: Some("mock_error".into()),
            message: "forbidden for you".into(),
            retry_after_secs: None,
        }
    );
    assert!(!err.is_key_rejected());
    assert_eq!(err.client_status(), Some(403));
}

#[tokio::test]
async fn only_a_401_rejects_the_key_and_other_statuses_are_rebuilt() {
    let (mock, gw) = setup().await;
    // 401 in any body: the key is rejected.
    mock.push_behavior(Behavior::openai_error(
        401,
        "Incorrect API key provided: {key}",
        Some("invalid_request_error"),
        Some("invalid_api_key"),
    ));
    let err = chat(&gw, messages()).await.unwrap_err();
    assert!(err.is_key_rejected(), "{err:?}");
    assert_eq!(err.upstream_status(), Some(401));
    assert_eq!(err.client_status(), None);
    assert_no_secret(&err);

    // 403 "no access to model", 404, 429 with Retry-After, 503 with an HTTP date, 422, 400.
    let cases = [
        (
            403,
            "You do not have access to model gpt-x (key {key})",
            Some("invalid_request_error"),
            Some("model_not_found"),
            None,
            None,
        ),
        (
            404,
            "The model `gpt-x` does not exist",
            Some("invalid_request_error"),
            Some("model_not_found"),
            None,
            None,
        ),
        (
            429,
            "Rate limit reached for {key} on requests per min",
            Some("requests"),
            Some("rate_limit_exceeded"),
            Some("17"),
            Some(17),
        ),
        (422, "Unprocessable: {key}", None, None, Some("5"), None),
        (
            400,
            "bad request",
            Some("invalid_request_error"),
            Some("context_length_exceeded"),
            None,
            None,
        ),
    ];
    for (status, message, kind, code, retry, want_retry) in cases {
        for body in [messages(), stream_body()] {
            let mut b = Behavior::openai_error(status, message, kind, code);
            if let Some(r) = retry {
                b = b.with_header("Retry-After", r);
            }
            mock.push_behavior(b);
            let err = chat(&gw, body).await.unwrap_err();
            let UpstreamError::Status {
                status: got,
                code: got_code,
                kind: got_kind,
                message: got_message,
                retry_after_secs,
            } = &err
            else {
                panic!("{status}: {err:?}");
            };
            assert_eq!(*got, status);
            assert_eq!(got_code.as_deref(), code);
            assert_eq!(got_kind.as_deref(), kind);
            assert_eq!(*retry_after_secs, want_retry, "{status}");
            assert_eq!(err.retry_after_secs(), want_retry);
            assert!(!err.is_key_rejected());
            assert_eq!(err.client_status(), Some(status));
            assert_eq!(err.upstream_status(), Some(status));
            assert_eq!(err.code(), "upstream_error");
            if message.contains("{key}") {
                assert!(got_message.contains("[redacted]"), "{got_message}");
            } else {
                assert_eq!(got_message, message);
            }
            assert_no_secret(&err);
        }
    }

    // 503 with an HTTP-date Retry-After (in the past: 0 s), 500 without: no client status.
    mock.push_behavior(
        Behavior::openai_error(503, "overloaded", Some("server_error"), None)
            .with_header("Retry-After", "Thu, 01 Jan 1970 00:00:10 GMT"),
    );
    let err = chat(&gw, messages()).await.unwrap_err();
    assert_eq!(
        (
            err.upstream_status(),
            err.retry_after_secs(),
            err.client_status()
        ),
        (Some(503), Some(0), None)
    );
    // A code or type that is not a short identifier, or that is the key, is dropped.
    mock.push_behavior(Behavior::Answer {
        status: 403,
        headers: vec![],
        body: r#"{"error":{"message":"no","type":"has spaces here","code":"{key}"}}"#.into(),
        echo: KeyForm::Exact,
    });
    let err = chat(&gw, messages()).await.unwrap_err();
    assert_eq!((err.upstream_code(), err.upstream_type()), (None, None));
    assert_no_secret(&err);
}

#[tokio::test]
async fn upstream_errors_never_carry_the_key_in_any_form() {
    let (mock, gw) = setup().await;
    for form in KeyForm::all() {
        for status in [401, 403, 404, 429, 500] {
            mock.push_behavior(
                Behavior::openai_error(
                    status,
                    "Incorrect API key provided: {key}. Other: {key}",
                    Some("invalid_request_error"),
                    Some("invalid_api_key"),
                )
                .echoing(form.clone()),
            );
            let err = chat(&gw, messages()).await.unwrap_err();
            assert_eq!(err.upstream_status(), Some(status), "{form:?}");
            assert_eq!(err.is_key_rejected(), status == 401);
            assert_no_secret(&err);
            let message = err.upstream_message().unwrap();
            assert!(
                message.starts_with("Incorrect API key provided: "),
                "{form:?}: {message}"
            );
        }
        // A plain-text body echoing the key.
        mock.push_behavior(Behavior::Answer {
            status: 502,
            headers: vec![],
            body: "gateway error for {key}".into(),
            echo: form.clone(),
        });
        let err = chat(&gw, messages()).await.unwrap_err();
        assert_no_secret(&err);
    }
}

#[tokio::test]
async fn upstream_500_is_a_status_error_with_its_message() {
    let (mock, gw) = setup().await;
    mock.push_behavior(Behavior::status(
        500,
        &format!("internal failure for {KEY}"),
    ));
    let err = chat(&gw, messages()).await.unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Status {
            status: 500,
            code: None,
            kind: Some("mock_error".into()),
            message: "internal failure for [redacted]".into(),
            retry_after_secs: None,
        }
    );
    assert_eq!(err.client_status(), None);
    assert_no_secret(&err);
    mock.push_behavior(Behavior::Status {
        status: 429,
        body: "slow down".into(),
    });
    let err = chat(&gw, stream_body()).await.unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Status {
            status: 429,
            code: None,
            kind: None,
            message: "slow down".into(),
            retry_after_secs: None,
        }
    );
    assert_eq!(err.code(), "upstream_error");
    // An HTML error page is not passed on as a message.
    mock.push_behavior(Behavior::Status {
        status: 502,
        body: "<html><body><h1>502 Bad Gateway</h1></body></html>".into(),
    });
    let err = chat(&gw, messages()).await.unwrap_err();
    assert_eq!(err.upstream_message(), Some("Bad Gateway"));
}

#[tokio::test]
async fn garbage_200_is_an_invalid_response() {
    let (mock, gw) = setup().await;
    mock.push_behavior(Behavior::Garbage);
    let err = chat(&gw, messages()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::InvalidResponse(_)), "{err:?}");
    assert_eq!(err.code(), "upstream_error");
    // A JSON object without `choices` is not a completion either.
    mock.push_behavior(Behavior::Status {
        status: 200,
        body: r#"{"id":"x"}"#.into(),
    });
    let err = chat(&gw, messages()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::InvalidResponse(_)), "{err:?}");
    // A stream request answered with JSON is not an event stream.
    mock.push_behavior(Behavior::Complete);
    let err = chat(&gw, stream_body()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::InvalidResponse(_)), "{err:?}");
}

#[tokio::test]
async fn a_hanging_upstream_times_out() {
    let (mock, _) = setup().await;
    let gw = gateway(mock.base_url(), Duration::from_millis(300));
    mock.set_behavior(Behavior::Hang);
    for body in [messages(), stream_body()] {
        let err = chat(&gw, body).await.unwrap_err();
        assert_eq!(err, UpstreamError::Timeout);
        assert_eq!(err.code(), "upstream_timeout");
    }
    // Giving up on the response closed the upstream connection.
    assert!(mock.wait_client_abort(LIMIT).await);
}

#[tokio::test]
async fn dropping_the_chat_call_before_the_answer_closes_the_upstream_request() {
    let (mock, gw) = setup().await;
    mock.push_behavior(Behavior::Hang);
    let key = secret();
    let call = gw.chat(&key, stream_body());
    assert!(tokio::time::timeout(Duration::from_millis(200), call)
        .await
        .is_err());
    assert!(mock.wait_client_abort(LIMIT).await);
}

#[tokio::test]
async fn https_goes_through_rustls() {
    // A plain-HTTP server behind an https URL: the TLS handshake fails, which proves the
    // rustls stack (ring provider, bundled roots) is wired and fails as a transport error.
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let gw = gateway(format!("https://{addr}/v1"), Duration::from_secs(2));
    let err = chat(&gw, messages()).await.unwrap_err();
    assert!(
        matches!(
            err,
            UpstreamError::Transport(_) | UpstreamError::Unreachable(_)
        ),
        "{err:?}"
    );
    let p = gw.probe(&secret()).await;
    assert!(!p.reachable, "{p:?}");
}

#[tokio::test]
async fn unreachable_upstream_is_a_transport_error() {
    let gw = gateway_to_nowhere();
    for body in [messages(), stream_body()] {
        let err = chat(&gw, body).await.unwrap_err();
        assert!(matches!(err, UpstreamError::Unreachable(_)), "{err:?}");
        assert!(err.is_retryable(), "nothing reached the upstream");
        assert_eq!(err.code(), "upstream_error");
        assert_no_secret(&err);
    }
}

/// The payloads of a whole stream the mock answers with `behavior`, and its report.
async fn stream_events(
    mock: &MockHandle,
    gw: &RegionGateway,
    behavior: Behavior,
) -> (Vec<String>, oneshot::Receiver<RunReport>) {
    mock.push_behavior(behavior);
    let (s, report) = open_stream(gw, stream_body()).await;
    (payloads(&collect(s).await), report)
}

fn error_frame(payload: &str) -> Value {
    let v: Value = serde_json::from_str(payload).unwrap();
    assert!(v["error"]["message"].is_string(), "{v}");
    assert!(v["error"]["type"].is_string(), "{v}");
    v
}

#[tokio::test]
async fn a_stream_broken_mid_way_ends_with_an_error_frame_then_done() {
    let (mock, gw) = setup().await;
    let (events, report) = stream_events(&mock, &gw, Behavior::BreakMidStream { after: 2 }).await;
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(events[0].contains("chunk-0") && events[1].contains("chunk-1"));
    assert_eq!(error_frame(&events[2])["error"]["code"], "upstream_error");
    assert_eq!(events[3], "[DONE]");
    let report = report.await.unwrap();
    assert_eq!(report.status, RunStatus::Error);
    assert_eq!(report.error_code.as_deref(), Some("upstream_error"));
}

#[tokio::test]
async fn a_stream_without_done_ends_with_an_error_frame_then_done() {
    let (mock, gw) = setup().await;
    let (events, report) =
        stream_events(&mock, &gw, Behavior::StreamWithoutDone { chunks: 2 }).await;
    assert_eq!(events.len(), 2 + 2, "{events:?}"); // chunks, error, [DONE]
    let err = error_frame(&events[2]);
    assert_eq!(err["error"]["code"], "upstream_error");
    assert!(err["error"]["message"].as_str().unwrap().contains("[DONE]"));
    assert_eq!(events[3], "[DONE]");
    let report = report.await.unwrap();
    assert_eq!(report.status, RunStatus::Error);
    assert_eq!(report.usage.map(|u| u.completion_tokens), Some(2));
}

#[tokio::test]
async fn an_idle_stream_times_out_with_an_error_frame() {
    let (mock, _) = setup().await;
    let gw = gateway(mock.base_url(), Duration::from_millis(300));
    let (events, report) = stream_events(&mock, &gw, Behavior::StreamThenHang { after: 1 }).await;
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events[0].contains("chunk-0"));
    assert_eq!(error_frame(&events[1])["error"]["code"], "upstream_timeout");
    assert_eq!(events[2], "[DONE]");
    assert_eq!(
        report.await.unwrap().error_code.as_deref(),
        Some("upstream_timeout")
    );
    // Ending the stream dropped the upstream request.
    assert!(mock.wait_client_abort(LIMIT).await);
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_upstream_request() {
    let (mock, gw) = setup().await;
    let (mut s, report) = gated_stream(&mock, &gw, 5).await;
    let first = next_frame(&mut s).await.unwrap();
    assert!(std::str::from_utf8(&first).unwrap().contains("chunk-0"));
    assert_eq!(mock.client_aborts(), 0);
    drop(s);
    // The mock sees the connection close while it waits to send chunk 1.
    assert!(mock.wait_client_abort(LIMIT).await);
    assert_eq!(mock.chunks_sent(), 1);
    let report = report.await.unwrap();
    assert_eq!(report.status, RunStatus::Cancelled);
    assert!(report.ttft_ms.is_some());
}

#[tokio::test]
async fn the_connection_is_reused_after_a_finished_call() {
    let (mock, gw) = setup().await;
    for _ in 0..3 {
        chat(&gw, messages()).await.unwrap();
        collect(open_stream(&gw, stream_body()).await.0).await;
    }
    assert_eq!(mock.request_count(), 6);
    // Completions and streams that ended with [DONE] leave their connection in the pool.
    assert_eq!(mock.connections(), 1);
}

#[tokio::test]
async fn no_error_or_report_contains_the_key() {
    let (mock, _) = setup().await;
    let gw = gateway(mock.base_url(), Duration::from_millis(300));
    mock.reject_key(KEY);
    let mut errors = vec![chat(&gw, messages()).await.unwrap_err()];
    mock.accept_key(KEY);
    for b in [
        Behavior::status(500, KEY),
        Behavior::Status {
            status: 502,
            body: format!("raw {KEY} body"),
        },
        Behavior::Status {
            status: 200,
            body: format!("{{\"key\":\"{KEY}\"}}"),
        },
        Behavior::Hang,
    ] {
        mock.push_behavior(b);
        errors.push(chat(&gw, messages()).await.unwrap_err());
    }
    for e in &errors {
        assert_no_secret(e);
    }
    let s = secret();
    assert!(!format!("{s:?} {s}").contains(KEY));
    assert!(!format!("{gw:?}").contains(KEY));
    let requests = format!("{:?}", mock.requests());
    assert!(!requests.contains(KEY), "{requests}");

    let (stream, report) = open_stream(&gw, stream_body()).await;
    assert!(!format!("{stream:?}").contains(KEY));
    assert!(!collect(stream).await.contains(KEY));
    assert!(!format!("{:?}", report.await.unwrap()).contains(KEY));
}

#[tokio::test]
async fn probe_reports_ready_not_ready_and_unreachable() {
    let (mock, gw) = setup().await;
    let ready = gw.probe(&secret()).await;
    assert!(ready.reachable);
    assert_eq!(ready.status_code, Some(200));
    assert_eq!(ready.outcome, KeyStatus::Ready);
    assert_eq!(ready.reason, None);
    let models = mock.requests();
    assert_eq!(models[0].method, "GET");
    assert_eq!(models[0].path, "/v1/models");
    assert_eq!(models[0].bearer(), Some(KEY));

    mock.reject_key(KEY);
    let rejected = gw.probe(&secret()).await;
    assert!(rejected.reachable);
    assert_eq!(rejected.status_code, Some(401));
    assert_eq!(rejected.outcome, KeyStatus::NotReady);
    assert!(rejected
        .reason
        .as_deref()
        .unwrap()
        .contains("rejected by gateway"));
    mock.accept_key(KEY);

    // A 403 on /models does not prove the key bad: ready, with a caveat.
    mock.set_models_status(Some(403));
    let forbidden = gw.probe(&secret()).await;
    assert_eq!(
        (
            forbidden.reachable,
            forbidden.status_code,
            forbidden.outcome
        ),
        (true, Some(403), KeyStatus::Ready)
    );
    let caveat = forbidden.reason.unwrap();
    assert!(
        caveat.contains("403") && !caveat.contains("rejected"),
        "{caveat}"
    );

    mock.set_models_status(Some(503));
    let broken = gw.probe(&secret()).await;
    assert_eq!(
        (broken.reachable, broken.status_code, broken.outcome),
        (true, Some(503), KeyStatus::NotReady)
    );
    assert!(broken.reason.as_deref().unwrap().contains("503"));
    mock.set_models_status(None);

    // Without a key the mock answers 401: still reachable.
    let reach = gw.check_reachable().await;
    assert_eq!((reach.reachable, reach.status_code), (true, Some(401)));
    assert_eq!(mock.requests().last().unwrap().authorization, None);

    let down = gateway_to_nowhere();
    for p in [down.probe(&secret()).await, down.check_reachable().await] {
        assert!(!p.reachable);
        assert_eq!(p.status_code, None);
        assert_eq!(p.outcome, KeyStatus::NotReady);
        assert!(!p.reason.unwrap().contains(KEY));
    }

    let slow = gateway(mock.base_url(), Duration::from_millis(200));
    mock.set_behavior(Behavior::Hang); // chat only; models still answer
    assert_eq!(slow.probe(&secret()).await.outcome, KeyStatus::Ready);
}

#[tokio::test]
async fn a_probe_times_out_as_unreachable() {
    // A listener that accepts but never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _keep = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let gw = gateway(format!("http://{addr}/v1"), Duration::from_millis(200));
    let p = gw.probe(&secret()).await;
    assert!(!p.reachable);
    assert!(p.reason.unwrap().contains("did not answer"));
}

/// The frames of a stream whose upstream sends an error event; checks the contract.
async fn error_event_stream(gw: &RegionGateway) -> (Vec<String>, RunReport) {
    let (s, report) = open_stream(gw, stream_body()).await;
    let text = collect(s).await;
    assert_no_key_in_any_form(&text);
    assert!(!text.contains("after the error"), "{text}");
    let events = payloads(&text);
    assert_eq!(
        events.iter().filter(|p| *p == "[DONE]").count(),
        1,
        "{text}"
    );
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let errors = events.iter().filter(|p| p.contains("\"error\"")).count();
    assert_eq!(errors, 1, "{text}");
    let report = report.await.unwrap();
    assert_no_key_in_any_form(&format!("{report:?}"));
    (events, report)
}

#[tokio::test]
async fn stream_error_events_are_rebuilt_not_forwarded() {
    let (mock, gw) = setup().await;
    let upstream_event = r#"{"error":{"message":"Rate limit for key {key}: retry later","type":"rate_limit_error","code":"rate_limit_exceeded","status":429,"param":null,"internal":"sk-internal-secret-value"}}"#;
    for named in [false, true] {
        for form in KeyForm::all() {
            // `event: error` carries the error object itself, or the OpenAI wrapper.
            mock.push_behavior(Behavior::StreamError {
                after: 2,
                data: upstream_event.into(),
                named,
                echo: form.clone(),
            });
            let (events, report) = error_event_stream(&gw).await;
            assert_eq!(events.len(), 4, "{events:?}");
            assert!(events[0].contains("chunk-0") && events[1].contains("chunk-1"));
            let frame: Value = serde_json::from_str(&events[2]).unwrap();
            let e = &frame["error"];
            assert_eq!(e["code"], "upstream_error", "{frame}");
            assert_eq!(e["type"], "upstream_error");
            assert_eq!(e["upstream_status"], 429);
            assert_eq!(e["upstream_code"], "rate_limit_exceeded");
            assert_eq!(e["upstream_type"], "rate_limit_error");
            let message = e["message"].as_str().unwrap();
            assert!(
                message.contains("Rate limit for key [redacted]"),
                "{form:?}: {message}"
            );
            assert!(e.get("internal").is_none() && e.get("param").is_none());
            assert!(!events[2].contains("sk-internal"));
            assert_eq!(report.status, RunStatus::Error);
            assert_eq!(report.error_code.as_deref(), Some("upstream_error"));
            assert_eq!(report.usage, None);
        }
    }
    // An `event: error` whose data is no JSON at all (or empty), right away.
    for data in ["upstream exploded with {key}", ""] {
        mock.push_behavior(Behavior::StreamError {
            after: 0,
            data: data.into(),
            named: true,
            echo: KeyForm::Upper,
        });
        let (events, _) = error_event_stream(&gw).await;
        assert_eq!(events.len(), 2, "{events:?}");
        let frame: Value = serde_json::from_str(&events[0]).unwrap();
        assert_eq!(frame["error"]["code"], "upstream_error");
        assert!(frame["error"].get("upstream_status").is_none());
    }
}

#[tokio::test]
async fn the_key_in_streamed_or_completed_content_is_redacted() {
    let (mock, gw) = setup().await;
    for form in [KeyForm::Exact, KeyForm::Upper, KeyForm::Lower] {
        mock.push_behavior(Behavior::StreamEchoKey { echo: form });
        let (s, report) = open_stream(&gw, stream_body()).await;
        let text = collect(s).await;
        assert!(
            !text
                .to_ascii_lowercase()
                .contains(&KEY.to_ascii_lowercase()),
            "{text}"
        );
        let events = payloads(&text);
        let first: Value = serde_json::from_str(&events[0]).unwrap();
        assert_eq!(
            first["choices"][0]["delta"]["content"],
            "your key: [redacted]"
        );
        assert!(events[1].contains("chunk-1"));
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
        assert_eq!(report.await.unwrap().status, RunStatus::Ok);
    }
    // A non-streamed completion echoing the key.
    mock.push_behavior(Behavior::Answer {
        status: 200,
        headers: vec![],
        body: r#"{"choices":[{"message":{"role":"assistant","content":"k={key}"}}],"model":"m"}"#
            .into(),
        echo: KeyForm::Upper,
    });
    let ChatOutcome::Complete(c) = chat(&gw, messages()).await.unwrap() else {
        panic!("expected a completion");
    };
    let body: Value = serde_json::from_slice(&c.body).unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "k=[redacted]");
}

// ---- The Responses API and embeddings (issue 32) ---------------------------------------------

use gc_domain::policy::runs::RunKind;

async fn call(
    gw: &RegionGateway,
    kind: RunKind,
    body: Value,
) -> Result<ChatOutcome, UpstreamError> {
    tokio::time::timeout(LIMIT, gw.call(kind, &secret(), body))
        .await
        .unwrap()
}

async fn open_responses_stream(
    gw: &RegionGateway,
    body: Value,
) -> (RunStream, oneshot::Receiver<RunReport>) {
    with_report(call(gw, RunKind::Responses, body).await)
}

/// An SSE text's events as (`event:` name or "", data).
fn named_events(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (mut name, mut data) = (String::new(), String::new());
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_owned();
                } else {
                    data = line.strip_prefix("data: ").unwrap().to_owned();
                }
            }
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn a_response_goes_to_responses_with_the_default_model_and_its_usage_read() {
    let (mock, gw) = setup().await;
    let body = json!({"model": "auto", "input": "hi", "max_output_tokens": 9});
    let Ok(ChatOutcome::Complete(done)) = call(&gw, RunKind::Responses, body).await else {
        panic!("a complete answer")
    };
    let answer: Value = serde_json::from_slice(&done.body).unwrap();
    assert_eq!(answer["object"], "response");
    assert_eq!(done.usage, usage(5, 7));
    assert_eq!(done.model, "region-default");
    let sent = mock.requests_to("/responses");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/responses");
    assert_eq!(sent[0].json().unwrap()["model"], "region-default");
    assert_eq!(sent[0].json().unwrap()["max_output_tokens"], 9);
    assert!(mock.chat_requests().is_empty());
    // A chat completion is not a Responses answer.
    mock.push_behavior(Behavior::Garbage);
    let e = call(&gw, RunKind::Responses, json!({"input": "x"})).await;
    assert!(matches!(e, Err(UpstreamError::InvalidResponse(_))), "{e:?}");
}

#[tokio::test]
async fn a_responses_stream_keeps_its_event_names_and_ends_after_response_completed() {
    let (mock, gw) = setup().await;
    mock.push_behavior(Behavior::Stream {
        chunks: 2,
        delay: Duration::from_millis(2),
    });
    let body = json!({"input": "hi", "stream": true});
    let (mut s, report) = open_responses_stream(&gw, body).await;
    s.count_relayed();
    let text = collect(s).await;
    let events = named_events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ],
        "{text}"
    );
    assert!(
        !text.contains("[DONE]"),
        "OpenAI's Responses streams have none"
    );
    let sent = mock.requests_to("/responses")[0].json().unwrap();
    assert!(sent.get("stream_options").is_none(), "{sent}");
    let report = report.await.unwrap();
    assert_eq!(report.status, RunStatus::Ok);
    assert_eq!(report.usage, usage(5, 2));
    assert_eq!(report.model, "region-default");
    // "chunk-0 " and "chunk-1 ": 3 tokens each in both encodings.
    assert!(report.relayed_tokens.is_some_and(|n| n > 0), "{report:?}");
}

#[tokio::test]
async fn a_responses_stream_that_ends_early_or_fails_gets_gc_s_error_frame() {
    let (mock, gw) = setup().await;
    let failed = r#"{"type":"response.failed","response":{"id":"r","status":"failed","model":"m","error":{"code":"server_error","message":"melted, key {key}"}}}"#;
    for behavior in [
        Behavior::StreamWithoutDone { chunks: 2 },
        Behavior::BreakMidStream { after: 1 },
        Behavior::StreamError {
            after: 1,
            data: failed.into(),
            named: false,
            echo: KeyForm::Exact,
        },
        Behavior::StreamError {
            after: 1,
            data: r#"{"type":"error","code":"oops","message":"bad {key}"}"#.into(),
            named: true,
            echo: KeyForm::Upper,
        },
    ] {
        mock.push_behavior(behavior.clone());
        let (s, report) = open_responses_stream(&gw, json!({"input": "hi", "stream": true})).await;
        let text = collect(s).await;
        assert_no_key_in_any_form(&text);
        let events = named_events(&text);
        let n = events.len();
        assert_eq!(events[0].0, "response.created", "{behavior:?}: {text}");
        assert_eq!(events[n - 1].1, "[DONE]", "{behavior:?}: {text}");
        let err = error_frame(&events[n - 2].1);
        assert_eq!(
            err["error"]["code"], "upstream_error",
            "{behavior:?}: {err}"
        );
        assert!(!text.contains("after the error"), "{text}");
        let report = report.await.unwrap();
        assert_eq!(report.status, RunStatus::Error, "{behavior:?}");
        if let Behavior::StreamError { named, .. } = behavior {
            let code = if named { "oops" } else { "server_error" };
            assert_eq!(err["error"]["upstream_code"], code, "{err}");
        }
    }
}

#[tokio::test]
async fn embeddings_go_to_embeddings_with_the_caller_s_model() {
    let (mock, gw) = setup().await;
    let body = json!({"model": "text-embedding-3-small", "input": ["a", "b", "c"]});
    let Ok(ChatOutcome::Complete(done)) = call(&gw, RunKind::Embeddings, body).await else {
        panic!("a complete answer")
    };
    let answer: Value = serde_json::from_slice(&done.body).unwrap();
    assert_eq!(answer["data"].as_array().unwrap().len(), 3);
    assert_eq!(done.usage, usage(5, 0));
    assert_eq!(done.model, "text-embedding-3-small");
    assert_eq!(done.report().relayed_tokens, None);
    let sent = mock.requests_to("/embeddings");
    assert_eq!(sent[0].path, "/v1/embeddings");
    assert_eq!(sent[0].json().unwrap()["model"], "text-embedding-3-small");
    // `stream: true` is not streamed (the domain refuses it before; the adapter never opens one).
    mock.push_behavior(Behavior::Garbage);
    let e = call(
        &gw,
        RunKind::Embeddings,
        json!({"model": "e", "input": "x"}),
    )
    .await;
    assert!(matches!(e, Err(UpstreamError::InvalidResponse(_))), "{e:?}");
    mock.push_behavior(Behavior::status(400, "bad input"));
    let e = call(
        &gw,
        RunKind::Embeddings,
        json!({"model": "e", "input": "x"}),
    )
    .await;
    assert_eq!(e.unwrap_err().client_status(), Some(400));
}

/// The idle time-out is the upstream's silence while gc waits on it, not time gc spends
/// elsewhere: here the worker thread is blocked longer than the time-out right after the
/// first chunk (as the first run under a token limit blocked it loading the tokenizer),
/// while the upstream's next chunks arrive and wait unread in the connection. Before, the
/// deadline ran from the first chunk's arrival, and the stream ended `upstream_timeout` after
/// it (the hung-up-streams quota test's flake).
#[test]
fn time_spent_away_from_the_stream_is_not_upstream_silence() {
    // The mock runs on its own runtime, so it sends while the stream's thread is blocked.
    let upstream = tokio::runtime::Runtime::new().unwrap();
    let (_, mock) = upstream.block_on(MockUpstream::start()).unwrap();
    let gc = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    gc.block_on(async {
        let gw = gateway(mock.base_url(), Duration::from_millis(300));
        let (mut s, report) = gated_stream(&mock, &gw, 3).await;
        let first = next_frame(&mut s).await.unwrap();
        assert!(std::str::from_utf8(&first).unwrap().contains("chunk-0 "));
        mock.release(2);
        // Blocks this thread (the stream's and its connection's): the mock sends meanwhile.
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(mock.chunks_sent(), 3);
        let rest = collect(s).await;
        assert!(!rest.contains("error"), "{rest}");
        assert!(
            rest.contains("chunk-1 ") && rest.contains("chunk-2 "),
            "{rest}"
        );
        assert_eq!(report.await.unwrap().status, RunStatus::Ok);
    });
}
