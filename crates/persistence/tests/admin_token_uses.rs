//! The audit lines of admin token uses stay bounded (decision 0044): lines older than the
//! retention go, and a token keeps at most its newest `USES_PER_TOKEN_MAX`; pruning runs with
//! a token's `last_used_at` write (`touch`), on both backends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use chrono::Duration;
use gc_domain::policy::admin_tokens::AdminTokenUse;
use gc_domain::ports::AdminTokenRepo;
use support::{now, Db};
use uuid::Uuid;

/// `docs/operations.md`, "Admin tokens": kept 90 days, at most 10,000 lines per token.
const USE_RETENTION_DAYS: i64 = 90;
const USES_PER_TOKEN_MAX: i64 = 10_000;

/// Records one use of `token_id` at `at`; `touch` as with the token's `last_used_at` write.
fn record_use(db: &Db, token_id: Uuid, at: chrono::DateTime<chrono::Utc>, touch: bool) {
    let used = AdminTokenUse {
        id: Uuid::now_v7(),
        at,
        admin_id: Uuid::now_v7(),
        token_id,
        token_name: "ci".into(),
        route: "GET /api/v1/admin/tenants".into(),
    };
    db.store.record_admin_token_use(&used, touch).unwrap();
}

fn old_lines_go_with_the_next_touch(db: &Db) {
    let (old_token, token) = (Uuid::now_v7(), Uuid::now_v7());
    let t = now();
    let too_old = t - Duration::days(USE_RETENTION_DAYS) - Duration::minutes(1);
    let kept = t - Duration::days(USE_RETENTION_DAYS) + Duration::hours(1);
    // A revoked token's old line, and this token's old and recent ones.
    record_use(db, old_token, too_old, true);
    record_use(db, token, too_old, false);
    record_use(db, token, kept, false);
    // Without a touch nothing is pruned.
    record_use(db, token, t, false);
    assert_eq!(db.store.admin_token_uses(token, 100).unwrap().len(), 3);
    assert_eq!(db.store.admin_token_uses(old_token, 100).unwrap().len(), 1);
    record_use(db, token, t, true);
    let lines = db.store.admin_token_uses(token, 100).unwrap();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| l.at >= kept), "{lines:?}");
    assert!(lines.windows(2).all(|w| w[0].at >= w[1].at), "newest first");
    assert_eq!(lines[0].route, "GET /api/v1/admin/tenants");
    // Every token's old lines go, not only the used token's.
    assert!(db
        .store
        .admin_token_uses(old_token, 100)
        .unwrap()
        .is_empty());
    assert_eq!(db.store.admin_token_uses(token, 2).unwrap().len(), 2);
}

fn a_token_keeps_at_most_its_newest_lines(db: &Db) {
    let (token, other) = (Uuid::now_v7(), Uuid::now_v7());
    let t = now() - Duration::days(1);
    let extra = 5;
    for i in 0..USES_PER_TOKEN_MAX + extra {
        let at = t + Duration::milliseconds(i);
        record_use(db, token, at, false);
    }
    record_use(db, other, t, false);
    record_use(db, token, t + Duration::hours(1), true);
    let limit = USES_PER_TOKEN_MAX + 100;
    let lines = db.store.admin_token_uses(token, limit).unwrap();
    assert_eq!(lines.len() as i64, USES_PER_TOKEN_MAX);
    // The oldest went: the newest kept line is the touch's, the oldest kept the 7th written.
    assert_eq!(lines[0].at, t + Duration::hours(1));
    assert_eq!(
        lines.last().unwrap().at,
        t + Duration::milliseconds(extra + 1)
    );
    // Another token's lines are not counted against it.
    assert_eq!(db.store.admin_token_uses(other, 10).unwrap().len(), 1);
}

on_both_backends!(old_lines_go_with_the_next_touch);

/// On SQLite only: writing the 10,005 lines one use at a time takes about 100 s on a loaded
/// PostgreSQL test server, and the pruning statements are the same on both backends (the
/// retention test above runs them on both).
#[test]
fn a_token_keeps_at_most_its_newest_lines_sqlite() {
    support::with_sqlite(a_token_keeps_at_most_its_newest_lines);
}
