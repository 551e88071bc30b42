//! Tenant AI keys and AI access.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::model::Tenant;
use crate::values::Region;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AiKeyStatus {
    Ready,
    NotReady,
}

impl AiKeyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::NotReady => "not_ready",
        }
    }

    pub fn from_stored(raw: &str) -> Self {
        if raw == "ready" {
            Self::Ready
        } else {
            Self::NotReady
        }
    }
}

/// An upstream provider key of a tenant, locked to one region. The secret is sealed
/// (AES-256-GCM) and never leaves the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantAiKey {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub region: Region,
    pub label: String,
    pub hint: String,
    pub sealed_secret: String,
    pub chat_enabled: bool,
    pub status: AiKeyStatus,
    pub status_reason: Option<String>,
    pub checked_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

pub type NewTenantAiKey = TenantAiKey;

/// A tenant's AI access, as the contract defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AiAccess {
    Ready,
    Disabled,
    NotReady,
}

impl AiAccess {
    /// `disabled` when AI is off; else `ready` when a ready, chat-enabled key of the tenant's
    /// region exists; else `not_ready`.
    pub fn of(tenant: &Tenant, keys: &[TenantAiKey]) -> Self {
        if !tenant.ai_enabled {
            return Self::Disabled;
        }
        let usable = keys.iter().any(|k| {
            k.tenant_id == tenant.id
                && k.region == tenant.region
                && k.chat_enabled
                && k.status == AiKeyStatus::Ready
        });
        if usable {
            Self::Ready
        } else {
            Self::NotReady
        }
    }
}
