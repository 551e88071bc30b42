//! Quotas that hold and records that are never lost under concurrency (issue 28): limited runs
//! on two nodes sharing one database, token reservations, cancelled streams.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures_util::future::join_all;
use gc_gateway::mock::{MockHandle, MockUpstream};
use gc_tests::*;

const SECRET: &str = "sk-upstream-secret-QR001111";

struct Setup {
    app: TestApp,
    mock: MockHandle,
    admin: Actor,
    tenant: Value,
    member: Actor,
}

impl Setup {
    fn tenant_id(&self) -> &str {
        self.tenant["id"].as_str().unwrap()
    }

    async fn limit_tenant(&self, limits: Value) {
        let r = self
            .admin
            .patch(
                &format!("/admin/tenants/{}", self.tenant_id()),
                json!({ "limits": limits }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }

    /// A key with these limits, and the member using it on this node and on a second node of
    /// the same database (the node must outlive its use).
    async fn keyed_on_two_nodes(&self, limits: Value) -> (TestApp, Actor, Actor) {
        let r = self
            .member
            .post(
                "/workspace/api-keys",
                json!({"name": "ci", "scopes": ["run"], "limits": limits}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        let key = r.body["key"].as_str().unwrap().to_owned();
        let node_b = self.app.second_node();
        let on_a = self.member.with_key(&key);
        let mut on_b = on_a.clone();
        on_b.app = AppRef {
            base: node_b.base.clone(),
            client: node_b.client.clone(),
            origin: on_a.app.origin.clone(),
        };
        (node_b, on_a, on_b)
    }

    /// The runs the tenant's usage counts this month (0 before the first is stored).
    async fn recorded(&self) -> u64 {
        let r = self.member.get("/workspace/usage").await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.body["data"]
            .as_array()
            .map(|rows| rows.iter().filter_map(|d| d["requests"].as_u64()).sum())
            .unwrap_or(0)
    }
}

async fn setup(backend: Backend, label: &str) -> Option<Setup> {
    let (_, mock) = MockUpstream::start().await.unwrap();
    let url = mock.base_url();
    let app = TestApp::start_with(backend, label, |c| {
        c.gateway_aihk_url = Some(url);
        c.gateway_timeout_s = 5;
        c.gateway_aihk_models = vec!["m-large".into()];
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
        app,
        mock,
        admin,
        tenant,
        member,
    })
}

macro_rules! quota_tests {
    ($($(#[doc = $doc:expr])* async fn $name:ident($s:ident) $body:block)*) => {
        $(
            $(#[doc = $doc])*
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

fn chat() -> Value {
    json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16})
}

/// Polls `f` until it answers true, for up to 10 s (the writer batches for 50 ms).
async fn eventually(mut f: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..200 {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

quota_tests! {
    /// Issue 28: with request limits on the tenant and on the key, the request-path take
    /// (tenant and key windows in one transaction) and each node's run writer (token counts of
    /// every window of a batch) locked the same rows in different orders; on PostgreSQL the
    /// deadlocks answered clients 500 and dropped whole batches of run records. Now: one lock
    /// order, conflicts retried, failed batches written again.
    async fn limited_runs_on_two_nodes_are_all_answered_and_all_recorded(s) {
        // Limits far above the load, so every run is admitted, but small enough that each node
        // takes small leases of both windows often (a lease is at most an eighth of what is left).
        s.limit_tenant(json!({"requests_per_minute": 100000, "tokens_per_minute": 100000000})).await;
        let (_node_b, on_a, on_b) = s
            .keyed_on_two_nodes(json!({"requests_per_minute": 90000, "tokens_per_minute": 90000000}))
            .await;
        let mut admitted = 0u64;
        let mut failures = Vec::new();
        let before = s.mock.request_count() as u64;
        // Waves of concurrent runs over both nodes, so the writers' batches overlap the takes.
        for _ in 0..4 {
            let sends = (0..80).map(|i| {
                let actor = if i % 2 == 0 { on_a.clone() } else { on_b.clone() };
                async move { actor.post("/run", chat()).await }
            });
            for r in join_all(sends).await {
                if r.status == 200 {
                    admitted += 1;
                } else if r.status != 429 {
                    failures.push(format!("{} {}", r.status, r.text));
                }
            }
        }
        assert!(failures.is_empty(), "{} runs failed: {:?}", failures.len(), &failures[..failures.len().min(5)]);
        assert_eq!(admitted, 320);
        assert_eq!(s.mock.request_count() as u64 - before, admitted);
        let counted = eventually(async || s.recorded().await >= admitted).await;
        let recorded = s.recorded().await;
        assert!(counted && recorded == admitted, "{recorded} runs recorded of {admitted} admitted");
    }
}
