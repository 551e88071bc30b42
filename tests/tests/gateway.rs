//! The AI gateway end to end: tenant AI keys, `/run`, streaming, refusals, failover,
//! diagnostics and `/chat/completions`, against mock OpenAI-compatible upstreams on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use gc_gateway::mock::{Behavior, MockHandle, MockUpstream};
use gc_tests::*;

const SECRET: &str = "sk-upstream-secret-AAAA1111";
const SECRET_2: &str = "sk-upstream-secret-BBBB2222";

struct Setup {
    app: TestApp,
    hk: MockHandle,
    ca: MockHandle,
    admin: Actor,
    tenant: Value,
    member: Actor,
}

impl Setup {
    fn tenant_id(&self) -> &str {
        self.tenant["id"].as_str().unwrap()
    }

    async fn add_key(&self, region: &str, secret: &str, chat_enabled: bool) -> Value {
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

    fn chat(&self) -> Value {
        json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16})
    }
}

async fn setup(
    backend: Backend,
    label: &str,
    tweak: impl FnOnce(&mut gc_server::Config),
) -> Option<Setup> {
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
    Some(Setup {
        app,
        hk,
        ca,
        admin,
        tenant,
        member,
    })
}

macro_rules! gateway_tests {
    ($(async fn $name:ident($s:ident) $body:block)*) => {
        $(
            mod $name {
                use super::*;
                async fn body($s: Setup) $body
                #[actix_web::test]
                async fn sqlite() {
                    if let Some(s) = setup(Backend::Sqlite, stringify!($name), |_| {}).await { body(s).await }
                }
                #[actix_web::test]
                async fn postgres() {
                    if let Some(s) = setup(Backend::Postgres, stringify!($name), |_| {}).await { body(s).await }
                }
            }
        )*
    };
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
