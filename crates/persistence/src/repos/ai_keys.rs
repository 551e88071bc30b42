//! Tenant AI keys (sealed upstream provider keys, locked to a region).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use gc_domain::model::Tenant;
use gc_domain::policy::access::AdminScope;
use gc_domain::policy::ai_access::{AiKeyStatus, KeyVerdict, NewTenantAiKey, TenantAiKey};
use gc_domain::ports::AiKeyRepo;
use gc_domain::values::Region;
use gc_domain::DomainResult;
use uuid::Uuid;

use crate::error::{db_error, parent_missing};
use crate::rows::{ms, text, AiKeyRow};
use crate::schema::{gateway_urls, tenant_ai_keys};
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
        self.write_one(|conn| {
            diesel::insert_into(tenant_ai_keys::table)
                .values(&row)
                .execute(conn)
                .map_err(|e| parent_missing("insert_ai_key", "tenant", e))
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
        let (id, tenant_id) = (text(id), text(tenant_id));
        super::delete_owned!(
            self,
            "delete_ai_key",
            tenant_ai_keys,
            &id,
            tenant_id = &tenant_id
        )
    }

    fn set_ai_key_status(&self, verdict: &KeyVerdict) -> DomainResult<()> {
        self.write_one(|conn| {
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

    /// From this node's memory while the tenant's AI-key version is the one the keys were read
    /// under; otherwise from the database, kept under the version `tenant` was read with.
    fn usable_ai_keys(&self, tenant: &Tenant) -> DomainResult<Vec<TenantAiKey>> {
        let (tenant_id, region, version) = (tenant.id, tenant.region, tenant.ai_keys_version);
        if let Some(keys) = self.usable_keys.get(tenant_id, region, version) {
            return Ok(keys);
        }
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
        let keys = to_domain(rows)?;
        self.usable_keys
            .keep(tenant_id, region, version, keys.clone());
        Ok(keys)
    }
}

/// The most tenant-and-region answers [`UsableKeys`] holds. When a new one would exceed it,
/// every answer is dropped and the map starts again empty: each tenant's next run reads its
/// keys from the database once more. A few hundred bytes each, so at most about 1 MiB.
const USABLE_KEYS_MAX: usize = 2048;

/// This node's answers to `usable_ai_keys` (decision 0022): per tenant and region, the keys
/// as read and the tenant's AI-key version read *before* them, on the same request. The
/// database raises that version in the same transaction as every insert, change or delete of
/// one of the tenant's keys (migration `2026-12-02-000000_ai_key_versions`), and versions
/// only grow, so:
/// - an answer kept under version `v` holds every change committed before `v` was read;
/// - a request that reads `v` again was answered after no change committed since, so the kept
///   answer is the database's (or newer);
/// - a request that read an older version than the kept one is answered from the database, and
///   its answer never replaces one kept under a later version.
///
/// Only the key rows are kept: no key is opened here, and every other access check (the
/// caller's key, membership, the tenant's status and AI switch) is still read per request.
#[derive(Debug, Default)]
pub(crate) struct UsableKeys {
    kept: Mutex<HashMap<(Uuid, Region), Kept>>,
}

/// One tenant-region's usable keys and the tenant's AI-key version read before them.
type Kept = (i64, Vec<TenantAiKey>);

impl UsableKeys {
    fn get(&self, tenant_id: Uuid, region: Region, version: i64) -> Option<Vec<TenantAiKey>> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        match kept.get(&(tenant_id, region)) {
            Some((v, keys)) if *v == version => Some(keys.clone()),
            _ => None,
        }
    }

    fn keep(&self, tenant_id: Uuid, region: Region, version: i64, keys: Vec<TenantAiKey>) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        match kept.get(&(tenant_id, region)) {
            Some((v, _)) if *v > version => {}
            found => {
                if found.is_none() && kept.len() >= USABLE_KEYS_MAX {
                    kept.clear();
                }
                kept.insert((tenant_id, region), (version, keys));
            }
        }
    }
}

impl DbStore {
    /// One key of a tenant (adapter tests and operators' tools; not a domain port).
    pub fn find_ai_key(&self, tenant_id: Uuid, id: Uuid) -> DomainResult<Option<TenantAiKey>> {
        self.read(|conn| {
            let query = tenant_ai_keys::table
                .filter(tenant_ai_keys::id.eq(text(id)))
                .filter(tenant_ai_keys::tenant_id.eq(text(tenant_id)));
            super::first_row!(conn, "find_ai_key", AiKeyRow, query)
        })
    }

    /// Notes, at start-up, the fingerprint of `region`'s gateway URL (decision 0044). When it
    /// differs from the one kept for the region, or none was kept, the `checked_at` of every
    /// key of the region is cleared and the new fingerprint kept, in one transaction: those
    /// keys were judged against another URL (or none), and the start-up re-check probes every
    /// key without a `checked_at`. A start that stops before probing them leaves them marked
    /// for the next one. Returns how many keys were marked, `None` when the URL is unchanged.
    pub fn note_gateway_url(
        &self,
        region: Region,
        fingerprint: &str,
        at: DateTime<Utc>,
    ) -> DomainResult<Option<usize>> {
        self.write("note_gateway_url", |conn| {
            let kept: Option<String> = gateway_urls::table
                .find(region.as_str())
                .select(gateway_urls::fingerprint)
                .first(conn)
                .optional()
                .map_err(|e| db_error("note_gateway_url", e))?;
            if kept.as_deref() == Some(fingerprint) {
                return Ok(None);
            }
            let marked = diesel::update(
                tenant_ai_keys::table.filter(tenant_ai_keys::region.eq(region.as_str())),
            )
            .set(tenant_ai_keys::checked_at.eq(None::<i64>))
            .execute(conn)
            .map_err(|e| db_error("note_gateway_url", e))?;
            if kept.is_some() {
                diesel::update(gateway_urls::table.find(region.as_str()))
                    .set((
                        gateway_urls::fingerprint.eq(fingerprint),
                        gateway_urls::changed_at.eq(ms(at)),
                    ))
                    .execute(conn)
            } else {
                diesel::insert_into(gateway_urls::table)
                    .values((
                        gateway_urls::region.eq(region.as_str()),
                        gateway_urls::fingerprint.eq(fingerprint),
                        gateway_urls::changed_at.eq(ms(at)),
                    ))
                    .execute(conn)
            }
            .map_err(|e| db_error("note_gateway_url", e))?;
            Ok(Some(marked))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_answers_are_bounded_and_dropped_together_when_full() {
        let kept = UsableKeys::default();
        let first = Uuid::now_v7();
        kept.keep(first, Region::Aihk, 1, Vec::new());
        for _ in 1..USABLE_KEYS_MAX {
            kept.keep(Uuid::now_v7(), Region::Aihk, 1, Vec::new());
        }
        assert_eq!(kept.kept.lock().unwrap().len(), USABLE_KEYS_MAX);
        // Full: a newer answer for a tenant already kept replaces it in place...
        kept.keep(first, Region::Aihk, 2, Vec::new());
        assert_eq!(kept.kept.lock().unwrap().len(), USABLE_KEYS_MAX);
        assert_eq!(kept.get(first, Region::Aihk, 2), Some(Vec::new()));
        assert_eq!(kept.get(first, Region::Aihk, 1), None);
        // ...and one more tenant-region drops every answer before it is kept.
        kept.keep(first, Region::Aica, 2, Vec::new());
        assert_eq!(kept.kept.lock().unwrap().len(), 1);
        assert_eq!(kept.get(first, Region::Aihk, 2), None);
        assert_eq!(kept.get(first, Region::Aica, 2), Some(Vec::new()));
    }
}
