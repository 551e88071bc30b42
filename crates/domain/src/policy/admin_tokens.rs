//! Admin API tokens' rules (decision 0036): the `gca_` prefix, a token's scope (`admin` or
//! `admin:read`, which only reads) and its expiry. Issuing, listing, revoking and
//! authenticating tokens is [`crate::services::admin_tokens`]; their storage is
//! [`crate::ports::AdminTokenRepo`].

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::{Tenant, User};

/// Every admin token starts with this, so scanners and the service recognise one.
pub const TOKEN_PREFIX: &str = "gca_";

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminTokenScope {
    /// Every administration route a session of its admin may use, tokens aside.
    Admin,
    /// Only requests that change nothing (GET, HEAD).
    AdminRead,
}

impl AdminTokenScope {
    pub fn parse(field: &str, raw: &str) -> DomainResult<Self> {
        match raw {
            "admin" => Ok(Self::Admin),
            "admin:read" => Ok(Self::AdminRead),
            _ => Err(DomainError::invalid(
                field,
                "must be `admin` or `admin:read`",
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::AdminRead => "admin:read",
        }
    }

    /// True when the token may make requests that change something.
    pub fn allows_writes(self) -> bool {
        self == Self::Admin
    }
}

/// A stored token, as its admin sees it: never the token, never its hash.
#[derive(Debug, Clone)]
pub struct AdminToken {
    pub id: Uuid,
    pub user_id: Uuid,
    pub name: String,
    pub scope: AdminTokenScope,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl AdminToken {
    /// False once `expires_at` has passed.
    pub fn is_usable_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// A token to store: the token with the SHA-256 of its secret.
#[derive(Debug, Clone)]
pub struct NewAdminToken {
    pub token: AdminToken,
    pub token_hash: String,
}

/// A token with its admin and the admin's tenant, as loaded for one request.
#[derive(Debug, Clone)]
pub struct AdminTokenContext {
    pub token: AdminToken,
    pub user: User,
    pub tenant: Option<Tenant>,
}

/// One use of a token: the audit line written for every request that presents a live one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminTokenUse {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    pub admin_id: Uuid,
    pub token_id: Uuid,
    pub token_name: String,
    /// The method and path, e.g. `GET /api/v1/admin/tenants`.
    pub route: String,
}
