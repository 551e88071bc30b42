//! `/admin/tenants`: platform admins list, create, read and change tenants (name, status,
//! region, AI switch and quotas).

use actix_web::web;
use chrono::Utc;
use gc_domain::model::{Status, TenantPatch};
use gc_domain::policy::models::allowed_models;
use gc_domain::policy::prices::money_limit;
use gc_domain::policy::quota::limit_change;
use gc_domain::services::admin::{self, tenant_name};
use gc_domain::values::Region;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::cursor::ListQuery;
use crate::extract::{nullable_body, parse_field, Auth, Body, Query};
use crate::reply::{created, list_page, ok, Reply};
use crate::views::{ListBody, TenantView};

/// Every tenant, newest first.
#[utoipa::path(get, path = "/api/v1/admin/tenants", tag = "admin", params(ListQuery),
    responses((status = 200, body = ListBody<TenantView>)))]
pub async fn list_tenants(Auth(state, p): Auth, query: Query<ListQuery>) -> Reply {
    let page = query.after(p.admin_scope())?.page()?;
    let page = state
        .db(move |ports| admin::list_tenants(ports, &p, &page))
        .await?;
    list_page(page, |(t, access)| TenantView::new(&t, access))
}

/// One tenant, as in the list (the console's tenant page reads it).
#[utoipa::path(get, path = "/api/v1/admin/tenants/{id}", tag = "admin",
    params(("id" = Uuid, Path, description = "Tenant id")),
    responses((status = 200, body = TenantView)))]
pub async fn get_tenant(Auth(state, p): Auth, id: web::Path<Uuid>) -> Reply {
    p.admin_scope()?;
    let id = id.into_inner();
    let (t, access) = state
        .db(move |ports| admin::get_tenant(ports, &p, id))
        .await?;
    ok(TenantView::new(&t, access))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenantBody {
    pub name: String,
    /// `AIHK` or `AICA`.
    pub region: String,
    /// Default false.
    pub ai_enabled: Option<bool>,
}

/// Creates an active tenant in a region.
#[utoipa::path(post, path = "/api/v1/admin/tenants", tag = "admin", request_body = CreateTenantBody,
    responses((status = 201, body = TenantView)))]
pub async fn create_tenant(Auth(state, p): Auth, body: Body<CreateTenantBody>) -> Reply {
    let body = body.after(p.admin_scope())?;
    let region = Region::parse("region", &body.region)?;
    let (t, access) = state
        .db(move |ports| {
            admin::create_tenant(
                ports,
                &p,
                &body.name,
                region,
                body.ai_enabled.unwrap_or(false),
                Utc::now(),
            )
        })
        .await?;
    created(TenantView::new(&t, access))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchTenantBody {
    pub name: Option<String>,
    /// `active` or `suspended`.
    pub status: Option<String>,
    /// `AIHK` or `AICA`.
    pub region: Option<String>,
    pub ai_enabled: Option<bool>,
    /// Quotas to change; a field left out stays, `null` removes that limit.
    #[serde(default, deserialize_with = "crate::extract::optional_object")]
    pub limits: Option<TenantLimitsBody>,
    /// The models the tenant's runs may name (within the region's list); `null`: the
    /// region's list.
    #[serde(default, deserialize_with = "crate::extract::nullable")]
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_models: Option<Option<Vec<String>>>,
}

nullable_body! {
    /// `PATCH` of a tenant's quotas: each a positive integer, or null for no limit.
    pub struct TenantLimitsBody {
        requests_per_minute: i64,
        tokens_per_minute: i64,
        monthly_tokens: i64,
        /// Money per UTC month, a decimal string (`"25.00"`) in the deployment's currency.
        monthly_spend: String,
    }
}

/// Renames, suspends or re-activates a tenant, moves its region, switches AI on or off, or
/// sets its quotas. A suspension refuses its members at their very next request; new limits
/// apply from the next run.
#[utoipa::path(patch, path = "/api/v1/admin/tenants/{id}", tag = "admin", request_body = PatchTenantBody,
    params(("id" = Uuid, Path, description = "Tenant id")),
    responses((status = 200, body = TenantView)))]
pub async fn patch_tenant(
    Auth(state, p): Auth,
    id: web::Path<Uuid>,
    body: Body<PatchTenantBody>,
) -> Reply {
    let body = body.after(p.admin_scope())?;
    let patch = TenantPatch {
        name: body.name.as_deref().map(tenant_name).transpose()?,
        status: parse_field("status", body.status.as_deref(), Status::parse)?,
        region: parse_field("region", body.region.as_deref(), Region::parse)?,
        ai_enabled: body.ai_enabled,
        requests_per_minute: limit_change(
            "limits.requests_per_minute",
            body.limits.as_ref().and_then(|l| l.requests_per_minute),
        )?,
        tokens_per_minute: limit_change(
            "limits.tokens_per_minute",
            body.limits.as_ref().and_then(|l| l.tokens_per_minute),
        )?,
        monthly_tokens: limit_change(
            "limits.monthly_tokens",
            body.limits.as_ref().and_then(|l| l.monthly_tokens),
        )?,
        monthly_spend: body
            .limits
            .as_ref()
            .and_then(|l| l.monthly_spend.as_ref())
            .map(|v| money_limit("limits.monthly_spend", v.as_deref()))
            .transpose()?,
        allowed_models: body
            .allowed_models
            .map(|l| allowed_models("allowed_models", l))
            .transpose()?,
    };
    let id = id.into_inner();
    let (t, access) = state
        .db(move |ports| admin::update_tenant(ports, &p, id, &patch))
        .await?;
    ok(TenantView::new(&t, access))
}
