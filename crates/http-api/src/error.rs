//! HTTP errors.
//!
//! Error policy: handlers return `ApiError`, which is either a domain refusal (`DomainError`,
//! with its stable code) or an HTTP-level one (bad JSON, wrong content type, too large, bad
//! Origin, unknown route). This module holds the only table from code to status. Every error
//! response has the body `{"error": {"code", "message", "request_id"}}`; the request-id
//! middleware fills `request_id` in and turns bodiless errors (405 from the router, say) into
//! that shape too. 500 is only for bugs and broken infrastructure; its message never says more
//! than "internal error", the cause goes to the log.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use gc_domain::{DomainError, ErrorCode};
use serde_json::json;

/// An error as the client sees it.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
    retry_after: Option<u64>,
    /// The offending parameter, for OpenAI-shaped errors.
    param: Option<String>,
    /// Extra headers (the `x-ratelimit-*` of a run).
    headers: Vec<(header::HeaderName, HeaderValue)>,
}

/// The `x-ratelimit-*` headers OpenAI sends, for the limits that apply to a run: the tighter
/// of the tenant's and the key's per-minute request limit, and of their per-minute token limit
/// (the monthly budget has no header; its refusal says so). Resets are `<seconds>s`.
pub fn rate_limit_headers(
    state: &gc_domain::policy::quota::RateLimitState,
) -> impl Iterator<Item = (header::HeaderName, HeaderValue)> {
    // Names made at compile time and integer values, yielded one by one (no list is built):
    // made per limited run, so no name is checked and no text formatted for it (issue 10:
    // formatting them was a fifth of the quota check).
    use header::HeaderName as N;
    static NAMES: [[N; 3]; 2] = [
        [
            N::from_static("x-ratelimit-limit-requests"),
            N::from_static("x-ratelimit-remaining-requests"),
            N::from_static("x-ratelimit-reset-requests"),
        ],
        [
            N::from_static("x-ratelimit-limit-tokens"),
            N::from_static("x-ratelimit-remaining-tokens"),
            N::from_static("x-ratelimit-reset-tokens"),
        ],
    ];
    NAMES
        .iter()
        .zip([state.requests, state.tokens])
        .filter_map(|(names, allowance)| allowance.map(|a| (names, a)))
        .flat_map(|(names, a)| {
            names.iter().cloned().zip([
                HeaderValue::from(a.limit),
                HeaderValue::from(a.remaining),
                reset_value(a.reset_secs),
            ])
        })
}

/// `<seconds>s` for a reset: a minute's resets (every one these headers show) from a static
/// table, so no text is formatted or allocated for them.
fn reset_value(secs: u64) -> HeaderValue {
    const MINUTE: [&str; 61] = [
        "0s", "1s", "2s", "3s", "4s", "5s", "6s", "7s", "8s", "9s", "10s", "11s", "12s", "13s",
        "14s", "15s", "16s", "17s", "18s", "19s", "20s", "21s", "22s", "23s", "24s", "25s", "26s",
        "27s", "28s", "29s", "30s", "31s", "32s", "33s", "34s", "35s", "36s", "37s", "38s", "39s",
        "40s", "41s", "42s", "43s", "44s", "45s", "46s", "47s", "48s", "49s", "50s", "51s", "52s",
        "53s", "54s", "55s", "56s", "57s", "58s", "59s", "60s",
    ];
    match usize::try_from(secs).ok().and_then(|i| MINUTE.get(i)) {
        Some(s) => HeaderValue::from_static(s),
        // Digits and `s` only: always a valid header value.
        None => HeaderValue::try_from(format!("{secs}s")).unwrap_or(HeaderValue::from_static("0s")),
    }
}

impl ApiError {
    /// An error with `code`'s own status.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: status_of(code),
            code,
            message: message.into(),
            retry_after: None,
            param: None,
            headers: Vec::new(),
        }
    }

    /// Adds the `x-ratelimit-*` headers of a run's limits.
    pub fn with_rate_limits(mut self, state: &gc_domain::policy::quota::RateLimitState) -> Self {
        self.headers.extend(rate_limit_headers(state));
        self
    }

    /// `upstream_rejected` with the upstream's own 4xx status (the one code whose status is
    /// not fixed); anything outside 400..=499 becomes 502 `upstream_error`.
    pub fn upstream_rejected(status: u16, message: impl Into<String>) -> Self {
        match StatusCode::from_u16(status) {
            Ok(s) if s.is_client_error() => Self {
                status: s,
                ..Self::new(ErrorCode::UpstreamRejected, message)
            },
            _ => Self::new(ErrorCode::UpstreamError, message),
        }
    }

    pub fn not_found() -> Self {
        Self::new(ErrorCode::NotFound, "no such route or object")
    }

    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs.max(1));
        self
    }

    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn param(&self) -> Option<&str> {
        self.param.as_deref()
    }

    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }

    /// The standard JSON body.
    pub fn body(&self, request_id: &str) -> serde_json::Value {
        json!({"error": {"code": self.code.as_str(), "message": self.message, "request_id": request_id}})
    }

    /// The generic error for a status that carries no error of ours (router 404/405 and the
    /// like).
    pub fn from_status(status: StatusCode) -> Self {
        let (code, message) = match status.as_u16() {
            400 => (ErrorCode::BadRequest, "the request is malformed"),
            401 => (ErrorCode::Unauthenticated, "no valid credentials were sent"),
            403 => (ErrorCode::Forbidden, "the request is refused"),
            404 => (ErrorCode::NotFound, "no such route or object"),
            405 => (
                ErrorCode::MethodNotAllowed,
                "this method is not allowed on this route",
            ),
            406 => (
                ErrorCode::NotAcceptable,
                "the requested representation is not available",
            ),
            408 => (
                ErrorCode::RequestTimeout,
                "the request took too long to arrive",
            ),
            413 => (ErrorCode::PayloadTooLarge, "the request body is too large"),
            415 => (
                ErrorCode::UnsupportedMediaType,
                "the request body must be application/json",
            ),
            431 => (
                ErrorCode::HeadersTooLarge,
                "the request headers are too large",
            ),
            503 => (
                ErrorCode::ServiceUnavailable,
                "the service is temporarily unavailable",
            ),
            _ if status.is_server_error() => (ErrorCode::InternalError, "internal error"),
            _ => (ErrorCode::BadRequest, "the request failed"),
        };
        Self::new(code, message)
    }
}

/// The status of `code`, from the one table in `gc_domain::ErrorCode`.
fn status_of(code: ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        // The request-id middleware rewrites the body with the request id; this body is the
        // fallback should the error escape it.
        let mut res = HttpResponse::build(self.status)
            .content_type("application/json; charset=utf-8")
            .json(self.body(""));
        if let Some(secs) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                res.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if self.code == ErrorCode::BudgetExhausted {
            // The budget is spent until the month turns: tells OpenAI's SDKs not to retry.
            res.headers_mut().insert(
                header::HeaderName::from_static("x-should-retry"),
                HeaderValue::from_static("false"),
            );
        }
        for (name, value) in &self.headers {
            res.headers_mut().insert(name.clone(), value.clone());
        }
        res
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        let message = match &e {
            DomainError::Internal(cause) => {
                tracing::error!(cause = %cause, "internal error");
                "internal error".to_owned()
            }
            other => other.to_string(),
        };
        let retry_after = match &e {
            DomainError::TooManyAttempts { retry_after_secs }
            | DomainError::RateLimited { retry_after_secs }
            | DomainError::QuotaExceeded {
                retry_after_secs, ..
            }
            | DomainError::Unavailable { retry_after_secs }
            | DomainError::Busy { retry_after_secs } => Some(*retry_after_secs),
            _ => None,
        };
        let headers = match &e {
            DomainError::QuotaExceeded { state, .. } => rate_limit_headers(state).collect(),
            _ => Vec::new(),
        };
        let param = match &e {
            DomainError::Validation { field, .. } => Some(field.clone()),
            DomainError::UnknownField(field) | DomainError::ProviderNotAllowed(field) => {
                Some(field.clone())
            }
            _ => None,
        };
        Self {
            retry_after: retry_after.map(|s| s.max(1)),
            param,
            headers,
            ..Self::new(e.code(), message)
        }
    }
}

impl From<actix_web::error::BlockingError> for ApiError {
    fn from(_: actix_web::error::BlockingError) -> Self {
        DomainError::Unavailable {
            retry_after_secs: 1,
        }
        .into()
    }
}

/// Maps actix's JSON body errors: 413 too large, 415 not JSON, 400 malformed, 422 for a body
/// that is JSON but of the wrong shape (with `unknown_field` for fields the route does not
/// take).
pub fn json_error(err: &actix_web::error::JsonPayloadError) -> ApiError {
    use actix_web::error::JsonPayloadError as E;
    match err {
        E::OverflowKnownLength { .. } | E::Overflow { .. } => {
            ApiError::from_status(StatusCode::PAYLOAD_TOO_LARGE)
        }
        E::ContentType => ApiError::from_status(StatusCode::UNSUPPORTED_MEDIA_TYPE),
        E::Payload(e) if crate::middleware::is_body_timeout(e) => body_timeout(),
        E::Deserialize(e) if e.is_data() => data_error(e),
        E::Deserialize(e) => ApiError::new(
            ErrorCode::InvalidJson,
            format!("the body is not valid JSON: {e}"),
        ),
        other => ApiError::new(
            ErrorCode::InvalidBody,
            format!("the body could not be read: {other}"),
        ),
    }
}

/// 408 `request_timeout`: the body did not arrive within its deadline.
pub fn body_timeout() -> ApiError {
    ApiError::new(
        ErrorCode::RequestTimeout,
        "the request body did not arrive in time",
    )
}

/// A serde data error as 422: `unknown_field` or `validation_failed` naming the field.
pub fn data_error(e: &serde_json::Error) -> ApiError {
    let text = e.to_string();
    if let Some(rest) = text.strip_prefix("unknown field `") {
        let field = rest.split('`').next().unwrap_or_default().to_owned();
        return ApiError::from(DomainError::UnknownField(field));
    }
    // serde's message names the field for missing fields and type mismatches.
    let field = text
        .split('`')
        .nth(1)
        .filter(|_| text.starts_with("missing field"))
        .unwrap_or("body")
        .to_owned();
    let message = text.split(" at line ").next().unwrap_or(&text).to_owned();
    ApiError::from(DomainError::invalid(field, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_read_as_seconds_from_the_table_and_beyond_it() {
        for secs in (0..=300).chain([u64::MAX]) {
            assert_eq!(reset_value(secs), format!("{secs}s").as_str(), "{secs}");
        }
    }
}
