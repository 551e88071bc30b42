//! `/admin`: tenants and users, and the member rules they drive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_tests::*;

both_backends! {
    async fn admins_create_list_and_patch_tenants(app: TestApp) {
        let admin = app.admin().await;
        let t = admin.post("/admin/tenants", json!({"name": "Acme", "region": "AIHK"})).await;
        assert_eq!(t.status, 201, "{}", t.text);
        assert_eq!(t.body["status"], "active");
        assert_eq!(t.body["region"], "AIHK");
        assert_eq!(t.body["ai_enabled"], false);
        assert_eq!(t.body["ai_access"], "disabled");
        let id = t.body["id"].as_str().unwrap().to_owned();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "7", "UUID v7: {id}");

        let p = admin.patch(&format!("/admin/tenants/{id}"), json!({"name": "Acme Ltd", "region": "AICA", "ai_enabled": true})).await;
        assert_eq!(p.status, 200, "{}", p.text);
        assert_eq!(p.body["name"], "Acme Ltd");
        assert_eq!(p.body["region"], "AICA");
        assert_eq!(p.body["ai_access"], "not_ready");

        assert_error(&admin.post("/admin/tenants", json!({"name": "X", "region": "EU"})).await, 422, "validation_failed");
        assert_error(&admin.post("/admin/tenants", json!({"name": "", "region": "AIHK"})).await, 422, "validation_failed");
        assert_error(&admin.post("/admin/tenants", json!({"region": "AIHK"})).await, 422, "validation_failed");
        assert_error(&admin.post("/admin/tenants", json!({"name": "X", "region": "AIHK", "owner": 1})).await, 422, "unknown_field");
        assert_error(&admin.patch(&format!("/admin/tenants/{id}"), json!({"status": "gone"})).await, 422, "validation_failed");
        assert_error(&admin.patch("/admin/tenants/0190f0f0-0000-7000-8000-000000000000", json!({"name": "Y"})).await, 404, "not_found");
        assert_error(&admin.patch("/admin/tenants/not-a-uuid", json!({"name": "Y"})).await, 404, "not_found");

        for i in 0..3 {
            admin.post("/admin/tenants", json!({"name": format!("T{i}"), "region": "AICA"})).await;
        }
        let page1 = admin.get("/admin/tenants?limit=2").await;
        assert_eq!(page1.status, 200);
        let names: Vec<_> = page1.body["data"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
        assert_eq!(names, ["T2", "T1"], "newest first");
        let cursor = page1.body["next_cursor"].as_str().unwrap();
        let page2 = admin.get(&format!("/admin/tenants?limit=2&cursor={cursor}")).await;
        let names: Vec<_> = page2.body["data"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
        assert_eq!(names, ["T0", "Acme Ltd"]);
        assert_eq!(page2.body["next_cursor"], Value::Null);
        assert_error(&admin.get("/admin/tenants?limit=0").await, 400, "invalid_query");
        assert_error(&admin.get("/admin/tenants?limit=201").await, 400, "invalid_query");
        assert_error(&admin.get("/admin/tenants?limit=abc").await, 400, "invalid_query");
        assert_error(&admin.get("/admin/tenants?cursor=%%%").await, 400, "invalid_cursor");
        assert_error(&admin.get("/admin/tenants?cursor=bm90LWEtY3Vyc29y").await, 400, "invalid_cursor");
    }

    async fn admins_create_assign_and_suspend_users(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let other = app.tenant(&admin, "Other", "AICA").await;
        let u = admin.post("/admin/users", json!({"email": "Zed@Acme.test", "name": "Zed", "password": PASSWORD})).await;
        assert_eq!(u.status, 201, "{}", u.text);
        assert_eq!(u.body["email"], "zed@acme.test");
        assert_eq!(u.body["status"], "unassigned");
        assert_eq!(u.body["tenant_id"], Value::Null);
        let id = u.body["id"].as_str().unwrap().to_owned();
        assert_error(&admin.post("/admin/users", json!({"email": "zed@acme.test", "name": "Z", "password": PASSWORD})).await, 409, "email_taken");
        assert_error(&admin.post("/admin/users", json!({"email": "y@acme.test", "name": "Y", "password": PASSWORD, "role": "god"})).await, 422, "validation_failed");
        assert_error(&admin.post("/admin/users", json!({"email": "y@acme.test", "name": "Y", "password": PASSWORD, "tenant_id": "0190f0f0-0000-7000-8000-000000000000"})).await, 422, "validation_failed");

        let zed = app.signin("zed@acme.test", PASSWORD).await;
        assert_error(&zed.get("/workspace").await, 403, "member_unassigned");

        let a = admin.patch(&format!("/admin/users/{id}/tenant"), json!({"tenant_id": acme["id"]})).await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.body["tenant_id"], acme["id"]);
        assert_eq!(a.body["status"], "active");
        let ws = zed.get("/workspace").await;
        assert_eq!(ws.status, 200, "{}", ws.text);
        assert_eq!(ws.body["tenant"]["id"], acme["id"]);
        assert_eq!(ws.body["member"]["email"], "zed@acme.test");
        assert_eq!(ws.body["support_view"], Value::Null);
        assert_eq!(ws.body["counts"]["skills"], 0);
        assert_eq!(zed.get("/auth/me").await.body["tenant"]["name"], "Acme");

        // Suspension takes effect at the very next request.
        let s = admin.patch(&format!("/admin/users/{id}"), json!({"status": "suspended"})).await;
        assert_eq!(s.body["status"], "suspended");
        assert_error(&zed.get("/workspace").await, 403, "member_suspended");
        // A refused member can still see why.
        let me = zed.get("/auth/me").await;
        assert_eq!(me.status, 200);
        assert_eq!(me.body["status"], "suspended");
        admin.patch(&format!("/admin/users/{id}"), json!({"status": "active"})).await;
        assert_eq!(zed.get("/workspace").await.status, 200);

        // A suspended tenant refuses its members.
        let acme_id = acme["id"].as_str().unwrap();
        admin.patch(&format!("/admin/tenants/{acme_id}"), json!({"status": "suspended"})).await;
        assert_error(&zed.get("/workspace").await, 403, "tenant_suspended");
        assert_eq!(zed.get("/auth/me").await.body["tenant"]["status"], "suspended");
        admin.patch(&format!("/admin/tenants/{acme_id}"), json!({"status": "active"})).await;
        assert_eq!(zed.get("/workspace").await.status, 200);

        // Moving and unassigning.
        admin.patch(&format!("/admin/users/{id}/tenant"), json!({"tenant_id": other["id"]})).await;
        assert_eq!(zed.get("/workspace").await.body["tenant"]["id"], other["id"]);
        let un = admin.patch(&format!("/admin/users/{id}/tenant"), json!({"tenant_id": null})).await;
        assert_eq!(un.body["status"], "unassigned");
        assert_error(&zed.get("/workspace").await, 403, "member_unassigned");
        assert_error(&admin.patch(&format!("/admin/users/{id}/tenant"), json!({"tenant_id": "0190f0f0-0000-7000-8000-000000000000"})).await, 422, "validation_failed");
        assert_error(&admin.patch("/admin/users/0190f0f0-0000-7000-8000-000000000000", json!({"name": "N"})).await, 404, "not_found");
        // The tenant must be named: null unassigns, a missing field is a mistake.
        assert_error(&admin.patch(&format!("/admin/users/{id}/tenant"), json!({})).await, 422, "validation_failed");
        assert_error(&admin.post("/auth/ip-admin", json!({})).await, 422, "validation_failed");

        // Rename and promote.
        let r = admin.patch(&format!("/admin/users/{id}"), json!({"name": "Zed Z", "role": "platform_admin"})).await;
        assert_eq!(r.body["name"], "Zed Z");
        assert_eq!(r.body["role"], "platform_admin");
        assert_eq!(zed.get("/admin/tenants").await.status, 200);
    }

    async fn users_are_listed_with_a_tenant_filter(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let m1 = app.member_of(&admin, &acme).await;
        let m2 = app.member_of(&admin, &acme).await;
        let all = admin.get("/admin/users").await;
        assert_eq!(all.body["data"].as_array().unwrap().len(), 3);
        let acme_id = acme["id"].as_str().unwrap();
        let only = admin.get(&format!("/admin/users?tenant_id={acme_id}")).await;
        let ids: Vec<_> = only.body["data"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap().to_owned()).collect();
        assert_eq!(ids, [m2.id.clone(), m1.id.clone()]);
        let page = admin.get(&format!("/admin/users?tenant_id={acme_id}&limit=1")).await;
        assert_eq!(page.body["data"].as_array().unwrap().len(), 1);
        assert!(page.body["next_cursor"].is_string());
        assert_error(&admin.get("/admin/users?tenant_id=nope").await, 400, "invalid_query");
        assert_error(&admin.get("/admin/users?colour=red").await, 400, "invalid_query");
    }

    async fn admin_routes_refuse_members_and_keys(app: TestApp) {
        let admin = app.admin().await;
        let acme = app.tenant(&admin, "Acme", "AIHK").await;
        let member = app.member_of(&admin, &acme).await;
        let acme_id = acme["id"].as_str().unwrap();
        let calls = [
            (Method::GET, "/admin/tenants".to_owned(), None),
            (Method::POST, "/admin/tenants".to_owned(), Some(json!({"name": "X", "region": "AIHK"}))),
            (Method::PATCH, format!("/admin/tenants/{acme_id}"), Some(json!({"name": "X"}))),
            (Method::GET, "/admin/users".to_owned(), None),
            (Method::POST, "/admin/users".to_owned(), Some(json!({"email": "q@q.qq", "name": "Q", "password": PASSWORD}))),
            (Method::PATCH, format!("/admin/users/{}", member.id), Some(json!({"role": "platform_admin"}))),
            (Method::PATCH, format!("/admin/users/{}/tenant", member.id), Some(json!({"tenant_id": null}))),
        ];
        for (method, path, body) in calls {
            let mut rb = member.request(method.clone(), &path);
            if let Some(b) = &body {
                rb = rb.json(b);
            }
            assert_error(&member.send(rb).await, 403, "admin_required");
            let mut rb = app.anon().request(method, &path);
            if let Some(b) = &body {
                rb = rb.json(b);
            }
            assert_error(&app.anon().send(rb).await, 401, "unauthenticated");
        }
        assert_eq!(member.get("/workspace").await.status, 200);
    }

    async fn a_suspended_admin_keeps_no_admin_power(app: TestApp) {
        let admin = app.admin().await;
        let t = app.tenant(&admin, "Acme", "AIHK").await;
        let email = format!("a{}@gc.test", unique());
        let made = admin.post("/admin/users", json!({"email": email, "name": "Second", "password": PASSWORD, "role": "platform_admin"})).await;
        assert_eq!(made.status, 201, "{}", made.text);
        let second = app.signin(&email, PASSWORD).await;
        assert_eq!(second.get("/admin/users").await.status, 200);
        let r = admin.patch(&format!("/admin/users/{}", second.id), json!({"status": "suspended"})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        // With its existing session, every admin power is refused, un-suspending itself too.
        assert_error(&second.get("/admin/users").await, 403, "member_suspended");
        assert_error(&second.get("/admin/tenants").await, 403, "member_suspended");
        let new_admin = json!({"email": format!("b{}@gc.test", unique()), "name": "X", "password": PASSWORD, "role": "platform_admin"});
        assert_error(&second.post("/admin/users", new_admin).await, 403, "member_suspended");
        assert_error(&second.patch(&format!("/admin/users/{}", second.id), json!({"status": "active"})).await, 403, "member_suspended");
        assert_error(&second.post("/auth/ip-admin", json!({"tenant_id": t["id"]})).await, 403, "member_suspended");
        assert_error(&second.post("/admin/tenants", json!({"name": "X", "region": "AIHK"})).await, 403, "member_suspended");
        let keys = format!("/admin/tenants/{}/ai-keys", t["id"].as_str().unwrap());
        assert_error(&second.get(&keys).await, 403, "member_suspended");
        assert_error(&second.post(&keys, json!({"region": "AIHK", "secret": "sk-x"})).await, 403, "member_suspended");
        assert_error(&second.delete(&format!("{keys}/0190f0f0-0000-7000-8000-000000000000")).await, 403, "member_suspended");
        assert_error(&second.post("/admin/ai-gateways/diagnostics", json!({})).await, 403, "member_suspended");
        // Its own account stays usable, as for a suspended member.
        assert_eq!(second.get("/auth/me").await.status, 200);
        assert_eq!(second.get("/auth/sessions").await.status, 200);
        // A fresh sign-in gives no more.
        let again = app.signin(&email, PASSWORD).await;
        assert_error(&again.get("/admin/users").await, 403, "member_suspended");
    }

    async fn moving_a_member_revokes_the_keys_made_in_the_old_tenant(app: TestApp) {
        let admin = app.admin().await;
        let a = app.tenant(&admin, "A", "AIHK").await;
        let b = app.tenant(&admin, "B", "AIHK").await;
        let member = app.member_of(&admin, &a).await;
        let key = member.new_key(&["workspace:read"]).await;
        assert_eq!(member.with_key(&key).get("/workspace/skills").await.status, 200);
        // A -> B -> A: the key made in A stays revoked.
        let r = admin.patch(&format!("/admin/users/{}/tenant", member.id), json!({"tenant_id": b["id"]})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let r = admin.patch(&format!("/admin/users/{}/tenant", member.id), json!({"tenant_id": a["id"]})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_error(&member.with_key(&key).get("/workspace/skills").await, 401, "invalid_api_key");
        let feed = member.get("/workspace/activity").await;
        let revoked = feed.body["data"].as_array().unwrap().iter().any(|l| l["action"] == "api_key.revoked" && l["detail"]["reason"] == "membership_changed");
        assert!(revoked, "{}", feed.text);
    }
}
