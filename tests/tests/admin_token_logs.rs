//! An admin token never reaches a log line, even at `trace`, while each of its uses is logged
//! by the token's id (decision 0036). Its own test binary: the capturing subscriber is global.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_tests::*;

/// The token never reaches a log line, even at `trace`, while its uses are logged by id.
#[actix_web::test]
async fn the_token_never_reaches_a_log_line() {
    let captured = CapturedLogs::install("trace");
    let app = TestApp::start_with(Backend::Sqlite, "admin_token_logs", |c| {
        c.log = "trace".into();
    })
    .await
    .unwrap();
    let admin = app.admin().await;
    let made = admin
        .post("/admin/tokens", json!({"name": "logged", "scope": "admin"}))
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let id = made.body["id"].as_str().unwrap().to_owned();
    let token = made.body["token"].as_str().unwrap().to_owned();
    let script = admin.with_key(&token);
    assert_eq!(script.get("/admin/tenants").await.status, 200);
    assert_eq!(
        script
            .post("/admin/tenants", json!({"name": "L", "region": "AIHK"}))
            .await
            .status,
        201
    );
    let _ = script.get("/workspace").await;
    let _ = script.get("/admin/tokens").await;
    let logs = captured.text();
    assert!(
        logs.contains("admin token used") && logs.contains(&id),
        "the uses are logged by id"
    );
    assert!(!logs.contains(&token), "the token reached the logs");
    assert!(
        !logs.contains(&token[4..]),
        "the token's body reached the logs"
    );
}
