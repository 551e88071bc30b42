//! `/workspace` records (skills, memory collections and sources, drafts), settings, the
//! activity feed and the overview counts, on both databases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_tests::*;

/// One record family: where it lives and bodies that pass and fail its rules.
struct Family {
    /// The list/create path.
    path: String,
    /// The name field (`title` for sources).
    name_field: &'static str,
    /// A valid create body named `name`.
    create: fn(&str) -> Value,
    /// A body missing a required field.
    missing: Value,
    /// A body with a wrong type.
    wrong_type: Value,
}

fn named(field: &str, name: &str, rest: Value) -> Value {
    let mut body = rest;
    body[field] = json!(name);
    body
}

async fn families(member: &Actor) -> Vec<Family> {
    let c = member
        .post("/workspace/memory", json!({"name": "Sources home"}))
        .await;
    assert_eq!(c.status, 201, "{}", c.text);
    let cid = c.body["id"].as_str().unwrap().to_owned();
    let mut out = vec![
        Family {
            path: "/workspace/skills".into(),
            name_field: "name",
            create: |n| {
                named(
                    "name",
                    n,
                    json!({"content": "# Skill\nDo things.", "tags": ["a", "a", "b"]}),
                )
            },
            missing: json!({"name": "no content"}),
            wrong_type: json!({"name": "x", "content": "x", "tags": "not-a-list"}),
        },
        Family {
            path: "/workspace/memory".into(),
            name_field: "name",
            create: |n| named("name", n, json!({"description": "notes"})),
            missing: json!({"description": "no name"}),
            wrong_type: json!({"name": 42}),
        },
        Family {
            path: format!("/workspace/memory/{cid}/sources"),
            name_field: "title",
            create: |n| {
                named(
                    "title",
                    n,
                    json!({"kind": "url", "content": "https://example.com/never-fetched"}),
                )
            },
            missing: json!({"title": "t", "kind": "text"}),
            wrong_type: json!({"title": "t", "kind": "pdf", "content": ""}),
        },
    ];
    for kind in ["agents", "workflows", "apps"] {
        out.push(Family {
            path: format!("/workspace/drafts/{kind}"),
            name_field: "name",
            create: |n| named("name", n, json!({"definition": {"steps": [1, 2]}})),
            missing: json!({"definition": {}}),
            wrong_type: json!({"name": "x", "definition": [1, 2]}),
        });
    }
    out
}

fn names(reply: &Reply, field: &str) -> Vec<String> {
    reply.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[field].as_str().unwrap().to_owned())
        // The collection that holds the sources family is not one of the records under test.
        .filter(|n| n != "Sources home")
        .collect()
}

both_backends! {
    async fn every_family_is_created_listed_read_patched_and_deleted(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let member = app.member_of(&admin, &acme).await;
        for f in families(&member).await {
            let p = &f.path;
            let nf = f.name_field;
            let mut ids = Vec::new();
            for n in ["one", "two", "three"] {
                let r = member.post(p, (f.create)(n)).await;
                assert_eq!(r.status, 201, "{p}: {}", r.text);
                assert_eq!(r.body["version"], 1, "{p}");
                assert_eq!(r.body[nf], n);
                assert_eq!(r.body["created_by"].as_str(), Some(member.id.as_str()), "{p}");
                assert!(r.body["created_at"].as_str().unwrap().ends_with('Z'), "{p}");
                assert_eq!(r.body["created_at"], r.body["updated_at"]);
                assert_eq!(r.header("etag"), Some("\"1\""), "{p}");
                ids.push(r.body["id"].as_str().unwrap().to_owned());
            }
            // Defaults and normalisation.
            let first = member.get(&format!("{p}/{}", ids[0])).await;
            if p.ends_with("skills") {
                assert_eq!(first.body["tags"], json!(["a", "b"]));
                assert_eq!(first.body["description"], "");
            }
            if p.contains("/sources") {
                assert!(first.body["collection_id"].is_string(), "{}", first.text);
                assert_eq!(first.body["content"], "https://example.com/never-fetched");
            }
            if p.contains("/drafts/") {
                assert_eq!(first.body["definition"], json!({"steps": [1, 2]}));
            }

            // Newest first, paginated with limit and cursor.
            let page1 = member.get(&format!("{p}?limit=2")).await;
            assert_eq!(page1.status, 200, "{}", page1.text);
            assert_eq!(names(&page1, nf), ["three", "two"], "{p}");
            let cursor = page1.body["next_cursor"].as_str().unwrap().to_owned();
            let page2 = member.get(&format!("{p}?limit=2&cursor={cursor}")).await;
            assert_eq!(names(&page2, nf), ["one"], "{p}");
            assert_eq!(page2.body["next_cursor"], Value::Null);
            let all = member.get(p).await;
            assert_eq!(names(&all, nf), ["three", "two", "one"]);
            assert_eq!(all.body["next_cursor"], Value::Null);
            assert_error(&member.get(&format!("{p}?limit=0")).await, 400, "invalid_query");
            assert_error(&member.get(&format!("{p}?cursor=nope")).await, 400, "invalid_cursor");

            // Get one, with its ETag.
            let item = format!("{p}/{}", ids[1]);
            let got = member.get(&item).await;
            assert_eq!(got.status, 200, "{}", got.text);
            assert_eq!(got.body[nf], "two");
            assert_eq!(got.header("etag"), Some("\"1\""));

            // Patch without If-Match, then a stale one (409), then a matching one.
            let desc_field = if p.contains("/sources") { "content" } else { "description" };
            let patched = member.patch(&item, json!({desc_field: "changed"})).await;
            assert_eq!(patched.status, 200, "{p}: {}", patched.text);
            assert_eq!(patched.body["version"], 2);
            assert_eq!(patched.body[desc_field], "changed");
            assert_eq!(patched.body[nf], "two", "a patch keeps the fields it does not name");
            assert_eq!(patched.header("etag"), Some("\"2\""));
            assert_ne!(patched.body["updated_at"], patched.body["created_at"]);
            let stale = member
                .send(member.request(Method::PATCH, &item).header("if-match", "\"1\"").json(&json!({nf: "late"})))
                .await;
            assert_error(&stale, 409, "version_conflict");
            let ok = member
                .send(member.request(Method::PATCH, &item).header("if-match", "\"2\"").json(&json!({nf: "renamed"})))
                .await;
            assert_eq!(ok.status, 200, "{}", ok.text);
            assert_eq!(ok.body["version"], 3);
            assert_eq!(ok.body[nf], "renamed");
            assert_eq!(member.get(&item).await.header("etag"), Some("\"3\""));
            let bad_tag = member
                .send(member.request(Method::PATCH, &item).header("if-match", "yesterday").json(&json!({})))
                .await;
            assert_error(&bad_tag, 400, "invalid_if_match");

            // Validation: missing required, too long, wrong type, unknown field, not an object.
            let r = member.post(p, f.missing.clone()).await;
            assert_error(&r, 422, "validation_failed");
            assert!(r.body["error"]["message"].as_str().unwrap().contains(':'), "{}", r.text);
            let long = member.post(p, (f.create)(&"x".repeat(201))).await;
            assert_error(&long, 422, "validation_failed");
            assert!(long.body["error"]["message"].as_str().unwrap().starts_with(nf), "{}", long.text);
            assert_error(&member.post(p, f.wrong_type.clone()).await, 422, "validation_failed");
            let mut unknown = (f.create)("u");
            unknown["colour"] = json!("red");
            let r = member.post(p, unknown).await;
            assert_error(&r, 422, "unknown_field");
            assert!(r.body["error"]["message"].as_str().unwrap().contains("colour"));
            assert_error(&member.patch(&item, json!({"colour": 1})).await, 422, "unknown_field");
            assert_error(&member.patch(&item, json!({nf: null})).await, 422, "validation_failed");
            assert_error(&member.patch(&item, json!({nf: ""})).await, 422, "validation_failed");
            assert_error(&member.post(p, json!([1, 2])).await, 422, "validation_failed");
            let not_json = member
                .send(member.request(Method::POST, p).header("content-type", "application/json").body("{nope"))
                .await;
            assert_error(&not_json, 400, "invalid_json");
            // Nothing invalid was stored.
            assert_eq!(names(&member.get(p).await, nf).len(), 3, "{p}");

            // Delete, then everything about it is gone.
            let d = member.delete(&item).await;
            assert_eq!(d.status, 204, "{}", d.text);
            assert!(d.text.is_empty());
            assert_error(&member.get(&item).await, 404, "not_found");
            assert_error(&member.delete(&item).await, 404, "not_found");
            assert_error(&member.patch(&item, json!({desc_field: "x"})).await, 404, "not_found");
            assert_eq!(names(&member.get(p).await, nf), ["three", "one"]);
            assert_error(&member.get(&format!("{p}/not-a-uuid")).await, 404, "not_found");
        }
    }

    async fn content_sizes_are_limited(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let member = app.member_of(&admin, &acme).await;
        let max = "x".repeat(256 * 1024);
        let ok = member.post("/workspace/skills", json!({"name": "big", "content": max})).await;
        assert_eq!(ok.status, 201, "{}", ok.text.len());
        let too_big = member.post("/workspace/skills", json!({"name": "big", "content": format!("{max}x")})).await;
        assert_error(&too_big, 422, "validation_failed");
        assert!(too_big.body["error"]["message"].as_str().unwrap().starts_with("content"));
        let r = member.post("/workspace/drafts/apps", json!({"name": "d", "definition": {"k": max}})).await;
        assert_error(&r, 422, "validation_failed");
        let r = member.post("/workspace/skills", json!({"name": "d", "content": "x", "description": "d".repeat(1001)})).await;
        assert_error(&r, 422, "validation_failed");
        let r = member.post("/workspace/skills", json!({"name": "   ", "content": "x"})).await;
        assert_error(&r, 422, "validation_failed");
    }

    async fn other_tenants_records_are_not_found_on_every_route(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let globex = app.tenant(&admin, "Globex", "AICA").await;
        let a = app.member_of(&admin, &acme).await;
        let g = app.member_of(&admin, &globex).await;
        for f in families(&a).await {
            let p = &f.path;
            let made = a.post(p, (f.create)("secret")).await;
            assert_eq!(made.status, 201);
            let item = format!("{p}/{}", made.body["id"].as_str().unwrap());
            if p.contains("/sources") {
                // The collection itself is another tenant's: list and create are 404 too.
                assert_error(&g.get(p).await, 404, "not_found");
                assert_error(&g.post(p, (f.create)("mine")).await, 404, "not_found");
            } else {
                let theirs = g.get(p).await;
                assert_eq!(theirs.status, 200);
                assert_eq!(theirs.body["data"], json!([]), "{p}");
            }
            assert_error(&g.get(&item).await, 404, "not_found");
            assert_error(&g.patch(&item, json!({f.name_field: "stolen"})).await, 404, "not_found");
            let stale = g
                .send(g.request(Method::PATCH, &item).header("if-match", "\"1\"").json(&json!({f.name_field: "stolen"})))
                .await;
            assert_error(&stale, 404, "not_found");
            assert_error(&g.delete(&item).await, 404, "not_found");
            // Untouched for its owner.
            let mine = a.get(&item).await;
            assert_eq!(mine.status, 200);
            assert_eq!(mine.body[f.name_field], "secret");
            assert_eq!(mine.body["version"], 1);
        }
        // Globex's own collection id does not reach Acme's sources either.
        let gc = g.post("/workspace/memory", json!({"name": "G"})).await;
        let gcid = gc.body["id"].as_str().unwrap().to_owned();
        let ac = a.get("/workspace/memory").await;
        let home = ac.body["data"].as_array().unwrap().iter().find(|c| c["name"] == "Sources home").unwrap();
        let acid = home["id"].as_str().unwrap().to_owned();
        let src = a.get(&format!("/workspace/memory/{acid}/sources")).await;
        let sid = src.body["data"][0]["id"].as_str().unwrap().to_owned();
        assert_error(&g.get(&format!("/workspace/memory/{gcid}/sources/{sid}")).await, 404, "not_found");
        assert_error(&g.delete(&format!("/workspace/memory/{gcid}/sources/{sid}")).await, 404, "not_found");
        assert_eq!(a.get(&format!("/workspace/memory/{acid}/sources/{sid}")).await.status, 200);
    }

    async fn sources_belong_to_their_collection(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        let one = m.post("/workspace/memory", json!({"name": "one"})).await.body["id"].as_str().unwrap().to_owned();
        let two = m.post("/workspace/memory", json!({"name": "two"})).await.body["id"].as_str().unwrap().to_owned();
        let s = m.post(&format!("/workspace/memory/{one}/sources"), json!({"title": "s", "kind": "note", "content": "n"})).await;
        assert_eq!(s.status, 201, "{}", s.text);
        assert_eq!(s.body["collection_id"], one.as_str());
        let sid = s.body["id"].as_str().unwrap().to_owned();
        let wrong = format!("/workspace/memory/{two}/sources/{sid}");
        assert_error(&m.get(&wrong).await, 404, "not_found");
        assert_error(&m.patch(&wrong, json!({"title": "moved"})).await, 404, "not_found");
        assert_error(&m.delete(&wrong).await, 404, "not_found");
        assert_eq!(m.get(&format!("/workspace/memory/{two}/sources")).await.body["data"], json!([]));
        // A collection id that is a source's (or anything else's) is no collection.
        assert_error(&m.get(&format!("/workspace/memory/{sid}/sources")).await, 404, "not_found");
        assert_error(&m.get(&format!("/workspace/memory/{sid}")).await, 404, "not_found");
        let unknown = "0190f0f0-0000-7000-8000-000000000000";
        assert_error(&m.post(&format!("/workspace/memory/{unknown}/sources"), json!({"title": "s", "kind": "note", "content": "n"})).await, 404, "not_found");

        // Deleting a collection deletes its sources.
        m.post(&format!("/workspace/memory/{one}/sources"), json!({"title": "s2", "kind": "text", "content": ""})).await;
        assert_eq!(m.get(&format!("/workspace/memory/{one}/sources")).await.body["data"].as_array().unwrap().len(), 2);
        assert_eq!(m.delete(&format!("/workspace/memory/{one}")).await.status, 204);
        assert_error(&m.get(&format!("/workspace/memory/{one}/sources")).await, 404, "not_found");
        assert_error(&m.get(&format!("/workspace/memory/{one}/sources/{sid}")).await, 404, "not_found");
        assert_error(&m.delete(&format!("/workspace/memory/{one}")).await, 404, "not_found");
        let feed = m.get("/workspace/activity").await;
        assert_eq!(feed.body["data"][0]["action"], "memory_collection.delete");
    }

    async fn only_three_draft_kinds_exist(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        assert_error(&m.get("/workspace/drafts/robots").await, 404, "not_found");
        assert_error(&m.post("/workspace/drafts/robots", json!({"name": "r"})).await, 404, "not_found");
        let id = "0190f0f0-0000-7000-8000-000000000000";
        assert_error(&m.get(&format!("/workspace/drafts/robots/{id}")).await, 404, "not_found");
        assert_error(&m.delete(&format!("/workspace/drafts/robots/{id}")).await, 404, "not_found");
        assert_error(&app.anon().get("/workspace/drafts/robots").await, 404, "not_found");
        assert_error(&app.anon().get("/workspace/drafts/agents").await, 401, "unauthenticated");
        // Kinds are separate lists.
        let a = m.post("/workspace/drafts/agents", json!({"name": "agent"})).await;
        let aid = a.body["id"].as_str().unwrap();
        assert_eq!(a.body["definition"], json!({}));
        assert_eq!(a.body["description"], "");
        assert_eq!(m.get("/workspace/drafts/apps").await.body["data"], json!([]));
        assert_error(&m.get(&format!("/workspace/drafts/apps/{aid}")).await, 404, "not_found");
        assert_eq!(m.get(&format!("/workspace/drafts/agents/{aid}")).await.status, 200);
        assert_error(&m.send(m.request(Method::PUT, "/workspace/drafts/agents")).await, 405, "method_not_allowed");
    }

    async fn settings_are_versioned_per_tenant(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let globex = app.tenant(&admin, "Globex", "AICA").await;
        let m = app.member_of(&admin, &acme).await;
        let g = app.member_of(&admin, &globex).await;
        let s = m.get("/workspace/settings").await;
        assert_eq!(s.status, 200, "{}", s.text);
        assert_eq!(s.body["version"], 0);
        assert_eq!(s.body["timezone"], "UTC");
        assert_eq!(s.body["default_model"], "auto");
        assert_eq!(s.body["display_name"], "");
        assert_eq!(s.body["description"], "");
        assert_eq!(s.body["updated_at"], Value::Null);
        assert_eq!(s.header("etag"), Some("\"0\""));

        let p = m.patch("/workspace/settings", json!({"timezone": "Asia/Hong_Kong", "display_name": "Acme HQ"})).await;
        assert_eq!(p.status, 200, "{}", p.text);
        assert_eq!(p.body["version"], 1);
        assert_eq!(p.body["timezone"], "Asia/Hong_Kong");
        assert_eq!(p.body["default_model"], "auto", "fields never written keep their defaults");
        assert!(p.body["updated_at"].is_string());
        assert_eq!(p.header("etag"), Some("\"1\""));

        let bad = m.patch("/workspace/settings", json!({"timezone": "Mars/Olympus_Mons"})).await;
        assert_error(&bad, 422, "validation_failed");
        assert!(bad.body["error"]["message"].as_str().unwrap().starts_with("timezone"));
        assert_error(&m.patch("/workspace/settings", json!({"timezone": 8})).await, 422, "validation_failed");
        assert_error(&m.patch("/workspace/settings", json!({"display_name": "x".repeat(101)})).await, 422, "validation_failed");
        assert_error(&m.patch("/workspace/settings", json!({"theme": "dark"})).await, 422, "unknown_field");
        let stale = m
            .send(m.request(Method::PATCH, "/workspace/settings").header("if-match", "\"0\"").json(&json!({"description": "late"})))
            .await;
        assert_error(&stale, 409, "version_conflict");
        let ok = m
            .send(m.request(Method::PATCH, "/workspace/settings").header("if-match", "\"1\"").json(&json!({"description": "d", "default_model": "gpt-4o"})))
            .await;
        assert_eq!(ok.status, 200, "{}", ok.text);
        assert_eq!(ok.body["version"], 2);
        assert_eq!(ok.body["display_name"], "Acme HQ");
        assert_eq!(ok.body["default_model"], "gpt-4o");
        let reset = m.patch("/workspace/settings", json!({"timezone": null})).await;
        assert_eq!(reset.body["timezone"], "UTC");

        // Another tenant's settings are its own.
        let theirs = g.get("/workspace/settings").await;
        assert_eq!(theirs.body["version"], 0);
        assert_eq!(theirs.body["display_name"], "");
        let feed = m.get("/workspace/activity").await;
        assert_eq!(feed.body["data"][0]["action"], "settings.update");
        assert_eq!(g.get("/workspace/activity").await.body["data"], json!([]));
    }

    async fn the_activity_feed_lists_writes_with_their_actors(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        let skill = m.post("/workspace/skills", json!({"name": "s", "content": "c"})).await;
        let sid = skill.body["id"].as_str().unwrap().to_owned();
        let key = m.post("/workspace/api-keys", json!({"name": "ci", "scopes": ["workspace:write", "workspace:read"]})).await;
        assert_eq!(key.status, 201, "{}", key.text);
        let secret = key.body["key"].as_str().unwrap().to_owned();
        let k = m.with_key(&secret);
        assert_eq!(k.patch(&format!("/workspace/skills/{sid}"), json!({"description": "by key"})).await.status, 200);
        let acme_id = acme["id"].as_str().unwrap();
        assert_eq!(admin.post("/auth/ip-admin", json!({"tenant_id": acme_id})).await.status, 200);
        assert_eq!(m.delete(&format!("/workspace/skills/{sid}")).await.status, 204);

        let feed = m.get("/workspace/activity").await;
        assert_eq!(feed.status, 200, "{}", feed.text);
        let lines = feed.body["data"].as_array().unwrap();
        let actions: Vec<&str> = lines.iter().map(|l| l["action"].as_str().unwrap()).collect();
        assert_eq!(actions, ["skill.delete", "shadow.enter", "skill.update", "api_key.create", "skill.create"]);
        let kinds: Vec<&str> = lines.iter().map(|l| l["actor"]["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["member", "admin", "key", "member", "member"]);
        assert_eq!(lines[0]["actor"]["id"].as_str(), Some(m.id.as_str()));
        assert_eq!(lines[0]["actor"]["label"].as_str(), Some(m.email.as_str()));
        assert_eq!(lines[0]["target"], json!({"kind": "skill", "id": sid}));
        assert_eq!(lines[1]["actor"]["label"], ADMIN_EMAIL);
        assert_eq!(lines[2]["actor"]["id"], key.body["id"]);
        assert!(lines[2]["actor"]["label"].as_str().unwrap().contains("ci"));
        assert_eq!(lines[3]["target"]["kind"], "api_key");
        for l in lines {
            assert!(l["id"].is_string() && l["at"].is_string() && l.get("detail").is_some(), "{l}");
        }
        assert!(!feed.text.contains(&secret), "the key's secret never appears in the feed");
        assert!(!feed.text.contains(&secret[3..20]));

        let page = m.get("/workspace/activity?limit=2").await;
        assert_eq!(page.body["data"].as_array().unwrap().len(), 2);
        let cursor = page.body["next_cursor"].as_str().unwrap();
        let rest = m.get(&format!("/workspace/activity?limit=10&cursor={cursor}")).await;
        let rest_actions: Vec<&str> = rest.body["data"].as_array().unwrap().iter().map(|l| l["action"].as_str().unwrap()).collect();
        assert_eq!(rest_actions, ["skill.update", "api_key.create", "skill.create"]);
        assert_eq!(rest.body["next_cursor"], Value::Null);
    }

    async fn the_overview_counts_records(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        for i in 0..2 {
            m.post("/workspace/skills", json!({"name": format!("s{i}"), "content": "c"})).await;
        }
        let c = m.post("/workspace/memory", json!({"name": "c"})).await;
        let cid = c.body["id"].as_str().unwrap();
        m.post(&format!("/workspace/memory/{cid}/sources"), json!({"title": "t", "kind": "text", "content": "x"})).await;
        m.post("/workspace/drafts/agents", json!({"name": "a"})).await;
        for i in 0..3 {
            m.post("/workspace/drafts/workflows", json!({"name": format!("w{i}")})).await;
        }
        let key = m.post("/workspace/api-keys", json!({"name": "k", "scopes": ["run"]})).await;
        m.post("/workspace/api-keys", json!({"name": "k2", "scopes": ["run"]})).await;
        m.delete(&format!("/workspace/api-keys/{}", key.body["id"].as_str().unwrap())).await;
        let o = m.get("/workspace").await;
        assert_eq!(o.status, 200, "{}", o.text);
        assert_eq!(o.body["counts"], json!({"skills": 2, "memory_collections": 1,
            "drafts": {"agents": 1, "workflows": 3, "apps": 0}, "api_keys": 1}));
        assert_eq!(o.body["ai_access"]["status"], "not_ready");
        assert_eq!(o.body["support_view"], Value::Null);
        assert!(o.body["preview"].as_array().unwrap().iter().any(|p| p == "skills"));
    }

    async fn ai_access_and_its_guide(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m = app.member_of(&admin, &acme).await;
        let a = m.get("/workspace/ai-access").await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.body["status"], "not_ready");
        assert_eq!(a.body["region"], "AIHK");
        assert_eq!(a.body["chat_enabled_keys"], 0);
        assert!(a.body["reason"].as_str().unwrap().contains("AIHK"));
        let acme_id = acme["id"].as_str().unwrap();
        admin.patch(&format!("/admin/tenants/{acme_id}"), json!({"ai_enabled": false})).await;
        let d = m.get("/workspace/ai-access").await;
        assert_eq!(d.body["status"], "disabled");
        assert!(d.body["reason"].is_string());

        let g = m.get("/workspace/ai-access/guide").await;
        assert_eq!(g.status, 200, "{}", g.text);
        assert!(!g.body["steps"].as_array().unwrap().is_empty());
        let curl = g.body["example"]["curl"].as_str().unwrap();
        assert!(curl.contains("/api/v1/run"), "{curl}");
        assert!(curl.contains("Authorization: Bearer"), "{curl}");
        assert!(curl.contains(&app.config.public_origin), "{curl}");
        assert!(g.body["example"]["python"].as_str().unwrap().contains("/api/v1"));
    }
}

/// Node `app`'s record lists so far, from its metrics: (kept answers served, lists read).
async fn lists_answered(app: &TestApp) -> (u64, u64) {
    let res = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    let text = res.text().await.unwrap();
    let count = |source: &str| {
        let prefix = format!("gc_record_lists_total{{source=\"{source}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map_or(0, |n| n.trim().parse().unwrap())
    };
    (count("kept"), count("read"))
}

/// The same caller on another node.
fn on_node(actor: &Actor, node: &TestApp) -> Actor {
    let mut moved = actor.clone();
    moved.app = AppRef {
        base: node.base.clone(),
        client: node.client.clone(),
        origin: actor.app.origin.clone(),
    };
    moved
}

both_backends! {
    async fn a_kept_list_is_never_served_after_any_node_changes_the_records(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let member = app.member_of(&admin, &acme).await;
        let other = app.tenant(&admin, "Other", "AIHK").await;
        let stranger = app.member_of(&admin, &other).await;
        let node_b = app.second_node();
        let key = member.new_key(&["workspace:read", "workspace:write"]).await;
        let on_a = member.with_key(&key);
        let on_b = on_node(&on_a, &node_b);
        let skill = |n: &str| json!({"name": n, "content": "# Skill"});
        let list = || on_a.get("/workspace/skills");

        let one = on_b.post("/workspace/skills", skill("one")).await;
        assert_eq!(one.status, 201, "{}", one.text);
        let first = list().await;
        assert_eq!(first.status, 200, "{}", first.text);
        assert_eq!(names(&first, "name"), ["one"]);
        // Unchanged records: node A keeps the answer the second time it reads it and then
        // serves it, byte for byte.
        let (kept, read) = lists_answered(&app).await;
        assert_eq!(list().await.text, first.text);
        assert_eq!(lists_answered(&app).await, (kept, read + 1));
        let third = list().await;
        assert_eq!(third.text, first.text);
        assert_eq!(third.header("content-type"), Some("application/json"));
        assert_eq!(lists_answered(&app).await, (kept + 1, read + 1));
        // Another tenant asking the same thing, with as many writes behind it (so the same
        // record version), gets its own answer.
        let theirs = stranger.post("/workspace/skills", skill("theirs")).await;
        assert_eq!(theirs.status, 201, "{}", theirs.text);
        for _ in 0..3 {
            let listed = stranger.get("/workspace/skills").await;
            assert_eq!(listed.status, 200, "{}", listed.text);
            assert_eq!(names(&listed, "name"), ["theirs"]);
        }

        // Every kind of write on node B shows in node A's next list.
        let two = on_b.post("/workspace/skills", skill("two")).await;
        assert_eq!(two.status, 201, "{}", two.text);
        assert_eq!(names(&list().await, "name"), ["two", "one"]);
        let two_id = two.body["id"].as_str().unwrap();
        let renamed = on_b.patch(&format!("/workspace/skills/{two_id}"), json!({"name": "zwei"})).await;
        assert_eq!(renamed.status, 200, "{}", renamed.text);
        let after_patch = list().await;
        assert_eq!(names(&after_patch, "name"), ["zwei", "one"]);
        assert_eq!(after_patch.body["data"][0]["version"], 2);
        let one_id = one.body["id"].as_str().unwrap();
        assert_eq!(on_b.delete(&format!("/workspace/skills/{one_id}")).await.status, 204);
        assert_eq!(names(&list().await, "name"), ["zwei"]);
        // A write of another kind (a collection) changes the tenant's version too: read again.
        let (kept, read) = lists_answered(&app).await;
        let coll = on_b.post("/workspace/memory", json!({"name": "notes"})).await;
        assert_eq!(coll.status, 201, "{}", coll.text);
        assert_eq!(names(&list().await, "name"), ["zwei"]);
        assert_eq!(lists_answered(&app).await, (kept, read + 1));

        // Another page of the same list is its own answer.
        assert_eq!(on_b.post("/workspace/skills", skill("three")).await.status, 201);
        let full = list().await;
        let page = on_a.get("/workspace/skills?limit=1").await;
        assert_eq!(names(&full, "name"), ["three", "zwei"]);
        assert_eq!(names(&page, "name"), ["three"]);
        let cursor = page.body["next_cursor"].as_str().unwrap();
        let next = format!("/workspace/skills?limit=1&cursor={cursor}");
        for _ in 0..3 {
            assert_eq!(names(&on_a.get("/workspace/skills?limit=1").await, "name"), ["three"]);
            assert_eq!(names(&on_a.get(&next).await, "name"), ["zwei"]);
        }
        assert_eq!(names(&list().await, "name"), ["three", "zwei"]);

        // Sources kept through a collection: deleting it on B makes the list not found on A.
        let cid = coll.body["id"].as_str().unwrap();
        let sources = format!("/workspace/memory/{cid}/sources");
        let source = json!({"title": "t", "kind": "text", "content": "x"});
        let empty = on_b.post("/workspace/memory", json!({"name": "empty"})).await;
        let empty_sources = format!("/workspace/memory/{}/sources", empty.body["id"].as_str().unwrap());
        assert_eq!(on_b.post(&sources, source).await.status, 201);
        for _ in 0..3 {
            assert_eq!(names(&on_a.get(&sources).await, "title"), ["t"]);
            assert_eq!(on_a.get(&empty_sources).await.body["data"], json!([]));
        }
        assert_eq!(on_b.delete(&format!("/workspace/memory/{cid}")).await.status, 204);
        assert_error(&on_a.get(&sources).await, 404, "not_found");

        // Access is decided on every request, kept answer or not: a key without the read
        // scope is refused, and a key revoked on node B is refused on node A at once.
        assert_eq!(list().await.status, 200);
        let run_only = member.keyed(&["run"]).await;
        assert_error(&run_only.get("/workspace/skills").await, 403, "insufficient_scope");
        let keys = on_node(&member, &node_b).get("/workspace/api-keys").await;
        let key_id = keys.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["scopes"] == json!(["workspace:read", "workspace:write"]))
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let revoked = on_node(&member, &node_b).delete(&format!("/workspace/api-keys/{key_id}")).await;
        assert_eq!(revoked.status, 204, "{}", revoked.text);
        assert_error(&list().await, 401, "invalid_api_key");
        drop(node_b);
    }
}
