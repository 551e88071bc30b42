//! No password, session token, workspace key or upstream key ever reaches a log line, even at
//! the most verbose level.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_gateway::mock::{Behavior, MockUpstream};
use gc_tests::*;

#[actix_web::test]
async fn secrets_never_reach_the_logs() {
    let captured = CapturedLogs::install("trace");

    let upstream_secret = "sk-upstream-LOGCHECK-9876";
    let (_, mock) = MockUpstream::start().await.unwrap();
    let url = mock.base_url();
    let app = TestApp::start_with(Backend::Sqlite, "logs", |c| {
        c.gateway_aihk_url = Some(url);
        c.log = "trace".into();
    })
    .await
    .unwrap();
    let admin = app.admin().await;
    let tenant = app.tenant(&admin, "Acme", "AIHK").await;
    let member = app.member_of(&admin, &tenant).await;
    let r = admin
        .post(
            &format!("/admin/tenants/{}/ai-keys", tenant["id"].as_str().unwrap()),
            json!({"region": "AIHK", "secret": upstream_secret, "chat_enabled": true}),
        )
        .await;
    assert_eq!(r.status, 201);
    let key = member
        .post(
            "/workspace/api-keys",
            json!({"name": "k", "scopes": ["run", "workspace:read"]}),
        )
        .await;
    let api_key = key.body["key"].as_str().unwrap().to_owned();
    let runner = member.with_key(&api_key);
    assert_eq!(
        runner
            .post(
                "/run",
                json!({"messages": [{"role": "user", "content": "hi"}]})
            )
            .await
            .status,
        200
    );
    // An upstream that echoes the key in its error, and a rejected key.
    mock.push_behavior(Behavior::status(500, upstream_secret));
    runner
        .post(
            "/run",
            json!({"messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    mock.reject_key(upstream_secret);
    runner
        .post(
            "/run",
            json!({"messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    admin
        .post("/admin/ai-gateways/diagnostics", json!({}))
        .await;
    // Failed sign-ins with a password.
    app.anon()
        .post(
            "/auth/signin",
            json!({"email": ADMIN_EMAIL, "password": "wrong-password-LOGCHECK"}),
        )
        .await;
    member.get("/workspace").await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;

    let logs = captured.text();
    assert!(logs.contains("request"), "request lines are logged");
    let session = member.cookie().unwrap().to_owned();
    for secret in [
        upstream_secret,
        api_key.as_str(),
        session.as_str(),
        PASSWORD,
        ADMIN_PASSWORD,
        "wrong-password-LOGCHECK",
    ] {
        assert!(!logs.contains(secret), "a secret reached the logs");
    }
}
