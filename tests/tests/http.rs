//! HTTP-level behaviour: error bodies, request ids, content types, sizes, health, OpenAPI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_tests::*;

both_backends! {
    async fn health_answers_when_the_database_does(app: TestApp) {
        let r = app.anon().get("/health").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body, json!({"status": "ok"}));
        assert!(r.header("x-request-id").is_some_and(|id| !id.is_empty()));
    }

    async fn request_ids_are_echoed_when_sane(app: TestApp) {
        let r = read(app.client.get(app.url("/health")).header("x-request-id", "abc-123").send().await.unwrap()).await;
        assert_eq!(r.header("x-request-id"), Some("abc-123"));
        let long = "x".repeat(300);
        let r = read(app.client.get(app.url("/health")).header("x-request-id", long.as_str()).send().await.unwrap()).await;
        assert_ne!(r.header("x-request-id"), Some(long.as_str()));
        let r = read(app.client.get(app.url("/nowhere")).header("x-request-id", "e-1").send().await.unwrap()).await;
        assert_error(&r, 404, "not_found");
        assert_eq!(r.body["error"]["request_id"], "e-1");
    }

    async fn every_error_has_the_json_shape(app: TestApp) {
        let anon = app.anon();
        assert_error(&anon.get("/no/such/route").await, 404, "not_found");
        // Outside `/api` the console answers (tests/tests/console.rs); under it, the JSON 404.
        let r = read(app.client.get(format!("{}/api/elsewhere", app.base)).send().await.unwrap()).await;
        assert_error(&r, 404, "not_found");
        // Wrong method on a known route.
        let r = read(app.client.delete(app.url("/auth/signin")).send().await.unwrap()).await;
        assert_error(&r, 405, "method_not_allowed");
        let r = read(app.client.put(app.url("/health")).send().await.unwrap()).await;
        assert_error(&r, 405, "method_not_allowed");
        // Malformed JSON.
        let r = read(app.client.post(app.url("/auth/signin")).header("content-type", "application/json").body("{\"email\": ").send().await.unwrap()).await;
        assert_error(&r, 400, "invalid_json");
        let r = read(app.client.post(app.url("/auth/signin")).header("content-type", "application/json").body("not json").send().await.unwrap()).await;
        assert_error(&r, 400, "invalid_json");
        // Wrong content type.
        let r = read(app.client.post(app.url("/auth/signin")).header("content-type", "text/plain").body("{}").send().await.unwrap()).await;
        assert_error(&r, 415, "unsupported_media_type");
        let r = read(app.client.post(app.url("/auth/signin")).body("{}").send().await.unwrap()).await;
        assert_error(&r, 415, "unsupported_media_type");
        // Oversized body (over 1 MiB).
        let big = format!("{{\"email\": \"{}\", \"password\": \"x\"}}", "a".repeat(1024 * 1024 + 10));
        let r = read(app.client.post(app.url("/auth/signin")).header("content-type", "application/json").body(big).send().await.unwrap()).await;
        assert_error(&r, 413, "payload_too_large");
        // Wrong types and unknown fields.
        let r = anon.post("/auth/signin", json!({"email": 5, "password": "x"})).await;
        assert_error(&r, 422, "validation_failed");
        let r = anon.post("/auth/signin", json!({"email": "a@b.c", "password": "x", "remember": true})).await;
        assert_error(&r, 422, "unknown_field");
        assert!(r.body["error"]["message"].as_str().unwrap().contains("remember"));
        let r = anon.post("/auth/signin", json!([1, 2])).await;
        assert_error(&r, 422, "validation_failed");
    }

    async fn refused_callers_hear_401_or_403_before_any_complaint_about_the_body(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let member = app.member_of(&admin, &acme).await;
        let key = member.post("/workspace/api-keys", json!({"name": "r", "scopes": ["workspace:read"]})).await;
        let reader = member.with_key(key.body["key"].as_str().unwrap());
        // A key where only a session may go, with an incomplete body.
        assert_error(&reader.post("/workspace/api-keys", json!({"name": "x"})).await, 403, "session_required");
        // A key without the write scope, with a body that is not even JSON.
        let r = reader.send(reader.request(Method::POST, "/workspace/skills").header("content-type", "application/json").body("{oops")).await;
        assert_error(&r, 403, "insufficient_scope");
        let r = reader.send(reader.request(Method::POST, "/run").header("content-type", "text/plain").body("hi")).await;
        assert_error(&r, 403, "insufficient_scope");
        // A revoked key with a malformed body.
        let id = key.body["id"].as_str().unwrap();
        assert_eq!(member.delete(&format!("/workspace/api-keys/{id}")).await.status, 204);
        let r = reader.send(reader.request(Method::PATCH, "/workspace/settings").header("content-type", "application/json").body("[")).await;
        assert_error(&r, 401, "invalid_api_key");
        assert_error(&reader.get("/workspace/skills?limit=abc").await, 401, "invalid_api_key");
        assert_error(&reader.get("/workspace/activity?cursor=%%%").await, 401, "invalid_api_key");
        assert_error(&member.get("/admin/users?limit=0").await, 403, "admin_required");
        assert_error(&member.get("/workspace/skills?limit=abc").await, 400, "invalid_query");
        assert_error(&member.get("/workspace/skills?colour=red").await, 400, "invalid_query");
        // The Shadow view refuses writes whatever the body.
        admin.post("/auth/ip-admin", json!({"tenant_id": acme["id"]})).await;
        assert_error(&admin.send(admin.request(Method::POST, "/workspace/skills")).await, 403, "shadow_read_only");
        // A member (not an admin) on an admin route with a wrong body.
        assert_error(&member.post("/admin/tenants", json!({"nope": 1})).await, 403, "admin_required");
        // A valid caller still gets the body's own errors.
        let r = member.send(member.request(Method::POST, "/workspace/skills").header("content-type", "application/json").body("{oops")).await;
        assert_error(&r, 400, "invalid_json");
    }

    async fn the_openapi_document_lists_every_route(app: TestApp) {
        let r = app.anon().get("/openapi.json").await;
        assert_eq!(r.status, 200);
        assert!(r.body["openapi"].as_str().unwrap().starts_with("3.1"));
        let paths = r.body["paths"].as_object().unwrap();
        for p in ["/api/v1/health", "/api/v1/auth/signin", "/api/v1/auth/signup", "/api/v1/auth/sessions",
                  "/api/v1/admin/tenants", "/api/v1/admin/users/{id}/tenant", "/api/v1/workspace"] {
            assert!(paths.contains_key(p), "{p}");
        }
    }
}

#[actix_web::test]
async fn the_committed_openapi_document_matches_the_code() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json"))
            .expect("docs/openapi.json exists; run `cargo xtask openapi`");
    assert_eq!(
        committed.trim(),
        gc_http_api_document().trim(),
        "docs/openapi.json is stale: run `cargo xtask openapi`"
    );
}

fn gc_http_api_document() -> String {
    gc_server::openapi_document()
}

#[actix_web::test]
async fn data_survives_a_restart() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let Some(app) = TestApp::start(backend, "restart").await else {
            continue;
        };
        let admin = app.admin().await;
        let t = app.tenant(&admin, "Durable", "AICA").await;
        let (config, db) = app.stop().await;
        let app = TestApp::start_on(config, db);
        let admin = app.admin().await;
        let list = admin.get("/admin/tenants").await;
        assert_eq!(list.body["data"][0]["id"], t["id"], "{backend:?}");
    }
}

#[actix_web::test]
async fn an_exhausted_pool_answers_503_with_retry_after_not_a_hang() {
    let Some((url, db)) = fresh_database(Backend::Sqlite, "health_503") else {
        return;
    };
    let mut config = test_config(&url);
    config.db_pool_size = Some(1);
    let store = gc_server::open_store(&config).unwrap();
    let state = gc_server::build_state_with(&config, store.clone()).unwrap();
    let running = gc_server::start(&config, state, false).unwrap();
    actix_web::rt::spawn(running.server);
    let url = format!("http://{}/api/v1/health", running.addr);
    let client = reqwest::Client::new();
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    // Hold the only connection: the pool cannot hand one out within its time-out. Work that
    // needs the database (a sign-up) is refused; liveness, which does not ask it, still answers.
    let held = store.hold_connection().unwrap();
    let signup = |email: &str| {
        client
            .post(url.replace("/health", "/auth/signup"))
            .header("origin", ORIGIN)
            .json(&json!({"email": email, "password": "a-fine-long-password-9", "name": "Pat"}))
            .send()
    };
    let r = read(signup("pat@example.com").await.unwrap()).await;
    assert_error(&r, 503, "service_unavailable");
    assert!(r.header("retry-after").is_some());
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    drop(held);
    assert_eq!(
        read(signup("pat2@example.com").await.unwrap()).await.status,
        201
    );
    running.handle.stop(false).await;
    drop(db);
}
