//! Key status follows configuration (issue 31): an AI key added while its region had no
//! gateway URL is probed again when the server restarts with the URL, and becomes `ready`
//! without an admin's diagnosis; the verdict is in the tenant's activity feed.
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

#[actix_web::test]
async fn sqlite() {
    a_key_added_before_its_url_is_ready_after_a_restart_with_it(Backend::Sqlite).await;
}

#[actix_web::test]
async fn postgres() {
    a_key_added_before_its_url_is_ready_after_a_restart_with_it(Backend::Postgres).await;
}
