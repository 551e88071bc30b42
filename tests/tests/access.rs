//! Every mounted route × every kind of caller, from the router's own route list
//! (`gc_http_api::routes`): a route without a row in [`policy`] fails the test, and each
//! cell checks the refusal (status and code) or that the caller got past every access check.
//! The expected policy is this file's own; a test checks that it agrees with the access class
//! the route table declares.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_http_api::routes::{self, Route};
use gc_tests::*;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Anyone; credentials are not read.
    Public,
    /// Anyone; credentials are read when sent, and must then be good for a recorded scan.
    PublicMaybeAuth,
    /// A signed-in session of any account, whatever its state (me, sessions, sign-out).
    Account,
    /// A platform admin's session (not suspended) or, on `/admin/**`, admin token (an
    /// `admin:read` token only when nothing is written).
    AdminOnly { write: bool },
    /// A platform admin's session only (`/auth/ip-admin`; `/admin/tokens/**`, where an admin
    /// token is refused `session_required` rather than unknown).
    AdminSession { admin_path: bool },
    /// A member's session or key with `workspace:read` (GET; `workspace:write` covers only
    /// POST, PATCH and DELETE); reads of another tenant's objects are 404.
    WorkspaceRead { item: bool },
    /// A member's session or key with `workspace:write`; refused in the Shadow view.
    WorkspaceWrite { item: bool },
    /// A member's session only (API keys manage keys through a session).
    WorkspaceSession { write: bool },
    /// A member's session or a key with `run`.
    Run,
    /// The models a run may use: the same rules as a run (the Shadow view, which may not run,
    /// is refused too).
    ModelList,
}

/// The policy of every mounted route. A route missing here fails the test.
fn policy(route: Route) -> Option<Policy> {
    use Policy::*;
    let item = route.path.ends_with("{id}");
    let read = route.method == "GET";
    Some(match (route.method, route.path) {
        (_, "/health" | "/ready" | "/openapi.json") => Public,
        ("GET", "/guard/scan") => Public,
        ("POST", "/guard/scan") => PublicMaybeAuth,
        (_, "/auth/signup") | ("POST", "/auth/signin") => Public,
        (_, "/auth/signout" | "/auth/change-password" | "/auth/me" | "/auth/sessions") => Account,
        ("POST", "/auth/ip-admin") => AdminSession { admin_path: false },
        ("GET" | "POST", "/admin/tokens") | ("DELETE", "/admin/tokens/{id}") => {
            AdminSession { admin_path: true }
        }
        (
            _,
            "/admin/tenants"
            | "/admin/tenants/{id}"
            | "/admin/tenants/{id}/ai-keys"
            | "/admin/tenants/{id}/ai-keys/{key_id}"
            | "/admin/ai-gateways/diagnostics"
            | "/admin/users"
            | "/admin/users/{id}"
            | "/admin/users/{id}/tenant"
            | "/admin/usage",
        ) => AdminOnly { write: !read },
        ("GET" | "POST", "/workspace/api-keys")
        | ("DELETE" | "PATCH", "/workspace/api-keys/{id}") => WorkspaceSession { write: !read },
        (
            "GET",
            "/workspace"
            | "/workspace/settings"
            | "/workspace/activity"
            | "/workspace/ai-access"
            | "/workspace/ai-access/guide"
            | "/workspace/usage",
        ) => WorkspaceRead { item: false },
        ("PATCH", "/workspace/settings") => WorkspaceWrite { item: false },
        ("POST", "/workspace/skills/{id}/scan") => WorkspaceWrite { item: true },
        (
            method,
            "/workspace/skills"
            | "/workspace/skills/{id}"
            | "/workspace/memory"
            | "/workspace/memory/{id}"
            | "/workspace/memory/{collection_id}/sources"
            | "/workspace/memory/{collection_id}/sources/{id}"
            | "/workspace/drafts/{kind}"
            | "/workspace/drafts/{kind}/{id}",
        ) => match method {
            "GET" => WorkspaceRead { item },
            _ => WorkspaceWrite { item },
        },
        ("POST", "/run" | "/chat/completions" | "/responses" | "/embeddings") => Run,
        ("GET", "/models" | "/models/{id}") => ModelList,
        _ => return None,
    })
}

/// The access class the route table declares for each route (from which the OpenAPI
/// document's credentials and shared refusals are derived) agrees with [`policy`]. The policy
/// stays written here, apart from the table, so the matrix checks the server's answers against
/// an expectation the code under test did not produce; this test only keeps the two in step.
#[test]
fn the_route_tables_access_class_agrees_with_the_policy() {
    use routes::Access;
    let mut wrong = Vec::new();
    for route in routes::all() {
        let class = match policy(route) {
            None => None,
            Some(Policy::Public) => Some(Access::Public),
            Some(Policy::PublicMaybeAuth) => Some(Access::Guard),
            Some(Policy::Account) => Some(Access::Session),
            Some(Policy::AdminOnly { .. }) => Some(Access::Admin),
            Some(Policy::AdminSession { .. }) => Some(Access::AdminSession),
            Some(Policy::WorkspaceSession { .. }) => Some(Access::KeyManagement),
            Some(Policy::WorkspaceRead { .. }) => Some(Access::Workspace("workspace:read")),
            Some(Policy::WorkspaceWrite { .. }) => Some(Access::Workspace("workspace:write")),
            Some(Policy::Run) => Some(Access::Run),
            Some(Policy::ModelList) => Some(Access::Models),
        };
        if class != Some(route.access) {
            wrong.push(format!(
                "{} {}: the table says {:?}, the policy {:?}",
                route.method, route.path, route.access, class
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The kinds of caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Anonymous,
    Unassigned,
    SuspendedMember,
    MemberOfSuspendedTenant,
    Member,
    OtherTenantMember,
    Admin,
    SuspendedAdmin,
    ShadowAdmin,
    KeyRead,
    KeyWrite,
    KeyGuard,
    KeyRun,
    RevokedKey,
    /// The admin's `admin` token, the same admin's `admin:read` token, and an `admin` token of
    /// the suspended admin (made before the suspension).
    AdminToken,
    AdminReadToken,
    SuspendedAdminToken,
}

const EVERYONE: [Who; 17] = [
    Who::Anonymous,
    Who::Unassigned,
    Who::SuspendedMember,
    Who::MemberOfSuspendedTenant,
    Who::Member,
    Who::OtherTenantMember,
    Who::Admin,
    Who::SuspendedAdmin,
    Who::ShadowAdmin,
    Who::KeyRead,
    Who::KeyWrite,
    Who::KeyGuard,
    Who::KeyRun,
    Who::RevokedKey,
    Who::AdminToken,
    Who::AdminReadToken,
    Who::SuspendedAdminToken,
];

/// What a caller should get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Past every access check (the answer may still be a validation error or a 404 for a
    /// made-up id, never 401 and never a refusal of the caller).
    Allowed,
    /// Refused with this status and code.
    Refused(u16, &'static str),
    /// Past the caller checks, but the object is another tenant's: 404.
    NotFound,
}

fn want(policy: Policy, who: Who) -> Want {
    use Policy::*;
    use Want::*;
    use Who::*;
    let key = matches!(who, KeyRead | KeyWrite | KeyGuard | KeyRun);
    let token = matches!(who, AdminToken | AdminReadToken | SuspendedAdminToken);
    // Refusals that come with the credential itself, before any route rule.
    match (policy, who) {
        (Public, _) => return Allowed,
        // An admin token is a credential on `/admin/**` only; there it acts as its admin.
        (AdminOnly { write }, _) if token => {
            return match who {
                SuspendedAdminToken => Refused(403, "member_suspended"),
                AdminReadToken if write => Refused(403, "insufficient_scope"),
                _ => Allowed,
            }
        }
        (AdminSession { admin_path: true }, _) if token => return Refused(403, "session_required"),
        (_, _) if token => return Refused(401, "invalid_api_key"),
        (_, RevokedKey) => return Refused(401, "invalid_api_key"),
        // Anonymous scans are allowed (and throttled); a platform admin's scan is recorded
        // nowhere or in the Shadow tenant's feed.
        (PublicMaybeAuth, Anonymous | Admin | ShadowAdmin) => return Allowed,
        (_, Anonymous) => return Refused(401, "unauthenticated"),
        _ => {}
    }
    match policy {
        Public => Allowed,
        // Credentials sent to the Guard must be good for a recorded scan.
        PublicMaybeAuth => member(who, false, false, Some("guard:scan")),
        Account if key => Refused(403, "session_required"),
        Account => Allowed,
        AdminOnly { .. } | AdminSession { .. } if key => Refused(403, "session_required"),
        AdminOnly { .. } | AdminSession { .. } => match who {
            Admin | ShadowAdmin => Allowed,
            SuspendedAdmin => Refused(403, "member_suspended"),
            _ => Refused(403, "admin_required"),
        },
        WorkspaceRead { item } => member(who, item, false, Some("workspace:read")),
        WorkspaceWrite { item } => member(who, item, true, Some("workspace:write")),
        WorkspaceSession { write } => member(who, false, write, None),
        Run => member(who, false, true, Some("run")),
        ModelList => member(who, false, true, Some("run")),
    }
}

/// The member rules: account state, tenant state, the Shadow view, then the key's scope.
fn member(who: Who, item: bool, write: bool, scope: Option<&'static str>) -> Want {
    use Want::*;
    use Who::*;
    match who {
        Unassigned | Admin => Refused(403, "member_unassigned"),
        SuspendedMember | SuspendedAdmin => Refused(403, "member_suspended"),
        MemberOfSuspendedTenant => Refused(403, "tenant_suspended"),
        ShadowAdmin if write => Refused(403, "shadow_read_only"),
        ShadowAdmin | Member => Allowed,
        OtherTenantMember if item => NotFound,
        OtherTenantMember => Allowed,
        KeyRead | KeyWrite | KeyGuard | KeyRun => {
            let has = match who {
                KeyRead => "workspace:read",
                KeyWrite => "workspace:write",
                KeyGuard => "guard:scan",
                _ => "run",
            };
            match scope {
                None => Refused(403, "session_required"),
                Some(s) if s == has => Allowed,
                Some(_) => Refused(403, "insufficient_scope"),
            }
        }
        Anonymous => Refused(401, "unauthenticated"),
        RevokedKey | AdminToken | AdminReadToken | SuspendedAdminToken => {
            Refused(401, "invalid_api_key")
        }
    }
}

/// Codes that refuse the caller rather than the request.
const CALLER_REFUSALS: &[&str] = &[
    "unauthenticated",
    "invalid_api_key",
    "member_unassigned",
    "member_suspended",
    "tenant_suspended",
    "insufficient_scope",
    "shadow_read_only",
    "admin_required",
    "session_required",
];

/// The callers, set up on one app: tenant T (the member's, with one record of each kind),
/// tenant U (another), tenant S (suspended).
struct World {
    callers: Vec<(Who, Actor)>,
    /// Path parameters: real ids from tenant T for reads, made-up ones for deletes.
    skill: String,
    collection: String,
    source: String,
    draft: String,
    tenant_t: String,
}

const NOWHERE: &str = "0190f0f0-0000-7000-8000-000000000000";

async fn world(app: &TestApp) -> World {
    let admin = app.admin().await;
    let t = app.tenant(&admin, "T", "AIHK").await;
    let u = app.tenant(&admin, "U", "AICA").await;
    let s = app.tenant(&admin, "S", "AIHK").await;
    let member = app.member_of(&admin, &t).await;
    let other = app.member_of(&admin, &u).await;
    let in_suspended = app.member_of(&admin, &s).await;
    let suspended_member = app.member_of(&admin, &t).await;

    let skill = member
        .post("/workspace/skills", json!({"name": "s", "content": "c"}))
        .await;
    let collection = member.post("/workspace/memory", json!({"name": "c"})).await;
    let cid = collection.body["id"].as_str().unwrap().to_owned();
    let source = member
        .post(
            &format!("/workspace/memory/{cid}/sources"),
            json!({"title": "src", "kind": "text", "content": "x"}),
        )
        .await;
    let draft = member
        .post("/workspace/drafts/agents", json!({"name": "d"}))
        .await;
    for r in [&skill, &collection, &source, &draft] {
        assert_eq!(r.status, 201, "{}", r.text);
    }

    // Keys before any suspension.
    let key_read = member.keyed(&["workspace:read"]).await;
    let key_write = member.keyed(&["workspace:write"]).await;
    let key_guard = member.keyed(&["guard:scan"]).await;
    let key_run = member.keyed(&["run"]).await;
    let revoked = member
        .post("/workspace/api-keys", json!({"name": "gone", "scopes": ["workspace:read", "workspace:write", "guard:scan", "run"]}))
        .await;
    let revoked_id = revoked.body["id"].as_str().unwrap();
    assert_eq!(
        member
            .delete(&format!("/workspace/api-keys/{revoked_id}"))
            .await
            .status,
        204
    );
    let revoked = member.with_key(revoked.body["key"].as_str().unwrap());

    // An unassigned account.
    let email = format!("u{}@gc.test", unique());
    let made = admin
        .post(
            "/admin/users",
            json!({"email": email, "name": "U", "password": PASSWORD}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let unassigned = app.signin(&email, PASSWORD).await;

    // Two more platform admins: one suspended, one in the Shadow view of T.
    let mut admins = Vec::new();
    for _ in 0..2 {
        let email = format!("a{}@gc.test", unique());
        let made = admin
            .post("/admin/users", json!({"email": email, "name": "A", "password": PASSWORD, "role": "platform_admin"}))
            .await;
        assert_eq!(made.status, 201, "{}", made.text);
        admins.push(app.signin(&email, PASSWORD).await);
    }
    let shadow = admins.pop().unwrap();
    let suspended_admin = admins.pop().unwrap();
    let token = |session: Actor, scope: &'static str| async move {
        let made = session
            .post("/admin/tokens", json!({"name": scope, "scope": scope}))
            .await;
        assert_eq!(made.status, 201, "{}", made.text);
        session.with_key(made.body["token"].as_str().unwrap())
    };
    let admin_token = token(admin.clone(), "admin").await;
    let admin_read_token = token(admin.clone(), "admin:read").await;
    let suspended_admin_token = token(suspended_admin.clone(), "admin").await;
    let enter = shadow
        .post("/auth/ip-admin", json!({"tenant_id": t["id"]}))
        .await;
    assert_eq!(enter.status, 200, "{}", enter.text);
    let r = admin
        .patch(
            &format!("/admin/users/{}", suspended_admin.id),
            json!({"status": "suspended"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = admin
        .patch(
            &format!("/admin/users/{}", suspended_member.id),
            json!({"status": "suspended"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = admin
        .patch(
            &format!("/admin/tenants/{}", s["id"].as_str().unwrap()),
            json!({"status": "suspended"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);

    World {
        callers: vec![
            (Who::Anonymous, app.anon()),
            (Who::Unassigned, unassigned),
            (Who::SuspendedMember, suspended_member),
            (Who::MemberOfSuspendedTenant, in_suspended),
            (Who::Member, member),
            (Who::OtherTenantMember, other),
            (Who::Admin, admin),
            (Who::SuspendedAdmin, suspended_admin),
            (Who::ShadowAdmin, shadow),
            (Who::KeyRead, key_read),
            (Who::KeyWrite, key_write),
            (Who::KeyGuard, key_guard),
            (Who::KeyRun, key_run),
            (Who::RevokedKey, revoked),
            (Who::AdminToken, admin_token),
            (Who::AdminReadToken, admin_read_token),
            (Who::SuspendedAdminToken, suspended_admin_token),
        ],
        skill: skill.body["id"].as_str().unwrap().to_owned(),
        collection: cid,
        source: source.body["id"].as_str().unwrap().to_owned(),
        draft: draft.body["id"].as_str().unwrap().to_owned(),
        tenant_t: t["id"].as_str().unwrap().to_owned(),
    }
}

/// The concrete path for a route: tenant T's objects for reads and patches, made-up ids for
/// deletes (nothing is destroyed) and for admin routes.
fn concrete(route: Route, w: &World) -> String {
    let reads_real = route.method != "DELETE";
    let id = |real: &str| {
        if reads_real {
            real.to_owned()
        } else {
            NOWHERE.to_owned()
        }
    };
    let mut path = route.path.to_owned();
    if path.starts_with("/workspace/memory/{collection_id}") {
        path = path
            .replace("{collection_id}", &w.collection)
            .replace("{id}", &id(&w.source));
    } else if path.starts_with("/workspace/memory/") {
        path = path.replace("{id}", &id(&w.collection));
    } else if path.starts_with("/workspace/skills/") {
        path = path.replace("{id}", &id(&w.skill));
    } else if path.starts_with("/workspace/drafts/") {
        path = path
            .replace("{kind}", "agents")
            .replace("{id}", &id(&w.draft));
    } else if path.starts_with("/admin/tenants/{id}/ai-keys") {
        // A real tenant, so that a refusal cannot hide behind a 404.
        path = path
            .replace("{id}", &w.tenant_t)
            .replace("{key_id}", NOWHERE);
    } else {
        path = path.replace("{id}", NOWHERE).replace("{kind}", "agents");
    }
    path
}

/// Routes that end or change the caller's sessions: the caller signs in again afterwards.
fn spends_the_session(route: Route) -> bool {
    matches!(
        (route.method, route.path),
        ("POST", "/auth/signout") | ("DELETE", "/auth/sessions") | ("POST", "/auth/ip-admin")
    )
}

/// A fresh session for the same person (re-entering the Shadow view for the shadow admin).
async fn fresh(app: &TestApp, who: Who, actor: &Actor, tenant_t: &str) -> Actor {
    if actor.cookie().is_none() {
        return actor.clone();
    }
    let password = if who == Who::Admin {
        ADMIN_PASSWORD
    } else {
        PASSWORD
    };
    let again = app.signin(&actor.email, password).await;
    if who == Who::ShadowAdmin {
        let r = again
            .post("/auth/ip-admin", json!({"tenant_id": tenant_t}))
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    again
}

async fn matrix(app: TestApp) {
    let mut w = world(&app).await;
    let routes: Vec<Route> = routes::all().collect();
    assert!(routes.len() > 50, "only {} routes", routes.len());
    let mut missing = Vec::new();
    let mut wrong = Vec::new();
    let mut cells = 0;
    for route in routes {
        let Some(policy) = policy(route) else {
            missing.push(format!("{} {}", route.method, route.path));
            continue;
        };
        let path = concrete(route, &w);
        for i in 0..w.callers.len() {
            let (who, actor) = w.callers[i].clone();
            let who = &who;
            let method = Method::from_bytes(route.method.as_bytes()).unwrap();
            let mut rb = actor.request(method.clone(), &path);
            if method != Method::GET && method != Method::DELETE {
                rb = rb.json(&json!({}));
            }
            let reply = actor.send(rb).await;
            let expected = want(policy, *who);
            let got_code = reply.code().to_owned();
            let ok = match expected {
                Want::Refused(status, code) => reply.status.as_u16() == status && got_code == code,
                Want::NotFound => reply.status == 404 && got_code == "not_found",
                Want::Allowed => {
                    reply.status != 401 && !CALLER_REFUSALS.contains(&got_code.as_str())
                }
            };
            if spends_the_session(route) {
                // Sign-out and session revocation end this and the person's other sessions.
                w.callers[i].1 = fresh(&app, *who, &actor, &w.tenant_t).await;
            }
            cells += 1;
            if !ok {
                wrong.push(format!(
                    "{} {} as {:?}: want {:?}, got {} {}",
                    route.method,
                    route.path,
                    who,
                    expected,
                    reply.status.as_u16(),
                    got_code
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "routes without a row in the access table: {missing:#?}"
    );
    assert!(
        wrong.is_empty(),
        "{} of {cells} cells wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert_eq!(cells, routes::all().count() * EVERYONE.len());
    schemes(&w).await;
    cookies_and_views(&w).await;
    bodies_and_agents(&w).await;
}

/// The extractors' body helpers and the user agent a session records: a whole-number float is
/// the integer it equals, anything else is refused, and an object field must be an object.
async fn bodies_and_agents(w: &World) {
    let member = caller(w, Who::Member);
    let key = |limits: Value| json!({"name": "b", "scopes": ["run"], "limits": limits});
    let made = member
        .post(
            "/workspace/api-keys",
            key(json!({"requests_per_minute": 7.0, "tokens_per_minute": null})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(made.body["limits"]["requests_per_minute"], json!(7));
    assert_eq!(made.body["limits"]["tokens_per_minute"], Value::Null);
    for bad in [
        json!({"requests_per_minute": 7.5}),
        json!({"requests_per_minute": 1e300}),
    ] {
        let r = member.post("/workspace/api-keys", key(bad.clone())).await;
        assert_eq!(r.status, 422, "{bad}: {}", r.text);
    }
    let r = member.post("/workspace/api-keys", key(json!([7, 7]))).await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.text.contains("a JSON object"), "{}", r.text);

    let signin = member
        .app
        .client
        .post(format!("{}/api/v1/auth/signin", member.app.base))
        .header("user-agent", "gc-access-test/1.0")
        .json(&json!({"email": member.email, "password": PASSWORD}));
    let reply = member.send(signin).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let sessions = member.get("/auth/sessions").await;
    assert!(
        sessions.body["data"]
            .as_array()
            .is_some_and(|all| all.iter().any(|s| s["user_agent"] == "gc-access-test/1.0")),
        "{}",
        sessions.text
    );
}

fn caller(w: &World, who: Who) -> Actor {
    w.callers
        .iter()
        .find(|(w, _)| *w == who)
        .map(|(_, a)| a.clone())
        .expect("every kind of caller is in the world")
}

/// What the extractors add besides the decision: cookie writes only from our own origin, the
/// Shadow view named on every answer, the client's address on the session.
async fn cookies_and_views(w: &World) {
    let member = caller(w, Who::Member);
    let Auth::Cookie(cookie) = member.auth.clone() else {
        panic!("the member signs in with a cookie");
    };
    let skill = json!({"name": "o", "content": "c"});
    for origin in [Some("https://evil.example"), None] {
        let mut rb = member
            .app
            .client
            .post(format!("{}/api/v1/workspace/skills", member.app.base))
            .header("cookie", format!("gc_session={cookie}"))
            .json(&skill);
        if let Some(origin) = origin {
            rb = rb.header("origin", origin);
        }
        let reply = member.send(rb).await;
        assert_eq!(reply.status.as_u16(), 403, "{origin:?}: {}", reply.text);
        assert_eq!(reply.code(), "origin_mismatch", "{origin:?}");
    }
    let own = member.post("/workspace/skills", skill).await;
    assert_eq!(own.status, 201, "{}", own.text);

    let shadow = caller(w, Who::ShadowAdmin);
    let reply = shadow.get("/workspace/skills").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.header("x-shadow-tenant"), Some(w.tenant_t.as_str()));
    let reply = member.get("/workspace/skills").await;
    assert_eq!(reply.header("x-shadow-tenant"), None);

    // No proxy is trusted here: a forwarded address from the peer is not believed.
    let spoofed = member
        .app
        .client
        .post(format!("{}/api/v1/auth/signin", member.app.base))
        .header("x-forwarded-for", "203.0.113.9, 198.51.100.7")
        .json(&json!({"email": member.email, "password": PASSWORD}));
    let reply = member.send(spoofed).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let sessions = member.get("/auth/sessions").await;
    assert_eq!(sessions.status, 200, "{}", sessions.text);
    let ips: Vec<&str> = sessions.body["data"]
        .as_array()
        .expect("a list of sessions")
        .iter()
        .filter_map(|s| s["ip"].as_str())
        .collect();
    assert!(
        !ips.is_empty() && ips.iter().all(|ip| *ip == "127.0.0.1"),
        "{}",
        sessions.text
    );
}

/// A key is a credential only under the Bearer scheme (in any case): the same live key under
/// another scheme is refused as unauthenticated, never read as a key.
async fn schemes(w: &World) {
    let keyed = caller(w, Who::KeyRead);
    let Auth::Bearer(key) = keyed.auth.clone() else {
        panic!("the read key's caller has no key");
    };
    let bare = Actor {
        auth: Auth::None,
        ..keyed
    };
    for (scheme, status) in [
        ("Bearer", 200),
        ("bEaReR", 200),
        ("Basic", 401),
        ("Token", 401),
        ("Bearerx", 401),
    ] {
        let rb = bare
            .request(Method::GET, "/workspace/skills")
            .header("authorization", format!("{scheme} {key}"));
        let reply = bare.send(rb).await;
        assert_eq!(reply.status.as_u16(), status, "{scheme}: {}", reply.text);
        if status == 401 {
            assert_eq!(reply.code(), "unauthenticated", "{scheme}");
        }
    }
}

async fn start(backend: Backend) -> Option<TestApp> {
    TestApp::start_with(backend, "access_matrix", |c| c.chat_completions = true).await
}

#[actix_web::test]
async fn every_route_refuses_every_caller_it_should_sqlite() {
    if let Some(app) = start(Backend::Sqlite).await {
        matrix(app).await;
    }
}

#[actix_web::test]
async fn every_route_refuses_every_caller_it_should_postgres() {
    if let Some(app) = start(Backend::Postgres).await {
        matrix(app).await;
    }
}
