//! Errors of this crate.
//!
//! Policy: errors are rebuilt by gc, never passed through. Of an upstream error answer only
//! its status, its `error.code` and `error.type` (when they are short identifiers) and its
//! message, run through [`crate::sanitize_upstream`] (the key removed in every form, tokens
//! removed, truncated), are kept; transport errors are described from their source chain and
//! sanitised too. [`UpstreamError::code`] gives the contract's error code so the web layer can
//! map `upstream_error` → 502 and `upstream_timeout` → 504; [`UpstreamError::client_status`]
//! gives the upstream 4xx to pass on instead (401 excepted: it rejects the key).

use std::time::{SystemTime, UNIX_EPOCH};

use gc_domain::ErrorCode;
use serde_json::Value;

use crate::secret::{sanitize_upstream, Secret};

/// Building a [`crate::RegionGateway`] failed (a configuration error, found at start-up).
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The base URL is not an absolute `http://` or `https://` URL.
    #[error("invalid gateway base URL {url:?}: {reason}")]
    InvalidBaseUrl { url: String, reason: String },
    /// The default model is empty.
    #[error("the gateway's default model must not be empty")]
    EmptyDefaultModel,
    /// A time-out is zero.
    #[error("gateway time-outs must be greater than zero")]
    ZeroTimeout,
    /// The TLS configuration could not be built.
    #[error("TLS setup failed: {0}")]
    Tls(String),
}

/// A chat call failed before anything reached the client.
///
/// Every string inside comes from [`crate::sanitize_upstream`]: never the key (in any form),
/// never an upstream token, never the upstream's raw body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// The upstream proved the key itself bad: it answered **401**. The caller marks the key
    /// `not_ready` and may try the next ready key. `status` is 0 when the key was refused
    /// locally because it cannot be sent in an HTTP header.
    ///
    /// Only 401 proves that: a 403 (e.g. no access to a model), 404, 429 etc. is a
    /// [`UpstreamError::Status`], answered to the client, and the key stays ready.
    #[error("upstream rejected the key (status {status}): {message}")]
    KeyRejected { status: u16, message: String },
    /// The upstream answered another 4xx or 5xx status (403 included). Rebuilt from its
    /// OpenAI-shaped error body (`{"error": {"message", "type", "code"}}`), never passed on.
    #[error("upstream answered status {status}{}: {message}", describe_code(.code.as_deref(), .kind.as_deref()))]
    Status {
        /// The upstream's HTTP status.
        status: u16,
        /// The upstream's `error.code`, when it is a short identifier (`[A-Za-z0-9_.-]{1,64}`,
        /// or a number) that is no secret.
        code: Option<String>,
        /// The upstream's `error.type` (same rule as `code`).
        kind: Option<String>,
        /// The upstream's message, sanitised and truncated (else the status' reason phrase).
        message: String,
        /// `Retry-After` (seconds, or an HTTP date turned into seconds from now; also
        /// `retry-after-ms` rounded up) of a 429 or 503, capped at one day.
        retry_after_secs: Option<u64>,
    },
    /// The upstream answered 2xx with something that is not a completion (or not an event
    /// stream when one was asked for).
    #[error("upstream sent an invalid response: {0}")]
    InvalidResponse(String),
    /// No response (non-streamed: no complete response) within the gateway's time-out.
    #[error("upstream did not answer in time")]
    Timeout,
    /// Talking to the upstream failed after the connection was made.
    #[error("upstream unreachable: {0}")]
    Transport(String),
    /// No connection could be made (refused, DNS, TLS handshake, connect time-out): the
    /// request never reached the upstream.
    #[error("upstream unreachable: {0}")]
    Unreachable(String),
}

/// ` (code, type)` for the `Status` message, or nothing.
fn describe_code(code: Option<&str>, kind: Option<&str>) -> String {
    match (code, kind) {
        (Some(c), Some(k)) if c != k => format!(" ({c}, {k})"),
        (Some(c), _) => format!(" ({c})"),
        (None, Some(k)) => format!(" ({k})"),
        (None, None) => String::new(),
    }
}

impl UpstreamError {
    /// The contract's error code: `upstream_timeout` for [`UpstreamError::Timeout`],
    /// `upstream_error` for everything else.
    pub fn code(&self) -> ErrorCode {
        match self {
            UpstreamError::Timeout => ErrorCode::UpstreamTimeout,
            _ => ErrorCode::UpstreamError,
        }
    }

    /// True when the call may be tried once more on another key: no connection could be made,
    /// or the upstream answered a 5xx. Never for time-outs (the upstream may still be working
    /// on it) or 4xx answers.
    pub fn is_retryable(&self) -> bool {
        match self {
            UpstreamError::Unreachable(_) => true,
            UpstreamError::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// True for [`UpstreamError::KeyRejected`] (an upstream 401, or a key that cannot be put
    /// in a header): mark the key `not_ready` and try the next key.
    pub fn is_key_rejected(&self) -> bool {
        matches!(self, UpstreamError::KeyRejected { .. })
    }

    /// The upstream's HTTP status, when it answered one.
    pub fn upstream_status(&self) -> Option<u16> {
        match self {
            UpstreamError::KeyRejected { status, .. } | UpstreamError::Status { status, .. }
                if *status != 0 =>
            {
                Some(*status)
            }
            _ => None,
        }
    }

    /// The status to answer the client with, when the upstream's answer concerns the request
    /// rather than the gateway: a 4xx other than 401 (400, 403, 404, 409, 413, 422, 429, ...).
    /// `None` for everything else (401: try the next key; 5xx, time-outs, transport and
    /// invalid responses: the contract's 502 / 504).
    pub fn client_status(&self) -> Option<u16> {
        match self {
            UpstreamError::Status { status, .. }
                if (400..500).contains(status) && *status != 401 =>
            {
                Some(*status)
            }
            _ => None,
        }
    }

    /// The upstream's `Retry-After` of a 429 or 503, in seconds.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            UpstreamError::Status {
                retry_after_secs, ..
            } => *retry_after_secs,
            _ => None,
        }
    }

    /// [`UpstreamError::retry_after_secs`] as a duration.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.retry_after_secs().map(std::time::Duration::from_secs)
    }

    /// The upstream's (checked) `error.code` of a [`UpstreamError::Status`].
    pub fn upstream_code(&self) -> Option<&str> {
        match self {
            UpstreamError::Status { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// The upstream's (checked) `error.type` of a [`UpstreamError::Status`].
    pub fn upstream_type(&self) -> Option<&str> {
        match self {
            UpstreamError::Status { kind, .. } => kind.as_deref(),
            _ => None,
        }
    }

    /// The sanitised message of a [`UpstreamError::KeyRejected`] or [`UpstreamError::Status`].
    pub fn upstream_message(&self) -> Option<&str> {
        match self {
            UpstreamError::KeyRejected { message, .. } | UpstreamError::Status { message, .. } => {
                Some(message)
            }
            _ => None,
        }
    }
}

/// What gc keeps of an upstream error (an error body or an in-stream error event).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ErrorDetails {
    /// `error.status` / `error.status_code` / `status` (100..=599), for stream events.
    pub status: Option<u16>,
    pub code: Option<String>,
    pub kind: Option<String>,
    /// Sanitised; `None` when the upstream gave none.
    pub message: Option<String>,
}

impl ErrorDetails {
    /// Reads an OpenAI-shaped error (`{"error": {"message", "type", "code"}}`, or `error` a
    /// string, or top-level `message` / `detail` / `code` / `type`). Anything that is not JSON
    /// is used as a message only when it is short plain text (no HTML page).
    pub(crate) fn parse(body: &[u8], secret: Option<&Secret>, max_chars: usize) -> Self {
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            let plain = !text.is_empty() && !text.starts_with('<') && !text.contains("<html");
            return ErrorDetails {
                message: plain
                    .then(|| sanitize_upstream(text, secret, max_chars))
                    .filter(|m| !m.is_empty()),
                ..ErrorDetails::default()
            };
        };
        let error = value.get("error").filter(|e| !e.is_null());
        let inner = error.filter(|e| e.is_object());
        let field = |name: &str| {
            inner
                .and_then(|e| e.get(name))
                .filter(|v| !v.is_null())
                .or_else(|| value.get(name).filter(|v| !v.is_null()))
        };
        let message = inner
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .or_else(|| error.and_then(Value::as_str))
            .or_else(|| value.get("message").and_then(Value::as_str))
            .or_else(|| value.get("detail").and_then(Value::as_str))
            .map(|m| sanitize_upstream(m, secret, max_chars))
            .filter(|m| !m.is_empty());
        let status = ["status", "status_code"]
            .iter()
            .find_map(|name| field(name).and_then(status_value));
        ErrorDetails {
            status,
            code: field("code").and_then(|v| identifier(v, secret)),
            kind: field("type").and_then(|v| identifier(v, secret)),
            message,
        }
    }
}

fn status_value(v: &Value) -> Option<u16> {
    let n = match v {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    u16::try_from(n).ok().filter(|s| (100..=599).contains(s))
}

/// A short identifier (`[A-Za-z0-9_.-]{1,64}`, or an integer) that the sanitiser leaves
/// untouched (so neither the key nor a token).
fn identifier(v: &Value, secret: Option<&Secret>) -> Option<String> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
        _ => return None,
    };
    let shaped = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    (shaped && sanitize_upstream(&text, secret, 64) == text).then_some(text)
}

/// The longest `Retry-After` kept (one day).
const MAX_RETRY_AFTER_SECS: u64 = 24 * 60 * 60;

/// `Retry-After` (delta-seconds or an HTTP date) or `retry-after-ms`, in whole seconds
/// (rounded up), capped at one day.
pub(crate) fn retry_after(headers: &http::HeaderMap, now: SystemTime) -> Option<u64> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let secs = if let Some(v) = text("retry-after") {
        match v.parse::<u64>() {
            Ok(secs) => Some(secs),
            Err(_) => parse_http_date(v).map(|at| {
                at.duration_since(now)
                    .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0))
                    .unwrap_or(0)
            }),
        }
    } else {
        None
    };
    let secs = secs.or_else(|| {
        let ms = text("retry-after-ms")?.parse::<f64>().ok()?;
        (ms.is_finite() && ms >= 0.0)
            .then(|| (ms / 1000.0).ceil().min(MAX_RETRY_AFTER_SECS as f64) as u64)
    })?;
    Some(secs.min(MAX_RETRY_AFTER_SECS))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP senders must use.
fn parse_http_date(text: &str) -> Option<SystemTime> {
    let (_, rest) = text.split_once(", ")?;
    let mut parts = rest.split(' ');
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: u64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':');
    let (h, m, s): (u64, u64, u64) = (
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
    );
    if parts.next()? != "GMT" || parts.next().is_some() || hms.next().is_some() {
        return None;
    }
    if !(1970..=9999).contains(&year) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), for years from 1970.
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    let secs = days * 86_400 + h * 3600 + m * 60 + s;
    Some(UNIX_EPOCH + std::time::Duration::from_secs(secs))
}

/// Describes an error by its source chain ("client error (Connect): tcp connect error:
/// Connection refused"), which is far more useful than the outermost message alone.
pub(crate) fn describe_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_rebuilt() {
        let key = Secret::new("sk-live-1234567890abcdef");
        let body = br#"{"error":{"message":"No access to model gpt-x for sk-live-1234567890abcdef","type":"invalid_request_error","code":"model_not_found","param":null}}"#;
        let d = ErrorDetails::parse(body, Some(&key), 300);
        assert_eq!(d.code.as_deref(), Some("model_not_found"));
        assert_eq!(d.kind.as_deref(), Some("invalid_request_error"));
        assert_eq!(
            d.message.as_deref(),
            Some("No access to model gpt-x for [redacted]")
        );
        assert_eq!(d.status, None);

        // Codes that are not short identifiers, or that are secrets, are dropped.
        let body = br#"{"error":{"message":"m","type":"a b","code":"sk-live-1234567890abcdef"}}"#;
        let d = ErrorDetails::parse(body, Some(&key), 300);
        assert_eq!((d.code, d.kind), (None, None));
        let long = format!(
            r#"{{"error":{{"code":"{}","type":"aB3dE6gH9jK2mN5pQ8sT1vW4"}}}}"#,
            "x".repeat(65)
        );
        let d = ErrorDetails::parse(long.as_bytes(), None, 300);
        assert_eq!((d.code, d.kind, d.message), (None, None, None));
        // Numeric codes and statuses (LiteLLM style), top-level fields.
        let d = ErrorDetails::parse(
            br#"{"error":{"message":"slow","code":429,"status":"429"}}"#,
            None,
            300,
        );
        assert_eq!((d.code.as_deref(), d.status), (Some("429"), Some(429)));
        let d = ErrorDetails::parse(br#"{"error":"plain string","code":"c1"}"#, None, 300);
        assert_eq!(
            (d.message.as_deref(), d.code.as_deref()),
            (Some("plain string"), Some("c1"))
        );
        let d = ErrorDetails::parse(br#"{"detail":"Not Found"}"#, None, 300);
        assert_eq!(d.message.as_deref(), Some("Not Found"));
        // Text and HTML bodies.
        let d = ErrorDetails::parse(b"slow down", None, 300);
        assert_eq!(d.message.as_deref(), Some("slow down"));
        let d = ErrorDetails::parse(b"<html><body>502 Bad Gateway</body></html>", None, 300);
        assert_eq!(d.message, None);
        assert_eq!(ErrorDetails::parse(b"", None, 300), ErrorDetails::default());
    }

    #[test]
    fn accessors() {
        let status = |status, retry| UpstreamError::Status {
            status,
            code: Some("c".into()),
            kind: Some("t".into()),
            message: "m".into(),
            retry_after_secs: retry,
        };
        assert_eq!(status(403, None).client_status(), Some(403));
        assert_eq!(status(429, Some(7)).client_status(), Some(429));
        assert_eq!(
            status(429, Some(7)).retry_after(),
            Some(std::time::Duration::from_secs(7))
        );
        assert_eq!(status(500, None).client_status(), None);
        assert_eq!(status(401, None).client_status(), None);
        let rejected = UpstreamError::KeyRejected {
            status: 401,
            message: "m".into(),
        };
        assert_eq!(rejected.client_status(), None);
        assert_eq!(UpstreamError::Timeout.client_status(), None);
        assert_eq!(status(404, None).upstream_code(), Some("c"));
        assert_eq!(status(404, None).upstream_type(), Some("t"));
        assert_eq!(status(404, None).upstream_message(), Some("m"));
        assert_eq!(
            status(404, None).to_string(),
            "upstream answered status 404 (c, t): m"
        );
        let bare = UpstreamError::Status {
            status: 502,
            code: None,
            kind: None,
            message: "Bad Gateway".into(),
            retry_after_secs: None,
        };
        assert_eq!(
            bare.to_string(),
            "upstream answered status 502: Bad Gateway"
        );
    }

    #[test]
    fn retry_after_is_parsed() {
        let now = UNIX_EPOCH + std::time::Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        let mut h = http::HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", http::HeaderValue::from_static("12"));
        assert_eq!(retry_after(&h, now), Some(12));
        h.insert(
            "retry-after",
            http::HeaderValue::from_static("Sun, 06 Nov 1994 08:50:07 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(30));
        h.insert(
            "retry-after",
            http::HeaderValue::from_static("Sun, 06 Nov 1994 08:00:00 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(0));
        h.insert("retry-after", http::HeaderValue::from_static("99999999"));
        assert_eq!(retry_after(&h, now), Some(MAX_RETRY_AFTER_SECS));
        h.insert("retry-after", http::HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
        h.remove("retry-after");
        h.insert("retry-after-ms", http::HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h, now), Some(2));
        assert_eq!(
            parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"),
            Some(UNIX_EPOCH)
        );
        assert_eq!(
            parse_http_date("Sat, 29 Feb 2020 12:00:00 GMT"),
            Some(UNIX_EPOCH + std::time::Duration::from_secs(1_582_977_600))
        );
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
    }
}
