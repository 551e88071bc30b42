//! A programmable mock OpenAI-compatible upstream on loopback, for tests and benchmarks
//! (cargo feature `mock`, off by default).
//!
//! It is a small HTTP/1.1 server written directly on Tokio's `TcpListener` (keep-alive,
//! `Content-Length` request bodies, chunked streamed responses), so it can also misbehave
//! precisely: hang, cut a stream mid-way, send garbage.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use gc_gateway::mock::{Behavior, MockUpstream};
//! let (addr, mock) = MockUpstream::start().await?;
//! let base_url = mock.base_url();          // "http://127.0.0.1:PORT/v1"
//! mock.push_behavior(Behavior::status(500, "boom")); // the next chat request only
//! mock.set_behavior(Behavior::Auto);        // every other chat request (the default)
//! mock.reject_key("sk-revoked");           // 401 for this key on every endpoint
//! // ... drive the code under test against `base_url` ...
//! let seen = mock.requests();              // method, path, authorization, body
//! # let _ = (addr, base_url, seen); Ok(()) }
//! ```
//!
//! # Endpoints
//!
//! - `GET /v1/models`: 401 without a bearer key or with a rejected key; else the status set by
//!   [`MockHandle::set_models_status`] (default 200 with a model list).
//! - `POST /v1/chat/completions`: 401 for a rejected key (its body echoes the key, as some
//!   upstreams do, to test redaction); else the next pushed [`Behavior`], or the default one.
//! - `POST /v1/responses`: the same, in the Responses API's shapes: a `response` object
//!   (usage 5/7/12 as `input_tokens` / `output_tokens`), or for `stream: true` its event
//!   stream (`event:` names; `response.created`, `response.output_item.added`,
//!   `response.content_part.added`, one `response.output_text.delta` per chunk, the three
//!   `*.done` events, then `response.completed` carrying the output and the usage, and no
//!   `[DONE]`; `StreamWithoutDone` leaves out the `*.done` events and `response.completed`).
//! - `POST /v1/embeddings`: the same behaviours (a stream behaviour answers the embeddings
//!   list): one 3-dimension embedding per input, as floats or, for `encoding_format:
//!   base64`, as little-endian `f32` bytes in base64 (the official Python SDK's default);
//!   usage `prompt_tokens` 5 / `total_tokens` 5.
//! - Anything else: 404.
//!
//! # Behaviours ([`Behavior`])
//!
//! `Auto` (a completion, or for `stream: true` a stream of 3 chunks), `Complete`,
//! `Stream { chunks, delay }`, `StreamGated { chunks }` (each chunk waits for
//! [`MockHandle::release`]), `StreamWithoutDone`, `BreakMidStream`, `StreamThenHang`,
//! `Status`, `Hang`, `Garbage`. Streams send `chunks` content chunks (`"chunk-0 "`,
//! `"chunk-1 "`, ...), a usage chunk (`prompt_tokens` 5, `completion_tokens` = chunks) and
//! `data: [DONE]`; completions report usage 5/7/12. The model echoes the request's `model`.
//!
//! Hostile upstreams: `Answer` (any status, headers and body, e.g. an OpenAI error with
//! `Retry-After`), `StreamError` (an error event mid-stream, as `data:` JSON or as
//! `event: error`) and `StreamEchoKey` (the key inside the model's content). Their bodies may
//! hold `{key}`, replaced by the request's bearer key rendered as a [`KeyForm`] (upper case,
//! base64 at any alignment, hex, split into pieces, ...), JSON-escaped.
//!
//! # Observing
//!
//! [`MockHandle::requests`] (recorded unless started with [`MockUpstream::start_for_bench`]
//! or [`MockHandle::set_recording`] is off), [`MockHandle::request_count`],
//! [`MockHandle::connections`], [`MockHandle::chunks_sent`], and
//! [`MockHandle::client_aborts`] / [`MockHandle::wait_client_abort`]: streams whose client
//! closed the connection before the mock finished sending.
//!
//! # Benchmarks
//!
//! [`MockUpstream::start_for_bench`] is the zero-delay mode: no recording, no delays, each
//! response written with one `write_all`, TCP_NODELAY. The mock stops accepting when the
//! last [`MockHandle`] clone is dropped.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use gc_domain::policy::runs::RunKind;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// How the mock answers a chat completion request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behavior {
    /// A completion, or a 3-chunk stream when the request has `stream: true`.
    Auto,
    /// Always a non-streamed completion.
    Complete,
    /// An event stream of `chunks` content chunks, `delay` apart, then usage and `[DONE]`.
    Stream { chunks: usize, delay: Duration },
    /// Like `Stream`, but each content chunk is sent only after a [`MockHandle::release`].
    StreamGated { chunks: usize },
    /// An event stream of `chunks` chunks that ends cleanly but without `[DONE]`.
    StreamWithoutDone { chunks: usize },
    /// `after` chunks, then the connection is closed in the middle of the chunked body.
    BreakMidStream { after: usize },
    /// `after` chunks, then silence with the connection open (until the client leaves).
    StreamThenHang { after: usize },
    /// This status with this (JSON) body.
    Status { status: u16, body: String },
    /// Reads the request and never answers (until the client leaves).
    Hang,
    /// 200 `application/json` whose body is not a completion.
    Garbage,
    /// This status, these extra headers and this (JSON) body, in which `{key}` becomes the
    /// bearer key rendered as `echo` (JSON-escaped).
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
        echo: KeyForm,
    },
    /// An event stream of `after` content chunks, then the error event `data` (`{key}`
    /// rendered as `echo`), preceded by an `event: error` line when `named`, then more content
    /// and `[DONE]` (which a gateway must not pass on after the error).
    StreamError {
        after: usize,
        data: String,
        named: bool,
        echo: KeyForm,
    },
    /// A 2-chunk stream whose first content is `"your key: {key}"` (`{key}` as `echo`).
    StreamEchoKey { echo: KeyForm },
}

/// How the mock writes the request's key into a `{key}` placeholder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KeyForm {
    /// As it is.
    #[default]
    Exact,
    /// In upper case.
    Upper,
    /// In lower case.
    Lower,
    /// `base64(prefix + key + suffix)`; the prefix length sets the byte alignment.
    Base64 {
        prefix: String,
        suffix: String,
        url_safe: bool,
        padded: bool,
    },
    /// Hex of the key's bytes.
    Hex { upper: bool },
    /// Pieces of `size` bytes joined by `sep` (e.g. `" "`, `"\n"`, `"\" + \""`, `","`).
    Split { size: usize, sep: String },
}

impl KeyForm {
    /// The key in this form.
    pub fn render(&self, key: &str) -> String {
        match self {
            KeyForm::Exact => key.to_owned(),
            KeyForm::Upper => key.to_ascii_uppercase(),
            KeyForm::Lower => key.to_ascii_lowercase(),
            KeyForm::Base64 {
                prefix,
                suffix,
                url_safe,
                padded,
            } => {
                let data = format!("{prefix}{key}{suffix}");
                let encoded = crate::secret::base64_encode(data.as_bytes(), *url_safe);
                if *padded {
                    encoded
                } else {
                    encoded.trim_end_matches('=').to_owned()
                }
            }
            KeyForm::Hex { upper } => {
                let hex = crate::secret::hex_encode(key.as_bytes());
                if *upper {
                    hex.to_ascii_uppercase()
                } else {
                    hex
                }
            }
            KeyForm::Split { size, sep } => key
                .as_bytes()
                .chunks((*size).max(1))
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
                .join(sep),
        }
    }

    /// One of each form: every case, base64 (standard and URL-safe, padded or not) at the three
    /// byte alignments, hex, and splits by space, newline, `+`, comma and JSON concatenation.
    pub fn all() -> Vec<KeyForm> {
        let mut forms = vec![
            KeyForm::Exact,
            KeyForm::Upper,
            KeyForm::Lower,
            KeyForm::Hex { upper: false },
            KeyForm::Hex { upper: true },
        ];
        for (prefix, suffix) in [("", ""), ("a", "!"), ("ab", "?>"), ("Bearer ", "")] {
            for (url_safe, padded) in [(false, true), (false, false), (true, true), (true, false)] {
                forms.push(KeyForm::Base64 {
                    prefix: prefix.into(),
                    suffix: suffix.into(),
                    url_safe,
                    padded,
                });
            }
        }
        for (size, sep) in [
            (4, " "),
            (5, "\n"),
            (6, "+"),
            (7, ","),
            (8, "\" + \""),
            (3, "\",\""),
        ] {
            forms.push(KeyForm::Split {
                size,
                sep: sep.into(),
            });
        }
        forms
    }
}

/// `text` with `{key}` replaced by `key` in `form`, JSON-escaped (for JSON string bodies).
fn fill_key(text: &str, key: &str, form: &KeyForm) -> String {
    if !text.contains("{key}") {
        return text.to_owned();
    }
    let rendered = Value::String(form.render(key)).to_string();
    let escaped = &rendered[1..rendered.len() - 1];
    text.replace("{key}", escaped)
}

impl Behavior {
    /// `Answer` with an OpenAI-shaped error body (`{"error": {"message", "type", "code"}}`);
    /// `{key}` in `message` is the key as it is (see [`Behavior::echoing`]).
    pub fn openai_error(
        status: u16,
        message: &str,
        kind: Option<&str>,
        code: Option<&str>,
    ) -> Self {
        let body =
            json!({"error": {"message": message, "type": kind, "code": code, "param": null}});
        Behavior::Answer {
            status,
            headers: Vec::new(),
            body: body.to_string(),
            echo: KeyForm::Exact,
        }
    }

    /// Adds a response header to an `Answer` (other behaviours are unchanged).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Behavior::Answer { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// Sets how `{key}` is rendered in an `Answer`, `StreamError` or `StreamEchoKey`.
    pub fn echoing(mut self, form: KeyForm) -> Self {
        match &mut self {
            Behavior::Answer { echo, .. }
            | Behavior::StreamError { echo, .. }
            | Behavior::StreamEchoKey { echo } => *echo = form,
            _ => {}
        }
        self
    }

    /// `Status` with an OpenAI-shaped error body carrying `message`.
    pub fn status(status: u16, message: &str) -> Self {
        let body = json!({"error": {"message": message, "type": "mock_error", "code": null}});
        Behavior::Status {
            status,
            body: body.to_string(),
        }
    }
}

/// One request the mock received.
#[derive(Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// The raw `Authorization` header (redacted in `Debug`).
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The key of a `Bearer` authorization.
    pub fn bearer(&self) -> Option<&str> {
        self.authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
    }

    /// The body as JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

impl fmt::Debug for RecordedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordedRequest")
            .field("method", &self.method)
            .field("path", &self.path)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "[redacted]"),
            )
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

struct Shared {
    default: Mutex<Behavior>,
    queue: Mutex<VecDeque<Behavior>>,
    rejected: Mutex<HashSet<String>>,
    models_status: Mutex<Option<u16>>,
    requests: Mutex<Vec<RecordedRequest>>,
    recording: AtomicBool,
    request_count: AtomicUsize,
    gate: Semaphore,
    chunks_sent: AtomicUsize,
    aborts: AtomicUsize,
    connections: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts mock upstreams.
pub struct MockUpstream;

impl MockUpstream {
    /// Starts a recording mock on `127.0.0.1` (a free port).
    pub async fn start() -> std::io::Result<(SocketAddr, MockHandle)> {
        Self::start_with(true).await
    }

    /// Starts the zero-delay mock for benchmarks: nothing is recorded.
    pub async fn start_for_bench() -> std::io::Result<(SocketAddr, MockHandle)> {
        Self::start_with(false).await
    }

    async fn start_with(recording: bool) -> std::io::Result<(SocketAddr, MockHandle)> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            default: Mutex::new(Behavior::Auto),
            queue: Mutex::new(VecDeque::new()),
            rejected: Mutex::new(HashSet::new()),
            models_status: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            recording: AtomicBool::new(recording),
            request_count: AtomicUsize::new(0),
            gate: Semaphore::new(0),
            chunks_sent: AtomicUsize::new(0),
            aborts: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
        });
        let accept_shared = shared.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let _ = socket.set_nodelay(true);
                accept_shared.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve_connection(socket, accept_shared.clone()));
            }
        });
        let handle = MockHandle {
            shared,
            addr,
            _accept: Arc::new(AbortOnDrop(task)),
        };
        Ok((addr, handle))
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Controls and observes a running mock. Clones share the mock.
#[derive(Clone)]
pub struct MockHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _accept: Arc<AbortOnDrop>,
}

impl fmt::Debug for MockHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MockHandle {
    /// The mock's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/v1`, the OpenAI-style base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The behaviour for chat requests with no pushed behaviour left.
    pub fn set_behavior(&self, behavior: Behavior) {
        *lock(&self.shared.default) = behavior;
    }

    /// A behaviour for the next chat request only (first in, first out).
    pub fn push_behavior(&self, behavior: Behavior) {
        lock(&self.shared.queue).push_back(behavior);
    }

    /// Answers 401 to every request carrying this bearer key.
    pub fn reject_key(&self, key: &str) {
        lock(&self.shared.rejected).insert(key.to_owned());
    }

    /// Accepts this key again.
    pub fn accept_key(&self, key: &str) {
        lock(&self.shared.rejected).remove(key);
    }

    /// The status of `GET /v1/models` for accepted keys (`None`: 200 with a list).
    pub fn set_models_status(&self, status: Option<u16>) {
        *lock(&self.shared.models_status) = status;
    }

    /// Turns request recording on or off.
    pub fn set_recording(&self, on: bool) {
        self.shared.recording.store(on, Ordering::Relaxed);
    }

    /// The recorded requests, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The recorded requests to `path` (e.g. `/responses`, `/embeddings`), oldest first.
    pub fn requests_to(&self, path: &str) -> Vec<RecordedRequest> {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.path.ends_with(path))
            .cloned()
            .collect()
    }

    /// The recorded chat completion requests, oldest first.
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.path.ends_with("/chat/completions"))
            .cloned()
            .collect()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    /// How many requests arrived (counted even when not recording).
    pub fn request_count(&self) -> usize {
        self.shared.request_count.load(Ordering::SeqCst)
    }

    /// TCP connections accepted so far (to check connection reuse).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Lets `n` more chunks of `StreamGated` streams go out.
    pub fn release(&self, n: usize) {
        self.shared.gate.add_permits(n);
    }

    /// Content chunks written so far, over all streams.
    pub fn chunks_sent(&self) -> usize {
        self.shared.chunks_sent.load(Ordering::SeqCst)
    }

    /// Responses whose client closed the connection before the mock had finished.
    pub fn client_aborts(&self) -> usize {
        self.shared.aborts.load(Ordering::SeqCst)
    }

    /// Waits until at least one client abort was seen; false after `timeout`.
    pub async fn wait_client_abort(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.client_aborts() > 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.client_aborts() > 0
    }
}

struct Request {
    method: String,
    path: String,
    authorization: Option<String>,
    close: bool,
    body: Vec<u8>,
}

/// Reads one request; `None` when the connection ended or is unusable.
async fn read_request(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> Option<Request> {
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let mut tmp = [0u8; 8192];
        match rd.read(&mut tmp).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let mut content_length = 0usize;
    let mut authorization = None;
    let mut close = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => content_length = value.parse().ok()?,
            "authorization" => authorization = Some(value.to_owned()),
            "connection" => close = value.eq_ignore_ascii_case("close"),
            "transfer-encoding" => return None, // chunked request bodies are not supported
            _ => {}
        }
    }
    let body_start = head_end + 4;
    while buf.len() < body_start + content_length {
        let mut tmp = [0u8; 8192];
        match rd.read(&mut tmp).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    let body = buf[body_start..body_start + content_length].to_vec();
    buf.drain(..body_start + content_length);
    Some(Request {
        method,
        path,
        authorization,
        close,
        body,
    })
}

async fn serve_connection(socket: TcpStream, shared: Arc<Shared>) {
    let (mut rd, mut wr) = socket.into_split();
    let mut buf = Vec::with_capacity(8192);
    while let Some(req) = read_request(&mut rd, &mut buf).await {
        shared.request_count.fetch_add(1, Ordering::SeqCst);
        if shared.recording.load(Ordering::Relaxed) {
            lock(&shared.requests).push(RecordedRequest {
                method: req.method.clone(),
                path: req.path.clone(),
                authorization: req.authorization.clone(),
                body: req.body.clone(),
            });
        }
        let keep_going = respond(&req, &shared, &mut rd, &mut wr, &mut buf).await;
        if !keep_going || req.close {
            let _ = wr.shutdown().await;
            return;
        }
    }
}

fn simple_response(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    response_with_headers(status, content_type, &[], body)
}

fn response_with_headers(
    status: u16,
    content_type: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n",
        reason(status),
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

fn reason(status: u16) -> &'static str {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Status")
}

#[derive(Deserialize, Default)]
struct RequestPeek {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    encoding_format: Option<String>,
}

/// Writes the answer; false when the connection must end.
async fn respond(
    req: &Request,
    shared: &Shared,
    rd: &mut OwnedReadHalf,
    wr: &mut OwnedWriteHalf,
    buf: &mut Vec<u8>,
) -> bool {
    let key = req
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "));
    let rejected = key.is_some_and(|k| lock(&shared.rejected).contains(k));
    let path = req.path.split('?').next().unwrap_or("");

    if req.method == "GET" && path.ends_with("/models") {
        let response = if key.is_none() || rejected {
            let body =
                json!({"error": {"message": "invalid api key", "type": "invalid_request_error"}});
            simple_response(401, "application/json", body.to_string().as_bytes())
        } else {
            match *lock(&shared.models_status) {
                Some(status) => simple_response(status, "application/json", b"{}"),
                None => {
                    let body = r#"{"object":"list","data":[{"id":"mock-model","object":"model","owned_by":"mock"}]}"#;
                    simple_response(200, "application/json", body.as_bytes())
                }
            }
        };
        return wr.write_all(&response).await.is_ok();
    }
    let kind = if path.ends_with("/chat/completions") {
        Some(RunKind::Chat)
    } else if path.ends_with("/responses") {
        Some(RunKind::Responses)
    } else if path.ends_with("/embeddings") {
        Some(RunKind::Embeddings)
    } else {
        None
    };
    let Some(kind) = kind.filter(|_| req.method == "POST") else {
        let response = simple_response(
            404,
            "application/json",
            br#"{"error":{"message":"not found"}}"#,
        );
        return wr.write_all(&response).await.is_ok();
    };
    if rejected {
        let message = format!("Incorrect API key provided: {}", key.unwrap_or(""));
        let body = json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}});
        let response = simple_response(401, "application/json", body.to_string().as_bytes());
        return wr.write_all(&response).await.is_ok();
    }

    let peek: RequestPeek = serde_json::from_slice(&req.body).unwrap_or_default();
    let model = peek.model.unwrap_or_else(|| "mock-model".to_owned());
    let wants_stream = peek.stream == Some(true);
    let behavior = lock(&shared.queue)
        .pop_front()
        .unwrap_or_else(|| lock(&shared.default).clone());

    let key = key.unwrap_or("");
    // Embeddings never stream: every behaviour that would is the embeddings list.
    let behavior = match behavior {
        Behavior::Stream { .. }
        | Behavior::StreamGated { .. }
        | Behavior::StreamWithoutDone { .. }
        | Behavior::BreakMidStream { .. }
        | Behavior::StreamThenHang { .. }
        | Behavior::StreamError { .. }
        | Behavior::StreamEchoKey { .. }
            if kind == RunKind::Embeddings =>
        {
            Behavior::Complete
        }
        other => other,
    };
    let mut plan = match behavior {
        Behavior::Auto if wants_stream && kind != RunKind::Embeddings => {
            StreamPlan::new(3, Duration::ZERO, false, Ending::Done)
        }
        Behavior::Answer {
            status,
            headers,
            body,
            echo,
        } => {
            let body = fill_key(&body, key, &echo);
            let response =
                response_with_headers(status, "application/json", &headers, body.as_bytes());
            return wr.write_all(&response).await.is_ok();
        }
        Behavior::StreamError {
            after,
            data,
            named,
            echo,
        } => StreamPlan::new(
            after,
            Duration::ZERO,
            false,
            Ending::Error {
                data: fill_key(&data, key, &echo),
                named,
            },
        ),
        Behavior::StreamEchoKey { echo } => {
            let mut plan = StreamPlan::new(2, Duration::ZERO, false, Ending::Done);
            plan.first_content = Some(fill_key("your key: {key}", key, &echo));
            plan
        }
        Behavior::Auto | Behavior::Complete => {
            let body = match kind {
                RunKind::Chat => completion(&model),
                RunKind::Responses => responses_answer(&model),
                RunKind::Embeddings => embeddings_answer(
                    &model,
                    peek.input.as_ref(),
                    peek.encoding_format.as_deref() == Some("base64"),
                ),
            };
            let response = simple_response(200, "application/json", body.as_bytes());
            return wr.write_all(&response).await.is_ok();
        }
        Behavior::Stream { chunks, delay } => StreamPlan::new(chunks, delay, false, Ending::Done),
        Behavior::StreamGated { chunks } => {
            StreamPlan::new(chunks, Duration::ZERO, true, Ending::Done)
        }
        Behavior::StreamWithoutDone { chunks } => {
            StreamPlan::new(chunks, Duration::ZERO, false, Ending::NoDone)
        }
        Behavior::BreakMidStream { after } => {
            StreamPlan::new(after, Duration::ZERO, false, Ending::Break)
        }
        Behavior::StreamThenHang { after } => {
            StreamPlan::new(after, Duration::ZERO, false, Ending::Hang)
        }
        Behavior::Status { status, body } => {
            let response = simple_response(status, "application/json", body.as_bytes());
            return wr.write_all(&response).await.is_ok();
        }
        Behavior::Hang => {
            wait_for_close(rd, buf).await;
            shared.aborts.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        Behavior::Garbage => {
            let response = simple_response(
                200,
                "application/json",
                b"<html>definitely not a completion</html>",
            );
            return wr.write_all(&response).await.is_ok();
        }
    };

    plan.kind = kind;
    // Send the stream while watching for the client closing the connection.
    let send = send_stream(plan, &model, shared, wr);
    tokio::pin!(send);
    tokio::select! {
        finished = &mut send => match finished {
            StreamEnd::Finished => true,
            StreamEnd::Closed => false,
            StreamEnd::WriteFailed => {
                shared.aborts.fetch_add(1, Ordering::SeqCst);
                false
            }
            StreamEnd::Hang => {
                wait_for_close(rd, buf).await;
                shared.aborts.fetch_add(1, Ordering::SeqCst);
                false
            }
        },
        () = wait_for_close(rd, buf) => {
            shared.aborts.fetch_add(1, Ordering::SeqCst);
            false
        }
    }
}

/// Completes when the peer closes the connection (bytes that arrive meanwhile are kept for
/// the next request).
async fn wait_for_close(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) {
    let mut tmp = [0u8; 4096];
    loop {
        match rd.read(&mut tmp).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

fn completion(model: &str) -> String {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "Hello from the mock."},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
    })
    .to_string()
}

/// A Responses API answer (`object: "response"`) with one message, usage 5/7/12.
fn responses_answer(model: &str) -> String {
    responses_object(model, "completed", "Hello from the mock.", Some((5, 7))).to_string()
}

/// A `response` object with `text` as its one message's output text.
fn responses_object(model: &str, status: &str, text: &str, usage: Option<(u64, u64)>) -> Value {
    let output = if status == "in_progress" {
        json!([])
    } else {
        json!([{
            "type": "message", "id": "msg_mock", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]
        }])
    };
    json!({
        "id": "resp_mock",
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage.map(|(input, output)| json!({
            "input_tokens": input,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input + output
        })),
    })
}

/// An embeddings list: one 3-dimension embedding per input (a string, a token array, or each
/// entry of an array of those), as floats or base64 of little-endian `f32`s.
fn embeddings_answer(model: &str, input: Option<&Value>, base64: bool) -> String {
    let n = match input {
        Some(Value::Array(items)) if !items.iter().all(Value::is_number) => items.len(),
        _ => 1,
    };
    let vector = [0.1f32, 0.2, 0.3];
    let embedding = if base64 {
        let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
        Value::String(crate::secret::base64_encode(&bytes, false))
    } else {
        json!(vector)
    };
    let data: Vec<Value> = (0..n)
        .map(|i| json!({"object": "embedding", "index": i, "embedding": embedding}))
        .collect();
    json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": 5, "total_tokens": 5}
    })
    .to_string()
}

enum Ending {
    Done,
    NoDone,
    Break,
    Hang,
    /// This error event (JSON text), optionally `event: error`, then a chunk and `[DONE]`.
    Error {
        data: String,
        named: bool,
    },
}

struct StreamPlan {
    chunks: usize,
    delay: Duration,
    gated: bool,
    ending: Ending,
    /// The (JSON-escaped) content of the first chunk instead of `chunk-0 `.
    first_content: Option<String>,
    /// Chat completion chunks or Responses API events.
    kind: RunKind,
}

impl StreamPlan {
    fn new(chunks: usize, delay: Duration, gated: bool, ending: Ending) -> Self {
        Self {
            chunks,
            delay,
            gated,
            ending,
            first_content: None,
            kind: RunKind::Chat,
        }
    }
}

enum StreamEnd {
    Finished,
    Closed,
    WriteFailed,
    Hang,
}

fn chunk_frame(out: &mut Vec<u8>, event: &str) {
    named_frame(out, None, event);
}

/// One chunk of the chunked body holding one event, with an `event:` name when given.
fn named_frame(out: &mut Vec<u8>, name: Option<&str>, event: &str) {
    let data = match name {
        Some(name) => format!("event: {name}\ndata: {event}\n\n"),
        None => format!("data: {event}\n\n"),
    };
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data.as_bytes());
    out.extend_from_slice(b"\r\n");
}

async fn send_stream(
    plan: StreamPlan,
    model: &str,
    shared: &Shared,
    wr: &mut OwnedWriteHalf,
) -> StreamEnd {
    let model_json = Value::String(model.to_owned()).to_string();
    let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    // Zero-delay, ungated streams go out in one write; otherwise chunk by chunk.
    let batch = plan.delay.is_zero() && !plan.gated;
    let responses = plan.kind == RunKind::Responses;
    if responses {
        let created = json!({"type": "response.created", "sequence_number": 0,
            "response": responses_object(model, "in_progress", "", None)});
        named_frame(&mut out, Some("response.created"), &created.to_string());
        let item = json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
            "item": {"type": "message", "id": "msg_mock", "status": "in_progress", "role": "assistant", "content": []}});
        named_frame(
            &mut out,
            Some("response.output_item.added"),
            &item.to_string(),
        );
        let part = json!({"type": "response.content_part.added", "sequence_number": 2, "item_id": "msg_mock",
            "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}});
        named_frame(
            &mut out,
            Some("response.content_part.added"),
            &part.to_string(),
        );
    }
    let mut text = String::new();
    for i in 0..plan.chunks {
        if !batch {
            if i > 0 && !plan.delay.is_zero() {
                tokio::time::sleep(plan.delay).await;
            }
            if plan.gated {
                match shared.gate.acquire().await {
                    Ok(permit) => permit.forget(),
                    Err(_) => return StreamEnd::WriteFailed,
                }
            }
        }
        let content = match (&plan.first_content, i) {
            (Some(c), 0) => c.clone(),
            _ => format!("chunk-{i} "),
        };
        if responses {
            // `content` is JSON-escaped already.
            let event = format!(
                r#"{{"type":"response.output_text.delta","sequence_number":{},"item_id":"msg_mock","output_index":0,"content_index":0,"delta":"{content}","logprobs":[]}}"#,
                i + 3
            );
            named_frame(&mut out, Some("response.output_text.delta"), &event);
            text.push_str(
                &serde_json::from_str::<String>(&format!("\"{content}\"")).unwrap_or_default(),
            );
        } else {
            let event = format!(
                r#"{{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":0,"model":{model_json},"choices":[{{"index":0,"delta":{{"content":"{content}"}},"finish_reason":null}}],"usage":null}}"#
            );
            chunk_frame(&mut out, &event);
        }
        if !batch {
            if wr.write_all(&out).await.is_err() {
                return StreamEnd::WriteFailed;
            }
            out.clear();
        }
        shared.chunks_sent.fetch_add(1, Ordering::SeqCst);
    }
    match &plan.ending {
        Ending::Error { data, named } => {
            let mut event = Vec::new();
            if *named {
                event.extend_from_slice(b"event: error\n");
            }
            event.extend_from_slice(format!("data: {data}\n\n").as_bytes());
            event.extend_from_slice(b"data: {\"choices\":[{\"delta\":{\"content\":\"after the error\"}}]}\n\ndata: [DONE]\n\n");
            out.extend_from_slice(format!("{:x}\r\n", event.len()).as_bytes());
            out.extend_from_slice(&event);
            out.extend_from_slice(b"\r\n0\r\n\r\n");
            if wr.write_all(&out).await.is_err() {
                return StreamEnd::WriteFailed;
            }
            return StreamEnd::Finished;
        }
        Ending::Break => {
            // Half a chunk, then the connection goes away without the terminating chunk.
            out.extend_from_slice(b"40\r\ndata: {\"trunc");
            let _ = wr.write_all(&out).await;
            let _ = wr.shutdown().await;
            return StreamEnd::Closed;
        }
        Ending::Hang => {
            if wr.write_all(&out).await.is_err() {
                return StreamEnd::WriteFailed;
            }
            return StreamEnd::Hang;
        }
        Ending::Done | Ending::NoDone => {}
    }
    if responses {
        if matches!(plan.ending, Ending::Done) {
            let chunks = u64::try_from(plan.chunks).unwrap_or(u64::MAX);
            let seq = plan.chunks + 3;
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            let done = [
                (
                    "response.output_text.done",
                    json!({"type": "response.output_text.done", "sequence_number": seq,
                    "item_id": "msg_mock", "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
                ),
                (
                    "response.content_part.done",
                    json!({"type": "response.content_part.done", "sequence_number": seq + 1,
                    "item_id": "msg_mock", "output_index": 0, "content_index": 0, "part": part}),
                ),
                (
                    "response.output_item.done",
                    json!({"type": "response.output_item.done", "sequence_number": seq + 2,
                    "output_index": 0, "item": {"type": "message", "id": "msg_mock", "status": "completed",
                    "role": "assistant", "content": [part]}}),
                ),
            ];
            for (name, event) in done {
                named_frame(&mut out, Some(name), &event.to_string());
            }
            let completed = json!({"type": "response.completed",
                "sequence_number": seq + 3,
                "response": responses_object(model, "completed", &text, Some((5, chunks)))});
            named_frame(&mut out, Some("response.completed"), &completed.to_string());
        }
        out.extend_from_slice(b"0\r\n\r\n");
        if wr.write_all(&out).await.is_err() {
            return StreamEnd::WriteFailed;
        }
        return StreamEnd::Finished;
    }
    let usage = format!(
        r#"{{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":0,"model":{model_json},"choices":[],"usage":{{"prompt_tokens":5,"completion_tokens":{},"total_tokens":{}}}}}"#,
        plan.chunks,
        plan.chunks + 5
    );
    chunk_frame(&mut out, &usage);
    if matches!(plan.ending, Ending::Done) {
        chunk_frame(&mut out, "[DONE]");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    if wr.write_all(&out).await.is_err() {
        return StreamEnd::WriteFailed;
    }
    StreamEnd::Finished
}
