//! Domain errors.
//!
//! Error policy: every refusal the service can give is a variant here with a stable,
//! snake_case `code()`. Adapters map their own failures into these variants
//! (`Unavailable` for a pool that cannot hand out a connection, `Internal` for bugs and
//! broken infrastructure); `gc-http-api` maps each code to an HTTP status in one table.
//! Messages never contain secrets: no password, token, key or upstream credential is ever
//! formatted into an error.

/// Result type of the domain and its ports.
pub type DomainResult<T> = Result<T, DomainError>;

/// Every refusal and failure the domain knows, each with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// A field failed validation; the message names the field.
    #[error("{field}: {message}")]
    Validation { field: String, message: String },
    /// A field that the resource does not have.
    #[error("unknown field `{0}`")]
    UnknownField(String),
    #[error("no valid credentials were sent")]
    Unauthenticated,
    #[error("the email or password is wrong")]
    InvalidCredentials,
    #[error("the API key is invalid, revoked or expired")]
    InvalidApiKey,
    #[error("too many failed sign-ins for this account; try again later")]
    TooManyAttempts { retry_after_secs: u64 },
    #[error("too many requests; try again later")]
    RateLimited { retry_after_secs: u64 },
    #[error("an account with this email already exists")]
    EmailTaken,
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("the record was changed since version {expected}; reload it and retry")]
    VersionConflict { expected: i64 },
    #[error("your account is not assigned to a tenant")]
    MemberUnassigned,
    #[error("your account is suspended")]
    MemberSuspended,
    #[error("your tenant is suspended")]
    TenantSuspended,
    #[error("the API key lacks the `{0}` scope")]
    InsufficientScope(&'static str),
    #[error("the Shadow support view is read-only")]
    ShadowReadOnly,
    #[error("this route requires a platform administrator")]
    AdminRequired,
    #[error("this route requires a signed-in session; API keys are not accepted here")]
    SessionRequired,
    #[error("sign-up is disabled on this service")]
    SignupDisabled,
    #[error("AI access is disabled for this tenant")]
    AiAccessDisabled,
    #[error("AI access is not ready for this tenant: {0}")]
    AiAccessNotReady(String),
    #[error("a provider cannot be chosen by the caller: `{0}` is not accepted")]
    ProviderNotAllowed(String),
    #[error("the service is temporarily unavailable")]
    Unavailable { retry_after_secs: u64 },
    #[error("internal error")]
    Internal(String),
}

impl DomainError {
    /// The stable code clients see in `error.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Validation { .. } => "validation_failed",
            Self::UnknownField(_) => "unknown_field",
            Self::Unauthenticated => "unauthenticated",
            Self::InvalidCredentials => "invalid_credentials",
            Self::InvalidApiKey => "invalid_api_key",
            Self::TooManyAttempts { .. } => "too_many_attempts",
            Self::RateLimited { .. } => "rate_limited",
            Self::EmailTaken => "email_taken",
            Self::NotFound(_) => "not_found",
            Self::VersionConflict { .. } => "version_conflict",
            Self::MemberUnassigned => "member_unassigned",
            Self::MemberSuspended => "member_suspended",
            Self::TenantSuspended => "tenant_suspended",
            Self::InsufficientScope(_) => "insufficient_scope",
            Self::ShadowReadOnly => "shadow_read_only",
            Self::AdminRequired => "admin_required",
            Self::SessionRequired => "session_required",
            Self::SignupDisabled => "signup_disabled",
            Self::AiAccessDisabled => "ai_access_disabled",
            Self::AiAccessNotReady(_) => "ai_access_not_ready",
            Self::ProviderNotAllowed(_) => "provider_not_allowed",
            Self::Unavailable { .. } => "service_unavailable",
            Self::Internal(_) => "internal_error",
        }
    }

    /// A validation error for `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Validation {
            field: field.into(),
            message: message.into(),
        }
    }
}
