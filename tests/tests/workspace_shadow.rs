//! The Shadow support view: a platform admin reads a tenant's workspace, writes nothing, and
//! the tenant's members see it happen. On both databases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_tests::*;

both_backends! {
    async fn an_admin_reads_in_the_shadow_view_and_writes_nothing(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let acme_id = acme["id"].as_str().unwrap().to_owned();
        let m = app.member_of(&admin, &acme).await;
        let skill = m.post("/workspace/skills", json!({"name": "s", "content": "c"})).await;
        let skill_path = format!("/workspace/skills/{}", skill.body["id"].as_str().unwrap());
        let coll = m.post("/workspace/memory", json!({"name": "c"})).await;
        let cid = coll.body["id"].as_str().unwrap().to_owned();
        let key = m.post("/workspace/api-keys", json!({"name": "ci", "scopes": ["run"]})).await;
        let secret = key.body["key"].as_str().unwrap().to_owned();
        let key_id = key.body["id"].as_str().unwrap().to_owned();

        // Before: an admin without a tenant has no workspace, and nobody is watching.
        assert_error(&admin.get("/workspace/skills").await, 403, "member_unassigned");
        assert_eq!(m.get("/workspace").await.body["support_view"], Value::Null);

        // Non-admins cannot enter.
        assert_error(&m.post("/auth/ip-admin", json!({"tenant_id": acme_id})).await, 403, "admin_required");
        assert_error(&admin.post("/auth/ip-admin", json!({"tenant_id": "0190f0f0-0000-7000-8000-000000000000"})).await, 404, "not_found");

        let enter = admin.post("/auth/ip-admin", json!({"tenant_id": acme_id})).await;
        assert_eq!(enter.status, 200, "{}", enter.text);
        assert_eq!(enter.body["shadow"]["tenant_id"], acme_id.as_str());
        let since = enter.body["shadow"]["since"].as_str().unwrap().to_owned();

        // Reads: the tenant's data, with the header on every response.
        for path in ["/workspace", "/workspace/skills", skill_path.as_str(), "/workspace/memory",
            &format!("/workspace/memory/{cid}/sources"), "/workspace/settings", "/workspace/activity",
            "/workspace/drafts/apps", "/workspace/ai-access", "/workspace/ai-access/guide", "/workspace/api-keys"] {
            let r = admin.get(path).await;
            assert_eq!(r.status, 200, "GET {path}: {}", r.text);
            assert_eq!(r.header("x-shadow-tenant"), Some(acme_id.as_str()), "{path}");
        }
        let skills = admin.get("/workspace/skills").await;
        assert_eq!(skills.body["data"][0]["name"], "s");
        let overview = admin.get("/workspace").await;
        assert_eq!(overview.body["tenant"]["id"], acme_id.as_str());
        let keys = admin.get("/workspace/api-keys").await;
        assert_eq!(keys.body["data"][0]["id"], key_id.as_str());
        assert!(!keys.text.contains(&secret), "the key list never holds secrets");
        assert_error(&admin.get("/workspace/skills/0190f0f0-0000-7000-8000-000000000000").await, 404, "not_found");

        // Writes: every one refused, with the header too.
        let refused: Vec<(Method, String, Value)> = vec![
            (Method::POST, "/workspace/skills".into(), json!({"name": "x", "content": "c"})),
            (Method::PATCH, skill_path.clone(), json!({"name": "x"})),
            (Method::DELETE, skill_path.clone(), json!({})),
            (Method::POST, "/workspace/memory".into(), json!({"name": "x"})),
            (Method::DELETE, format!("/workspace/memory/{cid}"), json!({})),
            (Method::POST, format!("/workspace/memory/{cid}/sources"), json!({"title": "t", "kind": "text", "content": "c"})),
            (Method::POST, "/workspace/drafts/agents".into(), json!({"name": "x"})),
            (Method::PATCH, "/workspace/settings".into(), json!({"display_name": "x"})),
            (Method::POST, "/workspace/api-keys".into(), json!({"name": "x", "scopes": ["run"]})),
            (Method::DELETE, format!("/workspace/api-keys/{key_id}"), json!({})),
            (Method::POST, "/run".into(), json!({"messages": [{"role": "user", "content": "hi"}]})),
        ];
        for (method, path, body) in &refused {
            let r = admin.send(admin.request(method.clone(), path).json(body)).await;
            assert_error(&r, 403, "shadow_read_only");
            assert_eq!(r.header("x-shadow-tenant"), Some(acme_id.as_str()), "{method} {path}");
        }
        // Nothing changed.
        assert_eq!(m.get(&skill_path).await.body["version"], 1);
        assert_eq!(m.get("/workspace/skills").await.body["data"].as_array().unwrap().len(), 1);
        assert_eq!(m.with_key(&secret).get("/workspace").await.code(), "insufficient_scope", "the key still lives");

        // The members see the view: in the overview and in the feed. Their responses carry no
        // Shadow header.
        let seen = m.get("/workspace").await;
        assert_eq!(seen.body["support_view"]["admin_email"], ADMIN_EMAIL);
        // Stored to the millisecond; the entry response may carry more digits, and a time on
        // a whole second is written without a fraction: compare the instants, to the ms.
        let seen_since = seen.body["support_view"]["since"].as_str().unwrap();
        let ms = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap().timestamp_millis();
        assert_eq!(ms(seen_since), ms(&since), "{seen_since} vs {since}");
        assert_eq!(seen.header("x-shadow-tenant"), None);
        let feed = m.get("/workspace/activity").await;
        let line = &feed.body["data"][0];
        assert_eq!(line["action"], "shadow.enter");
        assert_eq!(line["actor"]["kind"], "admin");
        assert_eq!(line["actor"]["label"], ADMIN_EMAIL);
        assert_eq!(line["detail"]["admin_email"], ADMIN_EMAIL);
        assert_eq!(line["target"]["id"], acme_id.as_str());
        // No refused write left a line.
        assert_eq!(feed.body["data"].as_array().unwrap().iter().filter(|l| l["actor"]["kind"] == "admin").count(), 1);

        // Leaving: written to the feed, the view disappears, the header too.
        let leave = admin.post("/auth/ip-admin", json!({"tenant_id": null})).await;
        assert_eq!(leave.status, 200, "{}", leave.text);
        assert_eq!(leave.body["shadow"], Value::Null);
        assert_eq!(m.get("/workspace").await.body["support_view"], Value::Null);
        let feed = m.get("/workspace/activity").await;
        assert_eq!(feed.body["data"][0]["action"], "shadow.exit");
        assert_eq!(feed.body["data"][0]["actor"]["label"], ADMIN_EMAIL);
        let after = admin.get("/workspace/skills").await;
        assert_error(&after, 403, "member_unassigned");
        assert_eq!(after.header("x-shadow-tenant"), None);
    }

    async fn a_shadow_view_reads_only_its_tenant(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let globex = app.tenant(&admin, "Globex", "AICA").await;
        let a = app.member_of(&admin, &acme).await;
        let g = app.member_of(&admin, &globex).await;
        let gs = g.post("/workspace/skills", json!({"name": "globex", "content": "c"})).await;
        let gpath = format!("/workspace/skills/{}", gs.body["id"].as_str().unwrap());
        a.post("/workspace/skills", json!({"name": "acme", "content": "c"})).await;

        admin.post("/auth/ip-admin", json!({"tenant_id": acme["id"]})).await;
        let list = admin.get("/workspace/skills").await;
        let names: Vec<&str> = list.body["data"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["acme"]);
        assert_error(&admin.get(&gpath).await, 404, "not_found");

        // Switching tenants exits the first view and enters the second, both on the record.
        let sw = admin.post("/auth/ip-admin", json!({"tenant_id": globex["id"]})).await;
        assert_eq!(sw.body["shadow"]["tenant_id"], globex["id"]);
        assert_eq!(admin.get(&gpath).await.body["name"], "globex");
        let gid = globex["id"].as_str().unwrap();
        assert_eq!(admin.get("/workspace").await.header("x-shadow-tenant"), Some(gid));
        assert_eq!(a.get("/workspace/activity").await.body["data"][0]["action"], "shadow.exit");
        assert_eq!(a.get("/workspace").await.body["support_view"], Value::Null);
        assert_eq!(g.get("/workspace/activity").await.body["data"][0]["action"], "shadow.enter");
        assert_eq!(g.get("/workspace").await.body["support_view"]["admin_email"], ADMIN_EMAIL);

        // A suspended tenant can still be inspected by support, read-only.
        admin.patch(&format!("/admin/tenants/{gid}"), json!({"status": "suspended"})).await;
        assert_error(&g.get("/workspace").await, 403, "tenant_suspended");
        assert_eq!(admin.get("/workspace/skills").await.status, 200);
        assert_error(&admin.post("/workspace/skills", json!({"name": "x", "content": "c"})).await, 403, "shadow_read_only");
        admin.post("/auth/ip-admin", json!({"tenant_id": null})).await;
    }
}
