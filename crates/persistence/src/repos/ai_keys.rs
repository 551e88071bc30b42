//! Tenant AI keys (sealed upstream provider keys, locked to a region).

use diesel::prelude::*;
use gc_domain::access::AdminScope;
use gc_domain::gateway::{AiKeyStatus, KeyVerdict, NewTenantAiKey, TenantAiKey};
use gc_domain::ports::AiKeyRepo;
use gc_domain::values::Region;
use gc_domain::{DomainError, DomainResult};
use uuid::Uuid;

use crate::error::db_error;
use crate::rows::{ms, text, AiKeyRow};
use crate::schema::tenant_ai_keys;
use crate::store::DbStore;

fn to_domain(rows: Vec<AiKeyRow>) -> DomainResult<Vec<TenantAiKey>> {
    rows.into_iter().map(AiKeyRow::into_domain).collect()
}

impl AiKeyRepo for DbStore {
    fn insert_ai_key(
        &self,
        _scope: &AdminScope,
        key: &NewTenantAiKey,
    ) -> DomainResult<TenantAiKey> {
        let row = AiKeyRow::from_domain(key);
        self.read(|conn| {
            diesel::insert_into(tenant_ai_keys::table)
                .values(&row)
                .execute(conn)
                .map_err(|e| match e {
                    diesel::result::Error::DatabaseError(
                        diesel::result::DatabaseErrorKind::ForeignKeyViolation,
                        _,
                    ) => DomainError::NotFound("tenant"),
                    e => db_error("insert_ai_key", e),
                })
        })?;
        row.into_domain()
    }

    fn list_ai_keys(
        &self,
        _scope: &AdminScope,
        tenant_id: Option<Uuid>,
    ) -> DomainResult<Vec<TenantAiKey>> {
        let rows = self.read(|conn| {
            let mut query = tenant_ai_keys::table
                .select(AiKeyRow::as_select())
                .order(tenant_ai_keys::id.desc())
                .into_boxed();
            if let Some(tenant_id) = tenant_id {
                query = query.filter(tenant_ai_keys::tenant_id.eq(text(tenant_id)));
            }
            query.load(conn).map_err(|e| db_error("list_ai_keys", e))
        })?;
        to_domain(rows)
    }

    fn delete_ai_key(&self, _scope: &AdminScope, tenant_id: Uuid, id: Uuid) -> DomainResult<bool> {
        self.read(|conn| {
            diesel::delete(
                tenant_ai_keys::table
                    .filter(tenant_ai_keys::id.eq(text(id)))
                    .filter(tenant_ai_keys::tenant_id.eq(text(tenant_id))),
            )
            .execute(conn)
            .map(|n| n > 0)
            .map_err(|e| db_error("delete_ai_key", e))
        })
    }

    fn set_ai_key_status(&self, verdict: &KeyVerdict) -> DomainResult<()> {
        self.read(|conn| {
            diesel::update(
                tenant_ai_keys::table
                    .find(text(verdict.key_id()))
                    .filter(tenant_ai_keys::tenant_id.eq(text(verdict.tenant_id()))),
            )
            .set((
                tenant_ai_keys::status.eq(verdict.status().as_str()),
                tenant_ai_keys::status_reason.eq(verdict.reason()),
                tenant_ai_keys::checked_at.eq(Some(ms(verdict.at()))),
            ))
            .execute(conn)
            .map_err(|e| db_error("set_ai_key_status", e))
        })?;
        Ok(())
    }

    fn usable_ai_keys(&self, tenant_id: Uuid, region: Region) -> DomainResult<Vec<TenantAiKey>> {
        let rows = self.read(|conn| {
            let tenant_id = text(tenant_id);
            crate::store::on_backend!(conn, |c| tenant_ai_keys::table
                .filter(tenant_ai_keys::tenant_id.eq(&tenant_id))
                .filter(tenant_ai_keys::region.eq(region.as_str()))
                .filter(tenant_ai_keys::status.eq(AiKeyStatus::Ready.as_str()))
                .filter(tenant_ai_keys::chat_enabled.eq(true))
                .select(AiKeyRow::as_select())
                .order(tenant_ai_keys::id.desc())
                .load(c))
            .map_err(|e| db_error("usable_ai_keys", e))
        })?;
        to_domain(rows)
    }
}

impl DbStore {
    /// One key of a tenant (adapter tests and operators' tools; not a domain port).
    pub fn find_ai_key(&self, tenant_id: Uuid, id: Uuid) -> DomainResult<Option<TenantAiKey>> {
        self.read(|conn| {
            tenant_ai_keys::table
                .filter(tenant_ai_keys::id.eq(text(id)))
                .filter(tenant_ai_keys::tenant_id.eq(text(tenant_id)))
                .select(AiKeyRow::as_select())
                .first(conn)
                .optional()
                .map_err(|e| db_error("find_ai_key", e))
        })?
        .map(AiKeyRow::into_domain)
        .transpose()
    }
}
