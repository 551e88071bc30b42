//! `/workspace/activity`: the tenant's activity feed, newest first.

use chrono::{DateTime, Utc};
use gc_domain::model::workspace::{Activity, KeyScope};
use gc_domain::services::workspace as service;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::cursor::ListQuery;
use crate::extract::{Auth, Query};
use crate::reply::{list_page, Reply};
use crate::views::ListBody;

#[derive(Debug, Serialize, ToSchema)]
pub struct ActorView {
    /// `member`, `admin` or `key`.
    pub kind: &'static str,
    /// The member's or admin's user id, or the key's id.
    pub id: Uuid,
    /// An email, or for a key `name (member email)`.
    pub label: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TargetView {
    /// What was touched: `skill`, `memory_collection`, `memory_source`, `agent_draft`,
    /// `workflow_draft`, `app_draft`, `settings`, `api_key` or `tenant`.
    pub kind: String,
    pub id: Uuid,
}

/// One line of the feed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActivityView {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    pub actor: ActorView,
    /// For example `skill.create`, `settings.update`, `api_key.revoke`, `shadow.enter`.
    pub action: String,
    pub target: Option<TargetView>,
    #[schema(value_type = Object)]
    pub detail: Value,
}

impl From<Activity> for ActivityView {
    fn from(a: Activity) -> Self {
        Self {
            id: a.id,
            at: a.at,
            actor: ActorView {
                kind: a.actor.kind.as_str(),
                id: a.actor.id,
                label: a.actor.label,
            },
            action: a.action,
            target: a.target.map(|t| TargetView {
                kind: t.kind,
                id: t.id,
            }),
            detail: a.detail,
        }
    }
}

/// The tenant's activity feed: every write, with who did it.
#[utoipa::path(get, path = "/api/v1/workspace/activity", tag = "workspace", params(ListQuery),
    responses((status = 200, body = ListBody<ActivityView>)))]
pub async fn list_activity(Auth(state, p): Auth, query: Query<ListQuery>) -> Reply {
    let page = query.after(p.read_scope(KeyScope::WorkspaceRead))?.page()?;
    let page = state
        .db(move |store| service::list_activity(store, &p, &page))
        .await?;
    list_page(page, ActivityView::from)
}
