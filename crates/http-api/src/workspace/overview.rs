use chrono::{DateTime, Utc};
use gc_domain::services::workspace as service;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::extract::Auth;
use crate::reply::{ok, Reply};
use crate::views::TenantSummary;

#[derive(Debug, Serialize, ToSchema)]
pub struct MemberSummary {
    pub id: Uuid,
    pub email: String,
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DraftCounts {
    pub agents: u64,
    pub workflows: u64,
    pub apps: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Counts {
    pub skills: u64,
    pub memory_collections: u64,
    pub drafts: DraftCounts,
    pub api_keys: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AiAccessSummary {
    /// `ready`, `disabled` or `not_ready`.
    #[schema(value_type = String)]
    pub status: gc_domain::policy::ai_access::AiAccess,
}

/// A platform admin currently in this tenant's Shadow support view.
#[derive(Debug, Serialize, ToSchema)]
pub struct SupportView {
    pub admin_email: String,
    pub since: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Overview {
    pub tenant: TenantSummary,
    pub member: MemberSummary,
    pub counts: Counts,
    pub ai_access: AiAccessSummary,
    pub support_view: Option<SupportView>,
    /// Areas whose records are stored but never executed.
    pub preview: Vec<&'static str>,
}

/// Preview areas: routes store records, nothing runs.
pub const PREVIEW: [&str; 8] = [
    "skills",
    "memory",
    "agents",
    "workflows",
    "apps",
    "billing",
    "sdk_cli",
    "unified_api",
];

/// The workspace overview: tenant, member, record counts, AI access and whether a support
/// admin is looking.
#[utoipa::path(get, path = "/api/v1/workspace", tag = "workspace",
    responses((status = 200, body = Overview)))]
pub async fn overview(Auth(state, p): Auth) -> Reply {
    let idle = state.policy.session_idle;
    let member = MemberSummary {
        id: p.user().id,
        email: p.user().email.as_str().to_owned(),
        name: p.user().name.clone(),
    };
    let o = state
        .db(move |store| service::overview(store, &p, idle, Utc::now()))
        .await?;
    let body = Overview {
        tenant: TenantSummary::from(&o.tenant),
        member,
        counts: Counts {
            skills: o.counts.skills,
            memory_collections: o.counts.memory_collections,
            drafts: DraftCounts {
                agents: o.counts.agents,
                workflows: o.counts.workflows,
                apps: o.counts.apps,
            },
            api_keys: o.counts.api_keys,
        },
        ai_access: AiAccessSummary {
            status: o.ai_access,
        },
        support_view: o
            .support_view
            .map(|(admin_email, since)| SupportView { admin_email, since }),
        preview: PREVIEW.to_vec(),
    };
    ok(body)
}
