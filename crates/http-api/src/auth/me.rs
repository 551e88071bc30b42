use serde::Deserialize;
use utoipa::ToSchema;

use crate::extract::{Auth, Body};
use crate::reply::{ok, Reply};
use crate::views::AccountView;

/// The caller's account, with its tenant and Shadow view. Usable by refused members too, so
/// they can see why.
#[utoipa::path(get, path = "/api/v1/auth/me", tag = "auth",
    responses((status = 200, body = AccountView)))]
pub async fn get_me(Auth(_, p): Auth) -> Reply {
    p.require_session()?;
    ok(AccountView::of(&p))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchMeBody {
    pub name: Option<String>,
}

/// Updates the caller's display name.
#[utoipa::path(patch, path = "/api/v1/auth/me", tag = "auth", request_body = PatchMeBody,
    responses((status = 200, body = AccountView)))]
pub async fn patch_me(Auth(state, p): Auth, body: Body<PatchMeBody>) -> Reply {
    let name = body.after(p.require_session())?.name;
    let caller = p.clone();
    let user = state
        .db(move |ports| gc_domain::services::accounts::rename(ports, &caller, name.as_deref()))
        .await?;
    ok(AccountView::new(&user, p.tenant(), p.shadow()))
}
