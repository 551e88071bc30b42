//! Response bodies, as the contract names their fields.

use chrono::{DateTime, Utc};
use gc_domain::model::{Session, Tenant, User};
use gc_domain::page::Page;
use gc_domain::policy::access::Principal;
use gc_domain::policy::ai_access::AiAccess;
use gc_domain::policy::quota::TenantLimits;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::cursor;

/// A list page: `{data, next_cursor}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListBody<T: ToSchema> {
    pub data: Vec<T>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl<T: ToSchema> ListBody<T> {
    pub fn from_page<U>(page: Page<U>, view: impl Fn(U) -> T) -> Self {
        Self {
            next_cursor: page.next.map(cursor::encode),
            data: page.items.into_iter().map(view).collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantSummary {
    pub id: Uuid,
    pub name: String,
    /// `active` or `suspended`.
    pub status: &'static str,
    /// `AIHK` or `AICA`.
    pub region: &'static str,
    /// The tenant's quotas (each null when there is none): a key's own limits may not exceed
    /// them.
    pub limits: TenantLimitsView,
}

impl From<&Tenant> for TenantSummary {
    fn from(t: &Tenant) -> Self {
        Self {
            id: t.id,
            name: t.name.clone(),
            status: t.status.as_str(),
            region: t.region.as_str(),
            limits: TenantLimitsView::from(&t.limits),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ShadowView {
    pub tenant_id: Uuid,
    pub tenant_name: String,
    pub since: DateTime<Utc>,
}

/// The caller's own account.
#[derive(Debug, Serialize, ToSchema)]
pub struct AccountView {
    pub id: Uuid,
    pub email: String,
    pub name: String,
    /// `member` or `platform_admin`.
    pub role: &'static str,
    /// `active`, `unassigned` or `suspended`: the member's own state.
    pub status: &'static str,
    pub tenant: Option<TenantSummary>,
    pub shadow: Option<ShadowView>,
    pub created_at: DateTime<Utc>,
}

pub fn member_status(user: &User) -> &'static str {
    match user.member_status() {
        gc_domain::model::MemberStatus::Active => "active",
        gc_domain::model::MemberStatus::Unassigned => "unassigned",
        gc_domain::model::MemberStatus::Suspended => "suspended",
    }
}

impl AccountView {
    pub fn new(
        user: &User,
        tenant: Option<&Tenant>,
        shadow: Option<&(Tenant, DateTime<Utc>)>,
    ) -> Self {
        Self {
            id: user.id,
            email: user.email.as_str().to_owned(),
            name: user.name.clone(),
            role: user.role.as_str(),
            status: member_status(user),
            tenant: tenant
                .filter(|t| Some(t.id) == user.tenant_id)
                .map(TenantSummary::from),
            shadow: shadow.map(|(t, since)| ShadowView {
                tenant_id: t.id,
                tenant_name: t.name.clone(),
                since: *since,
            }),
            created_at: user.created_at,
        }
    }

    pub fn of(p: &Principal) -> Self {
        Self::new(p.user(), p.tenant(), p.shadow())
    }
}

/// A tenant as administrators see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantView {
    pub id: Uuid,
    pub name: String,
    /// `active` or `suspended`.
    pub status: &'static str,
    /// `AIHK` or `AICA`.
    pub region: &'static str,
    pub ai_enabled: bool,
    /// `ready`, `disabled` or `not_ready`.
    #[schema(value_type = String)]
    pub ai_access: AiAccess,
    pub created_at: DateTime<Utc>,
    /// Quotas; each null when there is none.
    pub limits: TenantLimitsView,
    /// The models its runs may name, within the region's list; null: the region's list.
    pub allowed_models: Option<Vec<String>>,
}

/// A tenant's quotas, as shown and as `PATCH /admin/tenants/{id}` takes them.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantLimitsView {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    pub monthly_tokens: Option<u64>,
    /// Money per UTC month in the deployment's currency, a decimal string (`"25.00"`).
    pub monthly_spend: Option<String>,
}

impl From<&TenantLimits> for TenantLimitsView {
    fn from(l: &TenantLimits) -> Self {
        Self {
            requests_per_minute: l.requests_per_minute,
            tokens_per_minute: l.tokens_per_minute,
            monthly_tokens: l.monthly_tokens,
            monthly_spend: l.monthly_spend.map(gc_domain::policy::prices::format_money),
        }
    }
}

impl TenantView {
    pub fn new(t: &Tenant, ai_access: AiAccess) -> Self {
        Self {
            id: t.id,
            name: t.name.clone(),
            status: t.status.as_str(),
            region: t.region.as_str(),
            ai_enabled: t.ai_enabled,
            ai_access,
            created_at: t.created_at,
            limits: TenantLimitsView::from(&t.limits),
            allowed_models: t.allowed_models.clone(),
        }
    }
}

/// A user as administrators see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserView {
    pub id: Uuid,
    pub email: String,
    pub name: String,
    /// `member` or `platform_admin`.
    pub role: &'static str,
    /// `active`, `unassigned` or `suspended`.
    pub status: &'static str,
    pub tenant_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

impl From<User> for UserView {
    fn from(u: User) -> Self {
        Self {
            status: member_status(&u),
            id: u.id,
            email: u.email.as_str().to_owned(),
            name: u.name,
            role: u.role.as_str(),
            tenant_id: u.tenant_id,
            created_at: u.created_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub user_agent: String,
    pub ip: String,
    /// True for the session making this request.
    pub current: bool,
}

impl SessionView {
    pub fn new(s: Session, current: Option<Uuid>) -> Self {
        Self {
            current: Some(s.id) == current,
            id: s.id,
            created_at: s.created_at,
            last_seen_at: s.last_seen_at,
            expires_at: s.expires_at,
            user_agent: s.user_agent,
            ip: s.ip,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    pub data: Vec<SessionView>,
}
