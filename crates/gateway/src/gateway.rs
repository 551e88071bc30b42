//! [`RegionGateway`]: one region's OpenAI-compatible upstream, its pooled client, key probes
//! and chat calls.

use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use gc_domain::policy::runs::RunKind;

use crate::error::{describe_chain, retry_after, ErrorDetails, GatewayError, UpstreamError};
use crate::report::{RunReport, RunStatus, Usage};
use crate::secret::{contains_key, redact_verbatim, sanitize_upstream, Secret};
use crate::sse::RunStream;

/// The largest non-streamed completion (or Responses answer) accepted from an upstream.
const MAX_COMPLETION_BYTES: usize = 16 * 1024 * 1024;
/// The largest embeddings answer accepted from an upstream: 2048 inputs of 3072 floats are
/// about 130 MB as JSON, so a batch that large needs `encoding_format: base64` (a quarter of
/// that) or smaller batches.
const MAX_EMBEDDINGS_BYTES: usize = 64 * 1024 * 1024;
/// The largest error body read to extract the upstream's message.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Upstream messages kept in errors are cut to this many characters.
pub(crate) const MAX_MESSAGE_CHARS: usize = 300;
/// Model names taken from an upstream answer are cut to this many characters.
pub(crate) const MAX_MODEL_CHARS: usize = 200;

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

thread_local! {
    /// This thread's pooled client of each live gateway it has called (see `Inner::client`).
    static CLIENTS: RefCell<Vec<(Weak<Inner>, HttpsClient)>> = const { RefCell::new(Vec::new()) };
}

/// Region-agnostic configuration of one gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    /// The OpenAI-compatible base URL, e.g. `http://127.0.0.1:1234/v1` or `https://host/v1`
    /// (a trailing `/` is ignored). `/models` and `/chat/completions` are appended.
    pub base_url: String,
    /// The model that `auto` (or no model) resolves to.
    pub default_model: String,
    /// Time-out for a response (headers; for non-streamed calls the whole body) and the
    /// longest silence allowed inside a stream.
    pub timeout: Duration,
    /// Time-out for establishing a TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// The models offered on `GET /models` besides `auto` (the default model is always
    /// first, whether listed or not).
    pub models: Vec<String>,
}

/// The answer to a key probe or reachability check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeResult {
    /// The gateway answered with some HTTP status.
    pub reachable: bool,
    /// The status it answered.
    pub status_code: Option<u16>,
    /// Time until the response headers (or the failure).
    pub latency_ms: u64,
    /// `ready` when the gateway accepted the key (2xx, or 403: see [`RegionGateway::probe`]).
    /// For [`RegionGateway::check_reachable`]: `ready` when the gateway is reachable.
    pub outcome: KeyStatus,
    /// Why the outcome is `not_ready`, or a caveat on a `ready` one (a 403 on `/models`).
    /// Built by gc, never the upstream's text, never the key.
    pub reason: Option<String>,
}

impl ProbeResult {
    /// The gateway answered `status` after `latency_ms`.
    fn answered(
        status: StatusCode,
        latency_ms: u64,
        outcome: KeyStatus,
        reason: Option<String>,
    ) -> Self {
        Self {
            reachable: true,
            status_code: Some(status.as_u16()),
            latency_ms,
            outcome,
            reason,
        }
    }

    /// No HTTP status came back, for `reason` (built by gc).
    fn unreachable(latency_ms: u64, reason: String) -> Self {
        Self {
            reachable: false,
            status_code: None,
            latency_ms,
            outcome: KeyStatus::NotReady,
            reason: Some(reason),
        }
    }
}

/// Whether a key can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyStatus {
    Ready,
    NotReady,
}

impl KeyStatus {
    /// `"ready"` or `"not_ready"`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyStatus::Ready => "ready",
            KeyStatus::NotReady => "not_ready",
        }
    }
}

/// A successful chat call.
// The stream variant is a few hundred bytes, moved once per call: boxing it would cost an
// allocation per stream and an extra step for the caller, for nothing measurable.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ChatOutcome {
    /// A non-streamed completion, complete.
    Complete(Completion),
    /// An event stream, passed through as it arrives.
    Stream(RunStream),
}

/// A non-streamed answer: a chat completion, a Responses API response or an embeddings list.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The endpoint that answered.
    pub kind: RunKind,
    /// The upstream's body, byte for byte (a JSON object with `choices`, `output` or `data`
    /// for its kind), except that the key, should it appear verbatim (any letter case), is
    /// replaced by `[redacted]`.
    pub body: Bytes,
    /// The answer's `usage` (for a Responses answer `input_tokens` / `output_tokens` read as
    /// prompt and completion tokens), when present.
    pub usage: Option<Usage>,
    /// The model the upstream reported (sanitised), else the model that was requested.
    pub model: String,
    /// The upstream's (2xx) status.
    pub status: u16,
    /// Time from sending the request to having the whole body.
    pub latency_ms: u64,
}

/// The tokens of an answer's output: for a chat completion each choice's message `content`,
/// `refusal`, `reasoning_content` and tool calls' function name and arguments; for a
/// Responses answer each output item's text parts, refusals, reasoning summaries and
/// function calls' name and arguments; embeddings have none.
fn completion_tokens(kind: RunKind, model: &str, body: &[u8]) -> u64 {
    if kind == RunKind::Embeddings {
        return 0;
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return 0;
    };
    let mut n: u64 = 0;
    let mut add = |text: Option<&Value>| {
        if let Some(t) = text.and_then(Value::as_str) {
            n = n.saturating_add(crate::tokens::count(model, t));
        }
    };
    for item in v["output"].as_array().into_iter().flatten() {
        add(item.get("name"));
        add(item.get("arguments"));
        for part in ["content", "summary"]
            .iter()
            .filter_map(|f| item[*f].as_array())
            .flatten()
        {
            add(part.get("text"));
            add(part.get("refusal"));
        }
    }
    for choice in v["choices"].as_array().into_iter().flatten() {
        let m = &choice["message"];
        for field in ["content", "refusal", "reasoning_content"] {
            add(m.get(field));
        }
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            add(call["function"].get("name"));
            add(call["function"].get("arguments"));
        }
    }
    n
}

impl Completion {
    /// The run report of this completion (status `ok`; `ttft_ms` equals `latency_ms`).
    pub fn report(&self) -> RunReport {
        RunReport {
            status: RunStatus::Ok,
            usage: self.usage,
            ttft_ms: Some(self.latency_ms),
            latency_ms: self.latency_ms,
            model: self.model.clone(),
            error_code: None,
            error_message: None,
            // Counted only when the upstream reported no usage (rare): the text of every
            // choice's message.
            relayed_tokens: self
                .usage
                .is_none()
                .then(|| completion_tokens(self.kind, &self.model, &self.body)),
        }
    }
}

/// One region's gateway. Cheap to clone: all clones share its connection pools (one per thread).
#[derive(Clone)]
pub struct RegionGateway {
    inner: Arc<Inner>,
}

struct Inner {
    /// The connector every thread's client is built on (TLS configuration built once).
    connector: HttpsConnector<HttpConnector>,
    base_url: String,
    models_uri: Uri,
    chat_uri: Uri,
    responses_uri: Uri,
    embeddings_uri: Uri,
    default_model: String,
    models: Vec<String>,
    timeout: Duration,
}

impl Inner {
    /// Runs `use_it` with the calling thread's pooled client of this gateway, built on first
    /// use.
    ///
    /// hyper drives each pooled connection on the runtime of the task that opened it. With one
    /// pool shared by every server worker (each a single-threaded runtime), a worker would often
    /// take a connection another worker opened, and every request and answer on it would then
    /// cross threads (a wake-up each way). One pool per thread keeps a run and its upstream
    /// connection on the same worker. Bounded: a thread keeps one client per live gateway it
    /// has called (idle connections: `POOL_MAX_IDLE_PER_HOST` each, closed after
    /// `POOL_IDLE_TIMEOUT`); a dropped gateway's clients go the next time the thread builds one.
    fn with_client<T>(self: &Arc<Self>, use_it: impl FnOnce(&HttpsClient) -> T) -> T {
        CLIENTS.with(|clients| {
            let mut clients = clients.borrow_mut();
            let at = match clients
                .iter()
                .position(|(owner, _)| std::ptr::eq(owner.as_ptr(), Arc::as_ptr(self)))
            {
                Some(at) => at,
                None => {
                    clients.retain(|(owner, _)| owner.strong_count() > 0);
                    let client = Client::builder(TokioExecutor::new())
                        .pool_timer(TokioTimer::new())
                        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                        .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
                        .build(self.connector.clone());
                    clients.push((Arc::downgrade(self), client));
                    clients.len() - 1
                }
            };
            let (_, client) = &clients[at];
            use_it(client)
        })
    }

    /// Sends `req` on the calling thread's client (the future owns what it needs, so no client
    /// is cloned per request).
    fn request(
        self: &Arc<Self>,
        req: Request<Full<Bytes>>,
    ) -> hyper_util::client::legacy::ResponseFuture {
        self.with_client(|client| client.request(req))
    }
}

/// Idle upstream connections kept per host, per thread that calls the upstream.
const POOL_MAX_IDLE_PER_HOST: usize = 1024;
/// An idle upstream connection is closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

impl fmt::Debug for RegionGateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionGateway")
            .field("base_url", &self.inner.base_url)
            .field("default_model", &self.inner.default_model)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

fn endpoint(base: &str, path: &str) -> Result<Uri, GatewayError> {
    let url = format!("{base}{path}");
    let uri: Uri =
        url.parse()
            .map_err(|e: http::uri::InvalidUri| GatewayError::InvalidBaseUrl {
                url: base.to_owned(),
                reason: e.to_string(),
            })?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => {
            return Err(GatewayError::InvalidBaseUrl {
                url: base.to_owned(),
                reason: "the scheme must be http or https".to_owned(),
            })
        }
    }
    if uri.authority().is_none() {
        return Err(GatewayError::InvalidBaseUrl {
            url: base.to_owned(),
            reason: "a host is required".to_owned(),
        });
    }
    if uri.query().is_some() {
        return Err(GatewayError::InvalidBaseUrl {
            url: base.to_owned(),
            reason: "a query string is not allowed".to_owned(),
        });
    }
    Ok(uri)
}

fn bearer(secret: &Secret) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", secret.expose())).ok()?;
    // Keeps the value out of hyper's and http's Debug output.
    value.set_sensitive(true);
    Some(value)
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn transport_error(err: &hyper_util::client::legacy::Error, secret: Option<&Secret>) -> String {
    let text = describe_chain(err);
    sanitize_upstream(&text, secret, MAX_MESSAGE_CHARS)
}

/// Rebuilds a non-2xx answer as an error: 401 → [`UpstreamError::KeyRejected`] (the only
/// status that proves the key bad); any other status → [`UpstreamError::Status`] with the
/// upstream's checked `code` / `type`, its sanitised message (else the reason phrase) and,
/// for 429 / 503, its `Retry-After`.
fn status_error(
    status: StatusCode,
    headers: &http::HeaderMap,
    body: &[u8],
    secret: Option<&Secret>,
) -> UpstreamError {
    let details = ErrorDetails::parse(body, secret, MAX_MESSAGE_CHARS);
    let message = details
        .message
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("no message").to_owned());
    if status == StatusCode::UNAUTHORIZED {
        return UpstreamError::KeyRejected {
            status: status.as_u16(),
            message,
        };
    }
    let retry_after_secs =
        if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
            retry_after(headers, std::time::SystemTime::now())
        } else {
            None
        };
    UpstreamError::Status {
        status: status.as_u16(),
        code: details.code,
        kind: details.kind,
        message,
        retry_after_secs,
    }
}

/// Reads a whole body up to `limit` bytes.
async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, UpstreamError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(
            UpstreamError::InvalidResponse(format!("the response is larger than {limit} bytes")),
        ),
        Err(e) => Err(UpstreamError::Transport(format!(
            "reading the response failed: {}",
            describe_chain(e.as_ref())
        ))),
    }
}

/// What is read of a non-streamed answer: a JSON object with the array of its kind
/// (`choices`, `output` or `data`), its model and its usage.
#[derive(Deserialize)]
struct AnswerPeek {
    #[serde(default)]
    choices: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    output: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    data: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

impl AnswerPeek {
    fn is(&self, kind: RunKind) -> bool {
        match kind {
            RunKind::Chat => self.choices.is_some(),
            RunKind::Responses => self.output.is_some(),
            RunKind::Embeddings => self.data.is_some(),
        }
    }
}

/// What an answer of `kind` is called in errors.
fn answer_name(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Chat => "a chat completion",
        RunKind::Responses => "a Responses API response",
        RunKind::Embeddings => "an embeddings list",
    }
}

impl RegionGateway {
    /// Builds the gateway and its connection pool. Fails on a malformed base URL, an empty
    /// default model or a zero time-out. Needs no runtime; the first call needs Tokio.
    pub fn new(cfg: GatewayConfig) -> Result<Self, GatewayError> {
        let base = cfg.base_url.trim().trim_end_matches('/').to_owned();
        let models_uri = endpoint(&base, "/models")?;
        let chat_uri = endpoint(&base, RunKind::Chat.upstream_path())?;
        let responses_uri = endpoint(&base, RunKind::Responses.upstream_path())?;
        let embeddings_uri = endpoint(&base, RunKind::Embeddings.upstream_path())?;
        if cfg.default_model.trim().is_empty() {
            return Err(GatewayError::EmptyDefaultModel);
        }
        if cfg.timeout.is_zero() || cfg.connect_timeout.is_zero() {
            return Err(GatewayError::ZeroTimeout);
        }

        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(cfg.connect_timeout));
        http.set_keepalive(Some(Duration::from_secs(60)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| GatewayError::Tls(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);

        let default_model = cfg.default_model.trim().to_owned();
        let mut models = vec![default_model.clone()];
        for m in cfg.models.iter().map(|m| m.trim()) {
            if !m.is_empty() && m != "auto" && !models.iter().any(|have| have == m) {
                models.push(m.to_owned());
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                connector: https,
                base_url: base,
                models_uri,
                chat_uri,
                responses_uri,
                embeddings_uri,
                default_model,
                models,
                timeout: cfg.timeout,
            }),
        })
    }

    /// The base URL without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    /// The model `auto` resolves to.
    pub fn default_model(&self) -> &str {
        &self.inner.default_model
    }

    /// The configured models, the default model first.
    pub fn models(&self) -> &[String] {
        &self.inner.models
    }

    /// Checks a key: `GET {base}/models` with `Authorization: Bearer <secret>`.
    ///
    /// Keys are judged by proof:
    /// - 2xx → `ready`;
    /// - 401 → `not_ready` "rejected by gateway (status 401)": the only answer that proves
    ///   the key bad;
    /// - 403 → `ready`, with a `reason` caveat: the gateway authenticated the key but does not
    ///   let it list models. That says nothing against the key (per-model access is decided
    ///   on each chat call, whose 403 is passed on to the client), so it stays usable;
    /// - another status (404, 429, 5xx, ...) → `not_ready` "gateway answered status N": the
    ///   gateway could not confirm the key, which does not call it invalid either;
    /// - no answer in time or a transport error → not reachable, `not_ready`.
    pub async fn probe(&self, secret: &Secret) -> ProbeResult {
        let Some(auth) = bearer(secret) else {
            return ProbeResult::unreachable(
                0,
                "the key contains characters not allowed in an HTTP header".into(),
            );
        };
        let (answer, latency_ms) = self.get_models(Some(auth), Some(secret)).await;
        match answer {
            Ok(status) => {
                let (outcome, reason) = if status.is_success() {
                    (KeyStatus::Ready, None)
                } else if status == StatusCode::UNAUTHORIZED {
                    (
                        KeyStatus::NotReady,
                        Some(format!("rejected by gateway (status {})", status.as_u16())),
                    )
                } else if status == StatusCode::FORBIDDEN {
                    (
                        KeyStatus::Ready,
                        Some(
                            "gateway accepted the key but refused to list models (status 403); \
                             model access is checked on each run"
                                .to_owned(),
                        ),
                    )
                } else {
                    (
                        KeyStatus::NotReady,
                        Some(format!("gateway answered status {}", status.as_u16())),
                    )
                };
                ProbeResult::answered(status, latency_ms, outcome, reason)
            }
            Err(reason) => ProbeResult::unreachable(latency_ms, reason),
        }
    }

    /// Checks that the gateway answers at all (`GET {base}/models` without a key, for
    /// diagnostics): any HTTP status counts as reachable (`outcome` `ready`).
    pub async fn check_reachable(&self) -> ProbeResult {
        let (answer, latency_ms) = self.get_models(None, None).await;
        match answer {
            Ok(status) => ProbeResult::answered(status, latency_ms, KeyStatus::Ready, None),
            Err(reason) => ProbeResult::unreachable(latency_ms, reason),
        }
    }

    /// `GET {base}/models`: the status (or why there was none) and the time until then.
    async fn get_models(
        &self,
        auth: Option<HeaderValue>,
        secret: Option<&Secret>,
    ) -> (Result<StatusCode, String>, u64) {
        let mut builder = Request::builder()
            .method(Method::GET)
            .uri(self.inner.models_uri.clone())
            .header(ACCEPT, "application/json");
        if let Some(auth) = auth {
            builder = builder.header(AUTHORIZATION, auth);
        }
        let req = match builder.body(Full::new(Bytes::new())) {
            Ok(req) => req,
            Err(e) => return (Err(format!("building the request failed: {e}")), 0),
        };
        let started = Instant::now();
        let answer = tokio::time::timeout(self.inner.timeout, self.inner.request(req)).await;
        let latency_ms = elapsed_ms(started);
        let resp = match answer {
            Err(_) => {
                let reason = format!(
                    "gateway did not answer within {} ms",
                    self.inner.timeout.as_millis()
                );
                return (Err(reason), latency_ms);
            }
            Ok(Err(e)) => {
                let reason = format!("gateway unreachable: {}", transport_error(&e, secret));
                return (Err(reason), latency_ms);
            }
            Ok(Ok(resp)) => resp,
        };
        let status = resp.status();
        // Drain a small body so the connection can go back to the pool; a large or slow one
        // is dropped (closing that connection).
        let _ = tokio::time::timeout(
            Duration::from_millis(250),
            Limited::new(resp.into_body(), MAX_ERROR_BODY_BYTES).collect(),
        )
        .await;
        (Ok(status), latency_ms)
    }

    /// Sends a chat completion request (`POST {base}/chat/completions`, `Authorization:
    /// Bearer <secret>`). The body is the caller's validated request; this sets `model` to
    /// the default model when it is missing or `auto`, and for `stream: true` asks for usage
    /// (`stream_options.include_usage`), keeping every other field.
    ///
    /// Errors are failures before anything reached the client: 401 →
    /// [`UpstreamError::KeyRejected`], another non-2xx (403 included) →
    /// [`UpstreamError::Status`] rebuilt from the upstream's error body, a 2xx
    /// that is not a completion (or not an event stream when streaming) →
    /// [`UpstreamError::InvalidResponse`], no response in time →
    /// [`UpstreamError::Timeout`], connection failures → [`UpstreamError::Transport`].
    pub async fn chat(&self, secret: &Secret, body: Value) -> Result<ChatOutcome, UpstreamError> {
        self.call(RunKind::Chat, secret, body).await
    }

    /// Sends a run of `kind`: [`RegionGateway::chat`] for chat completions; for the Responses
    /// API `POST {base}/responses` (a missing or `auto` model is the default model; a stream is
    /// OpenAI's Responses event stream, passed through with its `event:` names, see
    /// [`RunStream`]); for embeddings `POST {base}/embeddings` (never streamed, the model as
    /// the caller named it). The same errors as `chat`.
    pub async fn call(
        &self,
        kind: RunKind,
        secret: &Secret,
        mut body: Value,
    ) -> Result<ChatOutcome, UpstreamError> {
        let Some(auth) = bearer(secret) else {
            return Err(UpstreamError::KeyRejected {
                status: 0,
                message: "the key contains characters not allowed in an HTTP header".into(),
            });
        };
        let (model, stream, client_wants_usage) = self.prepare_body(kind, &mut body);
        let uri = match kind {
            RunKind::Chat => &self.inner.chat_uri,
            RunKind::Responses => &self.inner.responses_uri,
            RunKind::Embeddings => &self.inner.embeddings_uri,
        };
        let payload = serde_json::to_vec(&body).map_err(|e| {
            UpstreamError::InvalidResponse(format!("request not serialisable: {e}"))
        })?;
        let req = Request::builder()
            .method(Method::POST)
            .uri(uri.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(
                ACCEPT,
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .header(AUTHORIZATION, auth)
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| UpstreamError::Transport(format!("building the request failed: {e}")))?;

        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.inner.timeout;
        let resp = match tokio::time::timeout_at(deadline, self.inner.request(req)).await {
            Err(_) => return Err(UpstreamError::Timeout),
            Ok(Err(e)) if e.is_connect() => {
                return Err(UpstreamError::Unreachable(transport_error(
                    &e,
                    Some(secret),
                )))
            }
            Ok(Err(e)) => return Err(UpstreamError::Transport(transport_error(&e, Some(secret)))),
            Ok(Ok(resp)) => resp,
        };

        let status = resp.status();
        if !status.is_success() {
            let (parts, body) = resp.into_parts();
            // The message is best effort: a slow or broken error body still yields the status.
            let bytes = tokio::time::timeout_at(deadline, read_body(body, MAX_ERROR_BODY_BYTES))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(status_error(status, &parts.headers, &bytes, Some(secret)));
        }

        if stream {
            let content_type = resp
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            if !content_type.is_empty() && !content_type.starts_with("text/event-stream") {
                return Err(UpstreamError::InvalidResponse(format!(
                    "expected an event stream, got {}",
                    sanitize_upstream(&content_type, Some(secret), 100)
                )));
            }
            return Ok(ChatOutcome::Stream(RunStream::new(
                resp.into_body(),
                started,
                self.inner.timeout,
                model,
                secret.clone(),
                client_wants_usage,
                kind,
            )));
        }

        let bytes = match tokio::time::timeout_at(
            deadline,
            read_body(
                resp.into_body(),
                if kind == RunKind::Embeddings {
                    MAX_EMBEDDINGS_BYTES
                } else {
                    MAX_COMPLETION_BYTES
                },
            ),
        )
        .await
        {
            Err(_) => return Err(UpstreamError::Timeout),
            Ok(Err(UpstreamError::Transport(m))) => {
                return Err(UpstreamError::Transport(sanitize_upstream(
                    &m,
                    Some(secret),
                    MAX_MESSAGE_CHARS,
                )))
            }
            Ok(Err(e)) => return Err(e),
            Ok(Ok(bytes)) => bytes,
        };
        let peek = serde_json::from_slice::<AnswerPeek>(&bytes)
            .ok()
            .filter(|p| p.is(kind))
            .ok_or_else(|| {
                let head = &bytes[..bytes.len().min(4096)];
                let snippet = sanitize_upstream(&String::from_utf8_lossy(head), Some(secret), 80);
                UpstreamError::InvalidResponse(format!("not {}: {snippet:?}", answer_name(kind)))
            })?;
        let usage = peek.usage.and_then(|u| Usage::of(kind, u));
        // The completion is the model's output and goes out as it is, but never with the key.
        let bytes = if contains_key(&bytes, secret.expose()) {
            Bytes::from(redact_verbatim(&bytes, secret.expose()))
        } else {
            bytes
        };
        let upstream_model = peek
            .model
            .map(|m| sanitize_upstream(&m, Some(secret), MAX_MODEL_CHARS))
            .filter(|m| !m.is_empty());
        Ok(ChatOutcome::Complete(Completion {
            kind,
            body: bytes,
            usage,
            model: upstream_model.unwrap_or(model),
            status: status.as_u16(),
            latency_ms: elapsed_ms(started),
        }))
    }

    /// Resolves the model and adds `stream_options.include_usage` for streams (gc needs the
    /// usage for its records and quotas). Returns the model sent, whether the call streams and
    /// whether the client asked for the usage chunk itself (when not, the stream drops it).
    ///
    /// For embeddings the model is the caller's (a chat default would be the wrong model) and
    /// nothing streams; for the Responses API no `stream_options` are added (its stream
    /// always ends with the usage, in `response.completed`).
    fn prepare_body(&self, kind: RunKind, body: &mut Value) -> (String, bool, bool) {
        let Some(obj) = body.as_object_mut() else {
            return (self.inner.default_model.clone(), false, false);
        };
        if kind == RunKind::Embeddings {
            let model = obj.get("model").and_then(Value::as_str);
            let model = model.unwrap_or(&self.inner.default_model).to_owned();
            return (model, false, false);
        }
        let model = match obj.get("model") {
            Some(Value::String(m)) if !m.trim().is_empty() && m != "auto" => m.clone(),
            _ => {
                obj.insert(
                    "model".into(),
                    Value::String(self.inner.default_model.clone()),
                );
                self.inner.default_model.clone()
            }
        };
        let stream = matches!(obj.get("stream"), Some(Value::Bool(true)));
        let wants_usage = matches!(
            obj.get("stream_options")
                .and_then(|o| o.get("include_usage")),
            Some(Value::Bool(true))
        );
        if stream && kind == RunKind::Chat {
            match obj.get_mut("stream_options") {
                Some(Value::Object(opts)) => {
                    opts.insert("include_usage".into(), Value::Bool(true));
                }
                _ => {
                    obj.insert(
                        "stream_options".into(),
                        serde_json::json!({ "include_usage": true }),
                    );
                }
            }
        }
        (model, stream, wants_usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(base: &str) -> Result<RegionGateway, GatewayError> {
        RegionGateway::new(GatewayConfig {
            base_url: base.into(),
            default_model: "m-default".into(),
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(1),
            models: vec!["m-large".into(), "m-default".into(), " ".into()],
        })
    }

    fn clients_held() -> usize {
        CLIENTS.with(|c| c.borrow().len())
    }

    #[test]
    fn each_thread_keeps_one_client_per_live_gateway() {
        // A fresh thread: the test harness may run other tests on this one.
        std::thread::spawn(|| {
            let hk = gateway("http://127.0.0.1:9/v1").unwrap();
            let ca = gateway("http://127.0.0.1:10/v1").unwrap();
            hk.inner.with_client(|_| ());
            hk.clone().inner.with_client(|_| ());
            assert_eq!(clients_held(), 1, "clones share the thread's client");
            ca.inner.with_client(|_| ());
            assert_eq!(clients_held(), 2);
            // Another thread builds its own, and leaves this one's alone.
            let other = hk.clone();
            std::thread::spawn(move || {
                other.inner.with_client(|_| ());
                assert_eq!(clients_held(), 1);
            })
            .join()
            .unwrap();
            assert_eq!(clients_held(), 2);
            // A dropped gateway's client goes when the thread next builds one.
            drop(ca);
            hk.inner.with_client(|_| ());
            assert_eq!(clients_held(), 2, "nothing built, nothing pruned");
            let eu = gateway("http://127.0.0.1:11/v1").unwrap();
            eu.inner.with_client(|_| ());
            assert_eq!(clients_held(), 2, "the dropped gateway's client was pruned");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn public_types_can_cross_threads() {
        fn send_sync<T: Send + Sync + 'static>() {}
        fn stream<T>()
        where
            T: futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>>
                + Send
                + Unpin
                + 'static,
        {
        }
        fn send_future<F: std::future::Future + Send>(_: F) {}
        send_sync::<RegionGateway>();
        send_sync::<UpstreamError>();
        stream::<RunStream>();
        let gw = gateway("http://127.0.0.1:1/v1").unwrap();
        let secret = Secret::new("k");
        send_future(gw.chat(&secret, Value::Null));
        send_future(gw.probe(&secret));
    }

    #[test]
    fn base_url_is_validated() {
        assert!(gateway("http://127.0.0.1:1234/v1").is_ok());
        assert!(gateway("https://gw.example.com/v1/").is_ok());
        assert!(matches!(
            gateway("ftp://x/v1"),
            Err(GatewayError::InvalidBaseUrl { .. })
        ));
        assert!(matches!(
            gateway("not a url"),
            Err(GatewayError::InvalidBaseUrl { .. })
        ));
        assert!(matches!(
            gateway("/v1"),
            Err(GatewayError::InvalidBaseUrl { .. })
        ));
        let gw = gateway("https://gw.example.com/v1/").unwrap();
        assert_eq!(gw.base_url(), "https://gw.example.com/v1");
        assert_eq!(
            gw.inner.chat_uri.to_string(),
            "https://gw.example.com/v1/chat/completions"
        );
    }

    #[test]
    fn model_resolution_and_stream_options() {
        let gw = gateway("http://127.0.0.1:1/v1").unwrap();
        for input in [
            serde_json::json!({"messages": []}),
            serde_json::json!({"model": "auto", "messages": []}),
            serde_json::json!({"model": null, "messages": []}),
        ] {
            let mut b = input;
            let (m, s, _) = gw.prepare_body(RunKind::Chat, &mut b);
            assert_eq!(m, "m-default");
            assert!(!s);
            assert_eq!(b["model"], "m-default");
            assert!(b.get("stream_options").is_none());
        }
        let mut b = serde_json::json!({"model": "gpt-x", "stream": true, "temperature": 0.5,
            "stream_options": {"other": 1}});
        let (m, s, wants) = gw.prepare_body(RunKind::Chat, &mut b);
        assert_eq!((m.as_str(), s, wants), ("gpt-x", true, false));
        assert_eq!(
            b["stream_options"],
            serde_json::json!({"other": 1, "include_usage": true})
        );
        assert_eq!(b["temperature"], 0.5);
        let mut b = serde_json::json!({"stream": true, "stream_options": {"include_usage": true}});
        assert!(
            gw.prepare_body(RunKind::Chat, &mut b).2,
            "the client asked for the usage chunk"
        );
        assert_eq!(gw.models(), ["m-default", "m-large"]);
    }

    #[test]
    fn status_errors_are_rebuilt_and_only_401_rejects_the_key() {
        let secret = Secret::new("Zq8live123456abc");
        let headers = http::HeaderMap::new();
        let body =
            br#"{"error":{"message":"Incorrect API key provided: Zq8live123456abc","type":"x"}}"#;
        let e = status_error(StatusCode::UNAUTHORIZED, &headers, body, Some(&secret));
        assert_eq!(
            e,
            UpstreamError::KeyRejected {
                status: 401,
                message: "Incorrect API key provided: [redacted]".into()
            }
        );
        let e = status_error(StatusCode::FORBIDDEN, &headers, body, Some(&secret));
        assert_eq!(e.upstream_status(), Some(403));
        assert_eq!(e.client_status(), Some(403));
        assert!(!e.is_key_rejected());
        assert_eq!(
            e.upstream_message(),
            Some("Incorrect API key provided: [redacted]")
        );
        let e = status_error(StatusCode::BAD_GATEWAY, &headers, b"", Some(&secret));
        assert_eq!(e.upstream_message(), Some("Bad Gateway"));
        let e = status_error(
            StatusCode::BAD_REQUEST,
            &headers,
            b"{\"message\":\"nope\"}",
            None,
        );
        assert_eq!(e.upstream_message(), Some("nope"));
        let long = "x".repeat(1000);
        let e = status_error(StatusCode::BAD_REQUEST, &headers, long.as_bytes(), None);
        assert!(e.upstream_message().unwrap().chars().count() <= MAX_MESSAGE_CHARS + 1);
        // Retry-After only for 429 and 503.
        let mut headers = http::HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("3"));
        for (status, want) in [(429, Some(3)), (503, Some(3)), (500, None), (403, None)] {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(
                status_error(status, &headers, b"", None).retry_after_secs(),
                want
            );
        }
    }
}
