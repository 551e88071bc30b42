//! `GET /admin/usage`: every tenant's usage (or one's), grouped by tenant, for platform admins.

use gc_domain::services::usage::{self, UsageGroup};
use uuid::Uuid;

use crate::extract::{Auth, Query};
use crate::reply::Reply;
use crate::workspace::usage::{report, usage_params, UsageBody};
use crate::workspace::usage_gate::ReportSubject;

usage_params! {
    /// `?from=&to=&tenant_id=&limit=&cursor=`.
    pub struct AdminUsageParams {
        /// Last day, inclusive; default the last of the current month.
        to,
        /// Only this tenant.
        tenant_id: Option<Uuid>,
    }
}

/// Usage per tenant, ordered by tenant id descending (newest tenants first).
#[utoipa::path(get, path = "/api/v1/admin/usage", tag = "admin", params(AdminUsageParams),
    responses((status = 200, body = UsageBody),
        (status = 429, description = "rate_limited: admins' reports already running (`GC_USAGE_REPORTS_PER_TENANT`); `Retry-After`")))]
pub async fn admin_usage(Auth(state, p): Auth, params: Query<AdminUsageParams>) -> Reply {
    let params = params.after(p.admin_scope())?;
    let tenant_id = params.tenant_id;
    let q = params.query(UsageGroup::Tenant)?;
    report(
        &state,
        ReportSubject::Admins,
        UsageGroup::Tenant,
        move |store| usage::admin_usage(store, &p, tenant_id, &q),
    )
    .await
}
