//! Users, tenants, sessions, the sign-in throttle and the health check.

use chrono::{DateTime, Duration, Utc};
use diesel::dsl::{count_star, min};
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use gc_domain::model::workspace::NewActivity;
use gc_domain::model::{
    new_id, Role, Session, SessionContext, Tenant, TenantPatch, User, UserPatch,
};
use gc_domain::page::{Page, PageRequest};
use gc_domain::policy::access::AdminScope;
use gc_domain::ports::{
    Attempt, HealthRepo, Reservation, SessionRepo, SessionWindow, ShadowChange, SigninThrottleRepo,
    TenantRepo, UserRepo,
};
use gc_domain::values::Email;
use gc_domain::{DomainError, DomainResult};
use uuid::Uuid;

use super::{affected, count, delete_owned, first_row, insert_one, newest_first};
use crate::error::db_error;
use crate::rows::{
    limit_in, models_in, ms, opt_text, text, time, ActivityRow, SessionRow, TenantRow, UserRow,
};
use crate::schema::{activity, api_keys, sessions, signin_failures, tenants, users};
use crate::store::{DbConnection, DbStore};

/// Failed sign-ins older than this are pruned when a new failure of the same email is recorded;
/// the throttle window is far shorter.
const FAILURE_RETENTION: Duration = Duration::days(1);

pub(crate) fn load_user(conn: &mut DbConnection, user_id: &str) -> DomainResult<Option<User>> {
    first_row!(conn, "find_user", UserRow, users::table.find(user_id))
}

pub(crate) fn load_tenant(
    conn: &mut DbConnection,
    tenant_id: &str,
) -> DomainResult<Option<Tenant>> {
    first_row!(
        conn,
        "find_tenant",
        TenantRow,
        tenants::table.find(tenant_id)
    )
}

/// The trait method `fn name(&self, scope, id, patch: &Patch) -> Option<Out>` that sets the
/// columns `changes` makes of the patch (a tuple of `Option<column.eq(value)>`: a column the
/// patch leaves out is not written) in the row of `table` with this id, and reads the row back
/// with `load`; `None` when there is no such row. The operation is named after the method. A
/// macro: the update is a different diesel type for each table.
macro_rules! update_by_patch {
    (
        fn $name:ident($patch:ident: &$patch_ty:ty) -> $out:ty: $table:ident, $load:ident,
        $changes:expr
    ) => {
        fn $name(
            &self,
            _scope: &AdminScope,
            id: Uuid,
            $patch: &$patch_ty,
        ) -> DomainResult<Option<$out>> {
            let id = text(id);
            let changes = $changes;
            self.write(stringify!($name), |conn| {
                // A patch of nothing is no statement (diesel refuses an empty changeset).
                diesel::update($table::table.find(&id))
                    .set(changes)
                    .execute(conn)
                    .optional_empty_changeset()
                    .map_err(|e| db_error(stringify!($name), e))?;
                $load(conn, &id)
            })
        }
    };
}

impl UserRepo for DbStore {
    fn insert_user(&self, user: &User) -> DomainResult<User> {
        let row = UserRow {
            id: text(user.id),
            email: user.email.as_str().to_lowercase(),
            name: user.name.clone(),
            role: user.role.as_str().to_owned(),
            status: user.status.as_str().to_owned(),
            tenant_id: opt_text(user.tenant_id),
            password_hash: user.password_hash.clone(),
            created_at: ms(user.created_at),
        };
        self.write_one(|conn| {
            diesel::insert_into(users::table)
                .values(&row)
                .execute(conn)
                .map_err(|e| match e {
                    DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => {
                        DomainError::EmailTaken
                    }
                    DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => {
                        DomainError::NotFound("tenant")
                    }
                    e => db_error("insert_user", e),
                })
        })?;
        row.into_domain()
    }

    fn find_user(&self, id: Uuid) -> DomainResult<Option<User>> {
        self.read(|conn| load_user(conn, &text(id)))
    }

    fn find_user_by_email(&self, email: &Email) -> DomainResult<Option<User>> {
        let email = email.as_str().to_lowercase();
        self.read(|conn| {
            let query = users::table.filter(users::email.eq(&email));
            first_row!(conn, "find_user_by_email", UserRow, query)
        })
    }

    fn list_users(
        &self,
        _scope: &AdminScope,
        tenant_id: Option<Uuid>,
        page: &PageRequest,
    ) -> DomainResult<Page<User>> {
        let tenant_id = opt_text(tenant_id);
        newest_first!(self, "list_users", users, UserRow, page, |query| {
            match &tenant_id {
                Some(tenant_id) => query.filter(users::tenant_id.eq(tenant_id)),
                None => query,
            }
        })
    }

    update_by_patch!(
        fn update_user(patch: &UserPatch) -> User: users, load_user,
        (
            patch.name.as_deref().map(|name| users::name.eq(name)),
            patch.role.map(|role| users::role.eq(role.as_str())),
            patch.status.map(|status| users::status.eq(status.as_str())),
        )
    );

    fn rename_user(&self, id: Uuid, name: Option<&str>) -> DomainResult<Option<User>> {
        let id = text(id);
        self.write("rename_user", |conn| {
            if let Some(name) = name {
                diesel::update(users::table.find(&id))
                    .set(users::name.eq(name))
                    .execute(conn)
                    .map_err(|e| db_error("rename_user", e))?;
            }
            load_user(conn, &id)
        })
    }

    fn move_member(
        &self,
        _scope: &AdminScope,
        id: Uuid,
        from: Option<Uuid>,
        to: Option<Uuid>,
        at: DateTime<Utc>,
        left: Option<&NewActivity>,
    ) -> DomainResult<Option<User>> {
        let id = text(id);
        let from = opt_text(from);
        let to = opt_text(to);
        self.write("move_member", |conn| {
            if let Some(to) = &to {
                if load_tenant(conn, to)?.is_none() {
                    return Err(DomainError::NotFound("tenant"));
                }
            }
            // Compare and set: only if the member is still where the caller saw it.
            let target = users::table.find(&id);
            let n = match &from {
                Some(from) => diesel::update(target.filter(users::tenant_id.eq(from)))
                    .set(users::tenant_id.eq(&to))
                    .execute(conn),
                None => diesel::update(target.filter(users::tenant_id.is_null()))
                    .set(users::tenant_id.eq(&to))
                    .execute(conn),
            }
            .map_err(|e| db_error("move_member", e))?;
            if n == 0 {
                return Ok(None);
            }
            if let Some(from) = &from {
                diesel::update(
                    api_keys::table
                        .filter(api_keys::user_id.eq(&id))
                        .filter(api_keys::tenant_id.eq(from))
                        .filter(api_keys::revoked_at.is_null()),
                )
                .set(api_keys::revoked_at.eq(Some(ms(at))))
                .execute(conn)
                .map_err(|e| db_error("move_member", e))?;
                if let Some(line) = left {
                    if line.tenant_id().to_string() != *from {
                        return Err(DomainError::Internal(
                            "membership line for another tenant".into(),
                        ));
                    }
                    diesel::insert_into(activity::table)
                        .values(ActivityRow::from_domain(line, line.tenant_id()))
                        .execute(conn)
                        .map_err(|e| db_error("move_member", e))?;
                }
            }
            load_user(conn, &id)
        })
    }

    fn change_password(
        &self,
        id: Uuid,
        password_hash: &str,
        keep: Option<Uuid>,
    ) -> DomainResult<()> {
        let id = text(id);
        let keep = opt_text(keep);
        self.write("change_password", |conn| {
            let n = diesel::update(users::table.find(&id))
                .set(users::password_hash.eq(password_hash))
                .execute(conn)
                .map_err(|e| db_error("change_password", e))?;
            if n == 0 {
                return Err(DomainError::NotFound("user"));
            }
            let others = sessions::table.filter(sessions::user_id.eq(&id));
            let deleted = match &keep {
                Some(keep) => diesel::delete(others.filter(sessions::id.ne(keep))).execute(conn),
                None => diesel::delete(others).execute(conn),
            };
            deleted.map_err(|e| db_error("change_password", e))?;
            Ok(())
        })
    }

    fn count_admins(&self) -> DomainResult<u64> {
        self.read(|conn| {
            users::table
                .filter(users::role.eq(Role::PlatformAdmin.as_str()))
                .select(count_star())
                .first::<i64>(conn)
                .map(count)
                .map_err(|e| db_error("count_admins", e))
        })
    }
}

impl TenantRepo for DbStore {
    fn insert_tenant(&self, _scope: &AdminScope, tenant: &Tenant) -> DomainResult<Tenant> {
        let row = TenantRow::from_domain(tenant);
        insert_one!(self, "insert_tenant", tenants, &row)?;
        row.into_domain()
    }

    fn find_tenant(&self, id: Uuid) -> DomainResult<Option<Tenant>> {
        self.read(|conn| load_tenant(conn, &text(id)))
    }

    fn list_tenants(&self, _scope: &AdminScope, page: &PageRequest) -> DomainResult<Page<Tenant>> {
        newest_first!(self, "list_tenants", tenants, TenantRow, page, |query| {
            query
        })
    }

    update_by_patch!(
        fn update_tenant(patch: &TenantPatch) -> Tenant: tenants, load_tenant,
        (
            patch.name.as_deref().map(|name| tenants::name.eq(name)),
            patch.status.map(|status| tenants::status.eq(status.as_str())),
            patch.region.map(|region| tenants::region.eq(region.as_str())),
            patch.ai_enabled.map(|on| tenants::ai_enabled.eq(on)),
            patch.requests_per_minute.map(|n| tenants::requests_per_minute.eq(limit_in(n))),
            patch.tokens_per_minute.map(|n| tenants::tokens_per_minute.eq(limit_in(n))),
            patch.monthly_tokens.map(|n| tenants::monthly_tokens.eq(limit_in(n))),
            patch.monthly_spend.map(|n| tenants::monthly_spend.eq(limit_in(n))),
            patch.allowed_models.as_ref().map(|models| {
                tenants::allowed_models.eq(models_in(models.as_ref()))
            }),
        )
    );
}

impl SessionRepo for DbStore {
    fn insert_session(&self, session: &Session) -> DomainResult<()> {
        let row = SessionRow::from_domain(session);
        insert_one!(self, "insert_session", sessions, &row)?;
        Ok(())
    }

    fn session_context(&self, token_hash: &str) -> DomainResult<Option<SessionContext>> {
        self.read(|conn| {
            // One query for the session, its user and the user's tenant; a second only for a
            // session in a Shadow view (platform admins).
            let found = crate::store::on_backend!(&mut *conn, |c| sessions::table
                .inner_join(users::table)
                .left_join(tenants::table.on(users::tenant_id.eq(tenants::id.nullable())))
                .filter(sessions::token_hash.eq(token_hash))
                .select((
                    SessionRow::as_select(),
                    UserRow::as_select(),
                    Option::<TenantRow>::as_select(),
                ))
                .first::<(SessionRow, UserRow, Option<TenantRow>)>(c))
            .optional()
            .map_err(|e| db_error("session_context", e))?;
            let Some((session, user, tenant)) = found else {
                return Ok(None);
            };
            let shadow_tenant = match &session.shadow_tenant_id {
                Some(shadow_id) => load_tenant(conn, shadow_id)?,
                None => None,
            };
            Ok(Some(SessionContext {
                session: session.into_domain()?,
                user: user.into_domain()?,
                tenant: tenant.map(TenantRow::into_domain).transpose()?,
                shadow_tenant,
            }))
        })
    }

    fn touch_session(&self, id: Uuid, at: DateTime<Utc>) -> DomainResult<()> {
        self.write_one(|conn| {
            diesel::update(sessions::table.find(text(id)))
                .set(sessions::last_seen_at.eq(ms(at)))
                .execute(conn)
                .map_err(|e| db_error("touch_session", e))
        })?;
        Ok(())
    }

    fn list_sessions(&self, user_id: Uuid) -> DomainResult<Vec<Session>> {
        let rows = self.read(|conn| {
            sessions::table
                .filter(sessions::user_id.eq(text(user_id)))
                .select(SessionRow::as_select())
                .order((sessions::created_at.desc(), sessions::id.desc()))
                .load(conn)
                .map_err(|e| db_error("list_sessions", e))
        })?;
        rows.into_iter().map(SessionRow::into_domain).collect()
    }

    fn delete_session(&self, user_id: Uuid, id: Uuid) -> DomainResult<bool> {
        let (id, user_id) = (text(id), text(user_id));
        delete_owned!(self, "delete_session", sessions, &id, user_id = &user_id)
    }

    fn delete_other_sessions(&self, user_id: Uuid, keep: Uuid) -> DomainResult<u64> {
        self.write_one(|conn| {
            diesel::delete(
                sessions::table
                    .filter(sessions::user_id.eq(text(user_id)))
                    .filter(sessions::id.ne(text(keep))),
            )
            .execute(conn)
            .map(affected)
            .map_err(|e| db_error("delete_other_sessions", e))
        })
    }

    fn delete_expired_sessions(&self, window: SessionWindow) -> DomainResult<u64> {
        self.write_one(|conn| {
            diesel::delete(
                sessions::table.filter(
                    sessions::expires_at
                        .le(ms(window.now))
                        .or(sessions::last_seen_at.lt(ms(window.seen_after))),
                ),
            )
            .execute(conn)
            .map(affected)
            .map_err(|e| db_error("delete_expired_sessions", e))
        })
    }

    fn shadow_viewers(
        &self,
        tenant_id: Uuid,
        window: SessionWindow,
    ) -> DomainResult<Vec<(String, DateTime<Utc>)>> {
        let rows = self.read(|conn| {
            sessions::table
                .inner_join(users::table)
                .filter(sessions::shadow_tenant_id.eq(text(tenant_id)))
                .filter(sessions::last_seen_at.gt(ms(window.seen_after)))
                .filter(sessions::expires_at.gt(ms(window.now)))
                .filter(users::role.eq(Role::PlatformAdmin.as_str()))
                .select((users::email, sessions::shadow_since))
                .order((sessions::shadow_since.asc(), sessions::id.asc()))
                .load::<(String, Option<i64>)>(conn)
                .map_err(|e| db_error("shadow_viewers", e))
        })?;
        rows.into_iter()
            .filter_map(|(email, since)| since.map(|since| (email, since)))
            .map(|(email, since)| Ok((email, time(since)?)))
            .collect()
    }

    fn set_shadow(&self, session_id: Uuid, change: ShadowChange<'_>) -> DomainResult<()> {
        let activity = change.activity();
        let session_id = text(session_id);
        let (shadow_tenant_id, shadow_since) = match change.view() {
            Some((tenant_id, since)) => (Some(text(tenant_id)), Some(ms(since))),
            None => (None, None),
        };
        let line = ActivityRow::from_domain(activity, activity.tenant_id());
        self.write("set_shadow", |conn| {
            if let Some(tenant_id) = &shadow_tenant_id {
                if load_tenant(conn, tenant_id)?.is_none() {
                    return Err(DomainError::NotFound("tenant"));
                }
            }
            let n = diesel::update(sessions::table.find(&session_id))
                .set((
                    sessions::shadow_tenant_id.eq(&shadow_tenant_id),
                    sessions::shadow_since.eq(shadow_since),
                ))
                .execute(conn)
                .map_err(|e| db_error("set_shadow", e))?;
            if n == 0 {
                return Err(DomainError::NotFound("session"));
            }
            diesel::insert_into(activity::table)
                .values(&line)
                .execute(conn)
                .map_err(|e| db_error("set_shadow", e))?;
            Ok(())
        })
    }
}

/// Emails are compared trimmed and lower-cased, like `Email` values.
fn throttle_key(email: &str) -> String {
    email.trim().to_lowercase()
}

impl SigninThrottleRepo for DbStore {
    fn reserve_attempt(&self, attempt: &Attempt<'_>) -> DomainResult<Reservation> {
        let email = throttle_key(attempt.key);
        let at = attempt.at;
        self.write("reserve_attempt", |conn| {
            // Serialise attempts for one email: SQLite's BEGIN IMMEDIATE already holds the
            // write lock; PostgreSQL takes a transaction-scoped advisory lock on the email.
            if let DbConnection::Pg(pg) = conn {
                diesel::sql_query("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))")
                    .bind::<diesel::sql_types::Text, _>(&email)
                    .execute(pg)
                    .map_err(|e| db_error("reserve_attempt", e))?;
            }
            diesel::delete(
                signin_failures::table
                    .filter(signin_failures::email.eq(&email))
                    .filter(signin_failures::at.lt(ms(at - FAILURE_RETENTION))),
            )
            .execute(conn)
            .map_err(|e| db_error("reserve_attempt", e))?;
            let (n, oldest) = signin_failures::table
                .filter(signin_failures::email.eq(&email))
                .filter(signin_failures::at.ge(ms(attempt.since)))
                .select((count_star(), min(signin_failures::at)))
                .first::<(i64, Option<i64>)>(conn)
                .map_err(|e| db_error("reserve_attempt", e))?;
            if count(n) >= attempt.max {
                return Ok(Reservation::Locked {
                    oldest: oldest.map(time).transpose()?.unwrap_or(at),
                });
            }
            diesel::insert_into(signin_failures::table)
                .values((
                    signin_failures::id.eq(text(new_id())),
                    signin_failures::email.eq(&email),
                    signin_failures::at.eq(ms(at)),
                ))
                .execute(conn)
                .map_err(|e| db_error("reserve_attempt", e))?;
            Ok(Reservation::Reserved)
        })
    }

    fn clear_failures(&self, email: &str) -> DomainResult<()> {
        let email = throttle_key(email);
        self.write_one(|conn| {
            diesel::delete(signin_failures::table.filter(signin_failures::email.eq(&email)))
                .execute(conn)
                .map_err(|e| db_error("clear_failures", e))
        })?;
        Ok(())
    }
}

impl HealthRepo for DbStore {
    fn ping(&self) -> DomainResult<()> {
        self.read(|conn| {
            diesel::sql_query("SELECT 1")
                .execute(conn)
                .map_err(|e| db_error("ping", e))
        })?;
        Ok(())
    }

    /// SQLite: takes the write lock and lets it go (`BEGIN IMMEDIATE` and an empty commit,
    /// nothing written), so a file locked by another process is seen. PostgreSQL: one query
    /// that also refuses a read-only server (a standby, `default_transaction_read_only`).
    fn ready(&self) -> DomainResult<()> {
        self.write_one(|conn| match conn {
            DbConnection::Sqlite(c) => c
                .immediate_transaction(|_| Ok::<_, DieselError>(()))
                .map_err(|e| db_error("ready", e)),
            DbConnection::Pg(c) => {
                let read_only: String =
                    diesel::select(diesel::dsl::sql::<diesel::sql_types::Text>(
                        "current_setting('transaction_read_only')",
                    ))
                    .get_result(c)
                    .map_err(|e| db_error("ready", e))?;
                if read_only == "off" {
                    Ok(())
                } else {
                    tracing::warn!("the database is read-only");
                    Err(DomainError::Unavailable {
                        retry_after_secs: crate::store::RETRY_AFTER_SECS,
                    })
                }
            }
        })
    }
}
