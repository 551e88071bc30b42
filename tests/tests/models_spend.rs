//! Model allow-lists and spend in money (issue 32, decision 0038), end to end on both
//! databases against a mock OpenAI-compatible upstream: refusals before any upstream call,
//! `GET /models` filtered, `auto` resolved inside the list, costs in the usage reports, and
//! monthly spend limits (tenant and key) held under parallel runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_gateway::mock::{MockHandle, MockUpstream};
use gc_tests::*;

const SECRET: &str = "sk-upstream-secret-AAAA1111";

/// The test's price table: `m-default` costs 1000 per million input tokens and 2000 per
/// million output tokens, so a mock completion (5 prompt, 7 completion tokens) costs
/// 0.005 + 0.014 = 0.019. `m-small` has no price.
const PRICES: &str = r#"{
  "m-default": {"input_per_million": "1000", "output_per_million": "2000", "currency": "USD"},
  "m-large": {"input_per_million": "3000", "output_per_million": "6000", "currency": "USD"}
}"#;

struct Setup {
    _app: TestApp,
    hk: MockHandle,
    admin: Actor,
    tenant: Value,
    member: Actor,
    _prices: TempFile,
}

/// A file removed when dropped.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Setup {
    fn tenant_path(&self) -> String {
        format!("/admin/tenants/{}", self.tenant["id"].as_str().unwrap())
    }

    async fn patch_tenant(&self, body: Value) -> Value {
        let r = self.admin.patch(&self.tenant_path(), body).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.body
    }

    fn chat(model: &str) -> Value {
        json!({"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16})
    }

    /// Waits until the member's usage this month counts `n` runs.
    async fn runs_recorded(&self, n: u64) {
        let member = self.member.clone();
        eventually(async || member.get("/workspace/usage").await.body["data"][0]["requests"] == n)
            .await;
    }

    /// The models the upstream was asked for, in order.
    fn models_sent(&self) -> Vec<String> {
        self.hk
            .chat_requests()
            .iter()
            .map(|r| r.json().unwrap()["model"].as_str().unwrap().to_owned())
            .collect()
    }
}

async fn setup(backend: Backend, label: &str) -> Option<Setup> {
    let (_, hk) = MockUpstream::start().await.unwrap();
    let hk_url = hk.base_url();
    let path = std::env::temp_dir().join(format!(
        "gc-prices-{label}-{backend:?}-{}.json",
        std::process::id()
    ));
    std::fs::write(&path, PRICES).unwrap();
    let prices = TempFile(path.clone());
    let app = TestApp::start_with(backend, label, |c| {
        c.gateway_aihk_url = Some(hk_url);
        c.gateway_aihk_model = "m-default".into();
        c.gateway_aihk_models = vec!["m-large".into(), "m-small".into()];
        c.chat_completions = true;
        c.prices = Some(path);
    })
    .await?;
    let admin = app.admin().await;
    let tenant = app.tenant(&admin, "Acme", "AIHK").await;
    let member = app.member_of(&admin, &tenant).await;
    let r = admin
        .post(
            &format!("/admin/tenants/{}/ai-keys", tenant["id"].as_str().unwrap()),
            json!({"region": "AIHK", "secret": SECRET, "label": "main", "chat_enabled": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    Some(Setup {
        _app: app,
        hk,
        admin,
        tenant,
        member,
        _prices: prices,
    })
}

/// Polls `f` until it answers true (the run-record writer batches for 50 ms).
async fn eventually(mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the condition did not hold in time");
}

macro_rules! both_backends {
    ($(async fn $name:ident($s:ident) $body:block)*) => {
        $(
            mod $name {
                use super::*;
                async fn body($s: Setup) $body
                #[actix_web::test]
                async fn sqlite() {
                    if let Some(s) = setup(Backend::Sqlite, stringify!($name)).await { body(s).await }
                }
                #[actix_web::test]
                async fn postgres() {
                    if let Some(s) = setup(Backend::Postgres, stringify!($name)).await { body(s).await }
                }
            }
        )*
    };
}

fn model_ids(r: &Reply) -> Vec<String> {
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

both_backends! {
    async fn models_outside_the_lists_are_refused_before_the_upstream(s) {
        // The region's list: its default model and GC_GATEWAY_AIHK_MODELS.
        assert_eq!(model_ids(&s.member.get("/models").await), ["auto", "m-default", "m-large", "m-small"]);
        let r = s.member.post("/run", Setup::chat("claude-3-5-sonnet")).await;
        assert_error(&r, 403, "model_not_allowed");
        // In OpenAI's shape on /chat/completions, streams included, before any byte.
        let r = s.member.post("/chat/completions", Setup::chat("claude-3-5-sonnet")).await;
        assert_eq!(r.status, 403, "{}", r.text);
        assert_eq!(r.body["error"]["code"], "model_not_allowed", "{}", r.text);
        let mut stream = Setup::chat("gpt-4");
        stream["stream"] = json!(true);
        assert_error(&s.member.post("/run", stream).await, 403, "model_not_allowed");
        assert!(s.hk.chat_requests().is_empty(), "a refused model reached the upstream");
        assert_eq!(s.member.post("/run", Setup::chat("m-large")).await.status, 200);

        // The tenant narrows the list; the region's default is not in it.
        let t = s.patch_tenant(json!({"allowed_models": ["m-small", "m-large", "not-in-region"]})).await;
        assert_eq!(t["allowed_models"], json!(["m-small", "m-large", "not-in-region"]));
        // Listed in the region's order, only what both lists hold.
        assert_eq!(model_ids(&s.member.get("/models").await), ["auto", "m-large", "m-small"]);
        assert_eq!(s.member.get("/models/m-default").await.status, 404);
        assert_error(&s.member.post("/run", Setup::chat("m-default")).await, 403, "model_not_allowed");
        assert_error(&s.member.post("/run", Setup::chat("not-in-region")).await, 403, "model_not_allowed");
        // `auto` resolves to the first model of the caller's list.
        assert_eq!(s.member.post("/run", Setup::chat("auto")).await.status, 200);
        let mut no_model = Setup::chat("auto");
        no_model.as_object_mut().unwrap().remove("model");
        assert_eq!(s.member.post("/run", no_model).await.status, 200);
        assert_eq!(s.models_sent(), ["m-large", "m-large", "m-large"]);

        // Nothing in common: every run is refused, nothing is listed.
        s.patch_tenant(json!({"allowed_models": ["other"]})).await;
        assert_error(&s.member.post("/run", Setup::chat("auto")).await, 403, "model_not_allowed");
        assert!(model_ids(&s.member.get("/models").await).is_empty());
        // null: the region's list again; auto is its default.
        let t = s.patch_tenant(json!({"allowed_models": null})).await;
        assert_eq!(t["allowed_models"], Value::Null);
        assert_eq!(s.member.post("/run", Setup::chat("auto")).await.status, 200);
        assert_eq!(s.models_sent().last().unwrap(), "m-default");
        assert_eq!(s.hk.chat_requests().len(), 4);

        // The list is validated; members cannot change it.
        for bad in [json!("m-large"), json!([1]), json!(["auto"]), json!([""]), json!({"a": 1}),
                    json!(["x".repeat(201)])] {
            let r = s.admin.patch(&s.tenant_path(), json!({"allowed_models": bad})).await;
            assert_eq!(r.status, 422, "{bad}: {}", r.text);
        }
        assert_error(&s.member.patch(&s.tenant_path(), json!({"allowed_models": ["m-large"]})).await,
            403, "admin_required");
    }

    async fn usage_reports_show_what_runs_cost(s) {
        for model in ["m-default", "m-default", "m-large"] {
            let r = s.member.post("/run", Setup::chat(model)).await;
            assert_eq!(r.status, 200, "{}", r.text);
        }
        // A model without a price costs nothing (and is admitted: no spend limit applies).
        let r = s.member.post("/run", Setup::chat("m-small")).await;
        assert_eq!(r.status, 200, "{}", r.text);
        s.runs_recorded(4).await;
        // 5 prompt and 7 completion tokens each: 0.019 at m-default's prices, 0.057 at m-large's.
        let day = s.member.get("/workspace/usage").await;
        assert_eq!(day.body["data"][0]["cost"], "0.095", "{}", day.text);
        assert_eq!(day.body["data"][0]["currency"], "USD");
        let by_model = s.member.get("/workspace/usage?group_by=model").await;
        let cost = |m: &str| {
            by_model.body["data"].as_array().unwrap().iter()
                .find(|l| l["model"] == m).map(|l| l["cost"].clone()).unwrap()
        };
        assert_eq!(cost("m-default"), "0.038", "{}", by_model.text);
        assert_eq!(cost("m-large"), "0.057");
        assert_eq!(cost("m-small"), "0.00");
        let admin = s.admin.get(&format!("/admin/usage?tenant_id={}", s.tenant["id"].as_str().unwrap())).await;
        assert_eq!(admin.body["data"][0]["cost"], "0.095", "{}", admin.text);
        assert!(admin.body["data"][0]["cost"].is_string(), "money is never a JSON number");
    }

    async fn a_tenant_spend_limit_refuses_before_the_upstream_and_is_not_retried(s) {
        let t = s.patch_tenant(json!({"limits": {"monthly_spend": "0.07"}})).await;
        assert_eq!(t["limits"]["monthly_spend"], "0.07", "{t}");
        // Each run reserves its prompt at the input price and its 16 max_tokens at the output
        // price (0.032 and a little), and settles to 0.019: two fit, the third does not.
        for n in [1, 2] {
            let r = s.member.post("/run", Setup::chat("m-default")).await;
            assert_eq!(r.status, 200, "{}", r.text);
            s.runs_recorded(n).await;
        }
        let refused = s.member.post("/run", Setup::chat("m-default")).await;
        assert_error(&refused, 429, "budget_exhausted");
        assert_eq!(refused.header("x-should-retry"), Some("false"));
        let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=31 * 86_400).contains(&wait), "{wait}");
        assert_eq!(s.hk.chat_requests().len(), 2);
        // A model without a price cannot be counted against the limit: refused.
        assert_error(&s.member.post("/run", Setup::chat("m-small")).await, 403, "model_not_allowed");
        // Raising the limit takes effect at the next run; null removes it.
        s.patch_tenant(json!({"limits": {"monthly_spend": "1"}})).await;
        assert_eq!(s.member.post("/run", Setup::chat("m-default")).await.status, 200);
        let t = s.patch_tenant(json!({"limits": {"monthly_spend": null}})).await;
        assert_eq!(t["limits"]["monthly_spend"], Value::Null);
        assert_eq!(s.member.post("/run", Setup::chat("m-small")).await.status, 200);
        for bad in [json!("0"), json!("-1"), json!(5), json!("1.0000000001"), json!("abc"), json!("1e3")] {
            let r = s.admin.patch(&s.tenant_path(), json!({"limits": {"monthly_spend": bad}})).await;
            assert_eq!(r.status, 422, "{bad}: {}", r.text);
        }
    }

    async fn parallel_runs_never_spend_past_the_limit(s) {
        // 0.2 a month; each run reserves about 0.04 and costs 0.019. 40 runs at once: the
        // reservations admit at most 5 at a time, and the month never passes the limit.
        s.patch_tenant(json!({"limits": {"monthly_spend": "0.2"}})).await;
        let runs = (0..40).map(|_| {
            let member = s.member.clone();
            async move { member.post("/run", Setup::chat("m-default")).await }
        });
        let replies = futures_util::future::join_all(runs).await;
        let admitted = replies.iter().filter(|r| r.status == 200).count();
        for r in replies.iter().filter(|r| r.status != 200) {
            assert_error(r, 429, "budget_exhausted");
        }
        assert!(admitted >= 1, "none admitted");
        assert_eq!(s.hk.chat_requests().len(), admitted, "a refusal reached the upstream");
        s.runs_recorded(admitted as u64).await;
        // Then, one after another until refused, each settled before the next (a run's whole
        // reservation counts until the writer settles it): what was spent never passes 0.2.
        for n in 0.. {
            assert!(n < 20, "the limit never refused a run");
            let r = s.member.post("/run", Setup::chat("m-default")).await;
            if r.status != 200 {
                assert_error(&r, 429, "budget_exhausted");
                break;
            }
            s.runs_recorded(s.hk.chat_requests().len() as u64).await;
        }
        let total = s.hk.chat_requests().len();
        s.runs_recorded(total as u64).await;
        let usage = s.member.get("/workspace/usage").await;
        let spent = usage.body["data"][0]["cost"].as_str().unwrap().parse::<f64>().unwrap();
        assert!(spent <= 0.2, "spent {spent} of 0.2 in {total} runs");
        // 0.2 / 0.019: at most 10 runs; the last reservation (0.04) leaves at least 8.
        assert!((8..=10).contains(&total), "{total} runs");
    }

    async fn a_key_spend_limit_is_its_own_and_within_the_tenant_s(s) {
        s.patch_tenant(json!({"limits": {"monthly_spend": "1"}})).await;
        let r = s.member.post("/workspace/api-keys",
            json!({"name": "ci", "scopes": ["run"], "limits": {"monthly_spend": "2"}})).await;
        assert_error(&r, 422, "validation_failed");
        let r = s.member.post("/workspace/api-keys",
            json!({"name": "ci", "scopes": ["run"], "limits": {"monthly_spend": "0.05"}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.body["limits"]["monthly_spend"], "0.05", "{}", r.text);
        let ci = s.member.with_key(r.body["key"].as_str().unwrap());
        // The key's 0.05 admits one run (reserving about 0.04, settling to 0.019), then refuses.
        assert_eq!(ci.post("/run", Setup::chat("m-default")).await.status, 200);
        s.runs_recorded(1).await;
        assert_error(&ci.post("/run", Setup::chat("m-default")).await, 429, "budget_exhausted");
        // The tenant's month has room: a session's runs (and other keys') go on.
        assert_eq!(s.member.post("/run", Setup::chat("m-default")).await.status, 200);
        assert_eq!(s.hk.chat_requests().len(), 2);
    }
}
