//! Workspace API keys: creation, listing and revocation (session only), every scope against
//! every route class, and the ways a key stops working, on both databases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_tests::*;

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// CRC-32 (IEEE), as the key format uses it; written out here so the tests do not lean on the
/// code under test.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn base62_6(mut n: u32) -> String {
    let mut out = vec![b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(out).unwrap()
}

/// A key with the right shape and a correct checksum that was never issued.
fn well_formed_unknown_key() -> String {
    let body: String = (0..43).map(|i| BASE62[(i * 7 + 3) % 62] as char).collect();
    format!("gc_{body}{}", base62_6(crc32(body.as_bytes())))
}

async fn create_key(member: &Actor, name: &str, scopes: &[&str]) -> (String, String) {
    let r = member
        .post(
            "/workspace/api-keys",
            json!({"name": name, "scopes": scopes}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    (
        r.body["id"].as_str().unwrap().to_owned(),
        r.body["key"].as_str().unwrap().to_owned(),
    )
}

/// Builds one of each record so every item route has a target; returns the item paths.
async fn fixtures(m: &Actor) -> (String, String, String, String) {
    let skill = m
        .post("/workspace/skills", json!({"name": "s", "content": "c"}))
        .await;
    let coll = m.post("/workspace/memory", json!({"name": "c"})).await;
    let cid = coll.body["id"].as_str().unwrap().to_owned();
    let src = m
        .post(
            &format!("/workspace/memory/{cid}/sources"),
            json!({"title": "t", "kind": "text", "content": "x"}),
        )
        .await;
    let draft = m
        .post("/workspace/drafts/agents", json!({"name": "a"}))
        .await;
    (
        format!("/workspace/skills/{}", skill.body["id"].as_str().unwrap()),
        format!("/workspace/memory/{cid}"),
        format!(
            "/workspace/memory/{cid}/sources/{}",
            src.body["id"].as_str().unwrap()
        ),
        format!(
            "/workspace/drafts/agents/{}",
            draft.body["id"].as_str().unwrap()
        ),
    )
}

both_backends! {
    async fn keys_are_created_once_listed_without_secrets_and_revoked(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        let r = m.post("/workspace/api-keys", json!({"name": " ci ", "scopes": ["workspace:read", "run", "workspace:read"],
            "expires_at": "2099-01-01T00:00:00Z"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let secret = r.body["key"].as_str().unwrap().to_owned();
        assert!(secret.starts_with("gc_") && secret.len() == 52, "{secret}");
        assert!(secret[3..].bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(r.body["name"], "ci");
        assert_eq!(r.body["scopes"], json!(["workspace:read", "run"]), "duplicates collapse");
        assert_eq!(r.body["hint"], format!("gc_…{}", &secret[secret.len() - 4..]));
        assert_eq!(r.body["expires_at"], "2099-01-01T00:00:00Z");
        assert_eq!(r.body["revoked_at"], Value::Null);
        assert_eq!(r.body["last_used_at"], Value::Null);
        let id = r.body["id"].as_str().unwrap().to_owned();

        let list = m.get("/workspace/api-keys").await;
        assert_eq!(list.status, 200, "{}", list.text);
        assert!(!list.text.contains(&secret), "the list never holds the secret");
        assert!(!list.text.contains(&secret[3..40]));
        let k = &list.body["data"][0];
        let mut fields: Vec<&str> = k.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["created_at", "expires_at", "hint", "id", "last_used_at", "limits", "name", "revoked_at", "scopes"]);
        assert_eq!(k["limits"], json!({"requests_per_minute": null, "tokens_per_minute": null, "monthly_spend": null}));
        assert_eq!(list.body["next_cursor"], Value::Null);

        // The key works, and its use is recorded (at most once a minute).
        let key = m.with_key(&secret);
        let ws = key.get("/workspace").await;
        assert_eq!(ws.status, 200, "{}", ws.text);
        assert_eq!(ws.body["member"]["id"].as_str(), Some(m.id.as_str()));
        assert_eq!(ws.body["counts"]["api_keys"], 1);
        let used = m.get("/workspace/api-keys").await;
        assert!(used.body["data"][0]["last_used_at"].is_string(), "{}", used.text);

        // Revocation: immediate, once.
        let d = m.delete(&format!("/workspace/api-keys/{id}")).await;
        assert_eq!(d.status, 204, "{}", d.text);
        assert_error(&key.get("/workspace").await, 401, "invalid_api_key");
        assert_error(&m.delete(&format!("/workspace/api-keys/{id}")).await, 404, "not_found");
        assert_error(&m.delete("/workspace/api-keys/0190f0f0-0000-7000-8000-000000000000").await, 404, "not_found");
        let after = m.get("/workspace/api-keys").await;
        assert!(after.body["data"][0]["revoked_at"].is_string());
        let feed = m.get("/workspace/activity").await;
        let actions: Vec<&str> = feed.body["data"].as_array().unwrap().iter().map(|l| l["action"].as_str().unwrap()).collect();
        assert_eq!(actions, ["api_key.revoke", "api_key.create"]);
        assert!(!feed.text.contains(&secret));

        // Another tenant cannot see or revoke it.
        let globex = app.tenant(&admin, "Globex", "AICA").await;
        let g = app.member_of(&admin, &globex).await;
        let (gid, _) = create_key(&g, "theirs", &["run"]).await;
        assert_error(&m.delete(&format!("/workspace/api-keys/{gid}")).await, 404, "not_found");
        assert_eq!(g.get("/workspace/api-keys").await.body["data"].as_array().unwrap().len(), 1);
        assert_eq!(m.get("/workspace/api-keys").await.body["data"].as_array().unwrap().len(), 1);

        // Pagination.
        for i in 0..3 {
            create_key(&m, &format!("k{i}"), &["run"]).await;
        }
        let page = m.get("/workspace/api-keys?limit=2").await;
        let names: Vec<&str> = page.body["data"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["k2", "k1"]);
        let cursor = page.body["next_cursor"].as_str().unwrap();
        let rest = m.get(&format!("/workspace/api-keys?limit=2&cursor={cursor}")).await;
        let names: Vec<&str> = rest.body["data"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["k0", "ci"]);
    }

    async fn key_bodies_are_validated(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        let cases = [
            (json!({"name": "k", "scopes": []}), "validation_failed", "scopes"),
            (json!({"name": "k", "scopes": ["admin"]}), "validation_failed", "scopes"),
            (json!({"name": "k", "scopes": "run"}), "validation_failed", ""),
            (json!({"name": "k"}), "validation_failed", "scopes"),
            (json!({"scopes": ["run"]}), "validation_failed", "name"),
            (json!({"name": "", "scopes": ["run"]}), "validation_failed", "name"),
            (json!({"name": "x".repeat(101), "scopes": ["run"]}), "validation_failed", "name"),
            (json!({"name": "k", "scopes": ["run"], "expires_at": "2020-01-01T00:00:00Z"}), "validation_failed", "expires_at"),
            (json!({"name": "k", "scopes": ["run"], "expires_at": "next tuesday"}), "validation_failed", "expires_at"),
            (json!({"name": "k", "scopes": ["run"], "owner": "me"}), "unknown_field", "owner"),
        ];
        for (body, code, field) in cases {
            let r = m.post("/workspace/api-keys", body.clone()).await;
            assert_error(&r, 422, code);
            assert!(r.body["error"]["message"].as_str().unwrap().contains(field), "{body}: {}", r.text);
        }
        assert_eq!(m.get("/workspace/api-keys").await.body["data"], json!([]));
        // A null expiry means none.
        let r = m.post("/workspace/api-keys", json!({"name": "k", "scopes": ["run"], "expires_at": null})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.body["expires_at"], Value::Null);
    }

    async fn every_scope_against_every_route_class(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        let (skill, coll, source, draft) = fixtures(&m).await;
        let reads = vec![
            "/workspace".to_owned(), "/workspace/settings".into(), "/workspace/activity".into(),
            "/workspace/skills".into(), skill.clone(), "/workspace/memory".into(), coll.clone(),
            format!("{coll}/sources"), source.clone(), "/workspace/drafts/agents".into(), draft.clone(),
            "/workspace/ai-access".into(), "/workspace/ai-access/guide".into(),
        ];
        let writes: Vec<(Method, String, Value)> = vec![
            (Method::POST, "/workspace/skills".into(), json!({"name": "k", "content": "c"})),
            (Method::PATCH, skill.clone(), json!({"description": "k"})),
            (Method::POST, "/workspace/memory".into(), json!({"name": "k"})),
            (Method::PATCH, coll.clone(), json!({"description": "k"})),
            (Method::POST, format!("{coll}/sources"), json!({"title": "k", "kind": "note", "content": "k"})),
            (Method::PATCH, source.clone(), json!({"content": "k"})),
            (Method::POST, "/workspace/drafts/apps".into(), json!({"name": "k"})),
            (Method::PATCH, draft.clone(), json!({"description": "k"})),
            (Method::PATCH, "/workspace/settings".into(), json!({"display_name": "k"})),
        ];
        let deletes = vec![source.clone(), draft.clone(), skill.clone(), coll.clone()];

        let mut keys = Vec::new();
        for scope in ["workspace:read", "workspace:write", "guard:scan", "run"] {
            let (_, secret) = create_key(&m, scope, &[scope]).await;
            keys.push((scope, m.with_key(&secret)));
        }
        let (_, all) = create_key(&m, "all", &["workspace:read", "workspace:write", "guard:scan", "run"]).await;
        let all = m.with_key(&all);

        for (scope, key) in &keys {
            for path in &reads {
                let r = key.get(path).await;
                if *scope == "workspace:read" {
                    assert_eq!(r.status, 200, "{scope} GET {path}: {}", r.text);
                } else {
                    assert_error(&r, 403, "insufficient_scope");
                    assert!(r.body["error"]["message"].as_str().unwrap().contains("workspace:read"));
                }
            }
            for (method, path, body) in &writes {
                let r = key.send(key.request(method.clone(), path).json(body)).await;
                if *scope == "workspace:write" {
                    assert!(r.status.is_success(), "{scope} {method} {path}: {}", r.text);
                } else {
                    assert_error(&r, 403, "insufficient_scope");
                }
            }
            // Key management and administration need a session, whatever the scopes.
            assert_error(&key.get("/workspace/api-keys").await, 403, "session_required");
            assert_error(&key.post("/workspace/api-keys", json!({"name": "x", "scopes": ["run"]})).await, 403, "session_required");
            assert_error(&key.delete("/workspace/api-keys/0190f0f0-0000-7000-8000-000000000000").await, 403, "session_required");
            assert_error(&key.get("/admin/tenants").await, 403, "session_required");
            assert_error(&key.get("/admin/users").await, 403, "session_required");
            assert_error(&key.post("/auth/ip-admin", json!({"tenant_id": null})).await, 403, "session_required");
        }
        // Refused writes stored nothing; writes with the write key created one of each.
        assert_eq!(m.get("/workspace/skills").await.body["data"].as_array().unwrap().len(), 2);

        // Deletes: refused without the scope, done with it.
        for path in &deletes {
            for (scope, key) in &keys {
                if *scope != "workspace:write" {
                    assert_error(&key.delete(path).await, 403, "insufficient_scope");
                }
            }
            let (_, writer) = &keys[1];
            assert_eq!(writer.delete(path).await.status, 204, "{path}");
        }
        assert_error(&all.get("/workspace/api-keys").await, 403, "session_required");
        assert_error(&all.get("/admin/tenants").await, 403, "session_required");
        assert_eq!(all.get("/workspace/skills").await.status, 200);
        assert_eq!(all.post("/workspace/skills", json!({"name": "a", "content": "c"})).await.status, 201);
        // The member's own session can do all of it.
        assert_eq!(m.get("/workspace/api-keys").await.status, 200);
        assert_error(&m.get("/admin/tenants").await, 403, "admin_required");
    }

    async fn keys_die_with_their_member_or_tenant(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let globex = app.tenant(&admin, "Globex", "AICA").await;
        let m = app.member_of(&admin, &acme).await;
        let (_, secret) = create_key(&m, "ci", &["workspace:read", "workspace:write"]).await;
        let key = m.with_key(&secret);
        assert_eq!(key.get("/workspace/skills").await.status, 200);

        let user = format!("/admin/users/{}", m.id);
        admin.patch(&user, json!({"status": "suspended"})).await;
        assert_error(&key.get("/workspace/skills").await, 403, "member_suspended");
        assert_error(&key.post("/workspace/skills", json!({"name": "s", "content": "c"})).await, 403, "member_suspended");
        admin.patch(&user, json!({"status": "active"})).await;
        assert_eq!(key.get("/workspace/skills").await.status, 200);

        let tenant = format!("/admin/tenants/{}", acme["id"].as_str().unwrap());
        admin.patch(&tenant, json!({"status": "suspended"})).await;
        assert_error(&key.get("/workspace/skills").await, 403, "tenant_suspended");
        assert_error(&key.patch("/workspace/settings", json!({"display_name": "x"})).await, 403, "tenant_suspended");
        admin.patch(&tenant, json!({"status": "active"})).await;
        assert_eq!(key.get("/workspace/skills").await.status, 200);

        // A member moved to another tenant leaves the key behind: it acts for nobody now,
        // and it never reaches the new tenant's data.
        let g = app.member_of(&admin, &globex).await;
        g.post("/workspace/skills", json!({"name": "globex only", "content": "c"})).await;
        admin.patch(&format!("{user}/tenant"), json!({"tenant_id": globex["id"]})).await;
        assert_error(&key.get("/workspace/skills").await, 401, "invalid_api_key");
        assert_error(&key.post("/workspace/skills", json!({"name": "s", "content": "c"})).await, 401, "invalid_api_key");
        // Keys end with membership: the move revoked it, so moving back does not bring it back.
        admin.patch(&format!("{user}/tenant"), json!({"tenant_id": acme["id"]})).await;
        assert_error(&key.get("/workspace/skills").await, 401, "invalid_api_key");
        // A key made after the return works, and unassigning the member revokes it too.
        let fresh = m.keyed(&["workspace:read"]).await;
        let back = fresh.get("/workspace/skills").await;
        assert_eq!(back.status, 200, "{}", back.text);
        assert!(!back.text.contains("globex only"));
        admin.patch(&format!("{user}/tenant"), json!({"tenant_id": null})).await;
        assert_error(&fresh.get("/workspace/skills").await, 401, "invalid_api_key");
    }

    async fn made_up_expired_and_malformed_keys_are_refused(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        let anon = app.anon();
        // A bad checksum, a good checksum that was never issued, junk.
        let (_, real) = create_key(&m, "real", &["workspace:read"]).await;
        let mut tampered = real.clone().into_bytes();
        tampered[10] = if tampered[10] == b'a' { b'b' } else { b'a' };
        let tampered = String::from_utf8(tampered).unwrap();
        let unknown = well_formed_unknown_key();
        assert_eq!(unknown.len(), 52);
        for bad in [tampered.as_str(), unknown.as_str(), "gc_short", "not-a-key", &real[..51]] {
            let r = anon.with_key(bad).get("/workspace").await;
            assert_error(&r, 401, "invalid_api_key");
        }
        let r = anon.send(anon.request(Method::GET, "/workspace").header("authorization", "Basic Zm9vOmJhcg==")).await;
        assert_eq!(r.status, 401, "{}", r.text);
        assert_error(&anon.get("/workspace").await, 401, "unauthenticated");
        assert_eq!(m.with_key(&real).get("/workspace").await.status, 200);

        // An expiry a couple of seconds ahead: works, then does not.
        let soon = chrono_in(2);
        let r = m.post("/workspace/api-keys", json!({"name": "soon", "scopes": ["workspace:read"], "expires_at": soon})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let key = m.with_key(r.body["key"].as_str().unwrap());
        assert_eq!(key.get("/workspace").await.status, 200);
        tokio::time::sleep(std::time::Duration::from_millis(3200)).await;
        assert_error(&key.get("/workspace").await, 401, "invalid_api_key");
    }
}

/// An RFC 3339 UTC time `secs` seconds from now (whole seconds, rounded up).
fn chrono_in(secs: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let t = now.as_secs() + secs + 1;
    // Civil-from-days (Howard Hinnant), enough for a test without a date crate.
    let days = (t / 86_400) as i64;
    let rem = t % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}
