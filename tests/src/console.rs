//! The console's browser-test harness, shared by `tests/tests/console.rs` and
//! `tests/tests/console_tokens.rs`: a running app on a fixed loopback port, a mock AIHK upstream,
//! a tenant, a member and a browser ([`crate::browser::Browser`]).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_gateway::mock::{MockHandle, MockUpstream};
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::{Actor, Backend, TestApp};

/// A running app on a fixed loopback port (its public origin, which the API's Origin check
/// compares with what Chromium sends), a mock AIHK upstream, a tenant, a member and a browser.
pub struct Console {
    pub app: TestApp,
    pub browser: Browser,
    pub hk: MockHandle,
    pub admin: Actor,
    pub tenant: Value,
    pub member: Actor,
}

impl Console {
    pub async fn start(label: &str) -> Option<Self> {
        Self::start_with(label, |_| {}).await
    }

    /// [`Console::start`] with more configuration.
    pub async fn start_with(
        label: &str,
        tweak: impl FnOnce(&mut gc_server::Config),
    ) -> Option<Self> {
        let browser = Browser::start(label).await?;
        let (_, hk) = MockUpstream::start().await.unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let hk_url = hk.base_url();
        let app = TestApp::start_with(Backend::Sqlite, label, |c| {
            c.bind = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            c.public_origin = format!("http://127.0.0.1:{port}");
            c.gateway_aihk_url = Some(hk_url);
            c.gateway_timeout_s = 10;
            tweak(c);
        })
        .await?;
        let admin = app.admin().await;
        let tenant = app.tenant(&admin, "Acme", "AIHK").await;
        let member = app.member_of(&admin, &tenant).await;
        Some(Self {
            app,
            browser,
            hk,
            admin,
            tenant,
            member,
        })
    }

    pub fn page(&self, path: &str) -> String {
        format!("{}{path}", self.app.base)
    }

    pub fn tenant_id(&self) -> &str {
        self.tenant["id"].as_str().unwrap()
    }

    pub async fn open(&self, path: &str) {
        self.browser.goto(&self.page(path)).await;
        self.browser.wait_for("main h1, main .refusal").await;
    }

    pub async fn sign_in(&self, email: &str, password: &str) {
        let b = &self.browser;
        b.goto(&self.page("/signin")).await;
        b.fill_labelled("Email", email).await;
        b.fill_labelled("Password", password).await;
        b.click_button("Sign in").await;
        b.wait_for("a.me").await;
    }

    pub async fn sign_out(&self) {
        self.browser.click_button("Sign out").await;
        self.browser.wait_text("main h1", "Sign in").await;
    }

    /// Gives the tenant an AIHK key (label `main`, chat enabled) through the admin API.
    pub async fn add_ai_key(&self, secret: &str) {
        let r = self
            .admin
            .post(
                &format!("/admin/tenants/{}/ai-keys", self.tenant_id()),
                json!({"region": "AIHK", "secret": secret, "label": "main", "chat_enabled": true}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }

    pub async fn shot(&self, name: &str) {
        if let Some(dir) = std::env::var_os("GC_CONSOLE_SCREENSHOTS") {
            self.browser
                .screenshot(&std::path::Path::new(&dir).join(format!("{name}.png")))
                .await;
        }
    }
    /// The page's text.
    pub async fn page_text(&self) -> String {
        self.script_text("return document.body.innerText").await
    }

    /// The page's HTML, attributes and all.
    pub async fn page_html(&self) -> String {
        self.script_text("return document.documentElement.outerHTML")
            .await
    }

    async fn script_text(&self, script: &str) -> String {
        self.browser
            .exec(script, json!([]))
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}
