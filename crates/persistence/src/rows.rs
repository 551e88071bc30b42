//! Row structs (one per table) and their conversion to and from the domain types.
//!
//! Ids are stored as lower-case hyphenated UUID text, timestamps as unix milliseconds, JSON as
//! text. A stored value that does not parse is an internal error, never a guess.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use gc_domain::model::workspace::{
    Activity, ActivityTarget, Actor, ActorKind, ApiKey, KeyScope, NewActivity, Record,
    RecordFields, RecordKind,
};
use gc_domain::model::{Role, Session, Status, Tenant, User};
use gc_domain::policy::ai_access::{AiKeyStatus, TenantAiKey};
use gc_domain::policy::quota::{KeyLimits, TenantLimits};
use gc_domain::services::skill_scan::SkillGuard;
use gc_domain::values::{Email, Region};
use gc_domain::DomainResult;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::corrupt;
use crate::schema::{activity, api_keys, records, sessions, tenant_ai_keys, tenants, users};

pub(crate) fn ms(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

pub(crate) fn opt_ms(at: Option<DateTime<Utc>>) -> Option<i64> {
    at.map(ms)
}

pub(crate) fn time(ms: i64) -> DomainResult<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| corrupt("timestamp"))
}

fn opt_time(ms: Option<i64>) -> DomainResult<Option<DateTime<Utc>>> {
    ms.map(time).transpose()
}

pub(crate) fn id(raw: &str) -> DomainResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| corrupt("id"))
}

fn opt_id(raw: Option<&str>) -> DomainResult<Option<Uuid>> {
    raw.map(id).transpose()
}

/// The stored text of an id.
pub(crate) fn text(id: Uuid) -> String {
    id.hyphenated().to_string()
}

pub(crate) fn opt_text(id: Option<Uuid>) -> Option<String> {
    id.map(text)
}

pub(crate) fn json_text(fields: &Map<String, Value>) -> String {
    Value::Object(fields.clone()).to_string()
}

pub(crate) fn json_object(raw: &str) -> DomainResult<Map<String, Value>> {
    match serde_json::from_str(raw) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(corrupt("JSON object")),
    }
}

fn status(raw: &str) -> DomainResult<Status> {
    Status::parse("status", raw).map_err(|_| corrupt("status"))
}

fn region(raw: &str) -> DomainResult<Region> {
    Region::parse("region", raw).map_err(|_| corrupt("region"))
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = tenants)]
pub(crate) struct TenantRow {
    pub id: String,
    pub name: String,
    pub status: String,
    pub region: String,
    pub ai_enabled: bool,
    pub created_at: i64,
    pub requests_per_minute: Option<i64>,
    pub tokens_per_minute: Option<i64>,
    pub monthly_tokens: Option<i64>,
    /// Raised by the database's triggers on every change to the tenant's AI keys, and written
    /// by nothing else: never inserted (the column's default, 0) nor updated from here.
    #[diesel(skip_insertion)]
    pub ai_keys_version: i64,
    /// A JSON array of model names, or null (decision 0038).
    pub allowed_models: Option<String>,
    pub monthly_spend: Option<i64>,
}

/// A tenant's stored allow-list: a JSON array of names.
pub(crate) fn models_in(list: Option<&Vec<String>>) -> Option<String> {
    list.map(|l| serde_json::Value::from(l.clone()).to_string())
}

fn models_out(raw: Option<String>) -> DomainResult<Option<Vec<String>>> {
    raw.map(|s| serde_json::from_str(&s).map_err(|_| corrupt("allowed_models")))
        .transpose()
}

/// A stored limit: a positive count, or none.
pub(crate) fn limit_in(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

fn limit_out(n: Option<i64>) -> DomainResult<Option<u64>> {
    n.map(|n| u64::try_from(n).map_err(|_| corrupt("limit")))
        .transpose()
}

impl TenantRow {
    pub fn from_domain(t: &Tenant) -> Self {
        Self {
            id: text(t.id),
            name: t.name.clone(),
            status: t.status.as_str().to_owned(),
            region: t.region.as_str().to_owned(),
            ai_enabled: t.ai_enabled,
            created_at: ms(t.created_at),
            requests_per_minute: limit_in(t.limits.requests_per_minute),
            tokens_per_minute: limit_in(t.limits.tokens_per_minute),
            monthly_tokens: limit_in(t.limits.monthly_tokens),
            ai_keys_version: t.ai_keys_version,
            allowed_models: models_in(t.allowed_models.as_ref()),
            monthly_spend: limit_in(t.limits.monthly_spend),
        }
    }

    pub fn into_domain(self) -> DomainResult<Tenant> {
        Ok(Tenant {
            id: id(&self.id)?,
            name: self.name,
            status: status(&self.status)?,
            region: region(&self.region)?,
            ai_enabled: self.ai_enabled,
            created_at: time(self.created_at)?,
            limits: TenantLimits {
                requests_per_minute: limit_out(self.requests_per_minute)?,
                tokens_per_minute: limit_out(self.tokens_per_minute)?,
                monthly_tokens: limit_out(self.monthly_tokens)?,
                monthly_spend: limit_out(self.monthly_spend)?,
            },
            allowed_models: models_out(self.allowed_models)?,
            ai_keys_version: self.ai_keys_version,
        })
    }
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = users)]
pub(crate) struct UserRow {
    pub id: String,
    pub email: String,
    pub name: String,
    pub role: String,
    pub status: String,
    pub tenant_id: Option<String>,
    pub password_hash: String,
    pub created_at: i64,
}

impl UserRow {
    pub fn into_domain(self) -> DomainResult<User> {
        Ok(User {
            id: id(&self.id)?,
            email: Email::from_stored(self.email),
            name: self.name,
            role: Role::parse("role", &self.role).map_err(|_| corrupt("role"))?,
            status: status(&self.status)?,
            tenant_id: opt_id(self.tenant_id.as_deref())?,
            password_hash: self.password_hash,
            created_at: time(self.created_at)?,
        })
    }
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = sessions)]
pub(crate) struct SessionRow {
    pub id: String,
    pub user_id: String,
    pub token_hash: String,
    pub created_at: i64,
    pub last_seen_at: i64,
    pub expires_at: i64,
    pub user_agent: String,
    pub ip: String,
    pub shadow_tenant_id: Option<String>,
    pub shadow_since: Option<i64>,
}

impl SessionRow {
    pub fn from_domain(s: &Session) -> Self {
        Self {
            id: text(s.id),
            user_id: text(s.user_id),
            token_hash: s.token_hash.clone(),
            created_at: ms(s.created_at),
            last_seen_at: ms(s.last_seen_at),
            expires_at: ms(s.expires_at),
            user_agent: s.user_agent.clone(),
            ip: s.ip.clone(),
            shadow_tenant_id: opt_text(s.shadow_tenant_id),
            shadow_since: opt_ms(s.shadow_since),
        }
    }

    pub fn into_domain(self) -> DomainResult<Session> {
        Ok(Session {
            id: id(&self.id)?,
            user_id: id(&self.user_id)?,
            token_hash: self.token_hash,
            created_at: time(self.created_at)?,
            last_seen_at: time(self.last_seen_at)?,
            expires_at: time(self.expires_at)?,
            user_agent: self.user_agent,
            ip: self.ip,
            shadow_tenant_id: opt_id(self.shadow_tenant_id.as_deref())?,
            shadow_since: opt_time(self.shadow_since)?,
        })
    }
}

/// A record as stored: its tenant and kind, and the columns a list reads.
#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = records)]
pub(crate) struct RecordRow {
    pub tenant_id: String,
    pub kind: String,
    #[diesel(embed)]
    pub listed: ListedRecordRow,
}

impl RecordRow {
    pub fn into_domain(self) -> DomainResult<Record> {
        let kind = RecordKind::from_stored(&self.kind).ok_or_else(|| corrupt("record kind"))?;
        self.listed.into_domain(kind)
    }
}

/// A row of a record list: the tenant and kind are the query's own, so they are not read.
#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = records)]
pub(crate) struct ListedRecordRow {
    pub id: String,
    pub parent_id: Option<String>,
    pub version: i64,
    pub fields: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub created_by: String,
    pub guard: Option<String>,
    pub guard_rules_version: Option<String>,
}

impl ListedRecordRow {
    pub fn into_domain(self, kind: RecordKind) -> DomainResult<Record> {
        Ok(Record {
            id: id(&self.id)?,
            kind,
            parent_id: opt_id(self.parent_id.as_deref())?,
            version: self.version,
            fields: RecordFields::from_stored(self.fields)
                .ok_or_else(|| corrupt("record fields"))?,
            created_at: time(self.created_at)?,
            updated_at: time(self.updated_at)?,
            created_by: id(&self.created_by)?,
            guard: self
                .guard
                .map(|g| {
                    SkillGuard::from_stored(g, self.guard_rules_version)
                        .ok_or_else(|| corrupt("record guard"))
                })
                .transpose()?,
        })
    }
}

/// An activity line. `None` is inserted as NULL (the column's default anyway), not as
/// `DEFAULT`: a row with a defaultable value makes diesel insert a batch on SQLite one row
/// per statement, and the run-record writer inserts its lines a batch per statement.
#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = activity, treat_none_as_default_value = false)]
pub(crate) struct ActivityRow {
    pub id: String,
    pub tenant_id: String,
    pub at: i64,
    pub actor_kind: String,
    pub actor_id: String,
    pub actor_label: String,
    pub action: String,
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    pub detail: String,
}

impl ActivityRow {
    /// The row of `a`, in the feed of `tenant_id`.
    pub fn from_domain(a: &NewActivity, tenant_id: Uuid) -> Self {
        Self {
            id: text(a.id()),
            tenant_id: text(tenant_id),
            at: ms(a.at()),
            actor_kind: a.actor().kind.as_str().to_owned(),
            actor_id: text(a.actor().id),
            actor_label: a.actor().label.clone(),
            action: a.action().to_owned(),
            target_kind: a.target().map(|t| t.kind.clone()),
            target_id: a.target().map(|t| text(t.id)),
            // Serialised when the line was made.
            detail: a.detail_json().to_owned(),
        }
    }

    pub fn into_domain(self) -> DomainResult<Activity> {
        let target = match (self.target_kind, self.target_id) {
            (Some(kind), Some(target_id)) => Some(ActivityTarget {
                kind,
                id: id(&target_id)?,
            }),
            _ => None,
        };
        Ok(Activity {
            id: id(&self.id)?,
            at: time(self.at)?,
            actor: Actor {
                kind: ActorKind::from_stored(&self.actor_kind),
                id: id(&self.actor_id)?,
                label: self.actor_label,
            },
            action: self.action,
            target,
            detail: serde_json::from_str(&self.detail).map_err(|_| corrupt("activity detail"))?,
        })
    }
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = api_keys)]
pub(crate) struct ApiKeyRow {
    pub id: String,
    pub tenant_id: String,
    pub user_id: String,
    pub name: String,
    pub scopes: String,
    pub hint: String,
    pub key_hash: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub requests_per_minute: Option<i64>,
    pub tokens_per_minute: Option<i64>,
    pub monthly_spend: Option<i64>,
}

impl ApiKeyRow {
    /// The row of `k`, owned by `tenant_id`.
    pub fn from_domain(k: &ApiKey, tenant_id: Uuid) -> Self {
        Self {
            id: text(k.id),
            tenant_id: text(tenant_id),
            user_id: text(k.user_id),
            name: k.name.clone(),
            scopes: k
                .scopes
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            hint: k.hint.clone(),
            key_hash: k.key_hash.clone(),
            created_at: ms(k.created_at),
            last_used_at: opt_ms(k.last_used_at),
            expires_at: opt_ms(k.expires_at),
            revoked_at: opt_ms(k.revoked_at),
            requests_per_minute: limit_in(k.limits.requests_per_minute),
            tokens_per_minute: limit_in(k.limits.tokens_per_minute),
            monthly_spend: limit_in(k.limits.monthly_spend),
        }
    }

    pub fn into_domain(self) -> DomainResult<ApiKey> {
        let scopes = self
            .scopes
            .split_whitespace()
            .map(|s| KeyScope::parse("scopes", s).map_err(|_| corrupt("key scope")))
            .collect::<DomainResult<Vec<_>>>()?;
        Ok(ApiKey {
            id: id(&self.id)?,
            tenant_id: id(&self.tenant_id)?,
            user_id: id(&self.user_id)?,
            name: self.name,
            scopes,
            hint: self.hint,
            key_hash: self.key_hash,
            created_at: time(self.created_at)?,
            last_used_at: opt_time(self.last_used_at)?,
            expires_at: opt_time(self.expires_at)?,
            revoked_at: opt_time(self.revoked_at)?,
            limits: KeyLimits {
                requests_per_minute: limit_out(self.requests_per_minute)?,
                tokens_per_minute: limit_out(self.tokens_per_minute)?,
                monthly_spend: limit_out(self.monthly_spend)?,
            },
        })
    }
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = tenant_ai_keys)]
pub(crate) struct AiKeyRow {
    pub id: String,
    pub tenant_id: String,
    pub region: String,
    pub label: String,
    pub hint: String,
    pub sealed_secret: String,
    pub chat_enabled: bool,
    pub status: String,
    pub status_reason: Option<String>,
    pub checked_at: Option<i64>,
    pub created_at: i64,
}

impl AiKeyRow {
    pub fn from_domain(k: &TenantAiKey) -> Self {
        Self {
            id: text(k.id),
            tenant_id: text(k.tenant_id),
            region: k.region.as_str().to_owned(),
            label: k.label.clone(),
            hint: k.hint.clone(),
            sealed_secret: k.sealed_secret.clone(),
            chat_enabled: k.chat_enabled,
            status: k.status.as_str().to_owned(),
            status_reason: k.status_reason.clone(),
            checked_at: opt_ms(k.checked_at),
            created_at: ms(k.created_at),
        }
    }

    pub fn into_domain(self) -> DomainResult<TenantAiKey> {
        Ok(TenantAiKey {
            id: id(&self.id)?,
            tenant_id: id(&self.tenant_id)?,
            region: region(&self.region)?,
            label: self.label,
            hint: self.hint,
            sealed_secret: self.sealed_secret,
            chat_enabled: self.chat_enabled,
            status: AiKeyStatus::from_stored(&self.status),
            status_reason: self.status_reason,
            checked_at: opt_time(self.checked_at)?,
            created_at: time(self.created_at)?,
        })
    }
}
