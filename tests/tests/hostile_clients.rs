//! Hostile clients: a sign-in flood from one address (its rate, and one password check in
//! flight), a full password-hashing queue, the bounded per-IP tables and their shared overflow
//! allowance (sign-in and anonymous Guard scans, filled through a trusted proxy's
//! `X-Forwarded-For`), and slow clients (slowloris on headers and on bodies) that must not hold
//! their connections.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use gc_server::Config;
use gc_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn signin_body(email: &str) -> Value {
    json!({"email": email, "password": "not-the-password-1"})
}

/// `POST path` with `body` from client `ip`, as the trusted proxy on loopback reports it.
async fn post_from(anon: &Actor, ip: &str, path: &str, body: &Value) -> Reply {
    anon.send(
        anon.request(Method::POST, path)
            .header("x-forwarded-for", ip)
            .json(body),
    )
    .await
}

both_backends_with! {
    async fn signin_and_signup_are_limited_per_client_ip(app: TestApp) with |c: &mut Config| {
        c.auth_per_ip_per_min = 3;
        c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    }; {
        let anon = app.anon();
        for i in 0..3 {
            let r = anon.post("/auth/signin", signin_body(&format!("nobody{i}@gc.test"))).await;
            assert_error(&r, 401, "invalid_credentials");
        }
        let r = anon.post("/auth/signin", signin_body("nobody@gc.test")).await;
        assert_error(&r, 429, "rate_limited");
        assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
        // Sign-up shares the allowance.
        let r = anon.post("/auth/signup", json!({"email": "new@gc.test", "password": "a-long-password-1", "name": "N"})).await;
        assert_error(&r, 429, "rate_limited");
        // Another client behind the trusted proxy has its own allowance.
        let other = read(app.client.post(app.url("/auth/signin"))
            .header("x-forwarded-for", "203.0.113.77")
            .json(&signin_body("nobody@gc.test")).send().await.unwrap()).await;
        assert_error(&other, 401, "invalid_credentials");
    }

    async fn a_full_hashing_queue_answers_busy_at_once(app: TestApp) with |c: &mut Config| {
        // Slow hashes and no waiting places: concurrent sign-ins beyond the hashing threads
        // are refused rather than queued.
        c.bcrypt_cost = 13;
        c.hash_queue = 0;
    }; {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let attempts: Vec<_> = (0..(4 * cores + 4))
            .map(|i| {
                let anon = app.anon();
                tokio::spawn(async move { anon.post("/auth/signin", signin_body(&format!("flood{i}@gc.test"))).await })
            })
            .collect();
        let mut busy = 0;
        for a in attempts {
            let r = a.await.unwrap();
            match r.status.as_u16() {
                401 => assert_error(&r, 401, "invalid_credentials"),
                _ => {
                    assert_error(&r, 503, "busy");
                    assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
                    busy += 1;
                }
            }
        }
        assert!(busy > 0, "some sign-ins found the queue full");
        // The queue drains: a sign-in afterwards is checked.
        app.admin().await;
    }

    async fn one_client_has_one_password_check_in_flight(app: TestApp) with |c: &mut Config| {
        // Slow hashes, one waiting place, a rate that never binds: what limits the flooder
        // is its one check in flight.
        c.bcrypt_cost = 11;
        c.hash_queue = 1;
        // Both places for sign-ins (the places kept for sessions have their own test,
        // password_limits.rs).
        c.hash_reserved = 0;
        c.auth_per_ip_in_flight = 1;
        c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    }; {
        let anon = app.anon();
        let flood: Vec<_> = (0..8)
            .map(|i| {
                let anon = app.anon();
                tokio::spawn(async move {
                    post_from(&anon, "198.51.100.7", "/auth/signin", &signin_body(&format!("flood{i}@gc.test"))).await
                })
            })
            .collect();
        // Another client signs in meanwhile: it finds a place in the hashing queue, because
        // the flooder holds one at most.
        let other = post_from(&anon, "203.0.113.8", "/auth/signin", &signin_body("other@gc.test")).await;
        assert_error(&other, 401, "invalid_credentials");
        let (mut checked, mut refused) = (0, 0);
        for f in flood {
            let r = f.await.unwrap();
            match r.status.as_u16() {
                401 => checked += 1,
                _ => {
                    // Refused at once, never 503 busy: one client cannot fill the queue.
                    assert_error(&r, 429, "rate_limited");
                    assert_eq!(r.header("retry-after"), Some("1"));
                    assert!(r.body["error"]["message"].as_str().unwrap().contains("already being checked"), "{}", r.text);
                    refused += 1;
                }
            }
        }
        assert!(checked >= 1 && refused >= 1, "checked {checked}, refused {refused}");
        // The place is given back when the check is done.
        let r = post_from(&anon, "198.51.100.7", "/auth/signin", &signin_body("again@gc.test")).await;
        assert_error(&r, 401, "invalid_credentials");
    }

    async fn the_sign_in_table_overflow_is_one_shared_allowance(app: TestApp) with |c: &mut Config| {
        // Three clients remembered, two sign-ins a minute each.
        c.per_ip_clients_max = 3;
        c.auth_per_ip_per_min = 2;
        c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    }; {
        let anon = app.anon();
        // A new unknown email each time, so the per-account lock never answers first.
        let body = || signin_body(&format!("{}@gc.test", unique()));
        for ip in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
            assert_error(&post_from(&anon, ip, "/auth/signin", &body()).await, 401, "invalid_credentials");
        }
        // The table is full of active clients: newcomers share one allowance of two.
        assert_error(&post_from(&anon, "192.0.2.4", "/auth/signin", &body()).await, 401, "invalid_credentials");
        assert_error(&post_from(&anon, "192.0.2.5", "/auth/signin", &body()).await, 401, "invalid_credentials");
        let r = post_from(&anon, "192.0.2.6", "/auth/signin", &body()).await;
        assert_error(&r, 429, "rate_limited");
        assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
        assert_error(&post_from(&anon, "192.0.2.4", "/auth/signin", &body()).await, 429, "rate_limited");
        // Sign-up draws on the same shared allowance.
        let signup = json!({"email": "new@gc.test", "password": "a-long-password-1", "name": "N"});
        assert_error(&post_from(&anon, "2001:db8::1", "/auth/signup", &signup).await, 429, "rate_limited");
        // A remembered client keeps its own allowance, and is not pushed out.
        assert_error(&post_from(&anon, "192.0.2.1", "/auth/signin", &body()).await, 401, "invalid_credentials");
        assert_error(&post_from(&anon, "192.0.2.1", "/auth/signin", &body()).await, 429, "rate_limited");
    }

    async fn the_anonymous_guard_table_overflow_is_one_shared_allowance(app: TestApp) with |c: &mut Config| {
        c.per_ip_clients_max = 2;
        c.guard_anon_per_min = 1;
        c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    }; {
        let anon = app.anon();
        let scan = json!({"target": "Summarise the notes the user pastes.", "mode": "skill"});
        for ip in ["192.0.2.1", "192.0.2.2"] {
            let r = post_from(&anon, ip, "/guard/scan", &scan).await;
            assert_eq!(r.status.as_u16(), 200, "{}", r.text);
        }
        // Full: the next newcomer gets the overflow allowance, the one after shares it.
        let r = post_from(&anon, "192.0.2.3", "/guard/scan", &scan).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.text);
        for ip in ["192.0.2.4", "2001:db8::4", "192.0.2.3"] {
            let r = post_from(&anon, ip, "/guard/scan", &scan).await;
            assert_error(&r, 429, "rate_limited");
            assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
        }
        // Remembered clients keep their own (spent) allowances.
        assert_error(&post_from(&anon, "192.0.2.1", "/guard/scan", &scan).await, 429, "rate_limited");
    }

    async fn a_slow_body_is_cut_at_its_deadline(app: TestApp) with |c: &mut Config| {
        c.body_timeout_s = 1;
    }; {
        let mut conn = TcpStream::connect(app.addr).await.unwrap();
        conn.write_all(b"POST /api/v1/auth/signin HTTP/1.1\r\nHost: gc\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{").await.unwrap();
        let (closed, answer) = dribble(&mut conn, 30).await;
        assert!(closed, "the connection is closed at the deadline, not held: {answer}");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("request_timeout"), "{answer}");
    }

    async fn slow_headers_are_cut_at_their_deadline(app: TestApp) with |c: &mut Config| {
        c.header_timeout_s = 1;
    }; {
        let mut conn = TcpStream::connect(app.addr).await.unwrap();
        conn.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\nX-Slow: ").await.unwrap();
        let (closed, answer) = dribble(&mut conn, 30).await;
        assert!(closed, "the connection is closed at the header deadline: {answer}");
        // With the API's error body and a request id, as every other error.
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
        assert!(answer.contains("x-request-id: "), "{answer}");
    }

    async fn a_slow_later_head_on_a_kept_alive_connection_is_cut_too(app: TestApp) with |c: &mut Config| {
        c.keep_alive_s = 1;
        c.header_timeout_s = 1;
    }; {
        // actix-http bounds only the first head; once a byte of a later one has arrived it
        // stops the keep-alive timer. gc hands a head on only when it is whole, so the
        // keep-alive timer still runs while a later head dribbles in.
        let mut conn = TcpStream::connect(app.addr).await.unwrap();
        conn.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\n\r\n").await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await.unwrap().unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
        conn.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\nX-Slow: ").await.unwrap();
        let started = std::time::Instant::now();
        let (closed, answer) = dribble(&mut conn, 30).await;
        assert!(closed, "the connection is closed, not held: {answer}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }
}

/// Sends one byte a second, at most `max` of them, reading whatever comes back; stops when
/// the server closes the connection. Returns whether it did, and what it answered.
async fn dribble(conn: &mut TcpStream, max: usize) -> (bool, String) {
    let mut answer = Vec::new();
    for _ in 0..max {
        let mut buf = [0u8; 4096];
        // Read for up to a second (the pace of the slow client).
        match tokio::time::timeout(Duration::from_secs(1), conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (true, String::from_utf8_lossy(&answer).into_owned()),
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                continue;
            }
            Err(_) => {}
        }
        if conn.write_all(b" ").await.is_err() {
            return (true, String::from_utf8_lossy(&answer).into_owned());
        }
    }
    (false, String::from_utf8_lossy(&answer).into_owned())
}
