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
    /// A run over one of its tenant's or key's quotas (before any upstream call).
    #[error("{reason}; retry in {retry_after_secs} s")]
    QuotaExceeded {
        reason: crate::policy::quota::QuotaReason,
        retry_after_secs: u64,
        state: crate::policy::quota::RateLimitState,
    },
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
    /// A model outside the caller's allow-list (or a model without a price under a spend
    /// limit): 403 `model_not_allowed`, before any upstream call.
    #[error("{0}")]
    ModelNotAllowed(String),
    #[error("the service is temporarily unavailable")]
    Unavailable { retry_after_secs: u64 },
    /// The service has no room for the request now (the run writer's queue is full): 503
    /// `busy` with `Retry-After`.
    #[error("the service is busy; retry shortly")]
    Busy { retry_after_secs: u64 },
    #[error("internal error")]
    Internal(String),
}

impl DomainError {
    /// The stable code clients see in `error.code`.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Validation { .. } => ErrorCode::ValidationFailed,
            Self::UnknownField(_) => ErrorCode::UnknownField,
            Self::Unauthenticated => ErrorCode::Unauthenticated,
            Self::InvalidCredentials => ErrorCode::InvalidCredentials,
            Self::InvalidApiKey => ErrorCode::InvalidApiKey,
            Self::TooManyAttempts { .. } => ErrorCode::TooManyAttempts,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::QuotaExceeded {
                reason:
                    crate::policy::quota::QuotaReason::MonthlyTokens
                    | crate::policy::quota::QuotaReason::MonthlySpend,
                ..
            } => ErrorCode::BudgetExhausted,
            Self::QuotaExceeded { .. } => ErrorCode::RateLimited,
            Self::EmailTaken => ErrorCode::EmailTaken,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::VersionConflict { .. } => ErrorCode::VersionConflict,
            Self::MemberUnassigned => ErrorCode::MemberUnassigned,
            Self::MemberSuspended => ErrorCode::MemberSuspended,
            Self::TenantSuspended => ErrorCode::TenantSuspended,
            Self::InsufficientScope(_) => ErrorCode::InsufficientScope,
            Self::ShadowReadOnly => ErrorCode::ShadowReadOnly,
            Self::AdminRequired => ErrorCode::AdminRequired,
            Self::SessionRequired => ErrorCode::SessionRequired,
            Self::SignupDisabled => ErrorCode::SignupDisabled,
            Self::AiAccessDisabled => ErrorCode::AiAccessDisabled,
            Self::AiAccessNotReady(_) => ErrorCode::AiAccessNotReady,
            Self::ProviderNotAllowed(_) => ErrorCode::ProviderNotAllowed,
            Self::ModelNotAllowed(_) => ErrorCode::ModelNotAllowed,
            Self::Unavailable { .. } => ErrorCode::ServiceUnavailable,
            Self::Busy { .. } => ErrorCode::Busy,
            Self::Internal(_) => ErrorCode::InternalError,
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

/// Declares [`ErrorCode`]: each code with its wire name and HTTP status, in one table.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = ($name:literal, $status:literal),)*) => {
        /// Every error code the service answers with, and its HTTP status. This is the only
        /// place a code string is written; adapters pick a variant. `upstream_rejected` is the
        /// one code whose status is the upstream's own (its `status()` here is the usual 400).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The snake_case name clients see in `error.code`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                }
            }

            /// The HTTP status this code is answered with.
            pub const fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)*
                }
            }
        }
    };
}

error_codes! {
    /// The request is malformed (generic, for router-level errors).
    BadRequest = ("bad_request", 400),
    /// The body is not valid JSON.
    InvalidJson = ("invalid_json", 400),
    /// The body could not be read.
    InvalidBody = ("invalid_body", 400),
    /// The query string is invalid.
    InvalidQuery = ("invalid_query", 400),
    /// A pagination cursor that this service did not issue.
    InvalidCursor = ("invalid_cursor", 400),
    /// An `If-Match` header that is not a version.
    InvalidIfMatch = ("invalid_if_match", 400),
    /// No valid credentials were sent.
    Unauthenticated = ("unauthenticated", 401),
    /// Wrong email or password.
    InvalidCredentials = ("invalid_credentials", 401),
    /// The API key is invalid, revoked or expired.
    InvalidApiKey = ("invalid_api_key", 401),
    /// Generic refusal (router-level).
    Forbidden = ("forbidden", 403),
    /// A cookie-authenticated unsafe request from another origin.
    OriginMismatch = ("origin_mismatch", 403),
    MemberUnassigned = ("member_unassigned", 403),
    MemberSuspended = ("member_suspended", 403),
    TenantSuspended = ("tenant_suspended", 403),
    InsufficientScope = ("insufficient_scope", 403),
    ShadowReadOnly = ("shadow_read_only", 403),
    AdminRequired = ("admin_required", 403),
    SessionRequired = ("session_required", 403),
    SignupDisabled = ("signup_disabled", 403),
    AiAccessDisabled = ("ai_access_disabled", 403),
    AiAccessNotReady = ("ai_access_not_ready", 403),
    ModelNotAllowed = ("model_not_allowed", 403),
    /// No such route or object.
    NotFound = ("not_found", 404),
    /// The Guard's repository does not exist or is not public.
    RepositoryNotFound = ("repository_not_found", 404),
    MethodNotAllowed = ("method_not_allowed", 405),
    NotAcceptable = ("not_acceptable", 406),
    RequestTimeout = ("request_timeout", 408),
    EmailTaken = ("email_taken", 409),
    VersionConflict = ("version_conflict", 409),
    PayloadTooLarge = ("payload_too_large", 413),
    UnsupportedMediaType = ("unsupported_media_type", 415),
    ValidationFailed = ("validation_failed", 422),
    UnknownField = ("unknown_field", 422),
    ProviderNotAllowed = ("provider_not_allowed", 422),
    UnsupportedMode = ("unsupported_mode", 422),
    InvalidTarget = ("invalid_target", 422),
    TargetNotAllowed = ("target_not_allowed", 422),
    ArchiveNotAccepted = ("archive_not_accepted", 422),
    RedirectNotFollowed = ("redirect_not_followed", 422),
    RepositoryTooLarge = ("repository_too_large", 422),
    /// The upstream refused the request (any 4xx but 401 and 429); answered with the
    /// upstream's status.
    UpstreamRejected = ("upstream_rejected", 400),
    TooManyAttempts = ("too_many_attempts", 429),
    RateLimited = ("rate_limited", 429),
    BudgetExhausted = ("budget_exhausted", 429),
    UpstreamRateLimited = ("upstream_rate_limited", 429),
    HeadersTooLarge = ("headers_too_large", 431),
    /// A bug or broken infrastructure; the message never says more.
    InternalError = ("internal_error", 500),
    UpstreamError = ("upstream_error", 502),
    ServiceUnavailable = ("service_unavailable", 503),
    /// A bounded queue (password hashing) is full.
    Busy = ("busy", 503),
    /// The Guard's executor is full.
    ScannerBusy = ("scanner_busy", 503),
    UpstreamTimeout = ("upstream_timeout", 504),
}

/// Lets tests compare a code with its wire name.
impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case_with_error_statuses() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let name = code.as_str();
            assert!(seen.insert(name), "{name} twice");
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
            assert!((400..600).contains(&code.status()), "{name}");
        }
    }

    #[test]
    fn domain_errors_keep_their_codes() {
        assert_eq!(
            DomainError::MemberSuspended.code().as_str(),
            "member_suspended"
        );
        assert_eq!(DomainError::MemberSuspended.code().status(), 403);
        assert_eq!(DomainError::invalid("f", "m").code().status(), 422);
        assert_eq!(
            DomainError::Unavailable {
                retry_after_secs: 1
            }
            .code()
            .as_str(),
            "service_unavailable"
        );
    }
}
