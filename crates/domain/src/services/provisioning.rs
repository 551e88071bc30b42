//! Provisioning that only the operator at the machine does (`gc-server admin keys create`,
//! `admin tokens ...`): a workspace key made for a member, as the member would make it in a
//! session, and a platform admin's API tokens, as the admin would manage them in a session.
//!
//! Workspace keys stay session-only on the API (the seed: a member makes their own keys). The
//! command line may make one for a member because whoever runs it can open the database and
//! write any row; going through here keeps every rule of a member's own key (the member
//! active and in an active tenant, scopes, expiry, limits at most the tenant's) and records
//! who made it: the member's `api_key.create` line, and an `api_key.provisioned` line with
//! the operator as the actor.

use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::{ActivityTarget, NewActivity};
use crate::model::Role;
use crate::page::{Page, PageRequest};
use crate::policy::access::{AdminAuthority, Credential, Principal};
use crate::policy::admin_tokens::AdminToken;
use crate::ports::AdminTokenRepo;
use crate::ports::{ApiKeyRepo, CredentialCodec, TenantRepo, UserRepo, WorkspaceRepo};
use crate::services::admin;
use crate::services::admin_tokens::{self, AdminTokenRequest, CreatedAdminToken};
use crate::services::api_keys::{create_api_key, CreatedKey, NewKeyRequest};

/// The activity action written with the operator as the actor.
pub const PROVISIONED_ACTION: &str = "api_key.provisioned";

/// Makes a workspace key for the member with this email, in the member's tenant, through
/// [`create_api_key`] with the member as the caller (a session of theirs that no token names:
/// the key is the member's, as if made in the console). Refused like the member would be
/// (`member_suspended`, `tenant_suspended`, `tenant_required` ...), or `admin_required` when
/// `operator` is no admin.
pub fn member_key<P>(
    store: &P,
    codec: &dyn CredentialCodec,
    operator: &impl AdminAuthority,
    email: &str,
    req: &NewKeyRequest,
    now: DateTime<Utc>,
) -> DomainResult<CreatedKey>
where
    P: UserRepo + TenantRepo + ApiKeyRepo + WorkspaceRepo + ?Sized,
{
    let scope = operator.admin_scope()?;
    let user = admin::find_user_by_email(store, operator, email)?;
    let tenant = match user.tenant_id {
        Some(id) => Some(
            store
                .find_tenant(id)?
                .ok_or(DomainError::NotFound("tenant"))?,
        ),
        None => None,
    };
    let member_email = user.email.as_str().to_owned();
    let member = Principal::new(
        user,
        tenant,
        Credential::Session {
            session_id: Uuid::nil(),
            shadow: None,
        },
    );
    let created = create_api_key(store, codec, &member, req, now)?;
    store.append_activity(&NewActivity::admin(
        &scope,
        created.key.tenant_id,
        now,
        PROVISIONED_ACTION,
        Some(ActivityTarget {
            kind: "api_key".into(),
            id: created.key.id,
        }),
        json!({"member_email": member_email, "name": created.key.name}),
    ))?;
    Ok(created)
}

/// The platform admin with this email, as a session of theirs that no token names: the token
/// functions then judge them as they would in the console (active, still an admin).
fn admin_session<P: UserRepo + ?Sized>(
    store: &P,
    operator: &impl AdminAuthority,
    email: &str,
) -> DomainResult<Principal> {
    let user = admin::find_user_by_email(store, operator, email)?;
    if user.role != Role::PlatformAdmin {
        return Err(DomainError::invalid("admin", "is not a platform admin"));
    }
    Ok(Principal::new(
        user,
        None,
        Credential::Session {
            session_id: Uuid::nil(),
            shadow: None,
        },
    ))
}

/// Makes an API token for the platform admin with this email ([`admin_tokens::create`]).
pub fn admin_token<P: UserRepo + AdminTokenRepo + ?Sized>(
    store: &P,
    codec: &dyn CredentialCodec,
    operator: &impl AdminAuthority,
    email: &str,
    request: &AdminTokenRequest,
    now: DateTime<Utc>,
) -> DomainResult<CreatedAdminToken> {
    let admin = admin_session(store, operator, email)?;
    admin_tokens::create(store, codec, &admin, request, now)
}

/// The tokens of the platform admin with this email, newest first.
pub fn admin_token_list<P: UserRepo + AdminTokenRepo + ?Sized>(
    store: &P,
    operator: &impl AdminAuthority,
    email: &str,
    page: &PageRequest,
) -> DomainResult<Page<AdminToken>> {
    let admin = admin_session(store, operator, email)?;
    admin_tokens::list(store, &admin, page)
}

/// Revokes one of that admin's tokens.
pub fn admin_token_revoke<P: UserRepo + AdminTokenRepo + ?Sized>(
    store: &P,
    operator: &impl AdminAuthority,
    email: &str,
    id: Uuid,
) -> DomainResult<()> {
    let admin = admin_session(store, operator, email)?;
    admin_tokens::revoke(store, &admin, id)
}
