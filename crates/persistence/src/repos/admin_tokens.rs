//! Admin API tokens (decision 0036): stored as SHA-256 only, always filtered by their admin;
//! every use is one line in `admin_token_uses`.

use diesel::prelude::*;
use gc_domain::page::{Page, PageRequest};
use gc_domain::policy::admin_tokens::{
    AdminToken, AdminTokenContext, AdminTokenScope, AdminTokenUse, NewAdminToken,
};
use gc_domain::ports::AdminTokenRepo;
use gc_domain::DomainResult;
use uuid::Uuid;

use super::{delete_owned, insert_one, newest_first, with_owner};
use crate::error::{corrupt, db_error};
use crate::rows::{id, ms, opt_ms, text, time};
use crate::schema::{admin_token_uses, admin_tokens};
use crate::store::DbStore;

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = admin_tokens)]
struct AdminTokenRow {
    id: String,
    user_id: String,
    name: String,
    scope: String,
    token_hash: String,
    created_at: i64,
    expires_at: Option<i64>,
    last_used_at: Option<i64>,
}

impl AdminTokenRow {
    fn from_domain(new: &NewAdminToken) -> Self {
        let t = &new.token;
        Self {
            id: text(t.id),
            user_id: text(t.user_id),
            name: t.name.clone(),
            scope: t.scope.as_str().to_owned(),
            token_hash: new.token_hash.clone(),
            created_at: ms(t.created_at),
            expires_at: opt_ms(t.expires_at),
            last_used_at: opt_ms(t.last_used_at),
        }
    }

    fn into_domain(self) -> DomainResult<AdminToken> {
        Ok(AdminToken {
            id: id(&self.id)?,
            user_id: id(&self.user_id)?,
            name: self.name,
            scope: AdminTokenScope::parse("scope", &self.scope)
                .map_err(|_| corrupt("admin token scope"))?,
            created_at: time(self.created_at)?,
            expires_at: self.expires_at.map(time).transpose()?,
            last_used_at: self.last_used_at.map(time).transpose()?,
        })
    }
}

/// How long a use's audit line is kept (`docs/operations.md`, "Admin tokens").
pub(crate) const USE_RETENTION_DAYS: i64 = 90;

/// The most audit lines kept per token: a script calling in a tight loop cannot grow the table
/// past this within the retention (the newest are kept).
pub(crate) const USES_PER_TOKEN_MAX: i64 = 10_000;

#[derive(Insertable)]
#[diesel(table_name = admin_token_uses)]
struct AdminTokenUseRow<'a> {
    id: String,
    at: i64,
    admin_id: String,
    token_id: String,
    token_name: &'a str,
    route: &'a str,
}

impl AdminTokenRepo for DbStore {
    fn insert_admin_token(&self, token: &NewAdminToken) -> DomainResult<AdminToken> {
        let row = AdminTokenRow::from_domain(token);
        insert_one!(self, "insert_admin_token", admin_tokens, &row)?;
        row.into_domain()
    }

    fn list_admin_tokens(
        &self,
        user_id: Uuid,
        page: &PageRequest,
    ) -> DomainResult<Page<AdminToken>> {
        let user_id = text(user_id);
        newest_first!(
            self,
            "list_admin_tokens",
            admin_tokens,
            AdminTokenRow,
            page,
            |query| query.filter(admin_tokens::user_id.eq(&user_id))
        )
    }

    fn delete_admin_token(&self, user_id: Uuid, token_id: Uuid) -> DomainResult<bool> {
        let (user_id, token_id) = (text(user_id), text(token_id));
        delete_owned!(
            self,
            "delete_admin_token",
            admin_tokens,
            &token_id,
            user_id = &user_id
        )
    }

    fn admin_token_context(&self, token_hash: &str) -> DomainResult<Option<AdminTokenContext>> {
        // One query: the token, its admin and the admin's tenant.
        let found = with_owner!(
            self, "admin_token_context", AdminTokenRow where admin_tokens::token_hash = token_hash
        )?;
        Ok(found.map(|(token, user, tenant)| AdminTokenContext {
            token,
            user,
            tenant,
        }))
    }

    fn record_admin_token_use(&self, used: &AdminTokenUse, touch: bool) -> DomainResult<()> {
        let row = AdminTokenUseRow {
            id: text(used.id),
            at: ms(used.at),
            admin_id: text(used.admin_id),
            token_id: text(used.token_id),
            token_name: &used.token_name,
            route: &used.route,
        };
        self.write("record_admin_token_use", |conn| {
            diesel::insert_into(admin_token_uses::table)
                .values(&row)
                .execute(conn)
                .map_err(|e| db_error("record_admin_token_use", e))?;
            if touch {
                diesel::update(admin_tokens::table.find(&row.token_id))
                    .set(admin_tokens::last_used_at.eq(Some(row.at)))
                    .execute(conn)
                    .map_err(|e| db_error("record_admin_token_use", e))?;
                prune_uses(conn, &row.token_id, row.at)?;
            }
            Ok(())
        })
    }
}

impl DbStore {
    /// The audit lines of one token's uses, newest first, at most `limit` (the command line's
    /// `admin tokens uses`; not a domain port). Lines are kept [`USE_RETENTION_DAYS`] days, at
    /// most [`USES_PER_TOKEN_MAX`] per token.
    pub fn admin_token_uses(&self, token_id: Uuid, limit: i64) -> DomainResult<Vec<AdminTokenUse>> {
        let rows: Vec<(String, i64, String, String, String, String)> = self.read(|conn| {
            admin_token_uses::table
                .filter(admin_token_uses::token_id.eq(text(token_id)))
                .select((
                    admin_token_uses::id,
                    admin_token_uses::at,
                    admin_token_uses::admin_id,
                    admin_token_uses::token_id,
                    admin_token_uses::token_name,
                    admin_token_uses::route,
                ))
                .order((admin_token_uses::at.desc(), admin_token_uses::id.desc()))
                .limit(limit.max(0))
                .load(conn)
                .map_err(|e| db_error("admin_token_uses", e))
        })?;
        rows.into_iter()
            .map(|(use_id, at, admin_id, token_id, token_name, route)| {
                Ok(AdminTokenUse {
                    id: id(&use_id)?,
                    at: time(at)?,
                    admin_id: id(&admin_id)?,
                    token_id: id(&token_id)?,
                    token_name,
                    route,
                })
            })
            .collect()
    }
}

/// Keeps `admin_token_uses` bounded, with a token's `last_used_at` write (at most once a
/// minute per token): drops every line older than [`USE_RETENTION_DAYS`] (by the index on `at`,
/// so revoked tokens' lines go too) and this token's lines beyond its newest
/// [`USES_PER_TOKEN_MAX`] (by the index on `(token_id, at)`).
fn prune_uses(conn: &mut crate::store::DbConnection, token_id: &str, now: i64) -> DomainResult<()> {
    const DAY_MS: i64 = 86_400_000;
    diesel::delete(
        admin_token_uses::table.filter(admin_token_uses::at.lt(now - USE_RETENTION_DAYS * DAY_MS)),
    )
    .execute(conn)
    .map_err(|e| db_error("prune_admin_token_uses", e))?;
    let oldest_kept: Option<i64> = admin_token_uses::table
        .filter(admin_token_uses::token_id.eq(token_id))
        .select(admin_token_uses::at)
        .order(admin_token_uses::at.desc())
        .offset(USES_PER_TOKEN_MAX - 1)
        .first(conn)
        .optional()
        .map_err(|e| db_error("prune_admin_token_uses", e))?;
    if let Some(oldest_kept) = oldest_kept {
        diesel::delete(
            admin_token_uses::table
                .filter(admin_token_uses::token_id.eq(token_id))
                .filter(admin_token_uses::at.lt(oldest_kept)),
        )
        .execute(conn)
        .map_err(|e| db_error("prune_admin_token_uses", e))?;
    }
    Ok(())
}
