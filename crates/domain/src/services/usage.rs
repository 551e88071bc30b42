//! Usage reads: a member's tenant's usage (`workspace:read`) and every tenant's for platform
//! admins. The ranges, groupings and pages are [`crate::policy::usage`]'s.

use uuid::Uuid;

use crate::error::DomainResult;
use crate::model::workspace::KeyScope;
use crate::policy::access::{AdminAuthority, Principal};
pub use crate::policy::usage::{UsageGroup, UsageLine, UsagePage, UsageQuery, UsageRange};
use crate::ports::UsageRepo;

/// The caller's tenant's usage (`workspace:read`, like every workspace read).
pub fn workspace_usage<P: UsageRepo + ?Sized>(
    store: &P,
    principal: &Principal,
    query: &UsageQuery,
) -> DomainResult<UsagePage> {
    let scope = principal.read_scope(KeyScope::WorkspaceRead)?;
    store.tenant_usage(&scope, query)
}

/// Every tenant's usage, grouped by tenant (platform admins).
pub fn admin_usage<P: UsageRepo + ?Sized>(
    store: &P,
    principal: &impl AdminAuthority,
    tenant_id: Option<Uuid>,
    query: &UsageQuery,
) -> DomainResult<UsagePage> {
    let scope = principal.admin_scope()?;
    let query = UsageQuery {
        group: UsageGroup::Tenant,
        ..query.clone()
    };
    store.all_usage(&scope, tenant_id, &query)
}
