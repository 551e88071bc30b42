//! Usage reports (issue 28, decision 0027): how many run at once (per tenant, then in all,
//! refused at once with `Retry-After` beyond), that other tenants keep being answered
//! meanwhile, that sums saturate instead of failing, and that a tenant's report holds only its
//! own runs. The rollup's plan is checked in `crates/persistence/tests/usage_plans.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use gc_gateway::mock::{Behavior, KeyForm, MockHandle, MockUpstream};
use gc_tests::*;

/// How long each report holds its place in the bounded tests (`usage_report_test_hold_ms`):
/// every request of a burst arrives well within it.
const HOLD: Duration = Duration::from_millis(1500);

/// A 400-day report ending today, the longest the API allows.
fn long_report() -> String {
    let today = chrono::Utc::now().date_naive();
    let from = today - chrono::Duration::days(399);
    format!("/workspace/usage?from={from}&to={today}")
}

/// Statuses of `n` reports of `actor` sent at once.
async fn burst(actor: &Actor, n: usize) -> Vec<Reply> {
    let path = long_report();
    join_all((0..n).map(|_| actor.get(&path))).await
}

fn statuses(replies: &[Reply]) -> Vec<u16> {
    let mut s: Vec<u16> = replies.iter().map(|r| r.status.as_u16()).collect();
    s.sort_unstable();
    s
}

both_backends_with! {
    async fn reports_beyond_a_tenants_bound_are_refused_while_other_tenants_are_answered(app: TestApp)
    with |c: &mut gc_server::Config| {
        c.usage_reports_per_tenant = 1;
        c.usage_reports_max = Some(2);
        c.usage_report_test_hold_ms = HOLD.as_millis() as u64;
    }; {
        let admin = app.admin().await;
        let ta = app.tenant(&admin, "A", "AIHK").await;
        let tb = app.tenant(&admin, "B", "AIHK").await;
        let a = app.member_of(&admin, &ta).await;
        let b = app.member_of(&admin, &tb).await;
        let b_key = b.keyed(&["workspace:read"]).await;
        let long = long_report();
        let started = Instant::now();
        // Four of A's at once and one of B's: one of A's runs, the other three are refused at
        // once; B's has its own place.
        let (a_replies, b_reply, skills) = tokio::join!(burst(&a, 4), b.get(&long), async {
            // While A's and B's reports hold their places, B's key lists its skills.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let t = Instant::now();
            let r = b_key.get("/workspace/skills").await;
            (r, t.elapsed())
        });
        assert_eq!(statuses(&a_replies), vec![200, 429, 429, 429], "{a_replies:?}");
        for r in a_replies.iter().filter(|r| r.status == 429) {
            assert_error(r, 429, "rate_limited");
            assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
        }
        assert_eq!(b_reply.status, 200, "{}", b_reply.text);
        let (skills, waited) = skills;
        assert_eq!(skills.status, 200, "{}", skills.text);
        assert!(waited < HOLD, "another tenant's read waited {waited:?} behind the reports");
        // Nobody queued: the whole burst is over in about one hold.
        assert!(started.elapsed() < HOLD * 3, "{:?}", started.elapsed());

        // In all: three tenants' reports at once, two places.
        let tc = app.tenant(&admin, "C", "AIHK").await;
        let c = app.member_of(&admin, &tc).await;
        let path = long_report();
        let replies = join_all([&a, &b, &c].map(|m| m.get(&path))).await;
        assert_eq!(statuses(&replies), vec![200, 200, 503], "{replies:?}");
        let busy = replies.iter().find(|r| r.status == 503).unwrap();
        assert_error(busy, 503, "busy");
        assert_eq!(busy.header("retry-after"), Some("1"));
        // Admins' reports have their own place under the same bound.
        let replies = join_all((0..2).map(|_| admin.get("/admin/usage"))).await;
        assert_eq!(statuses(&replies), vec![200, 429], "{replies:?}");
        // Every place was handed back.
        assert_eq!(a.get(&path).await.status, 200);
    }
}

/// The app with a mock upstream for region AIHK, and a tenant with an AI key and a member.
async fn with_upstream(
    backend: Backend,
    label: &str,
) -> Option<(TestApp, MockHandle, Actor, Actor, Value)> {
    let (_, hk) = MockUpstream::start().await.unwrap();
    let url = hk.base_url();
    let app = TestApp::start_with(backend, label, |c| {
        c.gateway_aihk_url = Some(url);
        c.gateway_timeout_s = 2;
    })
    .await?;
    let admin = app.admin().await;
    let tenant = app.tenant(&admin, "Acme", "AIHK").await;
    let r = admin
        .post(
            &format!("/admin/tenants/{}/ai-keys", tenant["id"].as_str().unwrap()),
            json!({"region": "AIHK", "secret": "sk-upstream-usage-1111", "label": "main", "chat_enabled": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let member = app.member_of(&admin, &tenant).await;
    Some((app, hk, admin, member, tenant))
}

/// A completion whose usage is `n` for each count.
fn huge_usage(n: u64) -> Behavior {
    let body = json!({
        "id": "chatcmpl-huge", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": n, "completion_tokens": n, "total_tokens": n}
    });
    Behavior::Answer {
        status: 200,
        headers: Vec::new(),
        body: body.to_string(),
        echo: KeyForm::Exact,
    }
}

fn chat() -> Value {
    json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16})
}

/// Polls `f` every 50 ms for up to 10 s.
async fn eventually(mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the condition did not hold in time");
}

async fn saturating_sums_body(
    app: TestApp,
    hk: MockHandle,
    admin: Actor,
    member: Actor,
    tenant: Value,
) {
    // Another tenant's runs on the same day, which the member's report must not count.
    let other_t = app.tenant(&admin, "Other", "AIHK").await;
    let r = admin
        .post(
            &format!("/admin/tenants/{}/ai-keys", other_t["id"].as_str().unwrap()),
            json!({"region": "AIHK", "secret": "sk-upstream-usage-2222", "label": "main", "chat_enabled": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let other = app.member_of(&admin, &other_t).await;
    for _ in 0..3 {
        assert_eq!(other.post("/run", chat()).await.status, 200);
    }
    // Two runs whose upstream reports 2^63 tokens of each kind, one with the session and one
    // with a key (two rows of the daily rollup, each saturated: a day's or a model's report
    // sums both), and an ordinary one.
    let top = 1_u64 << 63;
    let runner = member.keyed(&["run"]).await;
    for who in [&member, &runner] {
        hk.push_behavior(huge_usage(top));
        let r = who.post("/run", chat()).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    assert_eq!(member.post("/run", chat()).await.status, 200);
    eventually(async || member.get("/workspace/usage").await.body["data"][0]["requests"] == 3)
        .await;
    eventually(async || other.get("/workspace/usage").await.body["data"][0]["requests"] == 3).await;

    let max = i64::MAX;
    for path in ["/workspace/usage", "/workspace/usage?group_by=model"] {
        let r = member.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        let lines = r.body["data"].as_array().unwrap();
        assert_eq!(lines.len(), 1, "{path}: {}", r.text);
        let l = &lines[0];
        assert_eq!(
            l["requests"], 3,
            "{path}: only the tenant's own runs: {}",
            r.text
        );
        for k in ["prompt_tokens", "completion_tokens", "total_tokens"] {
            assert_eq!(l[k], max, "{path}: {k} saturates: {}", r.text);
        }
    }
    let r = member.get("/workspace/usage?group_by=key").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let lines = r.body["data"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{}", r.text);
    let session = lines.iter().find(|l| l["key_id"].is_null()).unwrap();
    let keyed = lines.iter().find(|l| l["key_id"].is_string()).unwrap();
    assert_eq!(
        (&session["requests"], &session["total_tokens"]),
        (&json!(2), &json!(max)),
        "{}",
        r.text
    );
    assert_eq!(
        (&keyed["requests"], &keyed["total_tokens"]),
        (&json!(1), &json!(max)),
        "{}",
        r.text
    );
    // The other tenant's report: its own three ordinary runs (5 + 7 tokens each).
    let r = other.get("/workspace/usage").await;
    assert_eq!(r.body["data"][0]["requests"], 3, "{}", r.text);
    assert_eq!(r.body["data"][0]["total_tokens"], 36, "{}", r.text);
    // Admins: per tenant, each apart.
    let r = admin.get("/admin/usage").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let lines = r.body["data"].as_array().unwrap();
    let of = |id: &Value| {
        lines
            .iter()
            .find(|l| l["tenant_id"] == *id)
            .unwrap()
            .clone()
    };
    assert_eq!(of(&tenant["id"])["total_tokens"], max, "{}", r.text);
    assert_eq!(of(&other_t["id"])["total_tokens"], 36, "{}", r.text);
    // More runs after saturation still answer, and stay saturated.
    hk.push_behavior(huge_usage(top));
    assert_eq!(member.post("/run", chat()).await.status, 200);
    eventually(async || member.get("/workspace/usage").await.body["data"][0]["requests"] == 4)
        .await;
    let r = member.get("/workspace/usage").await;
    assert_eq!(r.body["data"][0]["total_tokens"], max, "{}", r.text);
}

mod upstream_usage_of_2_pow_63_saturates_and_stays_in_its_tenant {
    use super::*;

    #[actix_web::test]
    async fn sqlite() {
        if let Some((app, hk, admin, member, tenant)) =
            with_upstream(Backend::Sqlite, "usage_saturates").await
        {
            saturating_sums_body(app, hk, admin, member, tenant).await;
        }
    }

    #[actix_web::test]
    async fn postgres() {
        if let Some((app, hk, admin, member, tenant)) =
            with_upstream(Backend::Postgres, "usage_saturates").await
        {
            saturating_sums_body(app, hk, admin, member, tenant).await;
        }
    }
}
