//! Errors of this crate.
//!
//! Policy: no error ever carries an upstream key. Messages taken from an upstream answer are
//! redacted (the key replaced by `[redacted]`) and truncated before they are stored in an
//! error; transport errors are described from their source chain, which never sees the key
//! (it lives only in a sensitive header). [`UpstreamError::code`] gives the contract's error
//! code so the web layer can map `upstream_error` → 502 and `upstream_timeout` → 504.

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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// The upstream refused the key (401/403). The caller marks the key `not_ready` and may
    /// try the next ready key. `status` is 0 when the key was refused locally because it
    /// cannot be sent in an HTTP header.
    #[error("upstream rejected the key (status {status}): {message}")]
    KeyRejected { status: u16, message: String },
    /// The upstream answered another 4xx or 5xx status.
    #[error("upstream answered status {status}: {message}")]
    Status { status: u16, message: String },
    /// The upstream answered 2xx with something that is not a completion (or not an event
    /// stream when one was asked for).
    #[error("upstream sent an invalid response: {0}")]
    InvalidResponse(String),
    /// No response (non-streamed: no complete response) within the gateway's time-out.
    #[error("upstream did not answer in time")]
    Timeout,
    /// Connecting or talking to the upstream failed.
    #[error("upstream unreachable: {0}")]
    Transport(String),
}

impl UpstreamError {
    /// The contract's error code: `upstream_timeout` for [`UpstreamError::Timeout`],
    /// `upstream_error` for everything else.
    pub fn code(&self) -> &'static str {
        match self {
            UpstreamError::Timeout => "upstream_timeout",
            _ => "upstream_error",
        }
    }

    /// True for [`UpstreamError::KeyRejected`]: try the next key.
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
