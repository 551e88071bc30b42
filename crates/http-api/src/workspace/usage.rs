//! `GET /workspace/usage`: the tenant's requests, errors and tokens from its run records, by
//! day, model or key, for a range of UTC dates (default: the current month).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::Utc;
use gc_domain::model::workspace::KeyScope;
use gc_domain::services::usage::{self, UsageGroup, UsageLine, UsagePage, UsageQuery, UsageRange};
use gc_domain::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::{Auth, Query};
use crate::reply::{ok, Reply};
use crate::state::{AppState, Work};
use crate::workspace::usage_gate::ReportSubject;

/// Declares a usage report's query (`GET /workspace/usage`, `GET /admin/usage`): the range and
/// page every report takes, `from`, `to`, `limit` and `cursor`, around the report's own field,
/// and its `query` (the [`UsageQuery`] of a group). `to` is written with its description, which
/// the two routes word apart.
macro_rules! usage_params {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(#[$to_doc:meta])* to,
            $(#[$own_doc:meta])* $own:ident: $own_ty:ty $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
        #[into_params(parameter_in = Query)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// First day, `YYYY-MM-DD` (UTC); default the first of the current month.
            pub from: Option<String>,
            $(#[$to_doc])*
            pub to: Option<String>,
            $(#[$own_doc])*
            pub $own: $own_ty,
            /// 1 to 200, default 50.
            #[param(minimum = 1, maximum = 200, default = 50)]
            pub limit: Option<u32>,
            /// The `next_cursor` of the previous page.
            pub cursor: Option<String>,
        }

        impl $name {
            /// The range, page size and cursor asked for, grouped by `group`.
            pub(crate) fn query(
                &self,
                group: gc_domain::services::usage::UsageGroup,
            ) -> Result<gc_domain::services::usage::UsageQuery, crate::error::ApiError> {
                $crate::workspace::usage::query(
                    self.from.as_deref(),
                    self.to.as_deref(),
                    self.limit,
                    self.cursor.as_deref(),
                    group,
                )
            }
        }
    };
}
pub(crate) use usage_params;

usage_params! {
    /// `?from=&to=&group_by=&limit=&cursor=`.
    pub struct UsageParams {
        /// Last day, inclusive; default the last of the current month. At most 400 days after
        /// `from`.
        to,
        /// `day` (default), `model` or `key`.
        group_by: Option<String>,
    }
}

/// The range (`from` to `to`), page size and cursor of a usage query grouped by `group`.
pub(crate) fn query(
    from: Option<&str>,
    to: Option<&str>,
    limit: Option<u32>,
    cursor: Option<&str>,
    group: UsageGroup,
) -> Result<UsageQuery, ApiError> {
    let before = match cursor {
        None | Some("") => None,
        Some(raw) => Some(
            URL_SAFE_NO_PAD
                .decode(raw)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidCursor,
                        "the cursor is not one this service issued",
                    )
                })?,
        ),
    };
    let range = UsageRange::parse(from, to, Utc::now().date_naive())?;
    UsageQuery::new(range, group, limit, before)
        .map_err(|e| ApiError::new(ErrorCode::InvalidQuery, e.to_string()))
}

/// One group's sums; exactly one of `day`, `model`, `key_id`, `tenant_id` is present.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageLineView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The workspace key; null for runs made with a session.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Uuid>)]
    pub key_id: Option<Option<Uuid>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<Uuid>,
    pub requests: u64,
    /// Runs that ended in an upstream error, time-out or refusal.
    pub errors: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// What the runs cost at the price table's prices, a decimal string (decision 0038).
    pub cost: String,
    /// The deployment's currency (`GC_PRICES`), e.g. `USD`.
    pub currency: String,
}

impl UsageLineView {
    fn new(group: UsageGroup, line: UsageLine, currency: &str) -> Self {
        let g = line.group;
        let mut view = Self {
            day: None,
            model: None,
            key_id: None,
            tenant_id: None,
            requests: line.requests,
            errors: line.errors,
            prompt_tokens: line.prompt_tokens,
            completion_tokens: line.completion_tokens,
            total_tokens: line.total_tokens,
            cost: gc_domain::policy::prices::format_money(line.cost),
            currency: currency.to_owned(),
        };
        match group {
            UsageGroup::Day => view.day = Some(g),
            UsageGroup::Model => view.model = Some(g),
            UsageGroup::Key => view.key_id = Some(Uuid::parse_str(&g).ok()),
            UsageGroup::Tenant => view.tenant_id = Uuid::parse_str(&g).ok(),
        }
        view
    }
}

/// A page of usage lines, ordered by the group key descending (days newest first).
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageBody {
    pub data: Vec<UsageLineView>,
    pub next_cursor: Option<String>,
}

impl UsageBody {
    pub(crate) fn new(group: UsageGroup, page: UsagePage, currency: &str) -> Self {
        Self {
            data: page
                .items
                .into_iter()
                .map(|l| UsageLineView::new(group, l, currency))
                .collect(),
            next_cursor: page.next.map(|g| URL_SAFE_NO_PAD.encode(g.as_bytes())),
        }
    }
}

/// The tenant's usage. Sessions of members (and Shadow views); keys need `workspace:read`.
#[utoipa::path(get, path = "/api/v1/workspace/usage", tag = "workspace", params(UsageParams),
    responses((status = 200, body = UsageBody),
        (status = 429, description = "rate_limited: the tenant's reports already running (`GC_USAGE_REPORTS_PER_TENANT`); `Retry-After`")))]
pub async fn workspace_usage(Auth(state, p): Auth, params: Query<UsageParams>) -> Reply {
    // Refused callers hear so before any complaint about the query.
    let tenant = p.read_scope(KeyScope::WorkspaceRead)?.tenant_id();
    let params = params.into_inner()?;
    let group = UsageGroup::parse(params.group_by.as_deref())?;
    let q = params.query(group)?;
    report(&state, ReportSubject::Tenant(tenant), group, move |store| {
        usage::workspace_usage(store, &p, &q)
    })
    .await
}

/// Answers a usage report: waits for one of `subject`'s report slots (429 or 503 when there is
/// none), runs `query` in one storage trip holding the slot (handed back when the query is
/// done, even if the client has gone), and shows the page of lines grouped by `group`. The
/// reports' 503 and 422 answers are described once, in `openapi.rs`.
pub(crate) async fn report(
    state: &AppState,
    subject: ReportSubject,
    group: UsageGroup,
    query: impl Work<UsagePage>,
) -> Reply {
    let permit = state.usage_gate.enter(subject)?.held().await;
    let page = state
        .db(move |store| {
            let _permit = permit;
            query(store)
        })
        .await?;
    let currency = state.quotas().catalog().prices().currency();
    ok(UsageBody::new(group, page, currency))
}
