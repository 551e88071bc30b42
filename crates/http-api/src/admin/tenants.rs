//! `/admin/tenants`: platform admins list, create, read and change tenants (name, status,
//! region, AI switch and quotas).

use actix_web::{web, HttpResponse};
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
use crate::error::ApiError;
use crate::extract::{parse_field, Auth, Body, Query};
use crate::state::AppState;
use crate::views::{ListBody, TenantView};

/// Every tenant, newest first.
#[utoipa::path(get, path = "/api/v1/admin/tenants", tag = "admin", params(ListQuery),
    responses((status = 200, body = ListBody<TenantView>), (status = 403, description = "admin_required")))]
pub async fn list_tenants(
    state: web::Data<AppState>,
    Auth(p): Auth,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = query.after(p.admin_scope())?.page()?;
    let page = state
        .db(move |ports| admin::list_tenants(ports, &p, &page))
        .await?;
    Ok(
        HttpResponse::Ok().json(ListBody::from_page(page, |(t, access)| {
            TenantView::new(&t, access)
        })),
    )
}

/// One tenant, as in the list (the console's tenant page reads it).
#[utoipa::path(get, path = "/api/v1/admin/tenants/{id}", tag = "admin",
    params(("id" = Uuid, Path, description = "Tenant id")),
    responses((status = 200, body = TenantView), (status = 404, description = "not_found")))]
pub async fn get_tenant(
    state: web::Data<AppState>,
    Auth(p): Auth,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    p.admin_scope()?;
    let id = id.into_inner();
    let (t, access) = state
        .db(move |ports| admin::get_tenant(ports, &p, id))
        .await?;
    Ok(HttpResponse::Ok().json(TenantView::new(&t, access)))
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
    responses((status = 201, body = TenantView), (status = 403, description = "admin_required"),
        (status = 422, description = "validation_failed")))]
pub async fn create_tenant(
    state: web::Data<AppState>,
    Auth(p): Auth,
    body: Body<CreateTenantBody>,
) -> Result<HttpResponse, ApiError> {
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
    Ok(HttpResponse::Created().json(TenantView::new(&t, access)))
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

/// `PATCH` of a tenant's quotas: each a positive integer, or null for no limit.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantLimitsBody {
    #[serde(default, deserialize_with = "crate::extract::nullable")]
    #[schema(value_type = Option<i64>)]
    pub requests_per_minute: Option<Option<i64>>,
    #[serde(default, deserialize_with = "crate::extract::nullable")]
    #[schema(value_type = Option<i64>)]
    pub tokens_per_minute: Option<Option<i64>>,
    #[serde(default, deserialize_with = "crate::extract::nullable")]
    #[schema(value_type = Option<i64>)]
    pub monthly_tokens: Option<Option<i64>>,
    /// Money per UTC month, a decimal string (`"25.00"`) in the deployment's currency.
    #[serde(default, deserialize_with = "crate::extract::nullable")]
    #[schema(value_type = Option<String>)]
    pub monthly_spend: Option<Option<String>>,
}

/// Renames, suspends or re-activates a tenant, moves its region, switches AI on or off, or
/// sets its quotas. A suspension refuses its members at their very next request; new limits
/// apply from the next run.
#[utoipa::path(patch, path = "/api/v1/admin/tenants/{id}", tag = "admin", request_body = PatchTenantBody,
    params(("id" = Uuid, Path, description = "Tenant id")),
    responses((status = 200, body = TenantView), (status = 404, description = "not_found"),
        (status = 422, description = "validation_failed")))]
pub async fn patch_tenant(
    state: web::Data<AppState>,
    Auth(p): Auth,
    id: web::Path<Uuid>,
    body: Body<PatchTenantBody>,
) -> Result<HttpResponse, ApiError> {
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
    Ok(HttpResponse::Ok().json(TenantView::new(&t, access)))
}
