//! An admin token never reaches a log line, even at `trace`, while each of its uses is logged
//! by the token's id (decision 0036). Its own test binary: the capturing subscriber is global.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use gc_tests::*;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The token never reaches a log line, even at `trace`, while its uses are logged by id.
#[actix_web::test]
async fn the_token_never_reaches_a_log_line() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_env_filter("trace")
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();
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
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
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
