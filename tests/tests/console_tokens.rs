//! The console's admin tokens and a workspace key's monthly spend limit, in a real browser
//! (issue 31): an admin makes a token on the Users page (shown once, listed, revoked: the
//! token stops working at once), and a member gives a key a monthly spend limit of its own on
//! the API keys page (checked against the workspace's before sending, saved, shown, removed).
//!
//! As `console.rs`: Debian's headless Chromium through `chromedriver`, SQLite only; without
//! them a SKIPPED line, unless `GC_REQUIRE_BROWSER=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gc_tests::console::Console;
use gc_tests::*;

#[actix_web::test]
async fn an_admin_token_is_shown_once_listed_and_revoked() {
    let Some(c) = Console::start("console_admin_tokens").await else {
        return;
    };
    let b = &c.browser;
    c.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    c.open("/admin/users").await;
    b.wait_text("#admin-tokens", "No admin tokens yet.").await;

    // Create: the token is in the page once, with how to use it.
    b.fill_labelled("Token name", "provisioning").await;
    b.select_labelled("Scope", "admin:read").await;
    b.click_button("Create token").await;
    let token = b.wait_text("#new-admin-token", "gca_").await;
    let token = token.trim().to_owned();
    assert!(token.starts_with("gca_"), "{token}");
    b.wait_text("main", "this is the only time it is shown")
        .await;

    // Listed, with its scope, never with the token.
    let listed = c.admin.get("/admin/tokens").await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let row = listed.body["data"][0].clone();
    assert_eq!(row["name"], "provisioning", "{row}");
    assert_eq!(row["scope"], "admin:read", "{row}");
    let table = b.wait_text("#admin-tokens table", "provisioning").await;
    assert!(table.contains("admin:read"), "{table}");

    // The token works as a read-only admin credential.
    let script = c.admin.with_key(&token);
    assert_eq!(script.get("/admin/tenants").await.status, 200);
    assert_error(
        &script
            .post("/admin/tenants", json!({"name": "Nope", "region": "AIHK"}))
            .await,
        403,
        "insufficient_scope",
    );

    // Dismissed: gone from the page; after a reload it is nowhere, but the row still is, and
    // its last use is shown.
    b.click_button("I have stored it").await;
    b.wait_text("main", "It is no longer shown").await;
    assert!(!c.page_html().await.contains(&token));
    c.open("/admin/users").await;
    b.wait_text("#admin-tokens table", "provisioning").await;
    assert!(!c.page_html().await.contains(&token));
    let listed = c.admin.get("/admin/tokens").await;
    assert!(
        !listed.body["data"][0]["last_used_at"].is_null(),
        "{}",
        listed.text
    );

    // Revoke, after a confirmation: refused at once.
    b.click("[aria-label='Revoke admin token provisioning']")
        .await;
    b.click_button("Yes, revoke").await;
    b.wait_text("main", "Revoked “provisioning”.").await;
    b.wait_text("#admin-tokens", "No admin tokens yet.").await;
    assert_eq!(script.get("/admin/tenants").await.status, 401);
    assert_eq!(c.admin.get("/admin/tokens").await.body["data"], json!([]));
    b.assert_no_console_errors("admin tokens").await;
}

#[actix_web::test]
async fn a_key_gets_a_monthly_spend_limit_of_its_own() {
    let Some(c) = Console::start("console_key_spend").await else {
        return;
    };
    let b = &c.browser;
    let tenant_path = format!("/admin/tenants/{}", c.tenant["id"].as_str().unwrap());
    let r = c
        .admin
        .patch(&tenant_path, json!({"limits": {"monthly_spend": "20.00"}}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let key = c.member.new_key(&["run"]).await;
    assert!(key.starts_with("gc_"));

    c.sign_in(&c.member.email, PASSWORD).await;
    c.open("/keys").await;
    b.wait_text("#workspace-limits", "20.00 a month").await;

    // Above the workspace's: caught before sending, next to the field.
    b.click("main [aria-label^='Edit the limits of']").await;
    b.wait_for("#key-limits").await;
    b.fill("#key-limits input[name=monthly_spend]", "25.50")
        .await;
    b.click_button("Save limits").await;
    let refused = b
        .wait_text(
            "#key-limits .field-error:not([hidden])",
            "at most the workspace's limit (20.00)",
        )
        .await;
    assert!(refused.starts_with("Monthly spend limit"), "{refused}");
    let keys = c.member.get("/workspace/api-keys").await;
    assert!(
        keys.body["data"][0]["limits"]["monthly_spend"].is_null(),
        "nothing was sent: {}",
        keys.text
    );
    // Not an amount: refused too.
    b.fill("#key-limits input[name=monthly_spend]", "ten").await;
    b.click_button("Save limits").await;
    b.wait_text(
        "#key-limits .field-error:not([hidden])",
        "must be an amount such as 25.00",
    )
    .await;

    // Within it: saved by PATCH, shown in the list after a reload, and in the form.
    b.fill("#key-limits input[name=monthly_spend]", "12.5")
        .await;
    b.click_button("Save limits").await;
    b.wait_text("main", "saved").await;
    let keys = c.member.get("/workspace/api-keys").await;
    assert_eq!(
        keys.body["data"][0]["limits"]["monthly_spend"], "12.50",
        "{}",
        keys.text
    );
    c.open("/keys").await;
    b.wait_text("main table", "12.50 a month").await;
    b.click("main [aria-label^='Edit the limits of']").await;
    b.wait_for("#key-limits").await;
    let shown = b
        .exec(
            "return document.querySelector('#key-limits input[name=monthly_spend]').value",
            json!([]),
        )
        .await;
    assert_eq!(shown, "12.50");

    // Emptied: the key has no spend limit of its own again.
    b.fill("#key-limits input[name=monthly_spend]", "").await;
    b.click_button("Save limits").await;
    b.wait_text("main", "saved").await;
    let keys = c.member.get("/workspace/api-keys").await;
    assert!(
        keys.body["data"][0]["limits"]["monthly_spend"].is_null(),
        "{}",
        keys.text
    );
    assert!(!c.page_text().await.contains(&key));
    b.assert_no_console_errors("key spend limit").await;
}
