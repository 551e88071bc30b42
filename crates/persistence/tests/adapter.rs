//! The adapter suite: every test body runs once on SQLite (a temp file) and once on
//! PostgreSQL (a fresh database at `GC_TEST_POSTGRES_URL`; skipped with a printed
//! `SKIPPED PostgreSQL leg` line when the server does not answer, a failure when
//! `GC_REQUIRE_POSTGRES=1`).

// Test bodies are plain functions run by the harness, outside `#[test]`: unwrap is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use support::*;

on_both_backends!(
    connects_and_migrates_once,
    data_survives_reopening,
    pool_exhaustion_is_unavailable_not_a_hang,
    users_emails_are_unique_case_insensitively,
    users_list_newest_first_with_cursor_and_tenant_filter,
    users_update_and_assign_tenant,
    tenants_insert_list_update,
    sessions_context_with_tenant_and_shadow,
    sessions_list_delete_and_expire,
    change_password_revokes_other_sessions,
    throttle_counts_failures_per_email,
    throttle_holds_under_concurrency,
    quota_takes_hold_under_concurrency,
    token_reservations_hold_under_concurrency_and_settle,
    records_crud_with_versions_and_activity,
    records_of_another_tenant_are_not_found,
    sources_only_through_their_own_collection,
    deleting_a_collection_deletes_its_sources,
    record_versions_rise_with_every_record_write_and_only_then,
    records_paginate_and_count,
    settings_upsert_with_versions,
    activity_is_per_tenant_newest_first,
    activity_batches_are_stored_whole,
    run_usage_batches_are_stored_whole,
    api_keys_context_list_and_revoke,
    ai_key_versions_follow_every_key_change,
    ai_keys_usable_filter,
    concurrent_writers_all_succeed,
    inline_reads_never_wait_and_defer_writes,
);

use std::time::{Duration as StdDuration, Instant};

use chrono::Duration;
use gc_domain::model::{Role, Status, TenantPatch, UserPatch};
use gc_domain::page::PageRequest;
use gc_domain::ports::{
    Attempt, HealthRepo, SessionRepo, SessionWindow, ShadowChange, SigninThrottleRepo, TenantRepo,
    UserRepo,
};
use gc_domain::values::{Email, Region};
use gc_domain::DomainError;
use gc_persistence::{DbStore, PoolOptions};

// ---- Connection, migrations, pool ----------------------------------------------------------

fn connects_and_migrates_once(db: &Db) {
    db.store.ping().unwrap();
    // The harness migrated already: a second run applies nothing.
    assert_eq!(db.store.migrate().unwrap(), Vec::<String>::new());
    // A fresh store on the same database agrees.
    let again = db.reopen(PoolOptions::default());
    assert!(again.migrate().unwrap().is_empty());
    again.ping().unwrap();
}

fn data_survives_reopening(db: &Db) {
    let m = member(&db.store, "keep@example.com");
    drop(db.reopen(PoolOptions::default()));
    let reopened = db.reopen(PoolOptions::default());
    assert!(reopened.migrate().unwrap().is_empty());
    assert_eq!(reopened.find_user(m.user.id).unwrap(), Some(m.user.clone()));
    assert_eq!(reopened.find_tenant(m.tenant.id).unwrap(), Some(m.tenant));
}

fn pool_exhaustion_is_unavailable_not_a_hang(db: &Db) {
    let small = db.reopen(PoolOptions {
        max_size: 1,
        connection_timeout: StdDuration::from_millis(300),
        ..PoolOptions::default()
    });
    small.ping().unwrap();
    let held = small.hold_connection().unwrap();
    let started = Instant::now();
    let err = small.ping().unwrap_err();
    assert_eq!(
        err,
        DomainError::Unavailable {
            retry_after_secs: 2
        }
    );
    assert!(started.elapsed() < StdDuration::from_secs(10));
    drop(held);
    small.ping().unwrap();
}

// ---- Users and tenants -------------------------------------------------------------------

fn users_emails_are_unique_case_insensitively(db: &Db) {
    let ann = user(&db.store, "Ann@Example.com", None);
    assert_eq!(ann.email.as_str(), "ann@example.com");
    assert_eq!(ann.status, Status::Active);
    assert_eq!(ann.tenant_id, None);
    let again = db.store.insert_user(&gc_domain::model::User {
        id: gc_domain::model::new_id(),
        email: Email::parse("email", "ANN@example.COM").unwrap(),
        name: "Other".into(),
        role: Role::Member,
        status: Status::Active,
        tenant_id: None,
        password_hash: "x".into(),
        created_at: now(),
    });
    assert_eq!(again.unwrap_err(), DomainError::EmailTaken);
    let found = db
        .store
        .find_user_by_email(&Email::parse("email", "aNN@example.com").unwrap())
        .unwrap();
    assert_eq!(found, Some(ann.clone()));
    assert_eq!(db.store.find_user(ann.id).unwrap(), Some(ann));
    assert_eq!(
        db.store.find_user(gc_domain::model::new_id()).unwrap(),
        None
    );
}

fn users_list_newest_first_with_cursor_and_tenant_filter(db: &Db) {
    let t = tenant(&db.store, "Acme");
    let other = tenant(&db.store, "Other");
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(user(&db.store, &format!("u{i}@example.com"), Some(&t)).id);
    }
    user(&db.store, "x@example.com", Some(&other));
    user(&db.store, "nobody@example.com", None);
    ids.reverse(); // newest first

    // One page of two of the tenant's users after `after`: their ids and the next cursor.
    let page = |after| {
        let page = db
            .store
            .list_users(
                db.admin(),
                Some(t.id),
                &PageRequest::new(Some(2), after).unwrap(),
            )
            .unwrap();
        (
            page.items.iter().map(|u| u.id).collect::<Vec<_>>(),
            page.next,
        )
    };
    let (first, next) = page(None);
    assert_eq!(first, ids[..2]);
    assert_eq!(next, Some(ids[1]));
    let (second, next) = page(next);
    assert_eq!(second, ids[2..4]);
    let (third, next) = page(next);
    assert_eq!(third, ids[4..]);
    assert_eq!(next, None);

    let all = db
        .store
        .list_users(db.admin(), None, &PageRequest::first())
        .unwrap();
    // The fixtures' admins (who made the tenants) are listed too; the members are all here.
    assert_eq!(
        all.items
            .iter()
            .filter(|u| u.role == gc_domain::model::Role::Member)
            .count(),
        7
    );
    assert!(all.items.windows(2).all(|w| w[0].id > w[1].id));
    assert_eq!(all.next, None);
}

fn users_update_and_assign_tenant(db: &Db) {
    let t = tenant(&db.store, "Acme");
    let u = user(&db.store, "bob@example.com", None);
    let updated = db
        .store
        .update_user(
            db.admin(),
            u.id,
            &UserPatch {
                name: Some("Bobby".into()),
                role: Some(Role::PlatformAdmin),
                status: Some(Status::Suspended),
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        (updated.name.as_str(), updated.role, updated.status),
        ("Bobby", Role::PlatformAdmin, Status::Suspended)
    );
    assert_eq!(
        db.store
            .update_user(db.admin(), u.id, &UserPatch::default())
            .unwrap(),
        Some(updated.clone())
    );
    assert_eq!(
        db.store
            .update_user(
                db.admin(),
                gc_domain::model::new_id(),
                &UserPatch::default()
            )
            .unwrap(),
        None
    );
    // The one promoted above, and the fixtures' admins.
    assert!(db.store.count_admins().unwrap() >= 1);

    let admin = db.admin().clone();
    let assigned = db
        .store
        .move_member(&admin, u.id, None, Some(t.id), now(), None)
        .unwrap()
        .unwrap();
    assert_eq!(assigned.tenant_id, Some(t.id));
    // A move from where the member no longer is changes nothing (compare and set).
    assert_eq!(
        db.store
            .move_member(&admin, u.id, None, None, now(), None)
            .unwrap(),
        None
    );
    assert_eq!(
        db.store
            .move_member(
                &admin,
                u.id,
                Some(t.id),
                Some(gc_domain::model::new_id()),
                now(),
                None
            )
            .unwrap_err(),
        DomainError::NotFound("tenant")
    );
    assert_eq!(
        db.store.find_user(u.id).unwrap().unwrap().tenant_id,
        Some(t.id)
    );
    let unassigned = db
        .store
        .move_member(&admin, u.id, Some(t.id), None, now(), None)
        .unwrap()
        .unwrap();
    assert_eq!(unassigned.tenant_id, None);
    assert_eq!(
        db.store
            .move_member(
                &admin,
                gc_domain::model::new_id(),
                None,
                Some(t.id),
                now(),
                None
            )
            .unwrap(),
        None
    );
}

fn tenants_insert_list_update(db: &Db) {
    let a = tenant(&db.store, "A");
    let b = tenant(&db.store, "B");
    assert_eq!(db.store.find_tenant(a.id).unwrap(), Some(a.clone()));
    let page = db
        .store
        .list_tenants(db.admin(), &PageRequest::new(Some(1), None).unwrap())
        .unwrap();
    assert_eq!(page.items, vec![b.clone()]);
    assert_eq!(page.next, Some(b.id));
    let page = db
        .store
        .list_tenants(db.admin(), &PageRequest::new(Some(1), page.next).unwrap())
        .unwrap();
    assert_eq!(page.items, vec![a.clone()]);
    assert_eq!(page.next, None);

    let patched = db
        .store
        .update_tenant(
            db.admin(),
            a.id,
            &TenantPatch {
                name: Some("A2".into()),
                status: Some(Status::Suspended),
                region: Some(Region::Aica),
                ai_enabled: Some(false),
                requests_per_minute: Some(Some(60)),
                tokens_per_minute: None,
                monthly_tokens: Some(None),
                monthly_spend: Some(Some(25_500_000_000)),
                allowed_models: Some(Some(vec!["gpt-4o-mini".into()])),
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(patched.name, "A2");
    assert_eq!(patched.status, Status::Suspended);
    assert_eq!(patched.region, Region::Aica);
    assert!(!patched.ai_enabled);
    assert_eq!(patched.limits.requests_per_minute, Some(60));
    assert_eq!(patched.limits.monthly_tokens, None);
    assert_eq!(patched.limits.monthly_spend, Some(25_500_000_000));
    assert_eq!(patched.allowed_models, Some(vec!["gpt-4o-mini".to_owned()]));
    // A patch of nothing changes nothing and answers the tenant.
    let unchanged = db
        .store
        .update_tenant(db.admin(), a.id, &TenantPatch::default());
    assert_eq!(unchanged.unwrap(), Some(patched.clone()));
    assert_eq!(db.store.find_tenant(a.id).unwrap(), Some(patched));
    assert_eq!(
        db.store
            .update_tenant(
                db.admin(),
                gc_domain::model::new_id(),
                &TenantPatch::default()
            )
            .unwrap(),
        None
    );
}

// ---- Sessions and the throttle ------------------------------------------------------------

fn sessions_context_with_tenant_and_shadow(db: &Db) {
    let m = member(&db.store, "member@example.com");
    let s = session(&db.store, &m.user, "hash-member");
    let ctx = db.store.session_context("hash-member").unwrap().unwrap();
    assert_eq!(ctx.session, s);
    assert_eq!(ctx.user, m.user);
    assert_eq!(ctx.tenant, Some(m.tenant.clone()));
    assert!(ctx.shadow_tenant.is_none());
    assert!(db.store.session_context("unknown").unwrap().is_none());

    // An unassigned user: no tenant.
    let lone = user(&db.store, "lone@example.com", None);
    session(&db.store, &lone, "hash-lone");
    let ctx = db.store.session_context("hash-lone").unwrap().unwrap();
    assert!(ctx.tenant.is_none());

    // An admin enters and leaves the Shadow view of the member's tenant.
    let admin = user_with_role(&db.store, "admin@example.com", None, Role::PlatformAdmin);
    let a = session(&db.store, &admin, "hash-admin");
    let enter = activity_a(
        &admin_scope(&db.store, &admin),
        m.tenant.id,
        "shadow.enter",
        None,
    );
    let since = enter.at();
    db.store
        .set_shadow(a.id, ShadowChange::Enter(&enter))
        .unwrap();
    let ctx = db.store.session_context("hash-admin").unwrap().unwrap();
    assert_eq!(ctx.shadow_tenant, Some(m.tenant.clone()));
    assert_eq!(ctx.session.shadow_tenant_id, Some(m.tenant.id));
    assert_eq!(ctx.session.shadow_since, Some(since));
    assert!(ctx.tenant.is_none());
    // The viewers of the member's tenant seen in the minute before (after) `since`.
    let viewers = |minutes| {
        let window = SessionWindow {
            seen_after: since + Duration::minutes(minutes),
            now: now(),
        };
        db.store.shadow_viewers(m.tenant.id, window).unwrap()
    };
    assert_eq!(viewers(-1), vec![("admin@example.com".to_owned(), since)]);
    assert!(viewers(1).is_empty());

    let feed =
        gc_domain::ports::WorkspaceRepo::list_activity(&db.store, &m.read, &PageRequest::first())
            .unwrap();
    assert_eq!(feed.items.len(), 1);
    assert_eq!(feed.items[0].action, "shadow.enter");
    assert_eq!(feed.items[0].actor, admin_actor(&admin));

    let leave = activity_a(
        &admin_scope(&db.store, &admin),
        m.tenant.id,
        "shadow.leave",
        None,
    );
    db.store
        .set_shadow(a.id, ShadowChange::Leave(&leave))
        .unwrap();
    let ctx = db.store.session_context("hash-admin").unwrap().unwrap();
    assert!(ctx.shadow_tenant.is_none());
    assert_eq!(ctx.session.shadow_since, None);
    assert!(viewers(-1).is_empty());
    assert_eq!(actions(db, &m), ["shadow.leave", "shadow.enter"]);

    // A Shadow view of a tenant that does not exist writes nothing.
    let ghost = gc_domain::model::new_id();
    let bad = activity_a(&admin_scope(&db.store, &admin), ghost, "shadow.enter", None);
    assert_eq!(
        db.store
            .set_shadow(a.id, ShadowChange::Enter(&bad))
            .unwrap_err(),
        DomainError::NotFound("tenant")
    );
}

fn sessions_list_delete_and_expire(db: &Db) {
    let u = user(&db.store, "s@example.com", None);
    let other = user(&db.store, "o@example.com", None);
    let s1 = session(&db.store, &u, "h1");
    let s2 = session(&db.store, &u, "h2");
    let s3 = session(&db.store, &u, "h3");
    let o1 = session(&db.store, &other, "ho");
    let listed = db.store.list_sessions(u.id).unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id).collect::<Vec<_>>(),
        [s3.id, s2.id, s1.id]
    );

    let later = now() + Duration::minutes(5);
    db.store.touch_session(s1.id, later).unwrap();
    let touched = db.store.session_context("h1").unwrap().unwrap();
    assert_eq!(touched.session.last_seen_at, later);

    // Another user's session is not mine to delete.
    assert!(!db.store.delete_session(u.id, o1.id).unwrap());
    assert!(db.store.delete_session(u.id, s2.id).unwrap());
    assert!(!db.store.delete_session(u.id, s2.id).unwrap());
    assert_eq!(db.store.delete_other_sessions(u.id, s1.id).unwrap(), 1);
    assert_eq!(
        db.store
            .list_sessions(u.id)
            .unwrap()
            .iter()
            .map(|s| s.id)
            .collect::<Vec<_>>(),
        [s1.id]
    );
    assert!(db.store.session_context("ho").unwrap().is_some());

    // Expiry: o1 idle since before `idle_before` goes; s1 was touched later and stays.
    let expire = |seen_after, now| {
        let window = SessionWindow { seen_after, now };
        db.store.delete_expired_sessions(window).unwrap()
    };
    let removed = expire(now() + Duration::minutes(1), now());
    assert_eq!(removed, 1);
    assert!(db.store.session_context("ho").unwrap().is_none());
    assert!(db.store.session_context("h1").unwrap().is_some());
    // Absolute expiry.
    let removed = expire(now() - Duration::days(1), now() + Duration::days(31));
    assert_eq!(removed, 1);
    assert!(db.store.list_sessions(u.id).unwrap().is_empty());
}

fn change_password_revokes_other_sessions(db: &Db) {
    let u = user(&db.store, "pw@example.com", None);
    let keep = session(&db.store, &u, "keep");
    session(&db.store, &u, "gone1");
    session(&db.store, &u, "gone2");
    db.store
        .change_password(u.id, "$2b$new", Some(keep.id))
        .unwrap();
    assert_eq!(
        db.store.find_user(u.id).unwrap().unwrap().password_hash,
        "$2b$new"
    );
    assert_eq!(db.store.list_sessions(u.id).unwrap(), vec![keep]);
    db.store.change_password(u.id, "$2b$newer", None).unwrap();
    assert!(db.store.list_sessions(u.id).unwrap().is_empty());
    assert_eq!(
        db.store
            .change_password(gc_domain::model::new_id(), "x", None)
            .unwrap_err(),
        DomainError::NotFound("user")
    );
}

fn throttle_counts_failures_per_email(db: &Db) {
    use gc_domain::ports::Reservation;
    let t0 = now() - Duration::minutes(20);
    // At most two attempts of `key` in the 15 minutes before `at`.
    let reserve = |key, at: chrono::DateTime<chrono::Utc>| {
        let attempt = Attempt {
            key,
            since: at - Duration::minutes(15),
            at,
            max: 2,
        };
        db.store.reserve_attempt(&attempt).unwrap()
    };
    for i in 0..3 {
        let at = t0 + Duration::minutes(i * 10);
        assert_eq!(reserve("ann@example.com", at), Reservation::Reserved);
    }
    // Two attempts in the window (t0+10, t0+20), case-insensitively: the third is refused.
    let at = t0 + Duration::minutes(21);
    assert_eq!(
        reserve("ANN@example.com", at),
        Reservation::Locked {
            oldest: t0 + Duration::minutes(10)
        }
    );
    // Other emails have their own count.
    assert_eq!(reserve("bob@example.com", at), Reservation::Reserved);
    db.store.clear_failures("ann@example.com").unwrap();
    assert_eq!(reserve("ann@example.com", at), Reservation::Reserved);
}

/// Runs `body(store, i)` for each `i` in `0..calls`, all at once, on four pools of the
/// database (as on four nodes), and sums what the calls return.
fn on_four_pools(db: &Db, calls: usize, body: impl Fn(&DbStore, usize) -> u64 + Sync) -> u64 {
    let stores: Vec<_> = (0..4).map(|_| db.reopen(PoolOptions::default())).collect();
    let total = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for i in 0..calls {
            let (store, total, body) = (&stores[i % stores.len()], &total, &body);
            s.spawn(move || {
                total.fetch_add(body(store, i), std::sync::atomic::Ordering::SeqCst);
            });
        }
    });
    total.into_inner()
}

/// Forty concurrent attempts for one email, from several pools (as from several nodes):
/// exactly the limit is admitted.
fn throttle_holds_under_concurrency(db: &Db) {
    use gc_domain::ports::Reservation;
    let admitted = on_four_pools(db, 40, |store, _| {
        let at = now();
        let r = store
            .reserve_attempt(&Attempt {
                key: "race@example.com",
                since: at - Duration::minutes(15),
                at,
                max: 5,
            })
            .unwrap();
        u64::from(r == Reservation::Reserved)
    });
    assert_eq!(admitted, 5);
}

/// Token reservations (decision 0025) from several pools (as from several nodes) never pass
/// a limit together; a refused one counts nothing in any window; hand-backs and settlements
/// never go below zero, and hostile sizes stay in range.
fn token_reservations_hold_under_concurrency_and_settle(db: &Db) {
    use gc_domain::policy::quota::{QuotaSubject, QuotaWindow, Take, TokenTake};
    use gc_domain::ports::QuotaRepo;
    let start_ms = 1_800_000_000_000;
    let (t, k) = (new_id(), new_id());
    let minute = QuotaWindow {
        subject: QuotaSubject::TenantMinute(t),
        start_ms,
    };
    let key = QuotaWindow {
        subject: QuotaSubject::KeyMinute(k),
        start_ms,
    };
    let month = QuotaWindow {
        subject: QuotaSubject::TenantMonth(t),
        start_ms: start_ms - 3_600_000,
    };
    // Named out of the lock order on purpose: the store orders them.
    let takes = |tokens| {
        [
            TokenTake {
                window: month,
                tokens,
                max: Some(100),
            },
            TokenTake {
                window: key,
                tokens,
                max: None,
            },
            TokenTake {
                window: minute,
                tokens,
                max: Some(1000),
            },
        ]
    };
    let admitted = on_four_pools(db, 40, |store, _| {
        match store.reserve_tokens(&takes(7)).unwrap() {
            Take::Taken(g) => {
                assert_eq!(g.len(), 3);
                1
            }
            Take::Full(_) => 0,
        }
    });
    // 14 runs of 7 fit 100.
    assert_eq!(admitted, 14);
    let store = &db.store;
    assert_eq!(
        store.window_tokens(&[month, key, minute]).unwrap(),
        vec![98, 98, 98]
    );
    // A refused take (the month is full) counts nothing anywhere.
    assert_eq!(store.reserve_tokens(&takes(3)).unwrap(), Take::Full(0));
    assert_eq!(
        store.window_tokens(&[month, key, minute]).unwrap(),
        vec![98, 98, 98]
    );
    // Hand-back, never below zero.
    store.release_tokens(&[minute, month], 90).unwrap();
    store.release_tokens(&[minute], 90).unwrap();
    assert_eq!(
        store.window_tokens(&[month, key, minute]).unwrap(),
        vec![8, 98, 0]
    );
    // A hostile size on an unlimited window stays in range, and so do sums of it.
    let huge = [TokenTake {
        window: key,
        tokens: u64::MAX,
        max: None,
    }];
    assert!(matches!(
        store.reserve_tokens(&huge).unwrap(),
        Take::Taken(_)
    ));
    assert!(matches!(
        store.reserve_tokens(&huge).unwrap(),
        Take::Full(0)
    ));
    let used = store.window_tokens(&[key]).unwrap()[0];
    assert!(used > 1 << 60 && used <= 1 << 62, "{used}");
}

fn quota_takes_hold_under_concurrency(db: &Db) {
    use gc_domain::policy::quota::{Grant, QuotaSubject, QuotaWindow, RequestTake, Take};
    use gc_domain::ports::QuotaRepo;
    let start_ms = 1_800_000_000_000;
    let window = |subject| QuotaWindow { subject, start_ms };
    let tenant = window(QuotaSubject::TenantMinute(new_id()));
    let key = window(QuotaSubject::KeyMinute(new_id()));
    let take = |window, max, want| RequestTake { window, max, want };
    let one = |window, max| take(window, max, 1);
    let taken = |granted, count| Take::Taken(vec![Grant { granted, count }]);
    let admitted = on_four_pools(db, 40, |store, i| {
        // Half the callers take the tenant alone, half the key (3) and the tenant (7).
        let takes = if i % 2 == 0 {
            vec![one(tenant, 7)]
        } else {
            vec![one(key, 3), one(tenant, 7)]
        };
        u64::from(matches!(
            store.take_request(&takes).unwrap(),
            Take::Taken(_)
        ))
    });
    assert_eq!(admitted, 7);
    // Nothing is left counted by refused two-window takes: the tenant holds exactly 7.
    let store = &db.store;
    assert_eq!(store.take_request(&[one(tenant, 8)]).unwrap(), taken(1, 8));
    // The key's count holds only its admitted takes (at most 3), never a refused one.
    let Take::Taken(key_count) = store.take_request(&[one(key, 100)]).unwrap() else {
        panic!("the key window is not full")
    };
    assert!(key_count[0].count <= 4, "{key_count:?}");
    assert_eq!(store.window_tokens(&[tenant, key]).unwrap(), vec![0, 0]);
    let next = QuotaWindow {
        start_ms: start_ms + 60_000,
        ..tenant
    };
    assert_eq!(store.take_request(&[one(next, 1)]).unwrap(), taken(1, 1));
    assert_eq!(store.take_request(&[one(next, 1)]).unwrap(), Take::Full(0));
    assert_eq!(store.prune_windows(start_ms + 60_000, 0).unwrap(), 2);

    // Leases: concurrent takes of several requests at once, from several pools, count
    // exactly the limit between them and never pass it; a lease that does not fit falls
    // back to a single request, and a refused two-window take gives its lease back.
    let leased = window(QuotaSubject::TenantMinute(new_id()));
    let granted = on_four_pools(db, 24, |store, _| {
        match store.take_request(&[take(leased, 50, 4)]).unwrap() {
            Take::Taken(g) => {
                assert!(g[0].count <= 50, "{g:?}");
                assert!(g[0].granted == 4 || g[0].granted == 1, "{g:?}");
                g[0].granted
            }
            Take::Full(_) => 0,
        }
    });
    assert_eq!(granted, 50);
    let lease_key = window(QuotaSubject::KeyMinute(new_id()));
    let fresh = window(QuotaSubject::TenantMinute(new_id()));
    assert_eq!(
        store.take_request(&[one(lease_key, 1)]).unwrap(),
        taken(1, 1)
    );
    let both = [take(fresh, 100, 10), one(lease_key, 1)];
    assert_eq!(store.take_request(&both).unwrap(), Take::Full(1));
    assert_eq!(
        store.take_request(&[take(fresh, 100, 100)]).unwrap(),
        taken(100, 100),
        "the refused take's lease of 10 was given back"
    );
}

// ---- Workspace records, settings, activity -----------------------------------------------

use gc_domain::model::new_id;
use gc_domain::model::workspace::RecordRef;
use gc_domain::model::workspace::{
    ApiKey, KeyScope, NewActivity, Record, RecordFields, RecordKind,
};
use gc_domain::page::Page;
use gc_domain::policy::access::{TenantScope, WriteScope};
use gc_domain::ports::{
    AiKeyRepo, ApiKeyRepo, RecordQuery, RecordUpdate, SettingsUpdate, TenantWrite, WorkspaceRepo,
};
use gc_domain::DomainResult;
use serde_json::{json, Map, Value};

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

fn record_fields(v: Value) -> RecordFields {
    RecordFields::from_map(&fields(v))
}

fn new_record(m: &Member, kind: RecordKind, parent_id: Option<uuid::Uuid>, name: &str) -> Record {
    let at = now();
    Record {
        id: new_id(),
        kind,
        parent_id,
        version: 7, // ignored: inserts start at 1
        fields: record_fields(json!({"name": name, "tags": ["a", "b"], "nested": {"n": 1}})),
        created_at: at,
        updated_at: at,
        created_by: m.user.id,
        guard: None,
    }
}

fn insert(
    db: &Db,
    m: &Member,
    kind: RecordKind,
    parent_id: Option<uuid::Uuid>,
    name: &str,
) -> Record {
    let record = new_record(m, kind, parent_id, name);
    let line = activity_w(&m.write, "create", Some((kind.as_str(), record.id)));
    db.store
        .insert_record(TenantWrite::new(&m.write, &line), &record)
        .unwrap()
}

/// The record at `at` in the scope's tenant.
fn find(db: &Db, scope: &TenantScope, at: RecordRef) -> Option<Record> {
    db.store.find_record(scope, at).unwrap()
}

/// Deletes the record at `at` in the scope's tenant with `line`; false when not found.
fn delete(db: &Db, scope: &WriteScope, line: &NewActivity, at: RecordRef) -> bool {
    db.store
        .delete_record(TenantWrite::new(scope, line), at)
        .unwrap()
}

/// The first page of `kind` records (under `parent`) in the scope's tenant.
fn list_first(
    db: &Db,
    scope: &TenantScope,
    kind: RecordKind,
    parent: Option<uuid::Uuid>,
) -> DomainResult<Page<Record>> {
    db.store
        .list_records(scope, &RecordQuery::new(kind, parent, PageRequest::first()))
}

/// Writes empty fields over a record, expecting `expected` (any version when `None`).
fn blank_update(
    db: &Db,
    scope: &WriteScope,
    kind: RecordKind,
    parent: Option<uuid::Uuid>,
    id: uuid::Uuid,
    expected: Option<i64>,
    line: &NewActivity,
) -> DomainResult<Option<Record>> {
    let update = RecordUpdate {
        record: RecordRef::new(kind, parent, id),
        expected_version: expected,
        fields: &RecordFields::from_map(&Map::new()),
        guard: None,
    };
    db.store
        .update_record(TenantWrite::new(scope, line), &update)
}

/// The actions of the first page of the member's tenant's activity feed, newest first.
fn actions(db: &Db, m: &Member) -> Vec<String> {
    action_names(
        db.store
            .list_activity(&m.read, &PageRequest::first())
            .unwrap()
            .items,
    )
}

fn action_names(lines: Vec<gc_domain::model::workspace::Activity>) -> Vec<String> {
    lines.into_iter().map(|a| a.action).collect()
}

fn records_crud_with_versions_and_activity(db: &Db) {
    let m = member(&db.store, "crud@example.com");
    let skill = insert(db, &m, RecordKind::Skill, None, "first");
    assert_eq!(skill.version, 1);
    assert_eq!(skill.fields.map()["nested"], json!({"n": 1}));
    assert_eq!(find(db, &m.read, skill.reference()), Some(skill.clone()));
    // The kind is part of the identity.
    assert_eq!(
        find(
            db,
            &m.read,
            RecordRef::new(RecordKind::AgentDraft, None, skill.id)
        ),
        None
    );

    let later = now() + Duration::seconds(1);
    let update = |expected: Option<i64>, name: &str| {
        let line = activity_at(&m.write, "update", Some(("skill", skill.id)), later);
        let update = RecordUpdate {
            record: skill.reference(),
            expected_version: expected,
            fields: &record_fields(json!({"name": name})),
            guard: None,
        };
        db.store
            .update_record(TenantWrite::new(&m.write, &line), &update)
    };
    let v2 = update(Some(1), "second").unwrap().unwrap();
    assert_eq!(v2.version, 2);
    assert_eq!(v2.fields, record_fields(json!({"name": "second"})));
    assert_eq!(v2.updated_at, later);
    assert_eq!(v2.created_at, skill.created_at);
    // A stale If-Match is a conflict and writes nothing.
    assert_eq!(
        update(Some(1), "stale").unwrap_err(),
        DomainError::VersionConflict { expected: 1 }
    );
    let v3 = update(None, "third").unwrap().unwrap();
    assert_eq!(v3.version, 3);
    assert_eq!(actions(db, &m), ["update", "update", "create"]);

    // Not found is not a conflict.
    let line = activity_w(&m.write, "update", None);
    assert_eq!(
        blank_update(
            db,
            &m.write,
            RecordKind::Skill,
            None,
            new_id(),
            Some(1),
            &line
        )
        .unwrap(),
        None
    );

    let line = activity_w(&m.write, "delete", Some(("skill", skill.id)));
    assert!(delete(db, &m.write, &line, skill.reference()));
    assert!(!delete(db, &m.write, &line, skill.reference()));
    assert_eq!(find(db, &m.read, skill.reference()), None);
    assert_eq!(actions(db, &m), ["delete", "update", "update", "create"]);
}

fn records_of_another_tenant_are_not_found(db: &Db) {
    let ann = member(&db.store, "ann@example.com");
    let eve = member(&db.store, "eve@example.com");
    let skill = insert(db, &ann, RecordKind::Skill, None, "ann's");
    assert_eq!(find(db, &eve.read, skill.reference()), None);
    let list = list_first(db, &eve.read, RecordKind::Skill, None).unwrap();
    assert!(list.items.is_empty());
    let line = activity_w(&eve.write, "update", None);
    for expected in [None, Some(1)] {
        let update = blank_update(
            db,
            &eve.write,
            RecordKind::Skill,
            None,
            skill.id,
            expected,
            &line,
        );
        assert_eq!(update.unwrap(), None);
    }
    assert!(!delete(db, &eve.write, &line, skill.reference()));
    // Ann's record is untouched and Eve's feed is empty.
    let still = find(db, &ann.read, skill.reference()).unwrap();
    assert_eq!(still, skill);
    assert!(actions(db, &eve).is_empty());
    assert_eq!(db.store.record_counts(&eve.read).unwrap().skills, 0);
}

fn sources_only_through_their_own_collection(db: &Db) {
    let ann = member(&db.store, "ann@example.com");
    let eve = member(&db.store, "eve@example.com");
    let coll = insert(db, &ann, RecordKind::MemoryCollection, None, "notes");
    let other_coll = insert(db, &ann, RecordKind::MemoryCollection, None, "other");
    let eve_coll = insert(db, &eve, RecordKind::MemoryCollection, None, "eve's");
    let src = insert(db, &ann, RecordKind::MemorySource, Some(coll.id), "source");
    assert_eq!(src.parent_id, Some(coll.id));

    let found = find(db, &ann.read, src.reference());
    assert_eq!(found, Some(src.clone()));
    // Through another collection of the same tenant: not found.
    assert_eq!(
        find(
            db,
            &ann.read,
            RecordRef::new(RecordKind::MemorySource, Some(other_coll.id), src.id)
        ),
        None
    );
    // Through the right collection id but another tenant's scope: not found.
    assert_eq!(find(db, &eve.read, src.reference()), None);
    // Without a parent: not found.
    assert_eq!(
        find(
            db,
            &ann.read,
            RecordRef::new(RecordKind::MemorySource, None, src.id)
        ),
        None
    );

    // Listing through someone else's (or no) collection is not found, not an empty list.
    assert_eq!(
        list_first(db, &eve.read, RecordKind::MemorySource, Some(coll.id)).unwrap_err(),
        DomainError::NotFound("memory collection")
    );
    assert_eq!(
        list_first(db, &ann.read, RecordKind::MemorySource, Some(src.id)).unwrap_err(),
        DomainError::NotFound("memory collection")
    );
    let listed = list_first(db, &ann.read, RecordKind::MemorySource, Some(coll.id)).unwrap();
    assert_eq!(listed.items, vec![src.clone()]);
    assert!(
        list_first(db, &ann.read, RecordKind::MemorySource, Some(other_coll.id))
            .unwrap()
            .items
            .is_empty()
    );

    // Creating a source under another tenant's collection is refused and writes nothing.
    let before = actions(db, &ann).len();
    let record = new_record(&ann, RecordKind::MemorySource, Some(eve_coll.id), "sneaky");
    let line = activity_w(&ann.write, "create", None);
    assert_eq!(
        db.store
            .insert_record(TenantWrite::new(&ann.write, &line), &record)
            .unwrap_err(),
        DomainError::NotFound("memory collection")
    );
    assert_eq!(actions(db, &ann).len(), before);
    assert_eq!(find(db, &ann.read, record.reference()), None);

    // Updating or deleting through the wrong collection: not found.
    let line = activity_w(&ann.write, "update", None);
    assert_eq!(
        blank_update(
            db,
            &ann.write,
            RecordKind::MemorySource,
            Some(other_coll.id),
            src.id,
            None,
            &line
        )
        .unwrap(),
        None
    );
    assert!(!delete(
        db,
        &ann.write,
        &line,
        RecordRef::new(RecordKind::MemorySource, Some(other_coll.id), src.id)
    ));
    assert!(!delete(db, &eve.write, &line, src.reference()));
    let update = RecordUpdate {
        record: src.reference(),
        expected_version: Some(1),
        fields: &record_fields(json!({"title": "t"})),
        guard: None,
    };
    let updated = db
        .store
        .update_record(TenantWrite::new(&ann.write, &line), &update)
        .unwrap()
        .unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.parent_id, Some(coll.id));
}

fn deleting_a_collection_deletes_its_sources(db: &Db) {
    let m = member(&db.store, "del@example.com");
    let coll = insert(db, &m, RecordKind::MemoryCollection, None, "c");
    let keep = insert(db, &m, RecordKind::MemoryCollection, None, "keep");
    let s1 = insert(db, &m, RecordKind::MemorySource, Some(coll.id), "s1");
    let s2 = insert(db, &m, RecordKind::MemorySource, Some(coll.id), "s2");
    let kept = insert(db, &m, RecordKind::MemorySource, Some(keep.id), "kept");
    let line = activity_w(&m.write, "delete", Some(("memory_collection", coll.id)));
    assert!(delete(db, &m.write, &line, coll.reference()));
    for s in [&s1, &s2] {
        assert_eq!(find(db, &m.read, s.reference()), None);
    }
    assert_eq!(find(db, &m.read, kept.reference()), Some(kept));
    assert_eq!(
        db.store.record_counts(&m.read).unwrap().memory_collections,
        1
    );
    // A fresh collection can be created again with no leftovers.
    let again = insert(db, &m, RecordKind::MemoryCollection, None, "c2");
    assert!(
        list_first(db, &m.read, RecordKind::MemorySource, Some(again.id))
            .unwrap()
            .items
            .is_empty()
    );
}

fn record_versions_rise_with_every_record_write_and_only_then(db: &Db) {
    let m = member(&db.store, "versions@example.com");
    let other = member(&db.store, "versions-other@example.com");
    let version = |m: &Member| db.store.records_version(&m.read).unwrap();
    // Never written: 0.
    assert_eq!(version(&m), 0);
    let mut seen = vec![0];
    let mut rose = |m: &Member, what: &str| {
        let now = version(m);
        assert!(now > *seen.last().unwrap(), "{what}: {now} after {seen:?}");
        seen.push(now);
    };
    let coll = insert(db, &m, RecordKind::MemoryCollection, None, "c");
    rose(&m, "insert");
    let source = insert(db, &m, RecordKind::MemorySource, Some(coll.id), "s");
    rose(&m, "insert of a source");
    let line = activity_w(&m.write, "update", Some(("skill", coll.id)));
    let fields = record_fields(json!({"name": "renamed"}));
    let update = |expected_version| {
        let update = RecordUpdate {
            record: coll.reference(),
            expected_version,
            fields: &fields,
            guard: None,
        };
        db.store
            .update_record(TenantWrite::new(&m.write, &line), &update)
    };
    update(None).unwrap().unwrap();
    rose(&m, "update");
    // A refused write (stale If-Match) and a write of nothing change nothing.
    let before = version(&m);
    assert!(matches!(
        update(Some(1)).unwrap_err(),
        DomainError::VersionConflict { .. }
    ));
    let missing = activity_w(&m.write, "delete", Some(("skill", new_id())));
    assert!(!delete(
        db,
        &m.write,
        &missing,
        RecordRef::new(RecordKind::Skill, None, new_id())
    ));
    assert_eq!(version(&m), before);
    // Another tenant's writes and reads leave this tenant's version alone.
    assert_eq!(version(&other), 0);
    insert(db, &other, RecordKind::Skill, None, "theirs");
    assert!(version(&other) > 0);
    assert_eq!(version(&m), before);
    list_first(db, &m.read, RecordKind::MemorySource, Some(coll.id)).unwrap();
    assert_eq!(version(&m), before);
    // Deleting the collection deletes its source too (by cascade): the version rises.
    let line = activity_w(&m.write, "delete", Some(("memory_collection", coll.id)));
    assert!(delete(db, &m.write, &line, coll.reference()));
    rose(&m, "delete");
    assert_eq!(find(db, &m.read, source.reference()), None);
    // A reopened store (another node) reads the same version.
    assert_eq!(
        db.reopen(PoolOptions::default())
            .records_version(&m.read)
            .unwrap(),
        version(&m)
    );
}

fn records_paginate_and_count(db: &Db) {
    let m = member(&db.store, "page@example.com");
    let mut ids: Vec<_> = (0..5)
        .map(|i| insert(db, &m, RecordKind::AgentDraft, None, &format!("a{i}")).id)
        .collect();
    ids.reverse();
    insert(db, &m, RecordKind::WorkflowDraft, None, "w");
    insert(db, &m, RecordKind::Skill, None, "s");
    let coll = insert(db, &m, RecordKind::MemoryCollection, None, "c");
    insert(db, &m, RecordKind::MemorySource, Some(coll.id), "src");

    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = db
            .store
            .list_records(
                &m.read,
                &RecordQuery::new(
                    RecordKind::AgentDraft,
                    None,
                    PageRequest::new(Some(2), cursor).unwrap(),
                ),
            )
            .unwrap();
        seen.extend(page.items.iter().map(|r| r.id));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ids);

    let counts = db.store.record_counts(&m.read).unwrap();
    assert_eq!(
        (
            counts.skills,
            counts.memory_collections,
            counts.agents,
            counts.workflows,
            counts.apps,
            counts.api_keys
        ),
        (1, 1, 5, 1, 0, 0)
    );
}

fn settings_upsert_with_versions(db: &Db) {
    let m = member(&db.store, "set@example.com");
    let other = member(&db.store, "other@example.com");
    let blank = db.store.settings(&m.read).unwrap();
    assert_eq!(
        (blank.fields.len(), blank.version, blank.updated_at),
        (0, 0, None)
    );

    let at = now();
    let line = || activity_at(&m.write, "settings.update", None, at);
    let update = |expected_version, fields: &Map<String, Value>| {
        let update = SettingsUpdate {
            expected_version,
            fields,
        };
        db.store
            .update_settings(TenantWrite::new(&m.write, &line()), &update)
    };
    // A stale version on a never-written row conflicts and leaves nothing behind.
    assert_eq!(
        update(Some(3), &fields(json!({"a": 1}))).unwrap_err(),
        DomainError::VersionConflict { expected: 3 }
    );
    assert_eq!(db.store.settings(&m.read).unwrap().version, 0);
    assert!(actions(db, &m).is_empty());

    let s1 = update(
        Some(0),
        &fields(json!({"display_name": "Acme", "timezone": "Europe/Berlin"})),
    )
    .unwrap();
    assert_eq!(s1.version, 1);
    assert_eq!(s1.updated_at, Some(at));
    assert_eq!(s1.fields["timezone"], json!("Europe/Berlin"));
    let s2 = update(None, &fields(json!({"display_name": "B"}))).unwrap();
    assert_eq!(s2.version, 2);
    assert_eq!(db.store.settings(&m.read).unwrap(), s2);
    assert_eq!(
        update(Some(1), &Map::new()).unwrap_err(),
        DomainError::VersionConflict { expected: 1 }
    );
    assert_eq!(actions(db, &m).len(), 2);
    // Another tenant's settings are its own.
    assert_eq!(db.store.settings(&other.read).unwrap().version, 0);
    let line = activity_w(&other.write, "settings.update", None);
    let blank = SettingsUpdate {
        expected_version: None,
        fields: &Map::new(),
    };
    let first_write = db
        .store
        .update_settings(TenantWrite::new(&other.write, &line), &blank)
        .unwrap();
    assert_eq!(first_write.version, 1);
    assert_eq!(actions(db, &other).len(), 1);
}

fn activity_is_per_tenant_newest_first(db: &Db) {
    let m = member(&db.store, "act@example.com");
    let other = member(&db.store, "x@example.com");
    let target = new_id();
    let mut lines = Vec::new();
    for i in 0..3 {
        let line = gc_domain::model::workspace::NewActivity::write(
            &m.write,
            now(),
            &format!("run{i}"),
            Some(gc_domain::model::workspace::ActivityTarget {
                kind: "skill".into(),
                id: target,
            }),
            json!({"i": i, "model": "gpt"}),
        );
        db.store.append_activity(&line).unwrap();
        lines.push(line);
    }
    db.store
        .append_activity(&activity_w(&other.write, "elsewhere", None))
        .unwrap();

    let page = db
        .store
        .list_activity(&m.read, &PageRequest::new(Some(2), None).unwrap())
        .unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.items[0].id, lines[2].id());
    assert_eq!(page.items[0].at, lines[2].at());
    assert_eq!(page.items[0].actor, *lines[2].actor());
    assert_eq!(page.items[0].target.as_ref().unwrap().id, target);
    assert_eq!(page.items[0].detail, json!({"i": 2, "model": "gpt"}));
    let rest = db
        .store
        .list_activity(&m.read, &PageRequest::new(Some(2), page.next).unwrap())
        .unwrap();
    assert_eq!(action_names(rest.items), ["run0"]);
    assert_eq!(rest.next, None);
    assert_eq!(actions(db, &other), ["elsewhere"]);
}

// ---- Keys ---------------------------------------------------------------------------------

/// The run-record writer's batches (`append_activities`) go in multi-row statements of fixed
/// row counts (32 down to 1, kept prepared): a batch that takes every count, with and without
/// targets, lands whole and in order, a missing target stored as none.
fn activity_batches_are_stored_whole(db: &Db) {
    let m = member(&db.store, "batch@example.com");
    let other = member(&db.store, "batch-other@example.com");
    let target = new_id();
    // 255 lines: seven statements of 32, then one each of 16, 8, 4, 2 and 1, both tenants
    // mixed in one batch.
    let lines: Vec<_> = (0..255)
        .map(|i| match i % 5 {
            0 => activity_w(&other.write, &format!("other{i}"), None),
            1 => activity_w(&m.write, &format!("run{i}"), Some(("skill", target))),
            _ => activity_w(&m.write, &format!("run{i}"), None),
        })
        .collect();
    db.store.append_activities(&lines).unwrap();

    let mut stored = Vec::new();
    let mut before = None;
    loop {
        let page = db
            .store
            .list_activity(&m.read, &PageRequest::new(Some(200), before).unwrap())
            .unwrap();
        stored.extend(page.items);
        match page.next {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    let mine: Vec<_> = lines
        .iter()
        .filter(|l| l.tenant_id() == m.tenant.id)
        .collect();
    assert_eq!(stored.len(), mine.len());
    // Newest first: the batch's own order, reversed.
    for (got, sent) in stored.iter().zip(mine.iter().rev()) {
        assert_eq!(got.id, sent.id());
        assert_eq!(got.action, sent.action());
        assert_eq!(
            got.target.as_ref().map(|t| t.id),
            sent.target().map(|t| t.id)
        );
    }
    assert_eq!(stored.iter().filter(|a| a.target.is_some()).count(), 51);
    let others = db
        .store
        .list_activity(&other.read, &PageRequest::new(Some(200), None).unwrap())
        .unwrap();
    assert_eq!(others.items.len(), 51);
}

fn api_key(m: &Member, name: &str, hash: &str) -> ApiKey {
    ApiKey {
        id: new_id(),
        tenant_id: m.tenant.id,
        user_id: m.user.id,
        name: name.into(),
        scopes: vec![KeyScope::WorkspaceRead, KeyScope::Run],
        hint: "gc_…abcd".into(),
        key_hash: hash.into(),
        created_at: now(),
        last_used_at: None,
        expires_at: Some(now() + Duration::days(30)),
        revoked_at: None,
        limits: Default::default(),
    }
}

fn api_keys_context_list_and_revoke(db: &Db) {
    let m = member(&db.store, "keys@example.com");
    let eve = member(&db.store, "eve@example.com");
    let create = |owner: &Member, name, hash| {
        let line = activity_w(&owner.write, "key.create", None);
        let key = api_key(owner, name, hash);
        db.store
            .insert_api_key(TenantWrite::new(&owner.write, &line), &key)
            .unwrap()
    };
    let k1 = create(&m, "ci", "hash1");
    let k2 = create(&m, "bot", "hash2");
    let ek = create(&eve, "eve", "hash3");
    assert_eq!(k1.scopes, vec![KeyScope::WorkspaceRead, KeyScope::Run]);

    let key_of = |hash| db.store.key_context(hash).unwrap().unwrap().key;
    let ctx = db.store.key_context("hash1").unwrap().unwrap();
    assert_eq!(ctx.key, k1);
    assert_eq!(ctx.user, m.user);
    assert_eq!(ctx.tenant, Some(m.tenant.clone()));
    assert!(db.store.key_context("nope").unwrap().is_none());

    let page = db
        .store
        .list_api_keys(&m.read, &PageRequest::new(Some(1), None).unwrap())
        .unwrap();
    assert_eq!(page.items, vec![k2.clone()]);
    let page = db
        .store
        .list_api_keys(&m.read, &PageRequest::new(Some(1), page.next).unwrap())
        .unwrap();
    assert_eq!(page.items, vec![k1.clone()]);
    assert_eq!(page.next, None);

    let used = now() + Duration::minutes(1);
    db.store.touch_api_key(k1.id, used).unwrap();
    assert_eq!(key_of("hash1").last_used_at, Some(used));

    // Eve cannot revoke Ann's key; Ann can, once.
    let line = activity_w(&eve.write, "key.revoke", None);
    assert!(!db
        .store
        .revoke_api_key(TenantWrite::new(&eve.write, &line), k1.id)
        .unwrap());
    let at = now();
    let line = activity_at(&m.write, "key.revoke", None, at);
    let revoke = TenantWrite::new(&m.write, &line);
    assert!(db.store.revoke_api_key(revoke, k1.id).unwrap());
    assert!(!db.store.revoke_api_key(revoke, k1.id).unwrap());
    assert_eq!(key_of("hash1").revoked_at, Some(at));
    assert_eq!(actions(db, &m), ["key.revoke", "key.create", "key.create"]);
    assert_eq!(actions(db, &eve), ["key.create"]);
    // Revoked keys stay listed; counts show usable ones.
    assert_eq!(
        db.store
            .list_api_keys(&m.read, &PageRequest::first())
            .unwrap()
            .items
            .len(),
        2
    );
    assert_eq!(db.store.record_counts(&m.read).unwrap().api_keys, 1);
    assert_eq!(
        db.store
            .list_api_keys(&eve.read, &PageRequest::first())
            .unwrap()
            .items,
        vec![ek]
    );

    // Keys end with membership: moving the member out revokes what it made there, with a
    // line in the old tenant's feed, in the same transaction.
    db.store
        .move_member(db.admin(), m.user.id, Some(m.tenant.id), None, now(), None)
        .unwrap()
        .unwrap();
    let ctx = db.store.key_context("hash2").unwrap().unwrap();
    assert_eq!(ctx.user.tenant_id, None);
    assert!(ctx.tenant.is_none());
    assert!(ctx.key.revoked_at.is_some());
}

/// 159 usage lines in one `record_runs` (statements of 32, 32, 32, 32, 16, 8, 4, 2 and 1), made
/// the only way they can be, by runs through the domain's orchestration against a scripted
/// upstream: every line is stored, summed by model, and its tokens land in its windows; the
/// runs' activity lines go in the same transaction. A batch that cannot be stored whole
/// stores nothing.
fn run_usage_batches_are_stored_whole(db: &Db) {
    use std::future::Future;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use gc_domain::policy::ai_access::{AiKeyStatus, TenantAiKey};
    use gc_domain::policy::quota::{token_windows, NodeQuotas};
    use gc_domain::policy::runs::{
        prepare_for, RunEnd, RunEvent, RunKind, RunLine, RunReport, RunSink, Runs, TokenUsage,
    };
    use gc_domain::policy::usage::{UsageGroup, UsageQuery, UsageRange};
    use gc_domain::ports::{KeySealer, QuotaRepo, UsageRepo};
    use gc_domain::secret::SecretString;
    use gc_domain::test_support::ChatOnlyUpstream;
    use gc_domain::DomainResult;

    struct Opened;
    impl KeySealer for Opened {
        fn seal(&self, plaintext: &str, _: &[u8]) -> DomainResult<String> {
            Ok(plaintext.to_owned())
        }
        fn open(&self, sealed: &str, _: &[u8]) -> Option<SecretString> {
            Some(SecretString::new(sealed))
        }
    }
    // Answers the n-th call at once with a completion of model `m-<n % 3>` and `n` tokens.
    let calls = AtomicU64::new(0);
    let upstream = ChatOnlyUpstream::new(
        &["m-0"],
        |text| text.len() as u64,
        move |_: &str| {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(RunReport {
                end: RunEnd::Ok,
                model: format!("m-{}", n % 3),
                latency_ms: 1,
                ttft_ms: None,
                usage: Some(TokenUsage {
                    prompt_tokens: 1,
                    completion_tokens: n - 1,
                    total_tokens: n,
                }),
                error_code: None,
                relayed_tokens: None,
            })
        },
    );
    type Kept<T> = Arc<Mutex<Vec<T>>>;
    #[derive(Default)]
    struct Lines(
        Kept<RunLine>,
        Kept<gc_domain::model::workspace::NewActivity>,
    );
    impl RunSink for Lines {
        fn send(&self, event: RunEvent) {
            if let RunEvent::Run(activity, line) = event {
                self.0.lock().unwrap().push(*line);
                self.1.lock().unwrap().push(activity);
            }
        }
        fn reserve(&self, _: bool) -> Option<gc_domain::policy::runs::RunSlot> {
            let kept = Self(Arc::clone(&self.0), Arc::clone(&self.1));
            Some(gc_domain::policy::runs::RunSlot::new(move |e| kept.send(e)))
        }
    }

    let m = member(&db.store, "usage-batch@example.com");
    db.store
        .insert_ai_key(
            db.admin(),
            &TenantAiKey {
                id: new_id(),
                tenant_id: m.tenant.id,
                region: Region::Aihk,
                label: "k".into(),
                hint: "sk-…1234".into(),
                sealed_secret: "sk-test".into(),
                chat_enabled: true,
                status: AiKeyStatus::Ready,
                status_reason: None,
                checked_at: None,
                created_at: now(),
            },
        )
        .unwrap();
    let caller = principal(&db.store, &m.user);
    let sink = Arc::new(Lines::default());
    let runs = Runs::new(Arc::new(upstream), sink.clone());
    let quotas = NodeQuotas::default();
    let mut waker = std::task::Context::from_waker(std::task::Waker::noop());
    for _ in 0..159 {
        let body = serde_json::json!({"messages": [{"role": "user", "content": "hi"}]});
        let plan = prepare_for(
            RunKind::Chat,
            &db.store,
            &Opened,
            &quotas,
            sink.as_ref(),
            &caller,
            &mut Some(Ok::<_, ()>(body)),
            |_| true,
            |_, text| text.len() as u64,
        )
        .unwrap()
        .unwrap();
        let mut run = std::pin::pin!(runs.execute(plan, "/run"));
        match run.as_mut().poll(&mut waker) {
            std::task::Poll::Ready(answer) => assert!(answer.is_ok()),
            std::task::Poll::Pending => panic!("the scripted upstream answers at once"),
        }
    }
    let lines = std::mem::take(&mut *sink.0.lock().unwrap());
    let activities = std::mem::take(&mut *sink.1.lock().unwrap());
    assert_eq!(lines.len(), 159);
    assert_eq!(activities.len(), 159);
    // A batch that fails part-way (an activity line twice: its id is taken, found by the
    // batch's last statement, after every other has run) stores nothing.
    let twice = [activities.clone(), activities[..1].to_vec()].concat();
    assert!(db.store.record_runs(&lines, &twice).is_err());
    assert!(
        actions(db, &m).is_empty(),
        "no activity from the failed batch"
    );
    // In two batches: the second adds its tokens to the windows the first created.
    db.store
        .record_runs(&lines[..80], &activities[..80])
        .unwrap();
    db.store
        .record_runs(&lines[80..], &activities[80..])
        .unwrap();
    let logged = db
        .store
        .list_activity(&m.read, &PageRequest::new(Some(200), None).unwrap())
        .unwrap()
        .items;
    assert_eq!(
        logged.len(),
        159,
        "the runs' activity lines, in the same commit"
    );
    // A batch of activity lines without runs (the recorder's other lines) is stored too.
    db.store
        .record_runs(&[], &[activity_w(&m.write, "alone", None)])
        .unwrap();
    assert_eq!(actions(db, &m).first().map(String::as_str), Some("alone"));

    let today = lines[0].at().date_naive();
    let query = UsageQuery::new(
        UsageRange::parse(None, None, today).unwrap(),
        UsageGroup::Model,
        None,
        None,
    )
    .unwrap();
    let page = db.store.tenant_usage(&m.read, &query).unwrap();
    // Run n (1..=159) reported n tokens under model m-(n % 3).
    let expect = |r: u64| (1..=159u64).filter(move |n| n % 3 == r);
    let mut models: Vec<_> = page
        .items
        .iter()
        .map(|l| (l.group.clone(), l.requests, l.total_tokens, l.errors))
        .collect();
    models.sort();
    let want: Vec<_> = (0..3)
        .map(|r| {
            (
                format!("m-{r}"),
                expect(r).count() as u64,
                expect(r).sum::<u64>(),
                0,
            )
        })
        .collect();
    assert_eq!(models, want);
    // The tenant's month window holds every token (the minute windows hold those of their
    // minute; the runs may straddle one).
    let month = token_windows(m.tenant.id, None, lines[0].at())
        .into_iter()
        .find(|w| {
            matches!(
                w.subject,
                gc_domain::policy::quota::QuotaSubject::TenantMonth(_)
            )
        })
        .unwrap();
    assert_eq!(
        db.store.window_tokens(&[month]).unwrap(),
        vec![159 * 160 / 2]
    );
    // A batch written again after an attempt whose answer was lost (decision 0024): the
    // writer's retry finds it stored and writes nothing twice; a plain write would fail on
    // the lines' ids, and so would the whole batch for ever.
    assert!(db
        .store
        .record_runs(&lines[80..], &activities[80..])
        .is_err());
    db.store
        .record_runs_again(&lines[80..], &activities[80..])
        .unwrap();
    db.store.record_runs_again(&lines[..80], &[]).unwrap();
    assert_eq!(
        db.store.window_tokens(&[month]).unwrap(),
        vec![159 * 160 / 2]
    );
    let page = db.store.tenant_usage(&m.read, &query).unwrap();
    let requests: u64 = page.items.iter().map(|l| l.requests).sum();
    assert_eq!(requests, 159);
}

/// The tenant as a request reads it now (with its AI-key version), moved to `region`.
fn read(db: &Db, t: &gc_domain::model::Tenant, region: Region) -> gc_domain::model::Tenant {
    let mut now = db.store.find_tenant(t.id).unwrap().unwrap();
    now.region = region;
    now
}

/// Every insert, change and delete of a tenant's AI key raises the tenant's AI-key version in
/// the same transaction, and nothing else does; `usable_ai_keys` answers from memory under an
/// unchanged version and reads again under a new one, whichever store (node) made the change.
fn ai_key_versions_follow_every_key_change(db: &Db) {
    use gc_domain::model::TenantPatch;
    use gc_domain::policy::ai_access::{AiKeyStatus, TenantAiKey};
    let t = tenant(&db.store, "Versions");
    let other = tenant(&db.store, "Other");
    let version = |t: &gc_domain::model::Tenant| read(db, t, Region::Aihk).ai_keys_version;
    assert_eq!((version(&t), t.ai_keys_version), (0, 0));
    let key = TenantAiKey {
        id: new_id(),
        tenant_id: t.id,
        region: Region::Aihk,
        label: "label".into(),
        hint: "sk-…1234".into(),
        sealed_secret: "sealed".into(),
        chat_enabled: true,
        status: AiKeyStatus::Ready,
        status_reason: None,
        checked_at: None,
        created_at: now(),
    };
    let key = db.store.insert_ai_key(db.admin(), &key).unwrap();
    assert_eq!(version(&t), 1, "an insert raises it");
    // Neither a change to the tenant itself nor another tenant's keys move it.
    db.store
        .update_tenant(
            db.admin(),
            t.id,
            &TenantPatch {
                name: Some("Renamed".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(version(&t), 1);
    let mut elsewhere = key.clone();
    elsewhere.id = new_id();
    elsewhere.tenant_id = other.id;
    db.store.insert_ai_key(db.admin(), &elsewhere).unwrap();
    assert_eq!((version(&t), version(&other)), (1, 1));

    // Read under version 1 and kept: the same version answers from memory, even when the
    // caller's tenant was read before a change (a request is answered as of its own read).
    let before = read(db, &t, Region::Aihk);
    assert_eq!(db.store.usable_ai_keys(&before).unwrap(), vec![key.clone()]);
    // Another node (store) on the same database marks the key not ready.
    let node_b = db.reopen(PoolOptions::default());
    gc_domain::services::admin::record_diagnosis(
        &node_b,
        &db.admin().clone(),
        &[(key.clone(), AiKeyStatus::NotReady, Some("401".into()))],
        now(),
    )
    .unwrap();
    assert_eq!(version(&t), 2, "a status change raises it");
    assert_eq!(
        db.store.usable_ai_keys(&before).unwrap(),
        vec![key.clone()],
        "kept under version 1"
    );
    // The next request reads version 2, and with it the change, on this node too.
    assert_eq!(
        db.store
            .usable_ai_keys(&read(db, &t, Region::Aihk))
            .unwrap(),
        vec![]
    );
    // An answer read under an older version never replaces one kept under a newer version.
    gc_domain::services::admin::record_diagnosis(
        &node_b,
        &db.admin().clone(),
        &[(key.clone(), AiKeyStatus::Ready, None)],
        now(),
    )
    .unwrap();
    let current = read(db, &t, Region::Aihk);
    assert_eq!(current.ai_keys_version, 3);
    assert_eq!(db.store.usable_ai_keys(&current).unwrap().len(), 1);
    // Version 1 is read from the database again (the key is ready again: one key)...
    assert_eq!(db.store.usable_ai_keys(&before).unwrap().len(), 1);
    assert!(node_b.delete_ai_key(db.admin(), t.id, key.id).unwrap());
    assert_eq!(version(&t), 4, "a delete raises it");
    // ...and did not replace version 3's answer: a request that read version 3 before the
    // delete is still answered from memory, while the next request sees the delete.
    assert_eq!(db.store.usable_ai_keys(&current).unwrap().len(), 1);
    assert_eq!(
        db.store
            .usable_ai_keys(&read(db, &t, Region::Aihk))
            .unwrap(),
        vec![]
    );
}

fn ai_keys_usable_filter(db: &Db) {
    use gc_domain::policy::ai_access::{AiKeyStatus, TenantAiKey};
    let t = tenant(&db.store, "AI");
    let other = tenant(&db.store, "Other");
    let key = |tenant_id, region, chat_enabled, status| TenantAiKey {
        id: new_id(),
        tenant_id,
        region,
        label: "label".into(),
        hint: "sk-…1234".into(),
        sealed_secret: "sealed".into(),
        chat_enabled,
        status,
        status_reason: None,
        checked_at: None,
        created_at: now(),
    };
    let insert = |tenant_id, region, chat_enabled, status| {
        db.store
            .insert_ai_key(db.admin(), &key(tenant_id, region, chat_enabled, status))
            .unwrap()
    };
    let good = insert(t.id, Region::Aihk, true, AiKeyStatus::Ready);
    let wrong_region = insert(t.id, Region::Aica, true, AiKeyStatus::Ready);
    let no_chat = insert(t.id, Region::Aihk, false, AiKeyStatus::Ready);
    let not_ready = insert(t.id, Region::Aihk, true, AiKeyStatus::NotReady);
    let elsewhere = insert(other.id, Region::Aihk, true, AiKeyStatus::Ready);
    assert_eq!(
        db.store
            .insert_ai_key(
                db.admin(),
                &key(new_id(), Region::Aihk, true, AiKeyStatus::Ready)
            )
            .unwrap_err(),
        DomainError::NotFound("tenant")
    );

    assert_eq!(
        db.store
            .usable_ai_keys(&read(db, &t, Region::Aihk))
            .unwrap(),
        vec![good.clone()]
    );
    assert_eq!(
        db.store
            .usable_ai_keys(&read(db, &t, Region::Aica))
            .unwrap(),
        vec![wrong_region.clone()]
    );
    assert_eq!(
        db.store.list_ai_keys(db.admin(), Some(t.id)).unwrap().len(),
        4
    );
    assert_eq!(db.store.list_ai_keys(db.admin(), None).unwrap().len(), 5);
    assert_eq!(
        db.store.find_ai_key(t.id, good.id).unwrap(),
        Some(good.clone())
    );
    assert_eq!(db.store.find_ai_key(other.id, good.id).unwrap(), None);

    let checked = now();
    let admin = db.admin().clone();
    gc_domain::services::admin::record_diagnosis(
        &db.store,
        &admin,
        &[
            (not_ready.clone(), AiKeyStatus::Ready, None),
            (
                good.clone(),
                AiKeyStatus::NotReady,
                Some("upstream said 401".to_owned()),
            ),
        ],
        checked,
    )
    .unwrap();
    let usable = db
        .store
        .usable_ai_keys(&read(db, &t, Region::Aihk))
        .unwrap();
    assert_eq!(
        usable.iter().map(|k| k.id).collect::<Vec<_>>(),
        [not_ready.id]
    );
    assert_eq!(usable[0].checked_at, Some(checked));
    let good_now = db.store.find_ai_key(t.id, good.id).unwrap().unwrap();
    assert_eq!(good_now.status_reason.as_deref(), Some("upstream said 401"));
    assert!(
        !db.store
            .find_ai_key(t.id, no_chat.id)
            .unwrap()
            .unwrap()
            .chat_enabled
    );

    assert!(!db
        .store
        .delete_ai_key(db.admin(), other.id, good.id)
        .unwrap());
    assert!(db.store.delete_ai_key(db.admin(), t.id, good.id).unwrap());
    assert!(!db.store.delete_ai_key(db.admin(), t.id, good.id).unwrap());
    assert_eq!(
        db.store.list_ai_keys(db.admin(), Some(other.id)).unwrap(),
        vec![elsewhere]
    );
}

// ---- Concurrency --------------------------------------------------------------------------

fn concurrent_writers_all_succeed(db: &Db) {
    // Eight threads writing at once: on SQLite the immediate transactions queue on the write
    // lock (busy_timeout) instead of failing; every write and its activity line land.
    let m = member(&db.store, "busy@example.com");
    let coll = insert(db, &m, RecordKind::MemoryCollection, None, "c");
    std::thread::scope(|s| {
        for t in 0..8 {
            let (store, m) = (&db.store, &m);
            s.spawn(move || {
                for i in 0..10 {
                    let record = new_record(
                        m,
                        RecordKind::MemorySource,
                        Some(coll.id),
                        &format!("{t}-{i}"),
                    );
                    let line = activity_w(&m.write, "create", None);
                    store
                        .insert_record(TenantWrite::new(&m.write, &line), &record)
                        .unwrap();
                    let line = activity_w(&m.write, "update", None);
                    let update = RecordUpdate {
                        record: record.reference(),
                        expected_version: Some(1),
                        fields: &RecordFields::from_map(&Map::new()),
                        guard: None,
                    };
                    store
                        .update_record(TenantWrite::new(&m.write, &line), &update)
                        .unwrap()
                        .unwrap();
                }
            });
        }
    });
    let all = db
        .store
        .list_records(
            &m.read,
            &RecordQuery::new(
                RecordKind::MemorySource,
                Some(coll.id),
                PageRequest::new(Some(200), None).unwrap(),
            ),
        )
        .unwrap();
    assert_eq!(all.items.len(), 80);
    assert!(all.items.iter().all(|r| r.version == 2));
    let feed = db
        .store
        .list_activity(&m.read, &PageRequest::new(Some(200), None).unwrap())
        .unwrap();
    assert_eq!(feed.items.len(), 161);
}

// ---- Inline reads (issue 14) ----------------------------------------------------------------

fn inline_reads_never_wait_and_defer_writes(db: &Db) {
    use gc_domain::ports::{InlineRepo, QuotaRepo, WorkspaceRepo};
    let m = member(&db.store, "inline@example.com");
    if db.store.backend() == "postgres" {
        // A PostgreSQL answer waits on the network: never on a serving thread.
        assert!(db.store.reserve_inline().is_none());
        return;
    }
    // Reads on the reserved connection.
    let guard = db
        .store
        .reserve_inline()
        .expect("an idle inline connection");
    assert_eq!(db.store.find_user(m.user.id).unwrap(), Some(m.user.clone()));
    assert!(!guard.deferred());
    // One reservation per thread.
    assert!(db.store.reserve_inline().is_none());
    // Another thread is not bound by this one's reservation.
    let other = db.store.clone();
    let id = m.user.id;
    let seen = std::thread::spawn(move || other.find_user(id).unwrap().is_some())
        .join()
        .unwrap();
    assert!(seen);
    // A write in a transaction is refused at once and defers the work.
    let record = new_record(&m, RecordKind::Skill, None, "inline");
    let line = activity_w(&m.write, "create", None);
    let err = db
        .store
        .insert_record(TenantWrite::new(&m.write, &line), &record)
        .unwrap_err();
    assert!(matches!(err, DomainError::Unavailable { .. }), "{err:?}");
    assert!(guard.deferred());
    drop(guard);
    // Nothing was written; the same write on the pool succeeds.
    assert!(find(db, &m.read, record.reference()).is_none());
    db.store
        .insert_record(TenantWrite::new(&m.write, &line), &record)
        .unwrap();

    // A one-statement write (no transaction) is refused the same way, before it reaches the
    // read-only connection (which would refuse it as a failed statement, a logged database
    // error): a key's touch, a quota's single-window take.
    let guard = db
        .store
        .reserve_inline()
        .expect("an idle inline connection");
    let err = db.store.touch_session(new_id(), now()).unwrap_err();
    assert!(matches!(err, DomainError::Unavailable { .. }), "{err:?}");
    assert!(guard.deferred());
    drop(guard);
    let take = gc_domain::policy::quota::RequestTake {
        window: gc_domain::policy::quota::QuotaWindow {
            subject: gc_domain::policy::quota::QuotaSubject::TenantMinute(m.tenant.id),
            start_ms: 0,
        },
        max: 10,
        want: 1,
    };
    let guard = db
        .store
        .reserve_inline()
        .expect("an idle inline connection");
    let err = db.store.take_request(&[take]).unwrap_err();
    assert!(matches!(err, DomainError::Unavailable { .. }), "{err:?}");
    assert!(guard.deferred());
    drop(guard);
    // Nothing was counted: on the pool, the same take is the window's first request.
    let gc_domain::policy::quota::Take::Taken(grants) = db.store.take_request(&[take]).unwrap()
    else {
        panic!("a take below the limit");
    };
    assert_eq!(grants[0].count, 1);

    // Every inline connection reserved (one per thread): the next thread gets none, at once.
    let (hold, release) = std::sync::mpsc::channel::<()>();
    let release = std::sync::Arc::new(std::sync::Mutex::new(release));
    let (reserved_tx, reserved_rx) = std::sync::mpsc::channel::<bool>();
    let mut holders = Vec::new();
    for _ in 0..8 {
        let store = db.store.clone();
        let release = std::sync::Arc::clone(&release);
        let reserved_tx = reserved_tx.clone();
        holders.push(std::thread::spawn(move || {
            let guard = store.reserve_inline();
            reserved_tx.send(guard.is_some()).unwrap();
            let _ = release.lock().unwrap().recv();
            drop(guard);
        }));
    }
    let got: Vec<bool> = (0..8).map(|_| reserved_rx.recv().unwrap()).collect();
    let reserved = got.iter().filter(|g| **g).count();
    assert!(
        (1..8).contains(&reserved),
        "a bounded number of inline connections, got {reserved} of 8"
    );
    let started = Instant::now();
    assert!(db.store.reserve_inline().is_none());
    assert!(started.elapsed() < StdDuration::from_secs(1));
    for _ in 0..8 {
        hold.send(()).unwrap();
    }
    for h in holders {
        h.join().unwrap();
    }
    assert!(db.store.reserve_inline().is_some());
}
