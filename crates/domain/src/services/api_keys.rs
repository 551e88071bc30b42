//! The workspace API-key service: list, create (the secret handed back once), rename or
//! re-limit, and revoke the keys of the caller's tenant.
//!
//! Keys are managed with a signed-in session only, never with a key; a Shadow view may list
//! them but never write. Each function decides that (through [`Principal`]) and validates the
//! request before it touches a port, and every write carries its activity line in the same
//! transaction. Handlers only extract, call one of these and map.

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::new_id;
use crate::model::workspace::{ActivityTarget, ApiKey, ApiKeyPatch, KeyScope, NewActivity};
use crate::page::{Page, PageRequest};
use crate::policy::access::{Principal, WriteScope};
use crate::policy::quota::{limit_change, KeyLimits};
use crate::ports::{ApiKeyRepo, CredentialCodec, TenantWrite};
use crate::secret::SecretString;
use crate::values::{expiry, text};

/// A key's own per-minute limits as the client sent them: each left out (`None`), removed
/// (`Some(None)`) or set (`Some(Some(n))`, checked to be a positive integer).
#[derive(Debug, Clone, Default)]
pub struct KeyLimitsRequest {
    pub requests_per_minute: Option<Option<i64>>,
    pub tokens_per_minute: Option<Option<i64>>,
    /// A decimal string (decision 0038); null removes it.
    pub monthly_spend: Option<Option<String>>,
}

/// A new key as the client asked for it, before any check.
#[derive(Debug, Clone)]
pub struct NewKeyRequest {
    pub name: String,
    /// Scope names (`workspace:read`, `workspace:write`, `guard:scan`, `run`).
    pub scopes: Vec<String>,
    /// An RFC 3339 time in the future, or `None` for a key that does not expire.
    pub expires_at: Option<String>,
    pub limits: Option<KeyLimitsRequest>,
}

/// A change to a key as the client asked for it, before any check.
#[derive(Debug, Clone, Default)]
pub struct KeyPatchRequest {
    pub name: Option<String>,
    pub limits: Option<KeyLimitsRequest>,
}

/// A key just made, and its secret: the only time the secret leaves the service.
pub struct CreatedKey {
    pub key: ApiKey,
    pub secret: SecretString,
}

/// The tenant's keys, newest first, revoked ones included.
pub fn list_api_keys<P: ApiKeyRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    page: &PageRequest,
) -> DomainResult<Page<ApiKey>> {
    let scope = p.key_listing_scope()?;
    ports.list_api_keys(&scope, page)
}

/// Makes a key acting for the caller, with an `api_key.create` activity line.
pub fn create_api_key<P: ApiKeyRepo + ?Sized>(
    ports: &P,
    codec: &dyn CredentialCodec,
    p: &Principal,
    req: &NewKeyRequest,
    now: DateTime<Utc>,
) -> DomainResult<CreatedKey> {
    let scope = p.key_management_scope()?;
    let name = text("name", &req.name, 1, 100)?;
    let scopes = scopes(&req.scopes)?;
    let (rpm, tpm, spend) = checked_limits(p, req.limits.as_ref())?;
    let expires_at = expiry(req.expires_at.as_deref(), now)?;
    let (secret, key_hash, hint) = codec.new_api_key();
    let key = ApiKey {
        id: new_id(),
        tenant_id: scope.tenant_id(),
        user_id: p.user().id,
        name,
        scopes,
        hint,
        key_hash,
        created_at: now,
        last_used_at: None,
        expires_at,
        revoked_at: None,
        limits: KeyLimits {
            requests_per_minute: rpm.flatten(),
            tokens_per_minute: tpm.flatten(),
            monthly_spend: spend.flatten(),
        },
    };
    let line = key_activity(
        &scope,
        now,
        "api_key.create",
        key.id,
        json!({
            "name": key.name,
            "scopes": key.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            "expires_at": key.expires_at,
        }),
    );
    let key = ports.insert_api_key(TenantWrite::new(&scope, &line), &key)?;
    Ok(CreatedKey { key, secret })
}

/// Renames a live key of the tenant or changes its own limits (at most the tenant's), with an
/// `api_key.update` line naming what changed. `NotFound` for a revoked or unknown key.
pub fn update_api_key<P: ApiKeyRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    id: Uuid,
    req: &KeyPatchRequest,
    now: DateTime<Utc>,
) -> DomainResult<ApiKey> {
    let scope = p.key_management_scope()?;
    let name = req
        .name
        .as_deref()
        .map(|n| text("name", n, 1, 100))
        .transpose()?;
    let (rpm, tpm, spend) = checked_limits(p, req.limits.as_ref())?;
    let patch = ApiKeyPatch {
        name,
        requests_per_minute: rpm,
        tokens_per_minute: tpm,
        monthly_spend: spend,
    };
    let mut detail = Map::new();
    if let Some(name) = &patch.name {
        detail.insert("name".into(), json!(name));
    }
    if let Some(v) = patch.requests_per_minute {
        detail.insert("requests_per_minute".into(), json!(v));
    }
    if let Some(v) = patch.monthly_spend {
        detail.insert(
            "monthly_spend".into(),
            json!(v.map(crate::policy::prices::format_money)),
        );
    }
    if let Some(v) = patch.tokens_per_minute {
        detail.insert("tokens_per_minute".into(), json!(v));
    }
    let line = key_activity(&scope, now, "api_key.update", id, Value::Object(detail));
    ports
        .update_api_key(TenantWrite::new(&scope, &line), id, &patch)?
        .ok_or(DomainError::NotFound("API key"))
}

/// Revokes a key of the tenant, with an `api_key.revoke` line: its next request is refused.
/// `NotFound` when unknown or already revoked.
pub fn revoke_api_key<P: ApiKeyRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    let scope = p.key_management_scope()?;
    let line = key_activity(&scope, now, "api_key.revoke", id, json!({}));
    if ports.revoke_api_key(TenantWrite::new(&scope, &line), id)? {
        Ok(())
    } else {
        Err(DomainError::NotFound("API key"))
    }
}

/// At least one known scope; duplicates collapse, the first spelling's order kept.
fn scopes(raw: &[String]) -> DomainResult<Vec<KeyScope>> {
    if raw.is_empty() {
        return Err(DomainError::invalid(
            "scopes",
            "must name at least one scope",
        ));
    }
    let mut scopes = Vec::with_capacity(raw.len());
    for name in raw {
        let s = KeyScope::parse("scopes", name)?;
        if !scopes.contains(&s) {
            scopes.push(s);
        }
    }
    Ok(scopes)
}

/// One limit of a change: left out (`None`), removed (`Some(None)`) or set.
type LimitChange = Option<Option<u64>>;

/// The checked limits of a request, each `None` when left out; refused above the caller's
/// tenant's limits.
fn checked_limits(
    p: &Principal,
    req: Option<&KeyLimitsRequest>,
) -> DomainResult<(LimitChange, LimitChange, LimitChange)> {
    let Some(req) = req else {
        return Ok((None, None, None));
    };
    let rpm = limit_change("limits.requests_per_minute", req.requests_per_minute)?;
    let tpm = limit_change("limits.tokens_per_minute", req.tokens_per_minute)?;
    let spend = req
        .monthly_spend
        .as_ref()
        .map(|v| crate::policy::prices::money_limit("limits.monthly_spend", v.as_deref()))
        .transpose()?;
    KeyLimits {
        requests_per_minute: rpm.flatten(),
        tokens_per_minute: tpm.flatten(),
        monthly_spend: spend.flatten(),
    }
    .check_within(&p.active_member_tenant()?.limits)?;
    Ok((rpm, tpm, spend))
}

fn key_activity(
    scope: &WriteScope,
    now: DateTime<Utc>,
    action: &str,
    id: Uuid,
    detail: Value,
) -> NewActivity {
    NewActivity::write(
        scope,
        now,
        action,
        Some(ActivityTarget {
            kind: "api_key".into(),
            id,
        }),
        detail,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{Fake, FakeCodec};
    use crate::model::{Role, Status};
    use crate::policy::access::tests::{member_of, session, tenant, user};
    use crate::policy::access::Credential;
    use crate::policy::quota::TenantLimits;

    fn request(name: &str, scopes: &[&str]) -> NewKeyRequest {
        NewKeyRequest {
            name: name.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            expires_at: None,
            limits: None,
        }
    }

    fn rpm(n: i64) -> Option<KeyLimitsRequest> {
        Some(KeyLimitsRequest {
            requests_per_minute: Some(Some(n)),
            tokens_per_minute: None,
            monthly_spend: None,
        })
    }

    #[test]
    fn a_key_is_made_in_the_callers_tenant_with_its_activity_and_secret() {
        let fake = Fake::default();
        let t = tenant(Status::Active);
        let p = member_of(&t);
        let made = create_api_key(
            &fake,
            &FakeCodec,
            &p,
            &request("ci", &["run", "run", "guard:scan"]),
            Utc::now(),
        )
        .unwrap();
        assert_eq!(made.key.tenant_id, t.id);
        assert_eq!(made.key.user_id, p.user().id);
        assert_eq!(made.key.scopes, vec![KeyScope::Run, KeyScope::GuardScan]);
        assert_eq!(made.key.key_hash, FakeCodec::hash_of(made.secret.expose()));
        let lines = fake.workspace.activity.lock().unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].tenant_id(), t.id);
        assert_eq!(lines[0].action(), "api_key.create");
        assert_eq!(lines[0].target().map(|x| x.id), Some(made.key.id));
    }

    #[test]
    fn a_key_cannot_manage_keys_and_a_shadow_view_may_only_list() {
        let fake = Fake::default();
        let t = tenant(Status::Active);
        let keyed = Principal::new(
            user(Role::Member, Status::Active, Some(&t)),
            Some(t.clone()),
            Credential::ApiKey {
                key_id: Uuid::now_v7(),
                name: "ci".into(),
                scopes: KeyScope::ALL.to_vec(),
                limits: KeyLimits::default(),
            },
        );
        let shadow = session(
            user(Role::PlatformAdmin, Status::Active, None),
            None,
            Some(t.clone()),
        );
        let now = Utc::now();
        let page = PageRequest::first();
        for p in [&keyed, &shadow] {
            let e = create_api_key(&fake, &FakeCodec, p, &request("x", &["run"]), now);
            assert!(e.is_err());
            assert!(
                update_api_key(&fake, p, Uuid::now_v7(), &KeyPatchRequest::default(), now).is_err()
            );
            assert!(revoke_api_key(&fake, p, Uuid::now_v7(), now).is_err());
        }
        assert_eq!(
            list_api_keys(&fake, &keyed, &page).unwrap_err().code(),
            "session_required"
        );
        assert!(list_api_keys(&fake, &shadow, &page).is_ok());
        assert!(fake.api_keys.lock().unwrap().is_empty());
        assert!(fake.workspace.activity.lock().unwrap().is_empty());
    }

    #[test]
    fn bad_requests_are_refused_before_any_write() {
        let fake = Fake::default();
        let mut t = tenant(Status::Active);
        t.limits = TenantLimits {
            requests_per_minute: Some(10),
            ..TenantLimits::default()
        };
        let p = member_of(&t);
        let now = Utc::now();
        let past = NewKeyRequest {
            expires_at: Some("2001-01-01T00:00:00Z".into()),
            ..request("x", &["run"])
        };
        let garbled = NewKeyRequest {
            expires_at: Some("tomorrow".into()),
            ..request("x", &["run"])
        };
        let over = NewKeyRequest {
            limits: rpm(11),
            ..request("x", &["run"])
        };
        let zero = NewKeyRequest {
            limits: rpm(0),
            ..request("x", &["run"])
        };
        for (req, field) in [
            (request("", &["run"]), "name"),
            (request("x", &[]), "scopes"),
            (request("x", &["admin"]), "scopes"),
            (past, "expires_at"),
            (garbled, "expires_at"),
            (over, "limits.requests_per_minute"),
            (zero, "limits.requests_per_minute"),
        ] {
            match create_api_key(&fake, &FakeCodec, &p, &req, now) {
                Err(DomainError::Validation { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {:?}", other.map(|k| k.key)),
            }
        }
        let at_limit = NewKeyRequest {
            limits: rpm(10),
            ..request("x", &["run"])
        };
        let made = create_api_key(&fake, &FakeCodec, &p, &at_limit, now).unwrap();
        assert_eq!(made.key.limits.requests_per_minute, Some(10));
        assert_eq!(fake.api_keys.lock().unwrap().len(), 1);
    }

    #[test]
    fn update_and_revoke_reach_only_the_callers_tenant_and_say_so() {
        let fake = Fake::default();
        let a = tenant(Status::Active);
        let b = tenant(Status::Active);
        let now = Utc::now();
        let mine = create_api_key(
            &fake,
            &FakeCodec,
            &member_of(&a),
            &request("a", &["run"]),
            now,
        )
        .unwrap()
        .key;
        let stranger = member_of(&b);
        let rename = KeyPatchRequest {
            name: Some("b".into()),
            limits: None,
        };
        assert!(matches!(
            update_api_key(&fake, &stranger, mine.id, &rename, now),
            Err(DomainError::NotFound(_))
        ));
        assert!(matches!(
            revoke_api_key(&fake, &stranger, mine.id, now),
            Err(DomainError::NotFound(_))
        ));
        let owner = member_of(&a);
        let renamed = update_api_key(&fake, &owner, mine.id, &rename, now).unwrap();
        assert_eq!(renamed.name, "b");
        revoke_api_key(&fake, &owner, mine.id, now).unwrap();
        assert!(matches!(
            revoke_api_key(&fake, &owner, mine.id, now),
            Err(DomainError::NotFound(_))
        ));
        assert!(matches!(
            update_api_key(&fake, &owner, mine.id, &rename, now),
            Err(DomainError::NotFound(_))
        ));
        let actions: Vec<String> = fake
            .workspace
            .activity
            .lock()
            .unwrap()
            .iter()
            .map(|l| l.action().to_owned())
            .collect();
        assert_eq!(
            actions,
            ["api_key.create", "api_key.update", "api_key.revoke"]
        );
    }
}
