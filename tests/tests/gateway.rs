//! The AI gateway end to end: tenant AI keys, `/run`, streaming, refusals, failover,
//! diagnostics and `/chat/completions`, against mock OpenAI-compatible upstreams on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use gc_gateway::mock::{Behavior, MockHandle};
use gc_tests::*;

const SECRET: &str = "sk-upstream-secret-AAAA1111";
const SECRET_2: &str = "sk-upstream-secret-BBBB2222";

type Setup = GatewayWorld;

/// What the gateway tests ask of their world besides [`GatewayWorld`]'s own helpers.
trait GatewayTests {
    /// A second node on this setup's database, and the member with one `run` key on either
    /// node: (node B, which must outlive its use; the member on A; the member on B).
    async fn on_two_nodes(&self) -> (TestApp, Actor, Actor);

    fn chat(&self) -> Value {
        json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16})
    }
}

impl GatewayTests for Setup {
    async fn on_two_nodes(&self) -> (TestApp, Actor, Actor) {
        let node_b = self.app.second_node();
        let key = self.member.new_key(&["run"]).await;
        let on_a = self.member.with_key(&key);
        let mut on_b = on_a.clone();
        on_b.app = AppRef {
            base: node_b.base.clone(),
            client: node_b.client.clone(),
            origin: on_a.app.origin.clone(),
        };
        (node_b, on_a, on_b)
    }
}

/// The gateway world with a second model (`m-large`) on AIHK's list.
async fn setup(
    backend: Backend,
    label: &str,
    tweak: impl FnOnce(&mut gc_server::Config),
) -> Option<Setup> {
    GatewayWorld::start(backend, label, |c| {
        c.gateway_aihk_models = vec!["m-large".into()];
        tweak(c);
    })
    .await
}

macro_rules! gateway_tests {
    ($($tests:tt)*) => { on_both_backends! { setup -> Setup; $($tests)* } };
}

/// Reads a whole SSE body and returns its `data:` payloads.
async fn sse_events(res: reqwest::Response) -> Vec<String> {
    let text = res.text().await.unwrap();
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

gateway_tests! {
    async fn a_run_goes_to_the_tenant_region_with_its_key(s) {
        let key = s.add_key("AIHK", SECRET, true).await;
        assert_eq!(key["status"], "ready", "{key}");
        assert_eq!(key["hint"], "…1111");
        assert_eq!(key["region"], "AIHK");
        let r = s.member.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.body["choices"].is_array(), "{}", r.text);
        assert_eq!(r.body["model"], "gpt-4o-mini", "auto resolves to the region default");
        let seen = s.hk.chat_requests();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].bearer(), Some(SECRET));
        assert_eq!(seen[0].json().unwrap()["max_tokens"], 16);
        assert!(s.ca.chat_requests().is_empty(), "never another region");
        assert!(!r.text.contains(SECRET));

        // The run is written to the activity feed, off the request path.
        let mut found = None;
        for _ in 0..50 {
            let feed = s.member.get("/workspace/activity").await;
            found = feed.body["data"].as_array().and_then(|d| d.iter().find(|a| a["action"] == "run").cloned());
            if found.is_some() { break; }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let run = found.expect("a run record in the activity feed");
        assert_eq!(run["detail"]["region"], "AIHK");
        assert_eq!(run["detail"]["model"], "gpt-4o-mini");
        assert_eq!(run["detail"]["status"], "ok");
        assert_eq!(run["detail"]["key_id"], key["id"]);
        assert_eq!(run["detail"]["usage"]["total_tokens"], 12);
        assert!(!run.to_string().contains(SECRET));
    }

    async fn streams_pass_through_with_done_once(s) {
        s.add_key("AIHK", SECRET, true).await;
        s.hk.set_behavior(Behavior::Stream { chunks: 4, delay: Duration::from_millis(5) });
        let mut body = s.chat();
        body["stream"] = json!(true);
        let res = s.member.request(Method::POST, "/run").json(&body).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        assert_eq!(res.headers()["cache-control"], "no-cache");
        assert_eq!(res.headers()["x-accel-buffering"], "no");
        let events = sse_events(res).await;
        assert_eq!(events.iter().filter(|e| *e == "[DONE]").count(), 1);
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
        let text: String = events.iter().filter_map(|e| serde_json::from_str::<Value>(e).ok())
            .filter_map(|v| v["choices"][0]["delta"]["content"].as_str().map(str::to_owned)).collect();
        assert_eq!(text, "chunk-0 chunk-1 chunk-2 chunk-3 ");
        let sent = s.hk.chat_requests()[0].json().unwrap();
        assert_eq!(sent["stream_options"]["include_usage"], true);
    }

    async fn chunks_arrive_as_they_are_sent_and_a_client_going_away_cancels_upstream(s) {
        s.add_key("AIHK", SECRET, true).await;
        s.hk.set_behavior(Behavior::StreamGated { chunks: 3 });
        let mut body = s.chat();
        body["stream"] = json!(true);
        // The mock sends its headers with the first chunk: let exactly one through.
        s.hk.release(1);
        let mut res = s.member.request(Method::POST, "/run").json(&body).send().await.unwrap();
        assert_eq!(res.status(), 200);
        let first = tokio::time::timeout(Duration::from_secs(5), res.chunk()).await.expect("first chunk before the rest is sent").unwrap().unwrap();
        assert!(String::from_utf8_lossy(&first).contains("chunk-0"), "{first:?}");
        assert_eq!(s.hk.chunks_sent(), 1);
        drop(res);
        assert!(s.hk.wait_client_abort(Duration::from_secs(5)).await, "upstream request cancelled");
    }

    async fn refusals_happen_before_any_upstream_call(s) {
        let tid = s.tenant_id().to_owned();
        // No key at all.
        assert_error(&s.member.post("/run", s.chat()).await, 403, "ai_access_not_ready");
        // A key of the wrong region, a chat-disabled key, a rejected (not ready) key.
        s.add_key("AICA", SECRET, true).await;
        s.add_key("AIHK", SECRET_2, false).await;
        s.hk.reject_key("sk-rejected-key-0000");
        let bad = s.add_key("AIHK", "sk-rejected-key-0000", true).await;
        assert_eq!(bad["status"], "not_ready");
        assert!(bad["status_reason"].as_str().is_some());
        let r = s.member.post("/run", s.chat()).await;
        assert_error(&r, 403, "ai_access_not_ready");
        assert_eq!(s.member.get("/workspace/ai-access").await.body["status"], "not_ready");
        // AI disabled comes first.
        s.admin.patch(&format!("/admin/tenants/{tid}"), json!({"ai_enabled": false})).await;
        assert_error(&s.member.post("/run", s.chat()).await, 403, "ai_access_disabled");
        s.admin.patch(&format!("/admin/tenants/{tid}"), json!({"ai_enabled": true})).await;
        // A caller-chosen provider is refused.
        for field in ["provider", "base_url", "api_key", "region", "gateway"] {
            let mut b = s.chat();
            b[field] = json!("elsewhere");
            assert_error(&s.member.post("/run", b).await, 422, "provider_not_allowed");
        }
        assert_error(&s.member.post("/run", json!({"messages": []})).await, 422, "validation_failed");
        assert_error(&s.member.post("/run", json!({"messages": [{"role": "robot", "content": "x"}]})).await, 422, "validation_failed");
        // Refused members.
        assert_error(&s.app.anon().post("/run", s.chat()).await, 401, "unauthenticated");
        s.admin.patch(&format!("/admin/users/{}", s.member.id), json!({"status": "suspended"})).await;
        assert_error(&s.member.post("/run", s.chat()).await, 403, "member_suspended");
        s.admin.patch(&format!("/admin/users/{}", s.member.id), json!({"status": "active"})).await;
        s.admin.patch(&format!("/admin/tenants/{tid}"), json!({"status": "suspended"})).await;
        assert_error(&s.member.post("/run", s.chat()).await, 403, "tenant_suspended");
        // Not one chat request reached either upstream.
        assert!(s.hk.chat_requests().is_empty());
        assert!(s.ca.chat_requests().is_empty());
    }

    async fn a_rejected_key_fails_over_to_the_next_and_is_marked_not_ready(s) {
        let first = s.add_key("AIHK", SECRET, true).await;
        let second = s.add_key("AIHK", SECRET_2, true).await;
        // The upstream revokes one of them after they were checked.
        s.hk.reject_key(SECRET);
        for _ in 0..4 {
            let r = s.member.post("/run", s.chat()).await;
            assert_eq!(r.status, 200, "{}", r.text);
        }
        // The verdict is written off the request path by the run writer: wait for it.
        let mut keys = s.admin.get(&format!("/admin/tenants/{}/ai-keys", s.tenant_id())).await;
        for _ in 0..50 {
            let marked = keys.body["data"].as_array().unwrap().iter().any(|k| k["id"] == first["id"] && k["status"] == "not_ready");
            if marked {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            keys = s.admin.get(&format!("/admin/tenants/{}/ai-keys", s.tenant_id())).await;
        }
        let status = |id: &Value| keys.body["data"].as_array().unwrap().iter().find(|k| k["id"] == *id).unwrap()["status"].clone();
        assert_eq!(status(&first["id"]), "not_ready");
        assert_eq!(status(&second["id"]), "ready");
        // Once every key is rejected, the client gets a 502 and no key.
        s.hk.reject_key(SECRET_2);
        let r = s.member.post("/run", s.chat()).await;
        assert_error(&r, 502, "upstream_error");
        assert!(!r.text.contains(SECRET_2) && !r.text.contains(SECRET));
        // The verdicts land off the request path; then no key is left.
        let mut r = s.member.post("/run", s.chat()).await;
        for _ in 0..50 {
            if r.status == 403 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            r = s.member.post("/run", s.chat()).await;
        }
        assert_error(&r, 403, "ai_access_not_ready");
    }

    async fn load_is_spread_over_ready_keys(s) {
        s.add_key("AIHK", SECRET, true).await;
        s.add_key("AIHK", SECRET_2, true).await;
        for _ in 0..6 {
            assert_eq!(s.member.post("/run", s.chat()).await.status, 200);
        }
        let used: Vec<_> = s.hk.chat_requests().iter().map(|r| r.bearer().unwrap().to_owned()).collect();
        assert!(used.iter().any(|k| k == SECRET) && used.iter().any(|k| k == SECRET_2), "{used:?}");
    }

    async fn upstream_failures_map_to_502_and_504(s) {
        s.add_key("AIHK", SECRET, true).await;
        // A 5xx is retried once (on the next key): two in a row are the caller's 502.
        s.hk.push_behavior(Behavior::status(500, "upstream exploded"));
        s.hk.push_behavior(Behavior::status(500, "upstream exploded"));
        let r = s.member.post("/run", s.chat()).await;
        assert_error(&r, 502, "upstream_error");
        assert!(r.text.contains("500"), "{}", r.text);
        s.hk.push_behavior(Behavior::Garbage);
        assert_error(&s.member.post("/run", s.chat()).await, 502, "upstream_error");
        s.hk.push_behavior(Behavior::Hang);
        assert_error(&s.member.post("/run", s.chat()).await, 504, "upstream_timeout");
        // A 400 from the upstream (say, a bad model) is the caller's error, with its status.
        s.hk.push_behavior(Behavior::status(400, "no such model"));
        let r = s.member.post("/run", s.chat()).await;
        assert_error(&r, 400, "upstream_rejected");
        assert!(r.text.contains("no such model"), "{}", r.text);
        // A 403 "no access to model" is the caller's too: the key stays ready (only a 401
        // proves a key bad), and a run-scoped caller cannot switch the tenant's AI off.
        s.hk.push_behavior(Behavior::status(403, "no access to model"));
        assert_error(&s.member.post("/run", s.chat()).await, 403, "upstream_rejected");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let keys = s.admin.get(&format!("/admin/tenants/{}/ai-keys", s.tenant_id())).await;
        assert_eq!(keys.body["data"][0]["status"], "ready", "{}", keys.text);
        // A 429 keeps its status and tells the client when to come back.
        s.hk.push_behavior(Behavior::openai_error(429, "slow down", Some("rate_limit"), Some("rate_limited")).with_header("retry-after", "7"));
        let r = s.member.post("/run", s.chat()).await;
        assert_error(&r, 429, "upstream_rate_limited");
        assert_eq!(r.headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("7"));
        // Still usable afterwards.
        assert_eq!(s.member.post("/run", s.chat()).await.status, 200);
    }

    async fn a_broken_stream_ends_with_an_error_frame_then_done(s) {
        s.add_key("AIHK", SECRET, true).await;
        let mut body = s.chat();
        body["stream"] = json!(true);
        for behavior in [Behavior::BreakMidStream { after: 2 }, Behavior::StreamWithoutDone { chunks: 2 }, Behavior::StreamThenHang { after: 1 }] {
            s.hk.push_behavior(behavior.clone());
            let res = s.member.request(Method::POST, "/run").json(&body).send().await.unwrap();
            assert_eq!(res.status(), 200);
            let events = sse_events(res).await;
            assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{behavior:?}: {events:?}");
            assert_eq!(events.iter().filter(|e| *e == "[DONE]").count(), 1);
            let error: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
            assert!(error["error"]["code"].as_str().unwrap().starts_with("upstream_"), "{error}");
            assert!(error["error"]["message"].is_string());
        }
    }

    async fn keys_and_scopes_on_run(s) {
        s.add_key("AIHK", SECRET, true).await;
        let runner = s.member.keyed(&["run"]).await;
        assert_eq!(runner.post("/run", s.chat()).await.status, 200);
        let reader = s.member.keyed(&["workspace:read"]).await;
        assert_error(&reader.post("/run", s.chat()).await, 403, "insufficient_scope");
        // The Shadow view never runs.
        s.admin.post("/auth/ip-admin", json!({"tenant_id": s.tenant["id"]})).await;
        assert_error(&s.admin.post("/run", s.chat()).await, 403, "shadow_read_only");
        assert_eq!(s.hk.chat_requests().len(), 1);
    }

    async fn a_deleted_key_is_unusable_at_once(s) {
        let key = s.add_key("AIHK", SECRET, true).await;
        assert_eq!(s.member.post("/run", s.chat()).await.status, 200);
        let path = format!("/admin/tenants/{}/ai-keys/{}", s.tenant_id(), key["id"].as_str().unwrap());
        assert_eq!(s.admin.delete(&path).await.status, 204);
        assert_error(&s.admin.delete(&path).await, 404, "not_found");
        assert_error(&s.member.post("/run", s.chat()).await, 403, "ai_access_not_ready");
        assert_eq!(s.hk.chat_requests().len(), 1);
    }

    async fn an_ai_key_change_on_one_node_holds_at_the_next_run_on_the_other(s) {
        // A node keeps a tenant's usable keys while the tenant's AI-key version is unchanged
        // (decision 0022): every key change made through another node reaches its next run.
        let first = s.add_key("AIHK", SECRET, true).await;
        let (_node_b, _on_a, on_b) = s.on_two_nodes().await;
        for _ in 0..2 {
            assert_eq!(on_b.post("/run", s.chat()).await.status, 200);
        }
        // Through node A: a second key, then the first deleted. Node B's next runs use only
        // the second.
        let second = s.add_key("AIHK", SECRET_2, true).await;
        let path = |k: &Value| format!("/admin/tenants/{}/ai-keys/{}", s.tenant_id(), k["id"].as_str().unwrap());
        assert_eq!(s.admin.delete(&path(&first)).await.status, 204);
        for _ in 0..3 {
            assert_eq!(on_b.post("/run", s.chat()).await.status, 200);
        }
        let bearers: Vec<_> = s.hk.chat_requests().iter().map(|r| r.bearer().map(str::to_owned)).collect();
        assert_eq!(bearers.len(), 5);
        assert!(bearers[..2].iter().all(|b| b.as_deref() == Some(SECRET)), "{bearers:?}");
        assert!(bearers[2..].iter().all(|b| b.as_deref() == Some(SECRET_2)), "{bearers:?}");
        // The last key deleted through node A: node B refuses at once, calling no upstream.
        assert_eq!(s.admin.delete(&path(&second)).await.status, 204);
        assert_error(&on_b.post("/run", s.chat()).await, 403, "ai_access_not_ready");
        assert_eq!(s.hk.chat_requests().len(), 5);
    }

    async fn admin_ai_key_routes_validate_and_refuse(s) {
        let path = format!("/admin/tenants/{}/ai-keys", s.tenant_id());
        assert_error(&s.admin.post(&path, json!({"region": "EU", "secret": SECRET})).await, 422, "validation_failed");
        assert_error(&s.admin.post(&path, json!({"region": "AIHK", "secret": ""})).await, 422, "validation_failed");
        assert_error(&s.admin.post(&path, json!({"region": "AIHK", "secret": SECRET, "provider": "x"})).await, 422, "unknown_field");
        assert_error(&s.admin.post("/admin/tenants/0190f0f0-0000-7000-8000-000000000000/ai-keys", json!({"region": "AIHK", "secret": SECRET})).await, 404, "not_found");
        assert_error(&s.member.post(&path, json!({"region": "AIHK", "secret": SECRET})).await, 403, "admin_required");
        assert_error(&s.member.get(&path).await, 403, "admin_required");
        s.add_key("AIHK", SECRET, true).await;
        let list = s.admin.get(&path).await;
        assert_eq!(list.body["data"].as_array().unwrap().len(), 1);
        assert!(!list.text.contains(SECRET));
        let t = s.admin.get("/admin/tenants").await;
        assert_eq!(t.body["data"][0]["ai_access"], "ready");
        assert_eq!(s.member.get("/workspace").await.body["ai_access"]["status"], "ready");
    }

    async fn diagnostics_recheck_keys_and_redact_secrets(s) {
        let key = s.add_key("AIHK", SECRET, true).await;
        s.hk.reject_key(SECRET);
        // No body at all is the same as {}.
        let r = s.admin.send(s.admin.request(Method::POST, "/admin/ai-gateways/diagnostics")).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(!r.text.contains(SECRET));
        let gws = r.body["gateways"].as_array().unwrap();
        assert_eq!(gws.len(), 2);
        assert!(gws.iter().all(|g| g["configured"] == true && g["reachable"] == true), "{}", r.text);
        let k = r.body["keys"].as_array().unwrap().iter().find(|k| k["id"] == key["id"]).unwrap();
        assert_eq!(k["status"], "not_ready");
        s.hk.accept_key(SECRET);
        let r = s.admin.post("/admin/ai-gateways/diagnostics", json!({"region": "AIHK", "tenant_id": s.tenant["id"]})).await;
        assert_eq!(r.body["gateways"].as_array().unwrap().len(), 1);
        assert_eq!(r.body["keys"][0]["status"], "ready");
        assert_eq!(s.member.post("/run", s.chat()).await.status, 200);
        assert_error(&s.member.post("/admin/ai-gateways/diagnostics", json!({})).await, 403, "admin_required");
        assert_error(&s.admin.post("/admin/ai-gateways/diagnostics", json!({"region": "EU"})).await, 422, "validation_failed");
        assert_error(&s.admin.post("/admin/ai-gateways/diagnostics", json!({"regions": []})).await, 422, "unknown_field");
    }

    async fn chat_completions_is_not_mounted_by_default(s) {
        s.add_key("AIHK", SECRET, true).await;
        assert_error(&s.member.post("/chat/completions", s.chat()).await, 404, "not_found");
    }
}

#[actix_web::test]
async fn a_region_without_a_gateway_is_not_ready() {
    let Some(s) = setup(Backend::Sqlite, "no_gateway", |c| c.gateway_aihk_url = None).await else {
        return;
    };
    let key = s.add_key("AIHK", SECRET, true).await;
    assert_eq!(key["status"], "not_ready");
    assert_error(
        &s.member.post("/run", s.chat()).await,
        403,
        "ai_access_not_ready",
    );
    let d = s
        .admin
        .post("/admin/ai-gateways/diagnostics", json!({"region": "AIHK"}))
        .await;
    assert_eq!(d.body["gateways"][0]["configured"], false);
}

#[actix_web::test]
async fn upstream_keys_are_unreadable_in_the_database_file() {
    let Some(s) = setup(Backend::Sqlite, "sealed_keys", |_| {}).await else {
        return;
    };
    s.add_key("AIHK", SECRET, true).await;
    assert_eq!(s.member.post("/run", s.chat()).await.status, 200);
    let url = s.app.config.database_url.clone();
    let path = url.strip_prefix("sqlite://").unwrap();
    let (config, db) = s.app.stop().await;
    drop(config);
    let mut bytes = std::fs::read(path).unwrap();
    if let Ok(wal) = std::fs::read(format!("{path}-wal")) {
        bytes.extend(wal);
    }
    let needle = SECRET.as_bytes();
    assert!(
        !bytes.windows(needle.len()).any(|w| w == needle),
        "the secret is in the database file"
    );
    drop(db);
}

#[actix_web::test]
async fn chat_completions_speaks_openai_when_enabled() {
    let Some(s) = setup(Backend::Sqlite, "chat_completions", |c| {
        c.chat_completions = true
    })
    .await
    else {
        return;
    };
    s.add_key("AIHK", SECRET, true).await;
    let sdk = s.member.keyed(&["run"]).await;
    let r = sdk.post("/chat/completions", s.chat()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["object"], "chat.completion");
    // Errors carry OpenAI's type and param.
    let r = sdk
        .post(
            "/chat/completions",
            json!({"messages": [], "model": "auto"}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(r.body["error"]["type"], "invalid_request_error");
    assert_eq!(r.body["error"]["param"], "messages");
    let anon = s.app.anon().post("/chat/completions", s.chat()).await;
    assert_eq!(anon.status, 401);
    assert_eq!(anon.body["error"]["type"], "authentication_error");
    let bad = s
        .member
        .with_key("gc_notavalidkey")
        .post("/chat/completions", s.chat())
        .await;
    assert_eq!(bad.body["error"]["code"], "invalid_api_key");
}

/// The `/chat/completions` route driven by async-openai, an independent OpenAI client: a plain
/// and a streamed completion with a workspace key as the API key.
#[actix_web::test]
async fn an_openai_client_library_can_use_chat_completions() {
    use async_openai::config::OpenAIConfig;
    use async_openai::types::chat::{
        ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs,
    };
    use futures_util::StreamExt;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(s) = setup(Backend::Sqlite, "async_openai", |c| {
        c.chat_completions = true
    })
    .await
    else {
        return;
    };
    s.add_key("AIHK", SECRET, true).await;
    let config = OpenAIConfig::new()
        .with_api_base(format!("{}/api/v1", s.app.base))
        .with_api_key(s.member.new_key(&["run"]).await);
    let client = async_openai::Client::with_config(config);
    let request = CreateChatCompletionRequestArgs::default()
        .model("auto")
        .max_completion_tokens(16u32)
        .messages([ChatCompletionRequestUserMessageArgs::default()
            .content("hello")
            .build()
            .unwrap()
            .into()])
        .build()
        .unwrap();
    let response = client
        .chat()
        .create(request.clone())
        .await
        .expect("a plain completion");
    assert!(!response.choices.is_empty());
    assert_eq!(response.model, "gpt-4o-mini");

    let mut stream = client
        .chat()
        .create_stream(request)
        .await
        .expect("a stream");
    let mut text = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("a chunk");
        for choice in chunk.choices {
            text.push_str(choice.delta.content.as_deref().unwrap_or_default());
        }
    }
    assert_eq!(text, "chunk-0 chunk-1 chunk-2 ");

    // A key without the run scope is refused in a shape the client understands.
    let config = OpenAIConfig::new()
        .with_api_base(format!("{}/api/v1", s.app.base))
        .with_api_key(s.member.new_key(&["workspace:read"]).await);
    let refused = async_openai::Client::with_config(config)
        .chat()
        .create(
            CreateChatCompletionRequestArgs::default()
                .model("auto")
                .messages([ChatCompletionRequestUserMessageArgs::default()
                    .content("x")
                    .build()
                    .unwrap()
                    .into()])
                .build()
                .unwrap(),
        )
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("run"), "{refused}");
}

// ---- Quotas, usage, models, metrics and failover (issue 10) --------------------------------

gateway_tests! {
    async fn a_tenant_over_its_request_limit_is_refused_before_the_upstream(s) {
        s.add_key("AIHK", SECRET, true).await;
        let t = s.limit_tenant(json!({"requests_per_minute": 2})).await;
        assert_eq!(t["limits"], json!({"requests_per_minute": 2, "tokens_per_minute": null, "monthly_tokens": null, "monthly_spend": null}));
        let r = s.member.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-limit-requests"), Some("2"));
        assert_eq!(r.header("x-ratelimit-remaining-requests"), Some("1"));
        assert!(r.header("x-ratelimit-reset-requests").is_some_and(|v| v.ends_with('s')));
        assert_eq!(r.header("x-ratelimit-limit-tokens"), None, "no token limit applies");
        let r = s.member.post("/run", s.chat()).await;
        assert_eq!(r.header("x-ratelimit-remaining-requests"), Some("0"));
        let refused = s.member.post("/run", s.chat()).await;
        assert_error(&refused, 429, "rate_limited");
        let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
        assert_eq!(refused.header("x-ratelimit-remaining-requests"), Some("0"));
        assert_eq!(s.hk.chat_requests().len(), 2, "a refused run never reaches the upstream");
        // A stream is refused the same way, as JSON, before any byte.
        let mut body = s.chat();
        body["stream"] = json!(true);
        assert_error(&s.member.post("/run", body).await, 429, "rate_limited");
        // Lifting the limit takes effect at the next request.
        s.limit_tenant(json!({"requests_per_minute": null})).await;
        let r = s.member.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-limit-requests"), None);
        // Limits are validated.
        // An array is not an object, though serde would read it as the fields in order.
        for bad in [json!({"requests_per_minute": 0}), json!({"monthly_tokens": -5}), json!({"tokens": 1}),
                    json!([null, null]), json!([5]), json!({"requests_per_minute": 2.5})] {
            let r = s.admin.patch(&format!("/admin/tenants/{}", s.tenant_id()), json!({"limits": bad})).await;
            assert_eq!(r.status, 422, "{bad}: {}", r.text);
        }
        let r = s.admin.patch(&format!("/admin/tenants/{}", s.tenant_id()), json!([null, null, null, null, null])).await;
        assert_error(&r, 422, "validation_failed");
        // A number with a zero fraction is that integer, as JSON Schema (and the document) says.
        let t = s.limit_tenant(json!({"monthly_tokens": 5000.0})).await;
        assert_eq!(t["limits"]["monthly_tokens"], 5000, "{t}");
        s.limit_tenant(json!({"monthly_tokens": null})).await;
        assert_error(&s.member.patch(&format!("/admin/tenants/{}", s.tenant_id()),
            json!({"limits": {"requests_per_minute": 1000}})).await, 403, "admin_required");
    }

    async fn a_busy_tenant_gets_exactly_its_limit_with_leases_refilled_ahead(s) {
        // 200 a minute, one request after another: leases grow to 16 and more and are
        // refilled off the request path (decision 0017), then shrink to single requests near
        // the limit. The header stays exact on one node and the limit holds.
        s.add_key("AIHK", SECRET, true).await;
        s.limit_tenant(json!({"requests_per_minute": 200})).await;
        let second = chrono::Utc::now().timestamp() % 60;
        if second > 55 {
            tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
        }
        for n in 1..=200 {
            let r = s.member.post("/run", s.chat()).await;
            assert_eq!(r.status, 200, "run {n}: {}", r.text);
            let left = (200 - n).to_string();
            assert_eq!(r.header("x-ratelimit-remaining-requests"), Some(left.as_str()), "run {n}");
        }
        assert_error(&s.member.post("/run", s.chat()).await, 429, "rate_limited");
        assert_eq!(s.hk.chat_requests().len(), 200);
    }

    async fn keys_carry_lower_limits_of_their_own(s) {
        s.add_key("AIHK", SECRET, true).await;
        s.limit_tenant(json!({"requests_per_minute": 3, "tokens_per_minute": 1000})).await;
        let r = s.member.post("/workspace/api-keys",
            json!({"name": "ci", "scopes": ["run"], "limits": {"requests_per_minute": 4}})).await;
        assert_error(&r, 422, "validation_failed");
        assert!(r.text.contains("limits.requests_per_minute"), "{}", r.text);
        let r = s.member.post("/workspace/api-keys",
            json!({"name": "ci", "scopes": ["run"], "limits": {"requests_per_minute": 1}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.body["limits"], json!({"requests_per_minute": 1, "tokens_per_minute": null, "monthly_spend": null}));
        let key_id = r.body["id"].as_str().unwrap().to_owned();
        let ci = s.member.with_key(r.body["key"].as_str().unwrap());
        let ok = ci.post("/run", s.chat()).await;
        assert_eq!(ok.status, 200, "{}", ok.text);
        assert_eq!(ok.header("x-ratelimit-limit-requests"), Some("1"), "the key's is the tighter");
        assert_eq!(ok.header("x-ratelimit-limit-tokens"), Some("1000"));
        assert_error(&ci.post("/run", s.chat()).await, 429, "rate_limited");
        // The member's session is not bound by the key's limit.
        assert_eq!(s.member.post("/run", s.chat()).await.status, 200);
        // PATCH: above the tenant's is refused; null removes the key's own limit.
        let path = format!("/workspace/api-keys/{key_id}");
        assert_error(&s.member.patch(&path, json!({"limits": {"tokens_per_minute": 1001}})).await, 422, "validation_failed");
        assert_error(&ci.patch(&path, json!({"limits": {"requests_per_minute": null}})).await, 403, "session_required");
        let r = s.member.patch(&path, json!({"name": "ci-2", "limits": {"requests_per_minute": null}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["name"], "ci-2");
        assert_eq!(r.body["limits"]["requests_per_minute"], Value::Null);
        let r = ci.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-limit-requests"), Some("3"));
        assert_eq!(r.header("x-ratelimit-remaining-requests"), Some("0"), "three runs of the tenant this minute");
        assert_error(&s.member.patch("/workspace/api-keys/0190a0a0-0000-7000-8000-000000000000",
            json!({"name": "x"})).await, 404, "not_found");
    }

    async fn usage_is_summed_from_the_run_records(s) {
        s.add_key("AIHK", SECRET, true).await;
        let ci = s.member.keyed(&["run"]).await;
        assert_eq!(s.member.post("/run", s.chat()).await.status, 200);
        assert_eq!(ci.post("/run", s.chat()).await.status, 200);
        let mut large = s.chat();
        large["model"] = json!("m-large");
        assert_eq!(ci.post("/run", large).await.status, 200);
        s.hk.push_behavior(Behavior::openai_error(400, "bad", None, None));
        assert_eq!(ci.post("/run", s.chat()).await.status, 400);
        let mut stream = s.chat();
        stream["stream"] = json!(true);
        let res = s.member.request(Method::POST, "/run").json(&stream).send().await.unwrap();
        assert_eq!(sse_events(res).await.last().map(String::as_str), Some("[DONE]"));
        s.runs_recorded(5).await;
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        let r = s.member.get("/workspace/usage").await;
        assert_eq!(r.body["data"].as_array().unwrap().len(), 1, "{}", r.text);
        let day = &r.body["data"][0];
        assert_eq!(day["day"], today);
        assert_eq!(day["errors"], 1);
        // Completions report 5 + 7; the 3-chunk stream 5 + 3.
        assert_eq!(day["prompt_tokens"], 20);
        assert_eq!(day["completion_tokens"], 24);
        assert_eq!(day["total_tokens"], 44);
        let r = s.member.get("/workspace/usage?group_by=model&limit=1").await;
        assert_eq!(r.body["data"].as_array().unwrap().len(), 1, "{}", r.text);
        assert_eq!(r.body["data"][0]["model"], "m-large");
        let cursor = r.body["next_cursor"].as_str().unwrap().to_owned();
        let r = s.member.get(&format!("/workspace/usage?group_by=model&cursor={cursor}")).await;
        assert_eq!(r.body["data"][0]["model"], "gpt-4o-mini", "{}", r.text);
        assert_eq!(r.body["data"][0]["requests"], 4);
        assert_eq!(r.body["next_cursor"], Value::Null);
        let r = s.member.get("/workspace/usage?group_by=key").await;
        let lines = r.body["data"].as_array().unwrap();
        assert_eq!(lines.len(), 2, "{}", r.text);
        assert!(lines.iter().any(|l| l["key_id"].is_null() && l["requests"] == 2), "{}", r.text);
        assert!(lines.iter().any(|l| l["key_id"].is_string() && l["requests"] == 3), "{}", r.text);
        // Ranges are checked; another month is empty.
        for bad in ["from=2026-02-10&to=2026-02-01", "from=2024-01-01&to=2026-01-01", "from=tuesday", "group_by=tenant", "color=red"] {
            let r = s.member.get(&format!("/workspace/usage?{bad}")).await;
            assert!(r.status == 422 || r.status == 400, "{bad}: {}", r.text);
        }
        let r = s.member.get("/workspace/usage?from=2020-01-01&to=2020-01-31").await;
        assert_eq!(r.body["data"], json!([]));
        // Keys need workspace:read; admins see every tenant.
        assert_error(&ci.get("/workspace/usage").await, 403, "insufficient_scope");
        let reader = s.member.keyed(&["workspace:read"]).await;
        assert_eq!(reader.get("/workspace/usage").await.status, 200);
        assert_error(&s.member.get("/admin/usage").await, 403, "admin_required");
        let r = s.admin.get(&format!("/admin/usage?tenant_id={}", s.tenant_id())).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["data"][0]["tenant_id"], s.tenant["id"]);
        assert_eq!(r.body["data"][0]["requests"], 5);
    }

    async fn a_monthly_budget_refuses_from_the_next_request(s) {
        s.add_key("AIHK", SECRET, true).await;
        s.limit_tenant(json!({"monthly_tokens": 40})).await;
        // Each run reserves 24 tokens at admission (its prompt, 8, and its max_tokens, 16) and
        // settles to the 12 its completion reports when its record is written (decision
        // 0025): the second run fits (12 + 24 <= 40), the third does not (24 + 24).
        for n in [1, 2] {
            let r = s.member.post("/run", s.chat()).await;
            assert_eq!(r.status, 200, "{}", r.text);
            s.runs_recorded(n).await;
        }
        let refused = s.member.post("/run", s.chat()).await;
        assert_error(&refused, 429, "budget_exhausted");
        let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=31 * 86_400).contains(&wait), "{wait}");
        assert_eq!(s.hk.chat_requests().len(), 2);
    }

    async fn the_month_the_minute_and_the_key_s_tokens_are_each_counted(s) {
        // Three token windows read in one statement: the tenant's month and minute, the key's
        // minute. Each completion reports 12 tokens.
        let second = chrono::Utc::now().timestamp() % 60;
        if second > 45 {
            // The minute windows must not roll over in the middle of the test.
            tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
        }
        s.add_key("AIHK", SECRET, true).await;
        s.limit_tenant(json!({"tokens_per_minute": 60, "monthly_tokens": 1000})).await;
        let r = s.member.post("/workspace/api-keys",
            json!({"name": "ci", "scopes": ["run"], "limits": {"tokens_per_minute": 30}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let ci = s.member.with_key(r.body["key"].as_str().unwrap());
        // Each run reserves 24 at admission (prompt 8, max_tokens 16) in every window and
        // settles to the completion's 12 when recorded (decision 0025); the headers show what
        // is left after the run's reservation.
        // A session's run counts for the tenant, not for the key: tenant 24 of 60.
        let r = s.member.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-remaining-tokens"), Some("36"));
        s.runs_recorded(1).await;
        // Tenant 12 + 24 of 60, key 24 of 30: the key's 6 left is the tighter (a mix-up of the
        // windows would show 24 or 30).
        let r = ci.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-remaining-tokens"), Some("6"));
        s.runs_recorded(2).await;
        // Key 12 + 24 > 30: refused; the tenant's minute (24 of 60) is not used up.
        assert_error(&ci.post("/run", s.chat()).await, 429, "rate_limited");
        let r = s.member.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-remaining-tokens"), Some("12"), "60 - 24 - 24 for the tenant");
        s.runs_recorded(3).await;
        // Tenant 36 + 24 = 60 fits exactly; then 48 + 24 does not, while the month has room.
        let r = s.member.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("x-ratelimit-remaining-tokens"), Some("0"));
        s.runs_recorded(4).await;
        assert_error(&s.member.post("/run", s.chat()).await, 429, "rate_limited");
        assert_eq!(s.hk.chat_requests().len(), 4);
    }

    async fn models_list_the_region_and_auto_first(s) {
        let key = s.member.keyed(&["run"]).await;
        let r = key.get("/models").await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["object"], "list");
        let ids: Vec<&str> = r.body["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["auto", "gpt-4o-mini", "m-large"]);
        assert_eq!(r.body["data"][0]["object"], "model");
        // `created` is a real date (2026-11-21T00:00:00Z), the same for every model, on every
        // call and every node.
        for m in r.body["data"].as_array().unwrap() {
            assert_eq!(m["created"], 1_795_219_200, "{m}");
        }
        let one = s.member.get("/models/m-large").await;
        assert_eq!(one.body["id"], "m-large");
        assert_eq!(one.body["created"], 1_795_219_200);
        assert_eq!(key.get("/models").await.body, r.body, "stable across calls");
        let missing = key.get("/models/gpt-9").await;
        assert_error(&missing, 404, "not_found");
        assert_eq!(missing.body["error"]["type"], "not_found_error");
        let reader = s.member.keyed(&["workspace:read"]).await;
        let r = reader.get("/models").await;
        assert_error(&r, 403, "insufficient_scope");
        assert_eq!(r.body["error"]["type"], "permission_error");
        assert_error(&s.app.anon().get("/models").await, 401, "unauthenticated");
    }

    async fn a_server_error_before_the_first_byte_is_retried_once_on_the_next_key(s) {
        s.add_key("AIHK", SECRET, true).await;
        s.add_key("AIHK", SECRET_2, true).await;
        let before = s.hk.chat_requests().len();
        s.hk.push_behavior(Behavior::openai_error(503, "overloaded", None, None));
        let r = s.member.post("/run", s.chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let seen = s.hk.chat_requests();
        assert_eq!(seen.len() - before, 2);
        assert_ne!(seen[before].bearer(), seen[before + 1].bearer(), "the next key");
        // Twice in a row: one retry only, then 502.
        s.hk.push_behavior(Behavior::openai_error(500, "down", None, None));
        s.hk.push_behavior(Behavior::openai_error(502, "down", None, None));
        assert_error(&s.member.post("/run", s.chat()).await, 502, "upstream_error");
        assert_eq!(s.hk.chat_requests().len() - before, 4);
        // A 4xx is the caller's: never retried.
        s.hk.push_behavior(Behavior::openai_error(400, "bad", None, None));
        assert_eq!(s.member.post("/run", s.chat()).await.status, 400);
        assert_eq!(s.hk.chat_requests().len() - before, 5);
        // A stream that breaks after its first bytes is never retried.
        s.hk.push_behavior(Behavior::BreakMidStream { after: 1 });
        let mut body = s.chat();
        body["stream"] = json!(true);
        let res = s.member.request(Method::POST, "/run").json(&body).send().await.unwrap();
        let events = sse_events(res).await;
        assert!(events[0].contains("chunk-0"), "{events:?}");
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
        assert_eq!(s.hk.chat_requests().len() - before, 6);
    }

    async fn metrics_count_routes_runs_and_refusals_without_ids(s) {
        s.add_key("AIHK", SECRET, true).await;
        s.limit_tenant(json!({"requests_per_minute": 1})).await;
        assert_eq!(s.member.post("/run", s.chat()).await.status, 200);
        assert_eq!(s.member.post("/run", s.chat()).await.status, 429);
        let _ = s.member.get(&format!("/admin/tenants/{}/ai-keys", s.tenant_id())).await;
        let res = s.app.client.get(format!("{}/metrics", s.app.base)).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
        let text = res.text().await.unwrap();
        for needle in [
            r#"gc_http_requests_total{method="POST",route="/api/v1/run",status="200"} 1"#,
            r#"gc_http_requests_total{method="POST",route="/api/v1/run",status="429"} 1"#,
            r#"route="/api/v1/admin/tenants/{id}/ai-keys""#,
            r#"gc_runs_total{region="AIHK",outcome="ok"} 1"#,
            r#"gc_quota_refusals_total{reason="rate_limited"} 1"#,
            r#"gc_tokens_total{region="AIHK",kind="completion"} 7"#,
            "gc_upstream_latency_seconds_count{region=\"AIHK\"} 1",
            "gc_added_latency_seconds_bucket",
            "gc_db_pool_connections{state=\"in_use\"}",
            "gc_run_record_queue_depth",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
        assert!(!text.contains(s.tenant_id()), "no tenant id in metrics");
        assert!(!text.contains(&s.member.id), "no member id in metrics");
    }
}

#[actix_web::test]
async fn metrics_can_move_to_their_own_address_or_be_turned_off() {
    let Some(app) = TestApp::start_with(Backend::Sqlite, "metrics_bind", |c| {
        c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
    })
    .await
    else {
        return;
    };
    let main = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(main.status(), 404, "not on the main listener");
    let (config, db) = app.stop().await;
    let state = gc_server::build_state(&config).unwrap();
    let running = gc_server::start(&config, state, false).unwrap();
    let addr = running.metrics_addr.unwrap();
    actix_web::rt::spawn(running.server);
    let r = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("gc_run_record_queue_depth"));
    running.handle.stop(true).await;
    drop(db);
    let Some(off) =
        TestApp::start_with(Backend::Sqlite, "metrics_off", |c| c.metrics = false).await
    else {
        return;
    };
    let r = off
        .client
        .get(format!("{}/metrics", off.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// Two nodes on one PostgreSQL database: a tenant limited to N requests a minute gets exactly
/// N through across both, however the requests are spread and raced.
#[actix_web::test]
async fn two_nodes_on_postgres_admit_exactly_the_limit() {
    let Some(s) = setup(Backend::Postgres, "two_nodes", |_| {}).await else {
        return;
    };
    s.add_key("AIHK", SECRET, true).await;
    s.limit_tenant(json!({"requests_per_minute": 5})).await;
    let (_node_b, on_a, on_b) = s.on_two_nodes().await;
    // Keep clear of a minute boundary so all requests fall in one window.
    let second = chrono::Utc::now().timestamp() % 60;
    if second > 50 {
        tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
    }
    let mut calls = Vec::new();
    for i in 0..16 {
        let actor = if i % 2 == 0 {
            on_a.clone()
        } else {
            on_b.clone()
        };
        let body = s.chat();
        calls.push(actix_web::rt::spawn(async move {
            actor.post("/run", body).await.status.as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for c in calls {
        statuses.push(c.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        11,
        "{statuses:?}"
    );
    assert_eq!(s.hk.chat_requests().len(), 5);
}

/// Two nodes on one PostgreSQL database: a monthly budget spent through one node is refused by
/// both (reservations and settlements are in the shared windows, decision 0025).
#[actix_web::test]
async fn two_nodes_on_postgres_share_the_token_budget() {
    let Some(s) = setup(Backend::Postgres, "two_nodes_tokens", |_| {}).await else {
        return;
    };
    s.add_key("AIHK", SECRET, true).await;
    // Each run reserves 24 and settles to the completion's 12: after two, 24 + 24 > 40.
    s.limit_tenant(json!({"monthly_tokens": 40})).await;
    let (_node_b, on_a, on_b) = s.on_two_nodes().await;
    assert_eq!(on_a.post("/run", s.chat()).await.status, 200);
    s.runs_recorded(1).await;
    let r = on_b.post("/run", s.chat()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    s.runs_recorded(2).await;
    assert_error(&on_a.post("/run", s.chat()).await, 429, "budget_exhausted");
    assert_error(&on_b.post("/run", s.chat()).await, 429, "budget_exhausted");
    assert_eq!(s.hk.chat_requests().len(), 2);
}

/// The OpenAI client library against gc: `models.list()`, a quota 429 that surfaces as a
/// rate-limit error without the upstream being called again, a `/chat/completions` stream
/// without `include_usage` whose every chunk has a choice, and an upstream 429 passed on once.
#[actix_web::test]
async fn an_openai_client_library_lists_models_and_sees_rate_limits() {
    use async_openai::config::OpenAIConfig;
    use async_openai::error::OpenAIError;
    use async_openai::types::chat::{
        ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs,
    };
    use futures_util::StreamExt;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(s) = openai_client_setup("openai_fidelity").await else {
        return;
    };
    let client = async_openai::Client::with_config(
        OpenAIConfig::new()
            .with_api_base(format!("{}/api/v1", s.app.base))
            .with_api_key(s.member.new_key(&["run"]).await),
    );
    let models = client.models().list().await.expect("models.list()");
    let ids: Vec<_> = models.data.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        ["auto", "gpt-4o-mini", "gpt-4o", "text-embedding-3-small"]
    );
    assert_eq!(
        client.models().retrieve("gpt-4o").await.unwrap().id,
        "gpt-4o"
    );

    let request = CreateChatCompletionRequestArgs::default()
        .model("auto")
        .messages([ChatCompletionRequestUserMessageArgs::default()
            .content("hello")
            .build()
            .unwrap()
            .into()])
        .build()
        .unwrap();
    // A stream without include_usage: every chunk the client sees has a choice.
    let mut stream = client.chat().create_stream(request.clone()).await.unwrap();
    let mut chunks = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("a chunk");
        assert!(!chunk.choices.is_empty(), "{chunk:?}");
        chunks += 1;
    }
    assert_eq!(chunks, 3);

    // An upstream 429 reaches the client as a rate-limit error with the upstream's
    // Retry-After. The client library retries 429s on its own (3 times, after Retry-After);
    // gc adds no attempt of its own, so the upstream sees exactly 1 + 3 calls, no storm.
    let calls = s.hk.chat_requests().len();
    queue_upstream_429s(&s.hk, 4);
    let err = client.chat().create(request.clone()).await.unwrap_err();
    let OpenAIError::ApiError(e) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(e.status_code.as_u16(), 429);
    assert_eq!(e.api_error.r#type.as_deref(), Some("rate_limit_error"));
    assert_eq!(e.api_error.code.as_deref(), Some("upstream_rate_limited"));
    assert_eq!(s.hk.chat_requests().len(), calls + 4);

    // gc's own monthly budget: `insufficient_quota`, which OpenAI clients do not retry, and
    // the upstream is never called for it.
    s.limit_tenant(json!({"monthly_tokens": 1})).await;
    let member = s.member.clone();
    let chat = s.chat();
    eventually(async || member.post("/run", chat.clone()).await.code() == "budget_exhausted").await;
    let calls = s.hk.chat_requests().len();
    let err = client.chat().create(request.clone()).await.unwrap_err();
    let OpenAIError::ApiError(e) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(e.status_code.as_u16(), 429);
    assert_eq!(e.api_error.code.as_deref(), Some("budget_exhausted"));
    assert_eq!(e.api_error.r#type.as_deref(), Some("insufficient_quota"));
    assert_eq!(
        s.hk.chat_requests().len(),
        calls,
        "refusals never reach the upstream"
    );
}

/// What the OpenAI client tests run against: `/chat/completions` mounted, AIHK configured with
/// `gpt-4o` and an embeddings model beside its default model, and a ready AIHK key.
async fn openai_client_setup(label: &str) -> Option<Setup> {
    let s = setup(Backend::Sqlite, label, |c| {
        c.chat_completions = true;
        c.gateway_aihk_models = vec!["gpt-4o".into(), "text-embedding-3-small".into()];
    })
    .await?;
    s.add_key("AIHK", SECRET, true).await;
    Some(s)
}

/// Queues `n` OpenAI-shaped upstream 429s with a Retry-After of one second.
fn queue_upstream_429s(upstream: &MockHandle, n: usize) {
    for _ in 0..n {
        upstream.push_behavior(
            Behavior::openai_error(
                429,
                "slow down",
                Some("rate_limit_exceeded"),
                Some("requests"),
            )
            .with_header("retry-after", "1"),
        );
    }
}

// ---- The official OpenAI Python SDK (issue 10) ------------------------------------------------

/// The official SDK's version, installed from PyPI into `target/openai-sdk-venv`.
const OPENAI_SDK: &str = "3.57.0";

/// Whether a missing Python SDK must fail the test run (`GC_REQUIRE_OPENAI_SDK=1`, CI).
fn openai_sdk_required() -> bool {
    std::env::var("GC_REQUIRE_OPENAI_SDK").is_ok_and(|v| v.trim() == "1")
}

/// The Python of a virtualenv holding the official OpenAI SDK at [`OPENAI_SDK`], made when
/// missing (`python3 -m venv`, then pip from PyPI, once per target folder). `None` when that
/// cannot be done here, after a note, unless the SDK is required.
fn openai_python() -> Option<std::path::PathBuf> {
    match python_with("openai-sdk-venv", "openai", OPENAI_SDK) {
        Ok(python) => Some(python),
        Err(line) => {
            assert!(
                !openai_sdk_required(),
                "{line}, and GC_REQUIRE_OPENAI_SDK=1"
            );
            eprintln!(
                "\n!!!!!!!! SKIPPED: {line}; the official-SDK test of issue 10 did not run !!!!!!!!\n"
            );
            None
        }
    }
}

/// Runs one phase of `tests/openai_sdk_check.py` with the SDK, against gc at `base` with `key`;
/// answers how many more requests than planned the phase had admitted (its last line).
async fn openai_sdk_phase(python: &std::path::Path, base: &str, key: &str, phase: &str) -> usize {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openai_sdk_check.py");
    let mut cmd = std::process::Command::new(python);
    cmd.arg(script)
        .arg(phase)
        .env("GC_BASE_URL", format!("{base}/api/v1"))
        .env("GC_API_KEY", key)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY");
    let out = actix_web::rt::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{phase}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    last.strip_prefix(&format!("ok {phase} "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{phase}: no result line in {stdout}"))
}

/// The official OpenAI Python SDK, as issue 10 names it: `models.list()` and `retrieve`, a
/// completion, a stream without `include_usage` whose every chunk has a choice (and the usage
/// chunk when asked for), an upstream 429 as `RateLimitError` after only the SDK's own
/// retries, gc's per-minute quota as `RateLimitError` with the `x-ratelimit-*` headers, and a
/// spent budget the SDK does not retry.
#[actix_web::test]
async fn the_official_openai_python_sdk_lists_models_streams_and_sees_rate_limits() {
    let Some(python) = openai_python() else {
        return;
    };
    let Some(s) = openai_client_setup("openai_python_sdk").await else {
        return;
    };
    let key = s.member.new_key(&["run"]).await;
    let base = s.app.base.clone();
    openai_sdk_phase(&python, &base, &key, "models-and-stream").await;
    // Issue 32: `responses.create` (plain, `stream=True`, the stream helper) and
    // `embeddings.create`, each reaching its own upstream path.
    openai_sdk_phase(&python, &base, &key, "responses-and-embeddings").await;
    assert_eq!(s.hk.requests_to("/responses").len(), 3);
    assert_eq!(s.hk.requests_to("/embeddings").len(), 2);

    // An upstream 429: the SDK tries three times (its default two retries, after the
    // upstream's Retry-After of 1 s); gc adds no attempt of its own.
    let calls = s.hk.chat_requests().len();
    queue_upstream_429s(&s.hk, 3);
    openai_sdk_phase(&python, &base, &key, "upstream-429").await;
    assert_eq!(s.hk.chat_requests().len(), calls + 3, "no retry storm");

    // gc's own per-minute limit of one request.
    s.limit_tenant(json!({"requests_per_minute": 1})).await;
    // (Across a minute boundary the second request is admitted too, and the third refused.)
    let calls = s.hk.chat_requests().len();
    let extra = openai_sdk_phase(&python, &base, &key, "quota-429").await;
    assert!(extra <= 1, "{extra}");
    assert_eq!(
        s.hk.chat_requests().len(),
        calls + 1 + extra,
        "the refusal never reached the upstream"
    );

    // A spent monthly budget: refused once, not retried (the refusals counter moves by one).
    s.limit_tenant(json!({"requests_per_minute": null, "monthly_tokens": 1}))
        .await;
    let member = s.member.clone();
    let chat = s.chat();
    eventually(async || member.post("/run", chat.clone()).await.code() == "budget_exhausted").await;
    let refusals = || async {
        let page = s
            .app
            .client
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        page.lines()
            .find(|l| l.starts_with(r#"gc_quota_refusals_total{reason="budget_exhausted"}"#))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = refusals().await;
    let calls = s.hk.chat_requests().len();
    openai_sdk_phase(&python, &base, &key, "budget-429").await;
    assert_eq!(refusals().await, before + 1, "the SDK did not retry");
    assert_eq!(s.hk.chat_requests().len(), calls);

    // Issue 32: a model outside the region's list is PermissionDeniedError, before the
    // upstream; a spent money limit is refused once and not retried.
    openai_sdk_phase(&python, &base, &key, "allow-list").await;
    assert_eq!(s.hk.chat_requests().len(), calls);
    s.limit_tenant(json!({"monthly_tokens": null, "monthly_spend": "0.000000001"}))
        .await;
    let before = refusals().await;
    openai_sdk_phase(&python, &base, &key, "spend-429").await;
    assert_eq!(refusals().await, before + 1, "the SDK did not retry");
    assert_eq!(s.hk.chat_requests().len(), calls);
}
