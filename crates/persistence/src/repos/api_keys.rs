//! Workspace API keys: stored as SHA-256 only, always filtered by the scope's tenant.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use gc_domain::model::workspace::{ApiKey, ApiKeyPatch, KeyContext};
use gc_domain::page::{Page, PageRequest};
use gc_domain::policy::access::TenantScope;
use gc_domain::ports::{ApiKeyRepo, TenantWrite};
use gc_domain::DomainResult;
use uuid::Uuid;

use super::workspace::append;
use super::{newest_first, with_owner};
use crate::error::{corrupt, db_error, parent_missing};
use crate::rows::{limit_in, ms, text, ApiKeyRow, TenantRow, UserRow};
use crate::schema::{api_keys, tenants, users};
use crate::store::{DbConnection, DbStore};

#[derive(AsChangeset)]
#[diesel(table_name = api_keys)]
struct KeyChanges<'a> {
    name: Option<&'a str>,
    requests_per_minute: Option<Option<i64>>,
    tokens_per_minute: Option<Option<i64>>,
    monthly_spend: Option<Option<i64>>,
}

impl ApiKeyRepo for DbStore {
    fn insert_api_key(&self, write: TenantWrite<'_>, key: &ApiKey) -> DomainResult<ApiKey> {
        let tenant = write.tenant_id();
        // The key belongs to the scope's tenant, whatever the value says.
        let row = ApiKeyRow::from_domain(key, tenant);
        self.write("insert_api_key", |conn| {
            diesel::insert_into(api_keys::table)
                .values(&row)
                .execute(conn)
                .map_err(|e| parent_missing("insert_api_key", "user", e))?;
            append(conn, "insert_api_key", write.activity, tenant)
        })?;
        row.into_domain()
    }

    fn list_api_keys(&self, scope: &TenantScope, page: &PageRequest) -> DomainResult<Page<ApiKey>> {
        let tenant_id = text(scope.tenant_id());
        newest_first!(self, "list_api_keys", api_keys, ApiKeyRow, page, |query| {
            query.filter(api_keys::tenant_id.eq(&tenant_id))
        })
    }

    fn revoke_api_key(&self, write: TenantWrite<'_>, id: Uuid) -> DomainResult<bool> {
        let tenant = write.tenant_id();
        let tenant_id = text(tenant);
        let id = text(id);
        self.write("revoke_api_key", |conn| {
            let n = diesel::update(
                api_keys::table
                    .filter(api_keys::id.eq(&id))
                    .filter(api_keys::tenant_id.eq(&tenant_id))
                    .filter(api_keys::revoked_at.is_null()),
            )
            .set(api_keys::revoked_at.eq(Some(ms(write.at()))))
            .execute(conn)
            .map_err(|e| db_error("revoke_api_key", e))?;
            if n == 0 {
                return Ok(false);
            }
            append(conn, "revoke_api_key", write.activity, tenant)?;
            Ok(true)
        })
    }

    fn update_api_key(
        &self,
        write: TenantWrite<'_>,
        id: Uuid,
        patch: &ApiKeyPatch,
    ) -> DomainResult<Option<ApiKey>> {
        let tenant = write.tenant_id();
        let tenant_id = text(tenant);
        let id = text(id);
        let changes = KeyChanges {
            name: patch.name.as_deref(),
            requests_per_minute: patch.requests_per_minute.map(limit_in),
            tokens_per_minute: patch.tokens_per_minute.map(limit_in),
            monthly_spend: patch.monthly_spend.map(limit_in),
        };
        let row = self.write("update_api_key", |conn| {
            let target = api_keys::table
                .filter(api_keys::id.eq(&id))
                .filter(api_keys::tenant_id.eq(&tenant_id))
                .filter(api_keys::revoked_at.is_null());
            let found = if changes.name.is_none()
                && changes.requests_per_minute.is_none()
                && changes.tokens_per_minute.is_none()
                && changes.monthly_spend.is_none()
            {
                target.count().get_result::<i64>(conn)
            } else {
                diesel::update(target)
                    .set(&changes)
                    .execute(conn)
                    .map(|n| i64::try_from(n).unwrap_or(1))
            }
            .map_err(|e| db_error("update_api_key", e))?;
            if found == 0 {
                return Ok(None);
            }
            append(conn, "update_api_key", write.activity, tenant)?;
            api_keys::table
                .filter(api_keys::id.eq(&id))
                .select(ApiKeyRow::as_select())
                .first(conn)
                .optional()
                .map_err(|e| db_error("update_api_key", e))
        })?;
        row.map(ApiKeyRow::into_domain).transpose()
    }

    fn key_context(&self, key_hash: &str) -> DomainResult<Option<KeyContext>> {
        // One query: the key, the member it acts for and the member's tenant. On PostgreSQL
        // in three columns rather than 34 (every request with a key reads it; see
        // `key_context_pg`).
        if self.backend() == "postgres" {
            let found = self.read(|conn| match conn {
                DbConnection::Pg(c) => key_context_pg(c, key_hash),
                DbConnection::Sqlite(_) => Err(db_error(
                    "key_context",
                    diesel::result::Error::NotInTransaction,
                )),
            })?;
            return found
                .map(|(key, user, tenant)| {
                    Ok(KeyContext {
                        key: key.into_domain()?,
                        user: user.into_domain()?,
                        tenant: tenant.map(TenantRow::into_domain).transpose()?,
                    })
                })
                .transpose();
        }
        let found =
            with_owner!(self, "key_context", ApiKeyRow where api_keys::key_hash = key_hash)?;
        Ok(found.map(|(key, user, tenant)| KeyContext { key, user, tenant }))
    }

    fn touch_api_key(&self, id: Uuid, at: DateTime<Utc>) -> DomainResult<()> {
        self.write_one(|conn| {
            diesel::update(api_keys::table.find(text(id)))
                .set(api_keys::last_used_at.eq(Some(ms(at))))
                .execute(conn)
                .map_err(|e| db_error("touch_api_key", e))
        })?;
        Ok(())
    }
}

/// The key whose hash is `key_hash`, its member and the member's tenant, on PostgreSQL: the
/// join of `with_owner!`, its values packed into three columns (the text columns in one
/// `text[]`, the integer columns in one `bigint[]`, and `ai_enabled`) instead of one column
/// each. Every request with a key runs this statement (issue 33), and both ends pay per
/// column per execution: the backend sends the row's description again (libpq describes the
/// portal each time) and looks up each column's output function, and libpq and diesel take
/// each column apart. The key's hash is the one asked for, the member's id the key's
/// `user_id` and the tenant's id the member's `tenant_id` (the join's conditions), so they
/// are not read back. Static SQL: kept prepared per connection, on the generic plan.
fn key_context_pg(
    conn: &mut diesel::PgConnection,
    key_hash: &str,
) -> DomainResult<Option<(ApiKeyRow, UserRow, Option<TenantRow>)>> {
    use diesel::dsl::array;
    use diesel::sql_types::{BigInt, Nullable, Text};
    let found = api_keys::table
        .inner_join(users::table)
        .left_join(tenants::table.on(users::tenant_id.eq(tenants::id.nullable())))
        .filter(api_keys::key_hash.eq(key_hash))
        .select((
            array::<Nullable<Text>, _>((
                api_keys::id.nullable(),
                api_keys::tenant_id.nullable(),
                api_keys::user_id.nullable(),
                api_keys::name.nullable(),
                api_keys::scopes.nullable(),
                api_keys::hint.nullable(),
                users::email.nullable(),
                users::name.nullable(),
                users::role.nullable(),
                users::status.nullable(),
                users::tenant_id,
                users::password_hash.nullable(),
                tenants::id.nullable(),
                tenants::name.nullable(),
                tenants::status.nullable(),
                tenants::region.nullable(),
                tenants::allowed_models.nullable(),
            )),
            array::<Nullable<BigInt>, _>((
                api_keys::created_at.nullable(),
                api_keys::last_used_at,
                api_keys::expires_at,
                api_keys::revoked_at,
                api_keys::requests_per_minute,
                api_keys::tokens_per_minute,
                api_keys::monthly_spend,
                users::created_at.nullable(),
                tenants::created_at.nullable(),
                tenants::requests_per_minute.nullable(),
                tenants::tokens_per_minute.nullable(),
                tenants::monthly_tokens.nullable(),
                tenants::ai_keys_version.nullable(),
                tenants::monthly_spend.nullable(),
            )),
            tenants::ai_enabled.nullable(),
        ))
        .first::<(Vec<Option<String>>, Vec<Option<i64>>, Option<bool>)>(conn)
        .optional()
        .map_err(|e| db_error("key_context", e))?;
    found
        .map(|(texts, numbers, ai_enabled)| owner_rows(key_hash, texts, numbers, ai_enabled))
        .transpose()
}

/// The rows `key_context_pg` read, taken out of its arrays in the order it packed them.
fn owner_rows(
    key_hash: &str,
    texts: Vec<Option<String>>,
    numbers: Vec<Option<i64>>,
    ai_enabled: Option<bool>,
) -> DomainResult<(ApiKeyRow, UserRow, Option<TenantRow>)> {
    if texts.len() != 17 || numbers.len() != 14 {
        return Err(corrupt("key_context row"));
    }
    let mut t = texts.into_iter();
    let mut n = numbers.into_iter();
    // Each `next()` is within the lengths checked above; a NULL where the column is NOT
    // NULL (only a tenant's, when the member has none) means no tenant, or a corrupt row.
    let mut text = || t.next().flatten();
    let mut number = || n.next().flatten();
    let must = |v: Option<String>| v.ok_or_else(|| corrupt("key_context row"));
    let key = ApiKeyRow {
        id: must(text())?,
        tenant_id: must(text())?,
        user_id: must(text())?,
        name: must(text())?,
        scopes: must(text())?,
        hint: must(text())?,
        key_hash: key_hash.to_owned(),
        created_at: number().ok_or_else(|| corrupt("key_context row"))?,
        last_used_at: number(),
        expires_at: number(),
        revoked_at: number(),
        requests_per_minute: number(),
        tokens_per_minute: number(),
        monthly_spend: number(),
    };
    let user = UserRow {
        id: key.user_id.clone(),
        email: must(text())?,
        name: must(text())?,
        role: must(text())?,
        status: must(text())?,
        tenant_id: text(),
        password_hash: must(text())?,
        created_at: number().ok_or_else(|| corrupt("key_context row"))?,
    };
    let tenant_id = text();
    let (name, status, region, allowed_models) = (text(), text(), text(), text());
    let created_at = number();
    let (requests_per_minute, tokens_per_minute, monthly_tokens) = (number(), number(), number());
    let (ai_keys_version, monthly_spend) = (number(), number());
    let tenant = match tenant_id {
        None => None,
        Some(id) => Some(TenantRow {
            id,
            name: must(name)?,
            status: must(status)?,
            region: must(region)?,
            ai_enabled: ai_enabled.ok_or_else(|| corrupt("key_context row"))?,
            created_at: created_at.ok_or_else(|| corrupt("key_context row"))?,
            requests_per_minute,
            tokens_per_minute,
            monthly_tokens,
            ai_keys_version: ai_keys_version.ok_or_else(|| corrupt("key_context row"))?,
            allowed_models,
            monthly_spend,
        }),
    };
    Ok((key, user, tenant))
}

/// Issue 33: on PostgreSQL a request's key is one statement of three columns, and it reads
/// what the one-column-per-value join reads.
#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use diesel::connection::{InstrumentationEvent, SimpleConnection};
    use gc_domain::ports::ApiKeyRepo;

    use super::*;
    use crate::testing;

    const TENANT: &str = "0190a000-0000-7000-8000-000000000001";
    const MEMBER: &str = "0190a000-0000-7000-8000-000000000002";
    const LOOSE: &str = "0190a000-0000-7000-8000-000000000003";

    /// A tenant with every optional value set, its member, a member of no tenant, and keys:
    /// `full` (every optional value set), `bare` (none), `loose` (the tenant-less member's).
    fn fixture(store: &DbStore) {
        let sql = format!(
            "INSERT INTO tenants (id, name, status, region, ai_enabled, created_at, \
               requests_per_minute, tokens_per_minute, monthly_tokens, allowed_models, monthly_spend) \
             VALUES ('{TENANT}', 'Acme \"quoted\", {{braces}}', 'active', 'AIHK', true, 1000, 60, 6000, \
               700000, '[\"gpt-4o\",\"auto\"]', 123456789); \
             UPDATE tenants SET ai_keys_version = 7 WHERE id = '{TENANT}'; \
             INSERT INTO users (id, email, name, role, status, tenant_id, password_hash, created_at) \
             VALUES ('{MEMBER}', 'ann@example.com', 'Ann, \"A\"', 'member', 'active', '{TENANT}', '$2b$04$hash', 2000), \
                    ('{LOOSE}', 'bob@example.com', 'Bob', 'member', 'suspended', NULL, 'h2', 3000); \
             INSERT INTO api_keys (id, tenant_id, user_id, name, scopes, hint, key_hash, created_at, \
               last_used_at, expires_at, revoked_at, requests_per_minute, tokens_per_minute, monthly_spend) \
             VALUES ('0190a000-0000-7000-8000-000000000011', '{TENANT}', '{MEMBER}', 'ci', \
                       'workspace:read run', 'gc_…abcd', 'full', 4000, 5000, 6000, 7000, 10, 20, 30), \
                    ('0190a000-0000-7000-8000-000000000012', '{TENANT}', '{MEMBER}', '', 'run', '', \
                       'bare', 4001, NULL, NULL, NULL, NULL, NULL, NULL), \
                    ('0190a000-0000-7000-8000-000000000013', '{TENANT}', '{LOOSE}', 'old', 'run', 'h', \
                       'loose', 4002, NULL, NULL, NULL, NULL, NULL, NULL);"
        );
        store
            .write("test", |conn| {
                match conn {
                    DbConnection::Pg(c) => c.batch_execute(&sql),
                    DbConnection::Sqlite(c) => c.batch_execute(&sql),
                }
                .map_err(|e| db_error("test", e))
            })
            .unwrap();
    }

    /// Every value of the three keys' contexts equals the 34-column join's (`with_owner!`):
    /// NULLs, limits, the tenant's allow-list and version, text with quotes, commas and
    /// braces, and the member without a tenant; a hash no key has is `None`. One statement per
    /// read, of three columns (one `text[]`, one `bigint[]`, `ai_enabled`).
    #[test]
    fn a_key_context_on_postgres_is_one_statement_of_three_columns() {
        let Some(db) = testing::postgres_or_skip("key_context columns") else {
            return;
        };
        let store = testing::open_migrated(db.url(), 1);
        fixture(&store);
        let statements = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = Arc::clone(&statements);
        {
            let mut conn = store.conn().unwrap();
            let DbConnection::Pg(pg) = &mut *conn else {
                panic!("a PostgreSQL connection")
            };
            pg.set_instrumentation(move |event: InstrumentationEvent<'_>| {
                if let InstrumentationEvent::StartQuery { query, .. } = event {
                    seen.lock().unwrap().push(query.to_string());
                }
            });
        }
        for hash in ["full", "bare", "loose", "none"] {
            statements.lock().unwrap().clear();
            let got = store.key_context(hash).unwrap();
            let started = statements.lock().unwrap().clone();
            assert_eq!(started.len(), 1, "{hash}: {started:?}");
            // `SELECT ARRAY[…], ARRAY[…], "tenants"."ai_enabled" FROM …`
            let columns = started[0].split(" FROM ").next().unwrap_or_default();
            assert!(
                columns.starts_with("SELECT ARRAY[")
                    && columns.matches("ARRAY[").count() == 2
                    && columns
                        .rsplit_once(']')
                        .is_some_and(|(_, last)| last == ", \"tenants\".\"ai_enabled\""),
                "{hash}: {}",
                started[0]
            );
            let want = with_owner!(store, "key_context", ApiKeyRow where api_keys::key_hash = hash)
                .unwrap();
            match (got, want) {
                (None, None) => assert_eq!(hash, "none"),
                (Some(got), Some((key, user, tenant))) => {
                    assert_eq!(got.key, key, "{hash}");
                    assert_eq!(got.user, user, "{hash}");
                    assert_eq!(got.tenant, tenant, "{hash}");
                    if hash == "full" {
                        let t = got.tenant.as_ref().expect("a tenant");
                        assert_eq!(t.ai_keys_version, 7);
                        assert!(
                            t.limits.monthly_spend.is_some()
                                && got.key.limits.monthly_spend.is_some()
                        );
                        assert!(got.key.revoked_at.is_some() && got.key.last_used_at.is_some());
                    }
                    if hash == "loose" {
                        assert!(got.tenant.is_none() && got.user.tenant_id.is_none());
                    }
                }
                (got, want) => panic!("{hash}: {got:?} against {want:?}"),
            }
        }
    }

    /// Arrays of any other length than the statement packs (one value short or one over, in
    /// either array) are a corrupt row, never read into a key with its values shifted.
    #[test]
    fn a_packed_row_of_another_shape_is_corrupt() {
        let texts = |n: usize| vec![Some("x".to_owned()); n];
        let numbers = |n: usize| vec![Some(1_i64); n];
        assert!(owner_rows("h", texts(17), numbers(14), Some(true)).is_ok());
        for (t, n) in [(16, 14), (18, 14), (17, 13), (17, 15), (16, 13)] {
            assert!(
                owner_rows("h", texts(t), numbers(n), Some(true)).is_err(),
                "{t} texts and {n} numbers read as a key"
            );
        }
    }
}
