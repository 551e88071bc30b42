//! Administration of tenants and users by platform admins.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::access::Principal;
use crate::error::{DomainError, DomainResult};
use crate::gateway::AiAccess;
use crate::model::{new_id, Status, Tenant, TenantPatch, User, UserPatch};
use crate::ports::Store;
use crate::values::{text, Region};

/// Validates a tenant name.
pub fn tenant_name(raw: &str) -> DomainResult<String> {
    text("name", raw, 1, 100)
}

/// Validates a person's display name.
pub fn person_name(raw: &str) -> DomainResult<String> {
    text("name", raw, 1, 100)
}

pub fn create_tenant(
    store: &dyn Store,
    admin: &Principal,
    name: &str,
    region: Region,
    ai_enabled: bool,
    now: DateTime<Utc>,
) -> DomainResult<Tenant> {
    admin.require_admin()?;
    store.insert_tenant(&Tenant {
        id: new_id(),
        name: tenant_name(name)?,
        status: Status::Active,
        region,
        ai_enabled,
        created_at: now,
    })
}

pub fn update_tenant(
    store: &dyn Store,
    admin: &Principal,
    id: Uuid,
    patch: &TenantPatch,
) -> DomainResult<Tenant> {
    admin.require_admin()?;
    store
        .update_tenant(id, patch)?
        .ok_or(DomainError::NotFound("tenant"))
}

pub fn update_user(
    store: &dyn Store,
    admin: &Principal,
    id: Uuid,
    patch: &UserPatch,
) -> DomainResult<User> {
    admin.require_admin()?;
    store
        .update_user(id, patch)?
        .ok_or(DomainError::NotFound("user"))
}

pub fn assign_tenant(
    store: &dyn Store,
    admin: &Principal,
    id: Uuid,
    tenant_id: Option<Uuid>,
) -> DomainResult<User> {
    admin.require_admin()?;
    if let Some(tenant_id) = tenant_id {
        if store.find_tenant(tenant_id)?.is_none() {
            return Err(DomainError::invalid("tenant_id", "no such tenant"));
        }
    }
    store
        .assign_tenant(id, tenant_id)?
        .ok_or(DomainError::NotFound("user"))
}

/// The AI access of a tenant, computed from its keys.
pub fn ai_access(store: &dyn Store, tenant: &Tenant) -> DomainResult<AiAccess> {
    if !tenant.ai_enabled {
        return Ok(AiAccess::Disabled);
    }
    let keys = store.usable_ai_keys(tenant.id, tenant.region)?;
    Ok(AiAccess::of(tenant, &keys))
}
