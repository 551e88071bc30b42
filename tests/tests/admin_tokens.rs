//! Admin API tokens (CONTRACT section 11, decision 0036), black-box: a script holding only an
//! admin token (no cookie, no `Origin`) provisions a tenant, its region key, its limits and a
//! member, whose own session makes the workspace key that runs against the mock upstream; and
//! every refusal: a read token writing, a token off `/admin/**`, a token managing tokens, a
//! suspended, demoted or deleted admin's token, an expired or revoked token. Every use is an
//! audit line naming the admin and the token; the token never appears in a list or a log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use diesel::prelude::*;
use gc_gateway::mock::MockUpstream;
use gc_http_api::routes::{self, Access};
use gc_tests::*;

const SECRET: &str = "sk-upstream-secret-TOKEN4242";
const NOWHERE: &str = "0190f0f0-0000-7000-8000-000000000000";

/// Makes a token through `session`; returns (id, token).
async fn make_token(session: &Actor, scope: &str, expires_at: Option<String>) -> (String, String) {
    let r = session
        .post(
            "/admin/tokens",
            json!({"name": format!("ci-{}", unique()), "scope": scope, "expires_at": expires_at}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let token = r.body["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("gca_"), "{token}");
    assert_eq!(r.body["scope"], scope);
    assert_eq!(r.body["last_used_at"], Value::Null);
    (r.body["id"].as_str().unwrap().to_owned(), token)
}

/// The same person holding only the token: `Authorization: Bearer`, no cookie, no `Origin`.
fn scripted(session: &Actor, token: &str) -> Actor {
    session.with_key(token)
}

/// One audit line of `admin_token_uses`.
#[derive(QueryableByName, Debug)]
struct Use {
    #[diesel(sql_type = diesel::sql_types::Text)]
    admin_id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    token_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    route: String,
}

/// The app's own database, opened beside it.
enum Db {
    Sqlite(diesel::SqliteConnection),
    Pg(diesel::PgConnection),
}

impl Db {
    fn open(app: &TestApp) -> Self {
        let url = &app.config.database_url;
        match url.strip_prefix("sqlite://") {
            Some(path) => Db::Sqlite(diesel::SqliteConnection::establish(path).unwrap()),
            None => Db::Pg(diesel::PgConnection::establish(url).unwrap()),
        }
    }

    fn uses(&mut self, token_id: &str) -> Vec<Use> {
        // A UUID parsed first: nothing but hex and hyphens reaches the statement.
        let id = uuid::Uuid::parse_str(token_id).unwrap();
        let sql = format!(
            "SELECT admin_id, token_name, route FROM admin_token_uses \
             WHERE token_id = '{id}' ORDER BY at, id"
        );
        match self {
            Db::Sqlite(c) => diesel::sql_query(sql).load(c).unwrap(),
            Db::Pg(c) => diesel::sql_query(sql).load(c).unwrap(),
        }
    }

    fn execute(&mut self, sql: &str) {
        match self {
            Db::Sqlite(c) => diesel::sql_query(sql).execute(c).unwrap(),
            Db::Pg(c) => diesel::sql_query(sql).execute(c).unwrap(),
        };
    }
}

async fn provisioning(backend: Backend) {
    let (_, upstream) = MockUpstream::start().await.unwrap();
    let url = upstream.base_url();
    let Some(app) = TestApp::start_with(backend, "admin_token_script", |c| {
        c.gateway_aihk_url = Some(url);
    })
    .await
    else {
        return;
    };
    let admin = app.admin().await;
    let (token_id, token) = make_token(&admin, "admin", None).await;
    let script = scripted(&admin, &token);
    assert!(script.cookie().is_none());

    // The script: a tenant, its region key, its limits, a member. A raw request proves that
    // neither a cookie nor an Origin is sent.
    let raw = app
        .client
        .post(app.url("/admin/tenants"))
        .bearer_auth(&token)
        .json(&json!({"name": "Scripted", "region": "AIHK", "ai_enabled": true}))
        .send()
        .await
        .unwrap();
    let tenant = read(raw).await;
    assert_eq!(tenant.status, 201, "{}", tenant.text);
    let tid = tenant.body["id"].as_str().unwrap().to_owned();
    let key = script
        .post(
            &format!("/admin/tenants/{tid}/ai-keys"),
            json!({"region": "AIHK", "secret": SECRET, "label": "main", "chat_enabled": true}),
        )
        .await;
    assert_eq!(key.status, 201, "{}", key.text);
    assert_eq!(key.body["status"], "ready", "{}", key.text);
    let limits = script
        .patch(
            &format!("/admin/tenants/{tid}"),
            json!({"limits": {"requests_per_minute": 100, "tokens_per_minute": 100000, "monthly_tokens": 1000000}}),
        )
        .await;
    assert_eq!(limits.status, 200, "{}", limits.text);
    assert_eq!(limits.body["limits"]["requests_per_minute"], 100);
    assert_eq!(limits.body["ai_access"], "ready", "{}", limits.text);
    let email = format!("scripted{}@gc.test", unique());
    let user = script
        .post(
            "/admin/users",
            json!({"email": email, "name": "Scripted", "password": PASSWORD, "tenant_id": tid}),
        )
        .await;
    assert_eq!(user.status, 201, "{}", user.text);
    let listed = script.get(&format!("/admin/users?tenant_id={tid}")).await;
    assert_eq!(listed.status, 200, "{}", listed.text);

    // The member's own session makes the workspace key; the run succeeds upstream.
    let member = app.signin(&email, PASSWORD).await;
    let runner = member.keyed(&["run"]).await;
    let run = runner
        .post(
            "/run",
            json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}),
        )
        .await;
    assert_eq!(run.status, 200, "{}", run.text);
    assert!(run.body["choices"].is_array(), "{}", run.text);
    let seen = upstream.chat_requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].bearer(), Some(SECRET));

    // Listed with its last use, never with the token; every use is an audit line naming the
    // admin and the token.
    let list = admin.get("/admin/tokens").await;
    assert_eq!(list.status, 200, "{}", list.text);
    assert!(!list.text.contains(&token), "{}", list.text);
    assert!(!list.text.contains("gca_"), "{}", list.text);
    let row = &list.body["data"][0];
    assert_eq!(row["id"], token_id.as_str());
    assert!(row["last_used_at"].is_string(), "{}", list.text);
    assert!(row.get("token").is_none(), "{}", list.text);
    let uses = Db::open(&app).uses(&token_id);
    assert_eq!(uses.len(), 5, "{uses:?}");
    assert!(uses
        .iter()
        .all(|u| u.admin_id == admin.id && u.token_name.starts_with("ci-")));
    assert_eq!(uses[0].route, "POST /api/v1/admin/tenants");
    assert_eq!(uses[4].route, "GET /api/v1/admin/users");
}

#[actix_web::test]
async fn a_script_with_only_an_admin_token_provisions_a_tenant_that_runs_sqlite() {
    provisioning(Backend::Sqlite).await;
}

#[actix_web::test]
async fn a_script_with_only_an_admin_token_provisions_a_tenant_that_runs_postgres() {
    provisioning(Backend::Postgres).await;
}

/// Every `/admin/**` route, with a real tenant where it names one.
fn admin_routes(tenant: &str) -> Vec<(routes::Route, String)> {
    routes::all()
        .filter(|r| r.path.starts_with("/admin/"))
        .map(|r| {
            let path = if r.path.starts_with("/admin/tenants/{id}") {
                r.path.replace("{id}", tenant).replace("{key_id}", NOWHERE)
            } else {
                r.path.replace("{id}", NOWHERE)
            };
            (r, path)
        })
        .collect()
}

/// Calls every admin route as `who` and checks each refusal: `code` on the routes a token may
/// use, `session_required` on the token routes.
async fn refused_everywhere(who: &Actor, tenant: &str, code: &str) {
    let mut wrong = Vec::new();
    let all = admin_routes(tenant);
    assert!(all.len() >= 15, "{}", all.len());
    for (route, path) in all {
        let method = Method::from_bytes(route.method.as_bytes()).unwrap();
        let mut rb = who.request(method.clone(), &path);
        if method != Method::GET && method != Method::DELETE {
            rb = rb.json(&json!({}));
        }
        let reply = who.send(rb).await;
        let want = if route.access == Access::AdminSession {
            "session_required"
        } else {
            code
        };
        if reply.status != 403 || reply.code() != want {
            wrong.push(format!(
                "{} {path}: want 403 {want}, got {} {}",
                route.method,
                reply.status,
                reply.code()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

both_backends! {
    async fn a_read_token_only_reads(app: TestApp) {
        let admin = app.admin().await;
        let tenant = app.tenant(&admin, "T", "AIHK").await;
        let tid = tenant["id"].as_str().unwrap();
        let (_, token) = make_token(&admin, "admin:read", None).await;
        let reader = scripted(&admin, &token);
        for path in ["/admin/tenants", "/admin/users", "/admin/usage"] {
            let r = reader.get(path).await;
            assert_eq!(r.status, 200, "{path}: {}", r.text);
        }
        assert_eq!(reader.get(&format!("/admin/tenants/{tid}/ai-keys")).await.status, 200);
        let writes = [
            reader.post("/admin/tenants", json!({"name": "X", "region": "AIHK"})).await,
            reader.patch(&format!("/admin/tenants/{tid}"), json!({"name": "Y"})).await,
            reader.post("/admin/users", json!({"email": "x@gc.test", "name": "X", "password": PASSWORD})).await,
            reader.delete(&format!("/admin/tenants/{tid}/ai-keys/{NOWHERE}")).await,
            reader.post("/admin/ai-gateways/diagnostics", json!({})).await,
        ];
        for r in &writes {
            assert_error(r, 403, "insufficient_scope");
        }
        // Nothing was changed.
        let t = admin.get(&format!("/admin/tenants/{tid}")).await;
        assert_eq!(t.body["name"], "T");
    }

    async fn a_token_is_a_credential_on_admin_routes_only(app: TestApp) {
        let admin = app.admin().await;
        let tenant = app.tenant(&admin, "T", "AIHK").await;
        let (_, token) = make_token(&admin, "admin", None).await;
        let script = scripted(&admin, &token);
        for (method, path) in [
            (Method::GET, "/workspace"),
            (Method::GET, "/workspace/skills"),
            (Method::GET, "/auth/me"),
            (Method::GET, "/auth/sessions"),
            (Method::POST, "/auth/ip-admin"),
            (Method::POST, "/run"),
            (Method::GET, "/models"),
            (Method::POST, "/guard/scan"),
            (Method::GET, "/workspace/api-keys"),
        ] {
            let body = json!({"tenant_id": tenant["id"], "target": "x", "mode": "skill",
                "messages": [{"role": "user", "content": "x"}]});
            let rb = script.request(method.clone(), path);
            let rb = if method == Method::POST { rb.json(&body) } else { rb };
            let r = script.send(rb).await;
            assert_eq!(r.status, 401, "{method} {path}: {}", r.text);
            assert_eq!(r.code(), "invalid_api_key", "{method} {path}");
        }
        // A made-up token of the right shape, and the right token with a changed character.
        let mut bad = token.clone().into_bytes();
        bad[10] = if bad[10] == b'a' { b'b' } else { b'a' };
        let bad = String::from_utf8(bad).unwrap();
        assert_error(&scripted(&admin, &bad).get("/admin/tenants").await, 401, "invalid_api_key");
        assert_eq!(script.get("/admin/tenants").await.status, 200);
    }

    async fn a_token_cannot_manage_tokens(app: TestApp) {
        let admin = app.admin().await;
        let (id, token) = make_token(&admin, "admin", None).await;
        let script = scripted(&admin, &token);
        assert_error(&script.get("/admin/tokens").await, 403, "session_required");
        assert_error(
            &script.post("/admin/tokens", json!({"name": "more", "scope": "admin"})).await,
            403,
            "session_required",
        );
        assert_error(&script.delete(&format!("/admin/tokens/{id}")).await, 403, "session_required");
        // Only the one token exists, and it still works.
        let list = admin.get("/admin/tokens").await;
        assert_eq!(list.body["data"].as_array().unwrap().len(), 1, "{}", list.text);
        assert_eq!(script.get("/admin/tenants").await.status, 200);
        // Validation of the body.
        for (body, field) in [
            (json!({"name": "", "scope": "admin"}), "name"),
            (json!({"name": "x", "scope": "root"}), "scope"),
            (json!({"name": "x", "scope": "admin", "expires_at": "2001-01-01T00:00:00Z"}), "expires_at"),
            (json!({"name": "x", "scope": "admin", "expires_at": "tomorrow"}), "expires_at"),
        ] {
            let r = admin.post("/admin/tokens", body.clone()).await;
            assert_error(&r, 422, "validation_failed");
            assert!(r.text.contains(field), "{body}: {}", r.text);
        }
        let r = admin.post("/admin/tokens", json!({"name": "x", "scope": "admin", "extra": 1})).await;
        assert_error(&r, 422, "unknown_field");
        // A member may not make one.
        let tenant = app.tenant(&admin, "T", "AIHK").await;
        let member = app.member_of(&admin, &tenant).await;
        assert_error(
            &member.post("/admin/tokens", json!({"name": "m", "scope": "admin"})).await,
            403,
            "admin_required",
        );
    }

    async fn revoked_and_expired_tokens_are_refused(app: TestApp) {
        let admin = app.admin().await;
        let (id, token) = make_token(&admin, "admin", None).await;
        let script = scripted(&admin, &token);
        assert_eq!(script.get("/admin/tenants").await.status, 200);
        assert_eq!(admin.delete(&format!("/admin/tokens/{id}")).await.status, 204);
        assert_error(&script.get("/admin/tenants").await, 401, "invalid_api_key");
        assert_error(&admin.delete(&format!("/admin/tokens/{id}")).await, 404, "not_found");
        assert!(admin.get("/admin/tokens").await.body["data"].as_array().unwrap().is_empty());

        let soon = (chrono::Utc::now() + chrono::Duration::milliseconds(1500)).to_rfc3339();
        let (_, token) = make_token(&admin, "admin", Some(soon)).await;
        let script = scripted(&admin, &token);
        assert_eq!(script.get("/admin/tenants").await.status, 200);
        tokio::time::sleep(std::time::Duration::from_millis(1700)).await;
        assert_error(&script.get("/admin/tenants").await, 401, "invalid_api_key");
    }

    async fn a_token_follows_its_admin_suspended_demoted_deleted(app: TestApp) {
        let root = app.admin().await;
        let tenant = app.tenant(&root, "T", "AIHK").await;
        let tid = tenant["id"].as_str().unwrap().to_owned();
        let email = format!("a{}@gc.test", unique());
        let made = root
            .post("/admin/users", json!({"email": email, "name": "A", "password": PASSWORD, "role": "platform_admin"}))
            .await;
        assert_eq!(made.status, 201, "{}", made.text);
        let other = app.signin(&email, PASSWORD).await;
        let (_, full) = make_token(&other, "admin", None).await;
        let (read_id, read) = make_token(&other, "admin:read", None).await;
        let (full, read) = (scripted(&other, &full), scripted(&other, &read));
        assert_eq!(full.get("/admin/tenants").await.status, 200);

        // Suspended: refused at once on every admin route, both tokens.
        let r = root.patch(&format!("/admin/users/{}", other.id), json!({"status": "suspended"})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        refused_everywhere(&full, &tid, "member_suspended").await;
        refused_everywhere(&read, &tid, "member_suspended").await;
        // Re-activated, then demoted.
        let r = root.patch(&format!("/admin/users/{}", other.id), json!({"status": "active"})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(full.get("/admin/tenants").await.status, 200);
        let r = root.patch(&format!("/admin/users/{}", other.id), json!({"role": "member"})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        refused_everywhere(&full, &tid, "admin_required").await;
        // Every refused use is recorded too.
        let mut db = Db::open(&app);
        assert!(db.uses(&read_id).len() >= 15);

        // Deleted: the token no longer names anyone.
        db.execute(&format!("DELETE FROM sessions WHERE user_id = '{}'", uuid::Uuid::parse_str(&other.id).unwrap()));
        db.execute(&format!("DELETE FROM users WHERE id = '{}'", uuid::Uuid::parse_str(&other.id).unwrap()));
        assert_error(&full.get("/admin/tenants").await, 401, "invalid_api_key");
        assert_error(&read.get("/admin/tenants").await, 401, "invalid_api_key");
    }

    async fn a_tokens_changes_are_attributed_to_its_admin_and_token(app: TestApp) {
        let root = app.admin().await;
        let (_, token) = make_token(&root, "admin", None).await;
        let script = scripted(&root, &token);
        let tenant = app.tenant(&root, "T", "AIHK").await;
        let tid = tenant["id"].as_str().unwrap().to_owned();
        let member = app.member_of(&root, &tenant).await;
        let r = script.patch(&format!("/admin/users/{}/tenant", member.id), json!({"tenant_id": null})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let shadow = root.post("/auth/ip-admin", json!({"tenant_id": tid})).await;
        assert_eq!(shadow.status, 200, "{}", shadow.text);
        let feed = root.get("/workspace/activity").await;
        let line = feed.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["action"] == "api_key.revoked")
            .cloned()
            .unwrap_or_else(|| panic!("{}", feed.text));
        assert_eq!(line["actor"]["kind"], "admin");
        assert_eq!(line["actor"]["id"], root.id.as_str());
        let label = line["actor"]["label"].as_str().unwrap();
        assert!(label.starts_with(ADMIN_EMAIL) && label.contains("admin token ci-"), "{label}");
        assert!(!feed.text.contains(&token));
    }
}
