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
use crate::error::{db_error, parent_missing};
use crate::rows::{limit_in, ms, text, ApiKeyRow};
use crate::schema::api_keys;
use crate::store::DbStore;

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
        // One query: the key, the member it acts for and the member's tenant.
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
