use gc_domain::services::accounts;
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::extract::{Auth, Query};
use crate::reply::{no_content, ok, Reply};
use crate::views::{SessionList, SessionView};

/// The caller's sessions, newest first; `current` marks this one.
#[utoipa::path(get, path = "/api/v1/auth/sessions", tag = "auth",
    responses((status = 200, body = SessionList)))]
pub async fn list_sessions(Auth(state, p): Auth) -> Reply {
    let current = p.require_session()?;
    let sessions = state
        .db(move |ports| accounts::list_sessions(ports, &p))
        .await?;
    ok(SessionList {
        data: sessions
            .into_iter()
            .map(|s| SessionView::new(s, Some(current)))
            .collect(),
    })
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeleteSessionsQuery {
    /// Revoke only this session of the caller's.
    pub id: Option<Uuid>,
}

/// Revokes every session but the current one, or with `?id=` that one session.
#[utoipa::path(delete, path = "/api/v1/auth/sessions", tag = "auth", params(DeleteSessionsQuery),
    responses((status = 204, description = "Revoked"), (status = 404, description = "no such session of yours")))]
pub async fn delete_sessions(Auth(state, p): Auth, query: Query<DeleteSessionsQuery>) -> Reply {
    let only = query.after(p.require_session())?.id;
    state
        .db(move |ports| accounts::revoke_sessions(ports, &p, only))
        .await?;
    no_content()
}
