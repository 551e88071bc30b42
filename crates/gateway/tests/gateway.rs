//! The gateway against the mock OpenAI-compatible upstream on loopback.

// Test helpers (not only `#[test]` functions) panic on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use gc_gateway::mock::{Behavior, MockHandle, MockUpstream};
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
    })
    .unwrap()
}

async fn setup() -> (MockHandle, RegionGateway) {
    let (_, mock) = MockUpstream::start().await.unwrap();
    let gw = gateway(mock.base_url(), Duration::from_secs(5));
    (mock, gw)
}

fn secret() -> Secret {
    Secret::new(KEY)
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
    match chat(gw, body).await {
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
}

#[tokio::test]
async fn non_streamed_completion_is_passed_through() {
    let (mock, gw) = setup().await;
    let ChatOutcome::Complete(c) = chat(&gw, messages()).await.unwrap() else {
        panic!("expected a completion");
    };
    assert_eq!(c.status, 200);
    assert_eq!(c.model, "region-default");
    assert_eq!(
        c.usage,
        Some(Usage {
            prompt_tokens: 5,
            completion_tokens: 7,
            total_tokens: 12
        })
    );
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
    mock.push_behavior(Behavior::StreamGated { chunks: 3 });
    mock.release(1);
    let (mut s, report) = open_stream(&gw, stream_body()).await;

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
    assert_eq!(
        report.usage,
        Some(Usage {
            prompt_tokens: 5,
            completion_tokens: 3,
            total_tokens: 8
        })
    );
    assert_eq!(report.model, "region-default");
    assert!(report.ttft_ms.is_some());
    assert!(report.ttft_ms <= Some(report.latency_ms));
}

#[tokio::test]
async fn done_is_sent_exactly_once_at_the_end() {
    let (_mock, gw) = setup().await;
    let (s, report) = open_stream(&gw, stream_body()).await;
    let text = collect(s).await;
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
    mock.push_behavior(Behavior::status(403, "forbidden for you"));
    let err = chat(&gw, messages()).await.unwrap_err();
    assert_eq!(
        err,
        UpstreamError::KeyRejected {
            status: 403,
            message: "forbidden for you".into()
        }
    );
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
            message: "internal failure for [redacted]".into()
        }
    );
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
            message: "slow down".into()
        }
    );
    assert_eq!(err.code(), "upstream_error");
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
    assert!(matches!(err, UpstreamError::Transport(_)), "{err:?}");
    let p = gw.probe(&secret()).await;
    assert!(!p.reachable, "{p:?}");
}

#[tokio::test]
async fn unreachable_upstream_is_a_transport_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let gw = gateway(
        format!("http://127.0.0.1:{port}/v1"),
        Duration::from_secs(2),
    );
    for body in [messages(), stream_body()] {
        let err = chat(&gw, body).await.unwrap_err();
        assert!(matches!(err, UpstreamError::Transport(_)), "{err:?}");
        assert_eq!(err.code(), "upstream_error");
        assert_no_secret(&err);
    }
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
    mock.push_behavior(Behavior::BreakMidStream { after: 2 });
    let (s, report) = open_stream(&gw, stream_body()).await;
    let events = payloads(&collect(s).await);
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
    mock.push_behavior(Behavior::StreamWithoutDone { chunks: 2 });
    let (s, report) = open_stream(&gw, stream_body()).await;
    let events = payloads(&collect(s).await);
    assert_eq!(events.len(), 2 + 1 + 2, "{events:?}"); // chunks, usage, error, [DONE]
    let err = error_frame(&events[3]);
    assert_eq!(err["error"]["code"], "upstream_error");
    assert!(err["error"]["message"].as_str().unwrap().contains("[DONE]"));
    assert_eq!(events[4], "[DONE]");
    let report = report.await.unwrap();
    assert_eq!(report.status, RunStatus::Error);
    assert_eq!(report.usage.map(|u| u.completion_tokens), Some(2));
}

#[tokio::test]
async fn an_idle_stream_times_out_with_an_error_frame() {
    let (mock, _) = setup().await;
    let gw = gateway(mock.base_url(), Duration::from_millis(300));
    mock.push_behavior(Behavior::StreamThenHang { after: 1 });
    let (s, report) = open_stream(&gw, stream_body()).await;
    let events = payloads(&collect(s).await);
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
    mock.push_behavior(Behavior::StreamGated { chunks: 5 });
    mock.release(1);
    let (mut s, report) = open_stream(&gw, stream_body()).await;
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

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let down = gateway(
        format!("http://127.0.0.1:{port}/v1"),
        Duration::from_secs(2),
    );
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
