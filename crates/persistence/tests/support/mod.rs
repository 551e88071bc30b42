//! Fixtures of the adapter suite and the macro that runs each body on both backends.

#![allow(dead_code)]

use chrono::{DateTime, Duration, Utc};
use gc_domain::model::workspace::{Actor, ActorKind, KeyScope, NewActivity};
use gc_domain::model::{new_id, Role, Session, Status, Tenant, User};
use gc_domain::policy::access::{AdminScope, Principal, TenantScope, WriteScope};
use gc_domain::ports::{SessionRepo, TenantRepo, UserRepo};
use gc_domain::values::{Email, Region};
use gc_persistence::{open, testing, DbStore, PoolOptions};
use serde_json::json;
use uuid::Uuid;

/// A test database: the store, the URL it was opened with, and (made on first use, so tests
/// that count users or sessions see none unless they ask) one platform admin's scope.
pub struct Db {
    pub url: String,
    pub store: DbStore,
    admin: std::sync::OnceLock<AdminScope>,
}

impl Db {
    fn new(url: String, store: DbStore) -> Self {
        Self {
            url,
            store,
            admin: std::sync::OnceLock::new(),
        }
    }

    /// The scope for the administration ports.
    pub fn admin(&self) -> &AdminScope {
        self.admin.get_or_init(|| some_admin(&self.store))
    }
}

impl Db {
    /// Opens the same database again (as a restarted process would).
    pub fn reopen(&self, opts: PoolOptions) -> DbStore {
        open(&self.url, opts).unwrap()
    }
}

pub fn with_sqlite(body: fn(&Db)) {
    let (url, _dir) = testing::fresh_sqlite_url();
    let store = open(&url, PoolOptions::default()).unwrap();
    assert_eq!(store.backend(), "sqlite");
    store.migrate().unwrap();
    body(&Db::new(url, store));
}

pub fn with_postgres(label: &str, body: fn(&Db)) {
    let Some(database) = testing::postgres_or_skip(label) else {
        return;
    };
    let url = database.url().to_owned();
    {
        let store = open(&url, PoolOptions::default()).unwrap();
        assert_eq!(store.backend(), "postgres");
        store.migrate().unwrap();
        body(&Db::new(url, store));
    }
    drop(database);
}

macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $name() { $crate::support::with_sqlite(super::$name) })*
        }
        mod postgres {
            $(#[test] fn $name() { $crate::support::with_postgres(stringify!($name), super::$name) })*
        }
    };
}

/// Now, to the millisecond (what the store keeps).
pub fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap()
}

pub fn tenant(store: &DbStore, name: &str) -> Tenant {
    store
        .insert_tenant(
            &some_admin(store),
            &Tenant {
                id: new_id(),
                name: name.into(),
                status: Status::Active,
                region: Region::Aihk,
                ai_enabled: true,
                created_at: now(),
                limits: Default::default(),
                ai_keys_version: 0,
                allowed_models: None,
            },
        )
        .unwrap()
}

pub fn user(store: &DbStore, email: &str, tenant: Option<&Tenant>) -> User {
    user_with_role(store, email, tenant, Role::Member)
}

pub fn user_with_role(store: &DbStore, email: &str, tenant: Option<&Tenant>, role: Role) -> User {
    store
        .insert_user(&User {
            id: new_id(),
            email: Email::parse("email", email).unwrap(),
            name: "Test".into(),
            role,
            status: Status::Active,
            tenant_id: tenant.map(|t| t.id),
            password_hash: "$2b$04$hash".into(),
            created_at: now(),
        })
        .unwrap()
}

pub fn session(store: &DbStore, user: &User, token_hash: &str) -> Session {
    let at = now();
    let session = Session {
        id: new_id(),
        user_id: user.id,
        token_hash: token_hash.into(),
        created_at: at,
        last_seen_at: at,
        expires_at: at + Duration::days(30),
        user_agent: "test-agent".into(),
        ip: "127.0.0.1".into(),
        shadow_tenant_id: None,
        shadow_since: None,
    };
    store.insert_session(&session).unwrap();
    session
}

/// The caller `user` is, authenticated the only way the domain allows: through a stored
/// session.
pub fn principal(store: &DbStore, user: &User) -> Principal {
    let hash = format!("test-token-{}", new_id());
    session(store, user, &hash);
    gc_domain::services::accounts::authenticate_session(
        store,
        &gc_domain::services::accounts::AccountPolicy::default(),
        &hash,
        now(),
    )
    .unwrap()
}

/// Read and write scopes of an active member of `tenant`.
pub fn scopes(store: &DbStore, user: &User) -> (TenantScope, WriteScope) {
    let p = principal(store, user);
    (
        p.read_scope(KeyScope::WorkspaceRead).unwrap(),
        p.write_scope(KeyScope::WorkspaceWrite).unwrap(),
    )
}

/// The administration scope of `admin` (an active platform admin).
pub fn admin_scope(store: &DbStore, admin: &User) -> AdminScope {
    principal(store, admin).admin_scope().unwrap()
}

/// The administration scope of a fresh platform admin.
pub fn some_admin(store: &DbStore) -> AdminScope {
    let admin = user_with_role(
        store,
        &format!("admin-{}@example.com", new_id().simple()),
        None,
        Role::PlatformAdmin,
    );
    admin_scope(store, &admin)
}

/// A member of a fresh tenant, with its scopes.
pub struct Member {
    pub tenant: Tenant,
    pub user: User,
    pub read: TenantScope,
    pub write: WriteScope,
}

pub fn member(store: &DbStore, email: &str) -> Member {
    let tenant = tenant(store, &format!("Tenant of {email}"));
    let user = user(store, email, Some(&tenant));
    let (read, write) = scopes(store, &user);
    Member {
        tenant,
        user,
        read,
        write,
    }
}

/// A write's activity line in the scope's tenant.
pub fn activity_w(scope: &WriteScope, action: &str, target: Option<(&str, Uuid)>) -> NewActivity {
    activity_at(scope, action, target, now())
}

/// `activity_w` at `at`: the time of the write it goes with.
pub fn activity_at(
    scope: &WriteScope,
    action: &str,
    target: Option<(&str, Uuid)>,
    at: DateTime<Utc>,
) -> NewActivity {
    NewActivity::write(scope, at, action, target_of(target), json!({"test": true}))
}

fn target_of(target: Option<(&str, Uuid)>) -> Option<gc_domain::model::workspace::ActivityTarget> {
    target.map(|(kind, id)| gc_domain::model::workspace::ActivityTarget {
        kind: kind.into(),
        id,
    })
}

/// An admin's activity line in a tenant's feed.
pub fn activity_a(
    scope: &AdminScope,
    tenant_id: Uuid,
    action: &str,
    target: Option<(&str, Uuid)>,
) -> NewActivity {
    NewActivity::admin(
        scope,
        tenant_id,
        now(),
        action,
        target_of(target),
        json!({"test": true}),
    )
}

pub fn admin_actor(user: &User) -> Actor {
    Actor {
        kind: ActorKind::Admin,
        id: user.id,
        label: user.email.as_str().into(),
    }
}
