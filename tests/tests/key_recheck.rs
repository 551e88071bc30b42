//! Key status follows configuration (issue 31, decision 0044): an AI key added while its region
//! had no gateway URL is probed again when the server restarts with the URL, and becomes
//! `ready` without an admin's diagnosis; a `ready` key is probed again when its region's URL
//! changes (and not when it stays the same); the verdict is in the tenant's activity feed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use gc_gateway::mock::MockUpstream;
use gc_tests::*;

const SECRET: &str = "sk-upstream-secret-RECHECK1";

async fn a_key_added_before_its_url_is_ready_after_a_restart_with_it(backend: Backend) {
    let Some(app) = TestApp::start_with(backend, "key_recheck", |c| {
        c.gateway_aihk_url = None;
        c.gateway_aica_url = None;
    })
    .await
    else {
        return;
    };
    let admin = app.admin().await;
    let tenant = app.tenant(&admin, "Acme", "AIHK").await;
    let tenant_id = tenant["id"].as_str().unwrap().to_owned();
    let member = app.member_of(&admin, &tenant).await;
    let key = admin
        .post(
            &format!("/admin/tenants/{tenant_id}/ai-keys"),
            json!({"region": "AIHK", "secret": SECRET, "label": "main"}),
        )
        .await;
    assert_eq!(key.status, 201, "{}", key.text);
    assert_eq!(key.body["status"], "not_ready");
    let chat = json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]});
    assert_error(
        &member.post("/run", chat.clone()).await,
        403,
        "ai_access_not_ready",
    );

    // The operator sets the region's URL and restarts.
    let (_, upstream) = MockUpstream::start().await.unwrap();
    let (mut config, db) = app.stop().await;
    config.gateway_aihk_url = Some(upstream.base_url());
    let app = TestApp::start_on(config, db);
    let admin = app.admin().await;
    let member = app.signin(&member.email, PASSWORD).await;

    let mut status = Value::Null;
    for _ in 0..100 {
        let keys = admin
            .get(&format!("/admin/tenants/{tenant_id}/ai-keys"))
            .await;
        status = keys.body["data"][0]["status"].clone();
        if status == "ready" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "ready", "the key was not re-checked at start-up");
    // The probe used the key, against the new URL.
    assert!(upstream
        .requests()
        .iter()
        .any(|r| r.bearer() == Some(SECRET)));

    let feed = member.get("/workspace/activity").await;
    let line = feed.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "ai_key.rechecked")
        .cloned()
        .unwrap_or_else(|| panic!("no ai_key.rechecked line: {}", feed.text));
    assert_eq!(line["detail"]["status"], "ready", "{line}");
    assert_eq!(line["target"]["id"], key.body["id"], "{line}");
    assert!(!feed.text.contains(SECRET));

    assert_eq!(member.post("/run", chat).await.status, 200);
}

/// The key's status once it differs from `from` (or after 5 s), with its reason.
async fn status_after_start(admin: &Actor, tenant_id: &str, from: &str) -> (Value, Value) {
    let mut key = Value::Null;
    for _ in 0..100 {
        let keys = admin
            .get(&format!("/admin/tenants/{tenant_id}/ai-keys"))
            .await;
        key = keys.body["data"][0].clone();
        if key["status"] != from && !key["checked_at"].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (key["status"].clone(), key["status_reason"].clone())
}

/// The `ai_key.rechecked` lines of the tenant's feed, newest first.
async fn rechecked_lines(member: &Actor) -> Vec<Value> {
    let feed = member.get("/workspace/activity").await;
    assert!(!feed.text.contains(SECRET));
    feed.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "ai_key.rechecked")
        .cloned()
        .collect()
}

async fn a_ready_key_is_probed_again_when_its_region_url_changes(backend: Backend) {
    let (_, first) = MockUpstream::start().await.unwrap();
    let (_, second) = MockUpstream::start().await.unwrap();
    second.reject_key(SECRET);
    let first_url = first.base_url();
    let Some(app) = TestApp::start_with(backend, "key_recheck_url", |c| {
        c.gateway_aihk_url = Some(first_url);
        c.gateway_aica_url = None;
    })
    .await
    else {
        return;
    };
    let admin = app.admin().await;
    let tenant = app.tenant(&admin, "Acme", "AIHK").await;
    let tenant_id = tenant["id"].as_str().unwrap().to_owned();
    let member = app.member_of(&admin, &tenant).await;
    let key = admin
        .post(
            &format!("/admin/tenants/{tenant_id}/ai-keys"),
            json!({"region": "AIHK", "secret": SECRET, "label": "main"}),
        )
        .await;
    assert_eq!(key.status, 201, "{}", key.text);
    assert_eq!(key.body["status"], "ready", "{}", key.text);
    let chat = json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(member.post("/run", chat.clone()).await.status, 200);

    // A restart with the same URL probes nothing.
    let (config, db) = app.stop().await;
    let probes = first.requests_to("/models").len();
    let app = TestApp::start_on(config, db);
    let _signed_in = app.admin().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(first.requests_to("/models").len(), probes, "probed again");
    let (config, db) = app.stop().await;

    // The operator points AIHK at another gateway, which refuses the key.
    let mut config = config;
    config.gateway_aihk_url = Some(second.base_url());
    let app = TestApp::start_on(config, db);
    let admin = app.admin().await;
    let (status, reason) = status_after_start(&admin, &tenant_id, "ready").await;
    assert_eq!(
        status, "not_ready",
        "the ready key was not probed against the new URL"
    );
    assert!(
        reason.as_str().is_some_and(|r| !r.is_empty()),
        "no reason: {reason}"
    );
    assert!(second.requests().iter().any(|r| r.bearer() == Some(SECRET)));
    let member = app.signin(&member.email, PASSWORD).await;
    let lines = rechecked_lines(&member).await;
    let line = lines
        .first()
        .unwrap_or_else(|| panic!("no ai_key.rechecked line"));
    assert_eq!(line["detail"]["status"], "not_ready", "{line}");
    assert_eq!(line["detail"]["previous_status"], "ready", "{line}");
    assert_eq!(line["detail"]["trigger"], "gateway_url_changed", "{line}");
    assert_eq!(line["target"]["id"], key.body["id"], "{line}");
    assert_error(
        &member.post("/run", chat.clone()).await,
        403,
        "ai_access_not_ready",
    );

    // And back: the first gateway accepts it again.
    let (mut config, db) = app.stop().await;
    config.gateway_aihk_url = Some(first.base_url());
    let app = TestApp::start_on(config, db);
    let admin = app.admin().await;
    let (status, reason) = status_after_start(&admin, &tenant_id, "not_ready").await;
    assert_eq!(
        status, "ready",
        "not re-checked after the URL came back: {reason}"
    );
    let member = app.signin(&member.email, PASSWORD).await;
    assert_eq!(rechecked_lines(&member).await.len(), 2);
    assert_eq!(member.post("/run", chat).await.status, 200);
}

#[actix_web::test]
async fn url_change_sqlite() {
    a_ready_key_is_probed_again_when_its_region_url_changes(Backend::Sqlite).await;
}

#[actix_web::test]
async fn url_change_postgres() {
    a_ready_key_is_probed_again_when_its_region_url_changes(Backend::Postgres).await;
}

#[actix_web::test]
async fn sqlite() {
    a_key_added_before_its_url_is_ready_after_a_restart_with_it(Backend::Sqlite).await;
}

#[actix_web::test]
async fn postgres() {
    a_key_added_before_its_url_is_ready_after_a_restart_with_it(Backend::Postgres).await;
}
