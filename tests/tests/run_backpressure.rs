//! An admitted run's record is never lost (issue 28, decision 0033): each run takes a place in
//! the run writer's queue before it is admitted; when the writer is behind and no place is
//! free the run is refused 503 `busy` with `Retry-After: 1`, before its quotas are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures_util::future::join_all;
use gc_gateway::mock::{MockHandle, MockUpstream};
use gc_tests::*;

/// Places in the run writer's queue for these tests.
const PLACES: usize = 4;
/// How long the writer waits before each batch: it stays behind the burst.
const WRITER_HOLD_MS: u64 = 300;

struct Setup {
    app: TestApp,
    _mock: MockHandle,
    member: Actor,
}

async fn setup(backend: Backend, label: &str) -> Option<Setup> {
    let (_, mock) = MockUpstream::start().await.unwrap();
    let url = mock.base_url();
    let app = TestApp::start_with(backend, label, |c| {
        c.gateway_aihk_url = Some(url);
        c.gateway_aihk_models = vec!["m-large".into()];
        c.run_queue_test_size = Some(PLACES);
        c.run_writer_test_hold_ms = WRITER_HOLD_MS;
    })
    .await?;
    let admin = app.admin().await;
    let tenant = app.tenant(&admin, "Acme", "AIHK").await;
    let tenant_id = tenant["id"].as_str().unwrap().to_owned();
    // Quotas apply, so a refusal that counted anything would show in the request count, and
    // admitted runs reserve tokens that only their record settles.
    let r = admin
        .patch(
            &format!("/admin/tenants/{tenant_id}"),
            json!({"limits": {"requests_per_minute": 1000, "monthly_tokens": 100000000}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let member = app.member_of(&admin, &tenant).await;
    let r = admin
        .post(
            &format!("/admin/tenants/{tenant_id}/ai-keys"),
            json!({"region": "AIHK", "secret": "sk-upstream-secret-BP001111", "label": "main", "chat_enabled": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    Some(Setup {
        app,
        _mock: mock,
        member,
    })
}

/// The runs the tenant's usage counts this month.
async fn recorded(member: &Actor) -> u64 {
    let r = member.get("/workspace/usage").await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["data"]
        .as_array()
        .map(|rows| rows.iter().filter_map(|d| d["requests"].as_u64()).sum())
        .unwrap_or(0)
}

async fn burst_of_runs_while_the_writer_is_behind(s: Setup) {
    let runs = 40;
    let sends = (0..runs).map(|i| {
        let member = s.member.clone();
        // Every fourth a stream: its place is held until the stream ends.
        let body = json!({"model": "auto", "stream": i % 4 == 0, "max_tokens": 16,
            "messages": [{"role": "user", "content": "hello"}]});
        async move { member.post("/run", body).await }
    });
    let (mut admitted, mut busy, mut other) = (0u64, 0u64, Vec::new());
    for r in join_all(sends).await {
        match r.status.as_u16() {
            200 => admitted += 1,
            503 if r.code() == "busy" => {
                assert_eq!(r.header("retry-after"), Some("1"), "{:?}", r.headers);
                busy += 1;
            }
            _ => other.push(format!("{} {}", r.status, r.text)),
        }
    }
    assert!(other.is_empty(), "only 200 or 503 busy: {other:?}");
    assert!(admitted >= 1, "some runs had a place");
    assert!(
        busy >= 1,
        "{PLACES} places cannot take {runs} runs while the writer waits"
    );
    // Every admitted run is recorded, once the writer catches up: none was dropped.
    let mut seen = 0;
    for _ in 0..100 {
        seen = recorded(&s.member).await;
        if seen >= admitted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen, admitted,
        "{seen} runs recorded of {admitted} admitted ({busy} busy)"
    );
    // The refused runs counted nothing: the next run finds the tenant's minute used by the
    // admitted runs alone (it may itself be refused busy while the writer drains).
    let mut remaining = None;
    for _ in 0..50 {
        let r = s
            .member
            .post(
                "/run",
                json!({"messages": [{"role": "user", "content": "hi"}]}),
            )
            .await;
        if r.status == 200 {
            remaining = r
                .header("x-ratelimit-remaining-requests")
                .map(str::to_owned);
            break;
        }
        assert_error(&r, 503, "busy");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let expected = 1000 - admitted - 1;
    assert_eq!(
        remaining,
        Some(expected.to_string()),
        "busy refusals took no quota"
    );
    // Counted for operators.
    let metrics = s
        .app
        .client
        .get(format!("{}/metrics", s.app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let refused = metrics
        .lines()
        .find_map(|l| l.strip_prefix("gc_runs_refused_busy_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(
        refused >= busy as f64,
        "{refused} counted of {busy} busy:\n{metrics}"
    );
}

mod burst_while_the_writer_is_behind {
    use super::*;

    #[actix_web::test]
    async fn sqlite() {
        if let Some(s) = setup(Backend::Sqlite, "run_backpressure").await {
            burst_of_runs_while_the_writer_is_behind(s).await
        }
    }

    #[actix_web::test]
    async fn postgres() {
        if let Some(s) = setup(Backend::Postgres, "run_backpressure").await {
            burst_of_runs_while_the_writer_is_behind(s).await
        }
    }
}
