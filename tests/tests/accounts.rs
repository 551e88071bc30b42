//! `/auth`: sign-up, sign-in, sessions, passwords and the throttle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_tests::*;

async fn signup(app: &TestApp, email: &str) -> reqwest::Response {
    app.client
        .post(app.url("/auth/signup"))
        .json(&json!({"email": email, "password": PASSWORD, "name": "Ann"}))
        .send()
        .await
        .unwrap()
}

both_backends! {
    async fn signup_creates_an_unassigned_member_and_signs_it_in(app: TestApp) {
        let res = signup(&app, "Ann@Example.com").await;
        assert_eq!(res.status(), 201);
        let set_cookie = res.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
        assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
        assert!(set_cookie.contains("SameSite=Lax"), "{set_cookie}");
        assert!(set_cookie.contains("Path=/"), "{set_cookie}");
        assert!(!set_cookie.contains("Secure"), "plain-http origin: {set_cookie}");
        let cookie = session_cookie(&res).unwrap();
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["email"], "ann@example.com");
        assert_eq!(body["status"], "unassigned");
        assert_eq!(body["role"], "member");
        assert_eq!(body["tenant"], Value::Null);
        assert!(body.get("password_hash").is_none());

        let me = app.anon();
        let me = Actor { auth: Auth::Cookie(cookie), ..me };
        let reply = me.get("/auth/me").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body["email"], "ann@example.com");
        assert_eq!(reply.body["shadow"], Value::Null);

        // Emails are unique whatever their case.
        let again = read(signup(&app, "ANN@example.com").await).await;
        assert_error(&again, 409, "email_taken");
    }

    async fn signup_validates_its_fields(app: TestApp) {
        let anon = app.anon();
        let cases = [
            (json!({"email": "nope", "password": PASSWORD, "name": "A"}), "email"),
            (json!({"email": "a@b.co", "password": "short", "name": "A"}), "password"),
            (json!({"email": "a@b.co", "password": "x".repeat(73), "name": "A"}), "password"),
            (json!({"email": "a@b.co", "password": PASSWORD, "name": ""}), "name"),
        ];
        for (body, field) in cases {
            let reply = anon.post("/auth/signup", body).await;
            assert_error(&reply, 422, "validation_failed");
            assert!(reply.body["error"]["message"].as_str().unwrap().contains(field), "{}", reply.text);
        }
        let reply = anon.post("/auth/signup", json!({"email": "a@b.co", "password": PASSWORD})).await;
        assert_error(&reply, 422, "validation_failed");
        assert!(reply.text.contains("name"));
        let reply = anon.post("/auth/signup", json!({"email": "a@b.co", "password": PASSWORD, "name": "A", "role": "platform_admin"})).await;
        assert_error(&reply, 422, "unknown_field");
        // A 72-byte password is accepted whole.
        let long = &"quiet lemon harbour keeps seven brass kettles near one green lantern at dusk"[..72];
        let reply = anon.post("/auth/signup", json!({"email": "long@b.co", "password": long, "name": "A"})).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        app.signin("long@b.co", long).await;
    }

    async fn guessable_passwords_are_refused_on_sign_up_and_change(app: TestApp) {
        let anon = app.anon();
        let email = "grace.hopper@example.com";
        let weak = [
            (" ".repeat(12), "spaces"),
            ("password1234".to_owned(), "common"),
            ("P@ssw0rd-2024!".to_owned(), "common"),
            ("123456789012".to_owned(), "sequence"),
            ("abababababab".to_owned(), "different"),
            (email.to_owned(), "email"),
            ("Grace.Hopper-1906".to_owned(), "email"),
        ];
        for (password, why) in &weak {
            let reply = anon.post("/auth/signup", json!({"email": email, "password": password, "name": "Grace"})).await;
            assert_error(&reply, 422, "validation_failed");
            let message = reply.body["error"]["message"].as_str().unwrap();
            assert!(message.contains("password") && message.contains(why), "{password:?}: {}", reply.text);
        }
        // The account was never made; a sound password makes it.
        let reply = anon.post("/auth/signup", json!({"email": email, "password": PASSWORD, "name": "Grace"})).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        let grace = app.signin(email, PASSWORD).await;
        for (password, why) in &weak {
            let reply = grace.post("/auth/change-password", json!({"current_password": PASSWORD, "new_password": password})).await;
            assert_error(&reply, 422, "validation_failed");
            let message = reply.body["error"]["message"].as_str().unwrap();
            assert!(message.contains("new_password") && message.contains(why), "{password:?}: {}", reply.text);
        }
        // Nothing was changed: the old password still signs in.
        app.signin(email, PASSWORD).await;
        // An administrator cannot give an account a guessable password either.
        let admin = app.admin().await;
        let reply = admin.post("/admin/users", json!({"email": "ada@example.com", "name": "Ada", "password": "ada@example.com"})).await;
        assert_error(&reply, 422, "validation_failed");
        let reply = admin.post("/admin/users", json!({"email": "ada@example.com", "name": "Ada", "password": "letmein!2024"})).await;
        assert_error(&reply, 422, "validation_failed");
    }

    async fn signin_refuses_wrong_passwords_and_unknown_emails_alike(app: TestApp) {
        signup(&app, "bob@example.com").await;
        let anon = app.anon();
        let wrong = anon.post("/auth/signin", json!({"email": "bob@example.com", "password": "wrong-password-1"})).await;
        let unknown = anon.post("/auth/signin", json!({"email": "nobody@example.com", "password": "wrong-password-1"})).await;
        assert_error(&wrong, 401, "invalid_credentials");
        assert_error(&unknown, 401, "invalid_credentials");
        assert_eq!(wrong.body["error"]["message"], unknown.body["error"]["message"]);
        assert!(wrong.header("set-cookie").is_none());
        // Every sign-in makes a new session.
        let a = app.signin("bob@example.com", PASSWORD).await;
        let b = app.signin("BOB@example.com", PASSWORD).await;
        assert_ne!(a.cookie(), b.cookie());
    }

    async fn five_failures_lock_the_email_even_for_the_right_password(app: TestApp) {
        signup(&app, "carol@example.com").await;
        let anon = app.anon();
        for _ in 0..5 {
            let r = anon.post("/auth/signin", json!({"email": "carol@example.com", "password": "not-the-password"})).await;
            assert_error(&r, 401, "invalid_credentials");
        }
        let locked = anon.post("/auth/signin", json!({"email": "Carol@example.com", "password": PASSWORD})).await;
        assert_error(&locked, 429, "too_many_attempts");
        let retry: u64 = locked.header("retry-after").unwrap().parse().unwrap();
        assert!(retry > 0 && retry <= 900, "{retry}");
        // Another email is not affected.
        signup(&app, "dave@example.com").await;
        app.signin("dave@example.com", PASSWORD).await;
    }

    async fn a_successful_signin_resets_the_failure_count(app: TestApp) {
        signup(&app, "erin@example.com").await;
        let anon = app.anon();
        for _ in 0..4 {
            anon.post("/auth/signin", json!({"email": "erin@example.com", "password": "not-the-password"})).await;
        }
        app.signin("erin@example.com", PASSWORD).await;
        for _ in 0..4 {
            anon.post("/auth/signin", json!({"email": "erin@example.com", "password": "not-the-password"})).await;
        }
        app.signin("erin@example.com", PASSWORD).await;
    }

    async fn sessions_are_listed_and_revoked(app: TestApp) {
        signup(&app, "fay@example.com").await;
        let one = app.signin("fay@example.com", PASSWORD).await;
        let two = app.signin("fay@example.com", PASSWORD).await;
        let three = app.signin("fay@example.com", PASSWORD).await;
        let list = one.get("/auth/sessions").await;
        assert_eq!(list.status, 200);
        let data = list.body["data"].as_array().unwrap();
        assert_eq!(data.len(), 4);
        assert_eq!(data.iter().filter(|s| s["current"] == true).count(), 1);
        for field in ["id", "created_at", "last_seen_at", "expires_at", "user_agent", "ip"] {
            assert!(data[0].get(field).is_some(), "{field}");
        }
        // Revoke one session of the caller's by id.
        let two_id = two.get("/auth/sessions").await.body["data"].as_array().unwrap().iter()
            .find(|s| s["current"] == true).unwrap()["id"].as_str().unwrap().to_owned();
        let r = one.delete(&format!("/auth/sessions?id={two_id}")).await;
        assert_eq!(r.status, 204);
        assert_error(&two.get("/auth/me").await, 401, "unauthenticated");
        // Someone else's session id is 404.
        signup(&app, "gus@example.com").await;
        let gus = app.signin("gus@example.com", PASSWORD).await;
        let gus_id = gus.get("/auth/sessions").await.body["data"][0]["id"].as_str().unwrap().to_owned();
        assert_error(&one.delete(&format!("/auth/sessions?id={gus_id}")).await, 404, "not_found");
        assert_eq!(gus.get("/auth/me").await.status, 200);
        // Revoke all others.
        assert_eq!(one.delete("/auth/sessions").await.status, 204);
        assert_error(&three.get("/auth/me").await, 401, "unauthenticated");
        assert_eq!(one.get("/auth/me").await.status, 200);
        assert_eq!(one.get("/auth/sessions").await.body["data"].as_array().unwrap().len(), 1);
    }

    async fn signout_ends_the_session_and_expires_the_cookie(app: TestApp) {
        signup(&app, "hal@example.com").await;
        let hal = app.signin("hal@example.com", PASSWORD).await;
        let r = hal.send(hal.request(Method::POST, "/auth/signout")).await;
        assert_eq!(r.status, 204);
        let cookie = r.header("set-cookie").unwrap();
        assert!(cookie.starts_with("gc_session=;") || cookie.contains("Max-Age=0"), "{cookie}");
        assert_error(&hal.get("/auth/me").await, 401, "unauthenticated");
    }

    async fn change_password_revokes_other_sessions(app: TestApp) {
        signup(&app, "ida@example.com").await;
        let a = app.signin("ida@example.com", PASSWORD).await;
        let b = app.signin("ida@example.com", PASSWORD).await;
        let wrong = a.post("/auth/change-password", json!({"current_password": "nope-nope-nope", "new_password": "a-new-password-1"})).await;
        assert_error(&wrong, 422, "validation_failed");
        let short = a.post("/auth/change-password", json!({"current_password": PASSWORD, "new_password": "short"})).await;
        assert_error(&short, 422, "validation_failed");
        let ok = a.post("/auth/change-password", json!({"current_password": PASSWORD, "new_password": "a-new-password-1"})).await;
        assert_eq!(ok.status, 204, "{}", ok.text);
        assert_eq!(a.get("/auth/me").await.status, 200);
        assert_error(&b.get("/auth/me").await, 401, "unauthenticated");
        let anon = app.anon();
        assert_error(&anon.post("/auth/signin", json!({"email": "ida@example.com", "password": PASSWORD})).await, 401, "invalid_credentials");
        app.signin("ida@example.com", "a-new-password-1").await;
    }

    async fn patch_me_renames(app: TestApp) {
        signup(&app, "jo@example.com").await;
        let jo = app.signin("jo@example.com", PASSWORD).await;
        let r = jo.patch("/auth/me", json!({"name": "Jo Q"})).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["name"], "Jo Q");
        assert_eq!(jo.get("/auth/me").await.body["name"], "Jo Q");
        assert_error(&jo.patch("/auth/me", json!({"name": ""})).await, 422, "validation_failed");
        assert_error(&jo.patch("/auth/me", json!({"email": "x@y.z"})).await, 422, "unknown_field");
    }

    async fn cookie_writes_need_the_service_origin(app: TestApp) {
        signup(&app, "kim@example.com").await;
        let kim = app.signin("kim@example.com", PASSWORD).await;
        let cookie = kim.cookie().unwrap().to_owned();
        for origin in [None, Some("http://evil.example"), Some("http://127.0.0.1:8080.evil")] {
            let mut rb = app.client.patch(app.url("/auth/me"))
                .header("cookie", format!("gc_session={cookie}"))
                .json(&json!({"name": "X"}));
            if let Some(o) = origin {
                rb = rb.header("origin", o);
            }
            assert_error(&read(rb.send().await.unwrap()).await, 403, "origin_mismatch");
        }
        // Reads need no Origin.
        let r = read(app.client.get(app.url("/auth/me")).header("cookie", format!("gc_session={cookie}")).send().await.unwrap()).await;
        assert_eq!(r.status, 200);
    }

    async fn bad_credentials_are_401(app: TestApp) {
        let anon = app.anon();
        assert_error(&anon.get("/auth/me").await, 401, "unauthenticated");
        let forged = Actor { auth: Auth::Cookie("A".repeat(43)), ..app.anon() };
        assert_error(&forged.get("/auth/me").await, 401, "unauthenticated");
        let junk = Actor { auth: Auth::Cookie("junk".into()), ..app.anon() };
        assert_error(&junk.get("/auth/me").await, 401, "unauthenticated");
        let r = read(app.client.get(app.url("/auth/me")).header("authorization", "Basic abc").send().await.unwrap()).await;
        assert_error(&r, 401, "unauthenticated");
    }
}

#[actix_web::test]
async fn closed_signup_is_refused() {
    let Some(app) = TestApp::start_with(Backend::Sqlite, "closed_signup", |c| {
        c.signup = "closed".into()
    })
    .await
    else {
        return;
    };
    let r = read(signup(&app, "x@example.com").await).await;
    assert_error(&r, 403, "signup_disabled");
}

/// A session unused for longer than the idle time-out is refused, on both databases.
#[actix_web::test]
async fn an_idle_session_expires() {
    use gc_domain::ports::SessionRepo;
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let Some(app) = TestApp::start(backend, "idle_session").await else {
            continue;
        };
        let admin = app.admin().await;
        assert_eq!(admin.get("/auth/me").await.status, 200);
        let sessions = admin.get("/auth/sessions").await;
        let id: uuid::Uuid = sessions.body["data"][0]["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        // Another process (a second node) sees the same database: make the session 25 hours idle.
        let store = gc_server::open_store(&app.config).unwrap();
        store
            .touch_session(id, chrono::Utc::now() - chrono::Duration::hours(25))
            .unwrap();
        assert_error(&admin.get("/auth/me").await, 401, "unauthenticated");
        // A fresh sign-in works.
        assert_eq!(app.admin().await.get("/auth/me").await.status, 200);
    }
}

/// Behind https the session cookie is `Secure`, and writes must come from that origin.
#[actix_web::test]
async fn an_https_origin_makes_cookies_secure() {
    let Some(app) = TestApp::start_with(Backend::Sqlite, "https_origin", |c| {
        c.public_origin = "https://gc.example".into()
    })
    .await
    else {
        return;
    };
    let res = signup(&app, "sec@example.com").await;
    let set_cookie = res
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(set_cookie.contains("Secure"), "{set_cookie}");
    let cookie = session_cookie(&res).unwrap();
    let patch = |origin: &'static str| {
        app.client
            .patch(app.url("/auth/me"))
            .header("cookie", format!("gc_session={cookie}"))
            .header("origin", origin)
            .json(&json!({"name": "S"}))
            .send()
    };
    assert_error(
        &read(patch("http://127.0.0.1:8080").await.unwrap()).await,
        403,
        "origin_mismatch",
    );
    assert_eq!(patch("https://gc.example").await.unwrap().status(), 200);
}
