//! Every password check is limited, not only sign-in (decision 0026): change-password goes
//! through the per-IP limits of sign-in plus one check in flight per account, so one account
//! cannot fill the hashing queue; and a sign-in flood from many addresses leaves places of the
//! queue (`GC_HASH_RESERVED`) to callers who already have a session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use gc_server::Config;
use gc_tests::*;
use tokio::sync::mpsc;

/// `POST path` with `body` by `actor` from client `ip`, as the trusted proxy on loopback
/// reports it.
async fn post_from(actor: &Actor, ip: &str, path: &str, body: &Value) -> Reply {
    actor
        .send(
            actor
                .request(Method::POST, path)
                .header("x-forwarded-for", ip)
                .json(body),
        )
        .await
}

/// Slow hashes and the default queue (cores − 1 hashing, 4 waiting); the production limits
/// per client IP, with a rate that never binds; client IPs from the trusted proxy.
fn slow_hashing(c: &mut Config) {
    c.bcrypt_cost = 10;
    c.hash_queue = 4;
    c.hash_reserved = 2;
    c.auth_per_ip_in_flight = 1;
    c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
}

/// Sends `n` requests at once (made by `request(i)`) and returns a receiver of their replies
/// in the order they come back.
fn burst<F, Fut>(n: usize, request: F) -> mpsc::UnboundedReceiver<Reply>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Reply> + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    for i in 0..n {
        let tx = tx.clone();
        let fut = request(i);
        tokio::spawn(async move {
            let _ = tx.send(fut.await);
        });
    }
    rx
}

/// Waits (bounded) for `n` replies of a burst.
async fn first_replies(rx: &mut mpsc::UnboundedReceiver<Reply>, n: usize) -> Vec<Reply> {
    let mut out = Vec::new();
    while out.len() < n {
        let r = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("the burst's replies come back")
            .expect("a reply");
        out.push(r);
    }
    out
}

both_backends_with! {
    async fn one_account_hammering_change_password_leaves_sign_in_alone(app: TestApp) with slow_hashing; {
        let admin = app.admin().await;
        let tenant = app.tenant(&admin, "Acme", "AIHK").await;
        let hammer = app.member_of(&admin, &tenant).await;
        let other = app.member_of(&admin, &tenant).await;
        // Twelve change-passwords at once from one account and address (the right current
        // password, so the failure lock never answers first).
        let body = json!({"current_password": PASSWORD, "new_password": PASSWORD});
        let mut replies = burst(12, |_| {
            let (hammer, body) = (hammer.clone(), body.clone());
            async move { post_from(&hammer, "198.51.100.20", "/auth/change-password", &body).await }
        });
        // Those refused at once have come back; the admitted ones are hashing.
        let mut seen = first_replies(&mut replies, 7).await;
        // Another member signs in from elsewhere meanwhile: the hammering account holds one
        // place of the hashing queue at most, so there is room.
        let signin = post_from(
            &app.anon(),
            "203.0.113.21",
            "/auth/signin",
            &json!({"email": other.email, "password": PASSWORD}),
        )
        .await;
        assert_eq!(signin.status, 200, "another user's sign-in: {}", signin.text);
        seen.extend(first_replies(&mut replies, 5).await);
        let (mut changed, mut refused) = (0, 0);
        for r in &seen {
            match r.status.as_u16() {
                204 => changed += 1,
                _ => {
                    // Refused at once for the address's or the account's check in flight,
                    // never by filling the queue.
                    assert_error(r, 429, "rate_limited");
                    assert_eq!(r.header("retry-after"), Some("1"), "{}", r.text);
                    refused += 1;
                }
            }
        }
        assert!(changed >= 1 && refused >= 1, "changed {changed}, refused {refused}");
        // From two addresses at once, the account still has one check in flight.
        let mut refused_for_account = None;
        for _ in 0..5 {
            let (a, b) = tokio::join!(
                post_from(&hammer, "198.51.100.22", "/auth/change-password", &body),
                post_from(&hammer, "198.51.100.23", "/auth/change-password", &body),
            );
            if let Some(r) = [a, b].into_iter().find(|r| r.status == 429) {
                refused_for_account = Some(r);
                break;
            }
        }
        let r = refused_for_account.expect("a second check of one account in flight is refused");
        assert_error(&r, 429, "rate_limited");
        assert!(r.body["error"]["message"].as_str().unwrap().contains("account"), "{}", r.text);
        // The places come back: the account changes its password again.
        let r = post_from(&hammer, "198.51.100.20", "/auth/change-password", &body).await;
        assert_eq!(r.status, 204, "{}", r.text);
    }

    async fn a_many_address_sign_in_flood_leaves_change_password_a_place(app: TestApp) with slow_hashing; {
        let admin = app.admin().await;
        let tenant = app.tenant(&admin, "Acme", "AIHK").await;
        let member = app.member_of(&admin, &tenant).await;
        // Sixty sign-ins at once, each from its own address (within every per-IP limit).
        let anon = app.anon();
        let mut replies = burst(60, |i| {
            let anon = anon.clone();
            async move {
                post_from(
                    &anon,
                    &format!("198.18.{}.{}", i / 200, i % 200 + 1),
                    "/auth/signin",
                    &json!({"email": format!("flood{i}@gc.test"), "password": "not-the-password-1"}),
                )
                .await
            }
        });
        // The flood has taken every place sign-ins may take; the rest were refused.
        let mut seen = first_replies(&mut replies, 55).await;
        assert!(seen.iter().any(|r| r.status == 503), "the flood fills the queue");
        // A member with a session changes the password meanwhile: a place is kept for it.
        let r = post_from(
            &member,
            "203.0.113.30",
            "/auth/change-password",
            &json!({"current_password": PASSWORD, "new_password": "a-new-password-1"}),
        )
        .await;
        assert_eq!(r.status, 204, "change-password during the flood: {}", r.text);
        seen.extend(first_replies(&mut replies, 5).await);
        for r in &seen {
            match r.status.as_u16() {
                401 => assert_error(r, 401, "invalid_credentials"),
                _ => assert_error(r, 503, "busy"),
            }
        }
        app.signin(&member.email, "a-new-password-1").await;
    }
}

both_backends! {
    async fn the_bootstrap_admin_password_follows_the_policy_when_it_is_used(app: TestApp) {
        // A deployment whose admin exists starts whatever its (no longer used) bootstrap
        // password is: existing passwords are not re-checked.
        let (mut config, db) = app.stop().await;
        config.bootstrap_admin_password = Some("password1234".into());
        let app = TestApp::start_on(config, db);
        app.admin().await;
        // On a fresh database, the weak bootstrap password is refused at start.
        let (url, _db) = fresh_database(Backend::Sqlite, "weak_bootstrap").unwrap();
        let mut fresh = test_config(&url);
        fresh.bootstrap_admin_password = Some("password1234".into());
        match gc_server::build_state(&fresh) {
            Ok(_) => panic!("a common bootstrap password was accepted"),
            Err(e) => assert!(format!("{e:#}").contains("too common"), "{e:#}"),
        }
    }
}
