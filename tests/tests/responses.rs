//! `POST /responses` and `POST /embeddings` (issue 32) end to end, against mock
//! OpenAI-compatible upstreams on loopback: plain and streamed Responses, embeddings, failover
//! on a rejected key, quotas before the upstream, usage lines and the activity record, a broken
//! stream's error frame, the caller refusals and hostile bodies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use gc_gateway::mock::Behavior;
use gc_tests::*;

const SECRET: &str = "sk-upstream-secret-RRRR1111";
const SECRET_2: &str = "sk-upstream-secret-EEEE2222";

type Setup = GatewayWorld;

/// What these tests ask of their world besides [`GatewayWorld`]'s own helpers.
trait ResponsesTests {
    /// Gives the tenant an AIHK key that serves chat.
    async fn add_chat_key(&self, secret: &str) -> Value;

    /// The activity feed's run records, newest first, once there are `n`.
    async fn run_records(&self, n: usize) -> Vec<Value>;
}

impl ResponsesTests for Setup {
    async fn add_chat_key(&self, secret: &str) -> Value {
        self.add_key("AIHK", secret, true).await
    }

    async fn run_records(&self, n: usize) -> Vec<Value> {
        let member = self.member.clone();
        let runs = async || {
            let feed = member.get("/workspace/activity").await;
            feed.body["data"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["action"] == "run")
                .cloned()
                .collect::<Vec<_>>()
        };
        eventually(async || runs().await.len() >= n).await;
        runs().await
    }
}

fn respond() -> Value {
    json!({"model": "auto", "input": "hello", "max_output_tokens": 16})
}

fn embed() -> Value {
    json!({"model": "text-embedding-3-small", "input": ["hello world", "bye"]})
}

/// The gateway world with `/responses` and `/embeddings` mounted, and the embeddings model on
/// AIHK's list beside its default chat model.
async fn setup(
    backend: Backend,
    label: &str,
    tweak: impl FnOnce(&mut gc_server::Config),
) -> Option<Setup> {
    GatewayWorld::start(backend, label, |c| {
        c.chat_completions = true;
        c.gateway_aihk_models = vec!["text-embedding-3-small".into()];
        tweak(c);
    })
    .await
}

macro_rules! responses_tests {
    ($($tests:tt)*) => { on_both_backends! { setup -> Setup; $($tests)* } };
}

/// An SSE body's events as (`event:` name or "", data).
fn sse(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let mut name = String::new();
            let mut data = String::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_owned();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = d.to_owned();
                } else {
                    panic!("unexpected line {line:?} in {text:?}");
                }
            }
            (name, data)
        })
        .collect()
}

async fn stream(actor: &Actor, path: &str, body: &Value) -> (reqwest::header::HeaderMap, String) {
    let res = actor
        .request(Method::POST, path)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let headers = res.headers().clone();
    (headers, res.text().await.unwrap())
}

responses_tests! {
    async fn a_response_plain_and_streamed_passes_through_and_is_recorded(s) {
        let key = s.add_chat_key(SECRET).await;
        let runner = s.member.keyed(&["run"]).await;
        let r = runner.post("/responses", respond()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["object"], "response");
        assert_eq!(r.body["output"][0]["content"][0]["text"], "Hello from the mock.");
        assert_eq!(r.body["model"], "gpt-4o-mini", "auto resolves to the region default");
        let sent = s.hk.requests_to("/responses");
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].path, "/v1/responses");
        assert_eq!(sent[0].bearer(), Some(SECRET));
        let body = sent[0].json().unwrap();
        assert_eq!(body["input"], "hello");
        assert_eq!(body["max_output_tokens"], 16);
        assert!(body.get("stream_options").is_none(), "{body}");
        assert!(s.hk.chat_requests().is_empty() && s.ca.requests().is_empty());

        // Streamed: OpenAI's Responses events pass through with their names and end after
        // response.completed, with no [DONE] of gc's.
        s.hk.push_behavior(Behavior::Stream { chunks: 3, delay: Duration::from_millis(5) });
        let mut body = respond();
        body["stream"] = json!(true);
        let (headers, text) = stream(&runner, "/responses", &body).await;
        assert_eq!(headers["content-type"], "text/event-stream");
        assert_eq!(headers["cache-control"], "no-cache");
        assert_eq!(headers["x-accel-buffering"], "no");
        let events = sse(&text);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["response.created", "response.output_item.added", "response.content_part.added",
            "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
            "response.output_text.done", "response.content_part.done", "response.output_item.done",
            "response.completed"], "{text}");
        let deltas: String = events.iter().filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| v["delta"].as_str().map(str::to_owned)).collect();
        assert_eq!(deltas, "chunk-0 chunk-1 chunk-2 ");
        for (name, data) in &events {
            assert_eq!(serde_json::from_str::<Value>(data).unwrap()["type"], name.as_str());
        }
        assert!(!text.contains(SECRET));

        // Both are recorded: the activity (route, model, usage) and the usage lines, from the
        // Responses API's input_tokens / output_tokens (5/7, then 5/3).
        let runs = s.run_records(2).await;
        let by_stream = |stream: bool| runs.iter().find(|r| r["detail"]["stream"] == stream).unwrap();
        for (stream, total) in [(false, 12), (true, 8)] {
            let d = &by_stream(stream)["detail"];
            assert_eq!(d["route"], "/responses", "{d}");
            assert_eq!(d["status"], "ok", "{d}");
            assert_eq!(d["model"], "gpt-4o-mini", "{d}");
            assert_eq!(d["key_id"], key["id"], "{d}");
            assert_eq!(d["usage"]["total_tokens"], total, "{d}");
        }
        assert!(!runs.iter().any(|r| r.to_string().contains(SECRET)));
        s.runs_recorded(2).await;
        let usage = s.member.get("/workspace/usage?group_by=model").await;
        let row = &usage.body["data"][0];
        assert_eq!(row["model"], "gpt-4o-mini", "{}", usage.text);
        assert_eq!((row["prompt_tokens"].as_u64(), row["completion_tokens"].as_u64(), row["total_tokens"].as_u64()),
            (Some(10), Some(10), Some(20)), "{}", usage.text);
    }

    async fn embeddings_answer_openai_s_list_and_are_recorded(s) {
        s.add_chat_key(SECRET).await;
        let runner = s.member.keyed(&["run"]).await;
        let r = runner.post("/embeddings", embed()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["object"], "list");
        assert_eq!(r.body["data"].as_array().unwrap().len(), 2, "{}", r.text);
        assert_eq!(r.body["data"][1]["embedding"], json!([0.1f32, 0.2f32, 0.3f32]));
        assert_eq!(r.body["usage"]["prompt_tokens"], 5);
        // base64, the official Python SDK's default, passes through as it is.
        let mut b64 = embed();
        b64["encoding_format"] = json!("base64");
        let r = runner.post("/embeddings", b64).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.body["data"][0]["embedding"].is_string(), "{}", r.text);
        let sent = s.hk.requests_to("/embeddings");
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].path, "/v1/embeddings");
        assert_eq!(sent[0].bearer(), Some(SECRET));
        assert_eq!(sent[0].json().unwrap()["model"], "text-embedding-3-small", "the caller's model, never the chat default");
        assert!(s.hk.chat_requests().is_empty());
        let runs = s.run_records(2).await;
        let d = &runs[0]["detail"];
        assert_eq!(d["route"], "/embeddings", "{d}");
        assert_eq!(d["model"], "text-embedding-3-small", "{d}");
        assert_eq!(d["usage"], json!({"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}), "{d}");
        s.runs_recorded(2).await;
        let usage = s.member.get("/workspace/usage?group_by=model").await;
        let row = &usage.body["data"][0];
        assert_eq!(row["model"], "text-embedding-3-small", "{}", usage.text);
        assert_eq!(row["total_tokens"], 10, "{}", usage.text);
        assert_eq!(row["completion_tokens"], 0, "{}", usage.text);
    }

    async fn a_rejected_key_fails_over_on_both_routes(s) {
        let first = s.add_chat_key(SECRET).await;
        s.add_chat_key(SECRET_2).await;
        // The upstream revokes the first key after it was checked; its 401 echoes the key.
        s.hk.reject_key(SECRET);
        for _ in 0..2 {
            let r = s.member.post("/responses", respond()).await;
            assert_eq!(r.status, 200, "{}", r.text);
            let r = s.member.post("/embeddings", embed()).await;
            assert_eq!(r.status, 200, "{}", r.text);
            assert!(!r.text.contains(SECRET));
        }
        let path = format!("/admin/tenants/{}/ai-keys", s.tenant_id());
        let admin = s.admin.clone();
        eventually(async || admin.get(&path).await.body["data"].as_array().unwrap().iter()
            .any(|k| k["id"] == first["id"] && k["status"] == "not_ready")).await;
        // Every key rejected: 502 in OpenAI's shape, never a key.
        s.hk.reject_key(SECRET_2);
        for route in ["/responses", "/embeddings"] {
            let body = if route == "/responses" { respond() } else { embed() };
            let r = s.member.post(route, body).await;
            assert_error(&r, 502, "upstream_error");
            assert_eq!(r.body["error"]["type"], "api_error", "{}", r.text);
            assert!(!r.text.contains(SECRET) && !r.text.contains(SECRET_2), "{}", r.text);
        }
    }

    async fn quotas_reserve_what_each_kind_costs_and_refuse_before_the_upstream(s) {
        let second = chrono::Utc::now().timestamp() % 60;
        if second > 45 {
            // The minute window must not roll over in the middle of the test.
            tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
        }
        s.add_chat_key(SECRET).await;
        s.limit_tenant(json!({"tokens_per_minute": 100})).await;
        // Embeddings reserve their input only ("hello world", "bye": 3 tokens), no completion.
        let r = s.member.post("/embeddings", embed()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-remaining-tokens"), Some("97"), "{:?}", r.headers);
        s.runs_recorded(1).await;
        // Settled to the 5 the upstream reported. A response reserves its input (3 for the
        // reply, 3 + 1 for "hello") and its max_output_tokens (16): 100 - 5 - 23.
        let r = s.member.post("/responses", respond()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-remaining-tokens"), Some("72"), "{:?}", r.headers);
        s.runs_recorded(2).await;
        // A monthly budget spent: both refused with 429 before any upstream call.
        s.limit_tenant(json!({"tokens_per_minute": null, "monthly_tokens": 17})).await;
        let calls = s.hk.request_count();
        for (route, body) in [("/responses", respond()), ("/embeddings", embed())] {
            let r = s.member.post(route, body).await;
            assert_error(&r, 429, "budget_exhausted");
            assert!(r.header("retry-after").is_some());
        }
        assert_eq!(s.hk.request_count(), calls, "refusals never reach the upstream");
    }

    async fn a_broken_responses_stream_ends_with_gc_s_error_frame(s) {
        s.add_chat_key(SECRET).await;
        let mut body = respond();
        body["stream"] = json!(true);
        let upstream_error = Behavior::StreamError {
            after: 1,
            data: r#"{"type":"error","code":"server_error","message":"boom {key}"}"#.into(),
            named: true,
            echo: Default::default(),
        };
        for behavior in [Behavior::BreakMidStream { after: 2 }, Behavior::StreamWithoutDone { chunks: 2 },
            Behavior::StreamThenHang { after: 1 }, upstream_error] {
            s.hk.push_behavior(behavior.clone());
            let (_, text) = stream(&s.member, "/responses", &body).await;
            assert!(!text.contains(SECRET), "{text}");
            let events = sse(&text);
            assert_eq!(events[0].0, "response.created", "{behavior:?}: {text}");
            let n = events.len();
            assert_eq!(events[n - 1], (String::new(), "[DONE]".to_owned()), "{behavior:?}: {text}");
            let error: Value = serde_json::from_str(&events[n - 2].1).unwrap();
            assert!(error["error"]["code"].as_str().unwrap().starts_with("upstream_"), "{error}");
            assert!(error["error"]["message"].is_string(), "{error}");
            assert!(!text.contains("response.completed"));
        }
        let runs = s.run_records(4).await;
        assert!(runs.iter().all(|r| r["detail"]["status"] == "error"), "{runs:?}");
    }

    async fn callers_and_bodies_are_refused_before_the_upstream(s) {
        s.add_chat_key(SECRET).await;
        let both = [("/responses", respond()), ("/embeddings", embed())];
        // Caller refusals, in OpenAI's shape.
        let reader = s.member.keyed(&["workspace:read"]).await;
        for (route, body) in &both {
            let r = reader.post(route, body.clone()).await;
            assert_error(&r, 403, "insufficient_scope");
            assert_eq!(r.body["error"]["type"], "permission_error", "{}", r.text);
            assert_error(&s.app.anon().post(route, body.clone()).await, 401, "unauthenticated");
        }
        s.admin.patch(&format!("/admin/users/{}", s.member.id), json!({"status": "suspended"})).await;
        for (route, body) in &both {
            assert_error(&s.member.post(route, body.clone()).await, 403, "member_suspended");
        }
        s.admin.patch(&format!("/admin/users/{}", s.member.id), json!({"status": "active"})).await;
        let shadow = s.app.admin().await;
        shadow.post("/auth/ip-admin", json!({"tenant_id": s.tenant["id"]})).await;
        for (route, body) in &both {
            assert_error(&shadow.post(route, body.clone()).await, 403, "shadow_read_only");
        }
        // Hostile and malformed bodies: a 4xx naming the problem, never a 500.
        let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        let many: Vec<Value> = (0..2049).map(|_| json!("x")).collect();
        let responses_bad = [
            json!({}), json!({"input": 5}), json!({"input": ""}), json!({"input": []}), json!({"input": [1]}),
            json!({"input": [{"role": "wizard", "content": "x"}]}), json!({"input": many.clone()}),
            json!({"input": "x", "max_output_tokens": 0}), json!({"input": "x", "max_output_tokens": 2.5}),
            json!({"input": "x", "stream": "yes"}), json!({"input": "x", "instructions": 7}),
            json!({"input": "x", "model": ""}), json!({"input": "x", "model": 3}),
        ];
        let embeddings_bad = [
            json!({"input": "x"}), json!({"model": "auto", "input": "x"}), json!({"model": "e", "input": []}),
            json!({"model": "e", "input": ""}), json!({"model": "e", "input": [[]]}), json!({"model": "e", "input": [{"a": 1}]}),
            json!({"model": "e", "input": [-1]}), json!({"model": "e", "input": many}),
            json!({"model": "e", "input": "x", "encoding_format": "hex"}), json!({"model": "e", "input": "x", "dimensions": 0}),
            json!({"model": "e", "input": "x", "stream": true}),
        ];
        for (route, bad) in responses_bad.iter().map(|b| ("/responses", b)).chain(embeddings_bad.iter().map(|b| ("/embeddings", b))) {
            let r = s.member.post(route, bad.clone()).await;
            assert_error(&r, 422, "validation_failed");
            assert_eq!(r.body["error"]["type"], "invalid_request_error", "{route} {bad}: {}", r.text);
        }
        for (route, _) in &both {
            let mut b = if *route == "/responses" { respond() } else { embed() };
            b["base_url"] = json!("http://elsewhere");
            assert_error(&s.member.post(route, b).await, 422, "provider_not_allowed");
            for raw in ["{\"input\": ", "[1, 2]", "\"text\"", "null", deep.as_str()] {
                let res = s.member.request(Method::POST, route).header("content-type", "application/json")
                    .body(raw.to_owned()).send().await.unwrap();
                let r = read(res).await;
                assert!(matches!(r.status.as_u16(), 400 | 422), "{route} {raw:.20}: {} {}", r.status, r.text);
            }
            let huge = json!({"model": "e", "input": "x".repeat(2 * 1024 * 1024)});
            let r = s.member.post(route, huge).await;
            assert_eq!(r.status, 413, "{route}: {}", r.text);
        }
        let runs = s.hk.requests_to("/responses").len() + s.hk.requests_to("/embeddings").len();
        assert_eq!(runs, 0, "nothing reached the upstream");
    }

    async fn upstream_refusals_keep_their_status_in_openai_s_shape(s) {
        s.add_chat_key(SECRET).await;
        s.hk.push_behavior(Behavior::status(400, "no such model"));
        let r = s.member.post("/embeddings", embed()).await;
        assert_error(&r, 400, "upstream_rejected");
        s.hk.push_behavior(Behavior::openai_error(429, "slow down", Some("rate_limit"), None).with_header("retry-after", "7"));
        let r = s.member.post("/responses", respond()).await;
        assert_error(&r, 429, "upstream_rate_limited");
        assert_eq!(r.header("retry-after"), Some("7"));
        s.hk.push_behavior(Behavior::Garbage);
        assert_error(&s.member.post("/responses", respond()).await, 502, "upstream_error");
        // A chat completion is not an embeddings list.
        s.hk.push_behavior(Behavior::Garbage);
        assert_error(&s.member.post("/embeddings", embed()).await, 502, "upstream_error");
        s.hk.push_behavior(Behavior::Hang);
        assert_error(&s.member.post("/embeddings", embed()).await, 504, "upstream_timeout");
    }
}

/// The routes are part of the OpenAI-compatible surface: mounted with `/chat/completions`
/// (`GC_CHAT_COMPLETIONS`), else 404 like it.
#[actix_web::test]
async fn the_routes_are_mounted_with_chat_completions_only() {
    let Some(s) = setup(Backend::Sqlite, "responses_unmounted", |c| {
        c.chat_completions = false
    })
    .await
    else {
        return;
    };
    s.add_chat_key(SECRET).await;
    for route in ["/chat/completions", "/responses", "/embeddings"] {
        let r = s.member.post(route, respond()).await;
        assert_error(&r, 404, "not_found");
    }
    assert_eq!(
        s.member
            .post(
                "/run",
                json!({"messages": [{"role": "user", "content": "x"}]})
            )
            .await
            .status,
        200
    );
    assert_eq!(
        s.hk.requests_to("/responses").len() + s.hk.requests_to("/embeddings").len(),
        0
    );
}
