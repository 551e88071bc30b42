//! [`RunStream`]: an upstream event stream passed through to the client as it arrives, with
//! the contract's stream rules built in.
//!
//! The upstream body is parsed incrementally, line by line; only the current, incomplete
//! line and event are held back. Each upstream `data:` event goes out as `data: ...\n\n` in
//! the same poll that received its last byte (comments, `event:`, `id:` and `retry:` lines are
//! dropped). Content events are the model's output and pass unchanged, except that the key,
//! should it appear verbatim (any letter case), is replaced by `[redacted]`.
//!
//! The stream ends exactly one way:
//!
//! - the upstream sends `data: [DONE]` → `data: [DONE]\n\n`, end (status `ok`);
//! - the upstream body breaks, ends without `[DONE]` or is silent longer than the time-out
//!   (counted while gc waits on it: not while gc handles its last bytes or the client has
//!   not asked for more yet) →
//!   one `data: {"error": {"code", "message", "type"}}\n\n` frame, `data: [DONE]\n\n`, end
//!   (status `error`);
//! - the upstream sends an error event (an `event: error`, or a `data:` event whose JSON has a
//!   non-null `error`) → its text is **not** forwarded: gc sends its own frame
//!   `data: {"error": {"code": "upstream_error", "type": "upstream_error", "message",
//!   "upstream_status"?, "upstream_code"?, "upstream_type"?}}\n\n` rebuilt from the event's
//!   status, code and type (short identifiers only) and its sanitised message
//!   ([`crate::sanitize_upstream`]), then `data: [DONE]\n\n`, and ends, dropping the upstream
//!   body (status `error`);
//! - the stream is dropped first (the client went away) → the upstream body is dropped, which
//!   closes that upstream connection and so cancels the request (status `cancelled`).
//!
//! # Responses API streams
//!
//! A stream of OpenAI's Responses API ([`RunKind::Responses`]) is passed through the same
//! way, with three differences: each event keeps its `event:` name (a short identifier, as
//! OpenAI's clients may dispatch on it); it ends after its terminal event
//! (`response.completed` or `response.incomplete`, which carries the usage and the model),
//! without a `[DONE]` of gc's (OpenAI's Responses streams have none; an upstream `[DONE]`
//! ends it too and is passed on); and `response.failed` is an upstream error event like
//! `error`: gc's own frame, then `data: [DONE]`. A body that breaks, goes idle or ends
//! before a terminal event gets gc's error frame and `data: [DONE]`, as a chat stream does.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::Stream;
use gc_domain::policy::runs::RunKind;
use gc_domain::ErrorCode;
use hyper::body::{Body, Incoming};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Sleep;

use crate::error::{describe_chain, ErrorDetails};
use crate::gateway::{MAX_MESSAGE_CHARS, MAX_MODEL_CHARS};
use crate::report::{RunReport, RunStatus, Usage};
use crate::secret::{contains_key, redact_verbatim, sanitize_upstream, Secret};

/// Largest single line or event accepted from an upstream stream.
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// How long the end of an upstream body is awaited after its `[DONE]`.
const DRAIN_GRACE: Duration = Duration::from_millis(250);

const DONE_FRAME: &[u8] = b"data: [DONE]\n\n";

/// The initial capacity of a stream's outgoing frames buffer: a frame or two (chunks are a
/// few hundred bytes; a burst grows it). Each frame is split off and dropped once the web
/// layer has copied it, so the buffer is reused in place. 4 KiB held about 1.8 KiB more RSS
/// per open stream (its one page, written through as frames advance): 1.7 MiB at 1,000
/// streams (`examples/stream_memory_probe.rs`, issue 33).
const OUT_CAPACITY: usize = 512;

type OnFinish = Box<dyn FnOnce(RunReport) + Send + 'static>;

/// A streamed chat answer: ready-to-send SSE frames (`Bytes`), never an error item, so a web
/// layer can hand it straight to a streaming response body.
///
/// Register [`RunStream::on_finish`] to learn how the run ended (see the crate docs).
pub struct RunStream {
    body: Option<Incoming>,
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    /// The idle deadline must start again at the next wait: the upstream sent something, or
    /// a frame went out (the consumer may come back for the next one much later).
    rearm: bool,
    parser: EventParser,
    run: RunState,
    out: BytesMut,
    phase: Phase,
    on_finish: Option<OnFinish>,
    /// The report, once the stream has ended and no callback was there to take it yet.
    report: Option<RunReport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Passing upstream events through.
    Streaming,
    /// The last frame was produced; the next poll ends the stream.
    Ended,
    /// `None` was returned.
    Closed,
}

/// What the run has seen so far, for its report.
struct RunState {
    started: Instant,
    ttft_ms: Option<u64>,
    usage: Option<Usage>,
    model: String,
    model_from_upstream: bool,
    /// The upstream's error event, rebuilt; nothing is passed on after it.
    upstream_error: Option<ErrorDetails>,
    done: bool,
    /// The key, to keep it out of everything passed on (never printed: `Secret`'s `Debug`).
    secret: Secret,
    /// The client did not ask for `stream_options.include_usage`: gc asked for it on its own
    /// behalf, so the usage-only chunk (`"choices": []`) is read and not passed on.
    strip_usage_chunk: bool,
    /// Tokens of the output passed on to the client, counted only when asked
    /// ([`RunStream::count_relayed`]: a run under a token limit, whose reservation settles to
    /// them when the stream ends without a usage).
    relayed: Option<Relayed>,
    /// A chat completions stream or a Responses API stream (see the module docs).
    kind: RunKind,
    /// The upstream ended the stream with `[DONE]` (always so for chat), which is passed on.
    done_marker: bool,
}

/// The output passed on so far, in tokens of the model's encoding. While that encoding is
/// still loading (on a thread of its own: never on the task polling the stream, which serves
/// other connections too), the text waits here and is counted once the encoding is there, or
/// when the stream ends.
#[derive(Debug, Default)]
struct Relayed {
    tokens: u64,
    /// Pieces not counted yet, each counted on its own as if it had been counted at once.
    waiting: Vec<String>,
    waiting_bytes: usize,
}

/// Text waiting for its encoding beyond this is counted at once, waiting for the load where
/// the stream runs (a burst this large before the encoding has loaded is rare).
const MAX_WAITING_BYTES: usize = 256 * 1024;

impl Relayed {
    fn add(&mut self, model: &str, text: &str) {
        if self.waiting.is_empty() {
            if let Some(n) = crate::tokens::count_loaded(model, text) {
                self.tokens = self.tokens.saturating_add(n);
                return;
            }
        } else if crate::tokens::count_loaded(model, "").is_some() {
            self.settle(model);
            self.add(model, text);
            return;
        }
        self.waiting.push(text.to_owned());
        self.waiting_bytes = self.waiting_bytes.saturating_add(text.len());
        if self.waiting_bytes > MAX_WAITING_BYTES {
            self.settle(model);
        }
    }

    /// Counts the waiting pieces (loading the encoding here if it is still not loaded) and
    /// says the total.
    fn settle(&mut self, model: &str) -> u64 {
        for text in std::mem::take(&mut self.waiting) {
            self.tokens = self
                .tokens
                .saturating_add(crate::tokens::count(model, &text));
        }
        self.waiting_bytes = 0;
        self.tokens
    }
}

/// How feeding a piece of the upstream body left the run.
enum Fed {
    /// Still streaming.
    More,
    /// The upstream sent `[DONE]`.
    Done,
    /// The upstream sent an error event.
    UpstreamError(ErrorDetails),
}

impl fmt::Debug for RunStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunStream")
            .field("model", &self.run.model)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

impl RunStream {
    pub(crate) fn new(
        body: Incoming,
        started: Instant,
        idle_timeout: Duration,
        model: String,
        secret: Secret,
        client_wants_usage: bool,
        kind: RunKind,
    ) -> Self {
        Self {
            body: Some(body),
            idle: Box::pin(tokio::time::sleep(idle_timeout)),
            idle_timeout,
            // The first wait starts at the first poll, whatever came before it.
            rearm: true,
            parser: EventParser::default(),
            run: RunState {
                started,
                ttft_ms: None,
                usage: None,
                model,
                model_from_upstream: false,
                upstream_error: None,
                done: false,
                secret,
                strip_usage_chunk: !client_wants_usage && kind == RunKind::Chat,
                relayed: None,
                kind,
                done_marker: false,
            },
            out: BytesMut::with_capacity(OUT_CAPACITY),
            phase: Phase::Streaming,
            on_finish: None,
            report: None,
        }
    }

    /// Registers the callback that receives this run's [`RunReport`], exactly once: when the
    /// stream produces its last frame (`ok` / `error`), or when it is dropped before that
    /// (`cancelled`). It runs inline on the polling or dropping task: keep it cheap and
    /// non-blocking. Registering again replaces the previous callback; registering after the
    /// stream ended calls it at once.
    pub fn on_finish(&mut self, callback: impl FnOnce(RunReport) + Send + 'static) {
        match self.report.take() {
            Some(report) => callback(report),
            None => self.on_finish = Some(Box::new(callback)),
        }
    }

    /// Counts the tokens of the output passed on to the client from now on (content,
    /// refusals, reasoning and tool-call text of each chunk, in the model's encoding), for the
    /// report's `relayed_tokens`. Costs a parse of every chunk: only for runs under a token
    /// limit.
    pub fn count_relayed(&mut self) {
        if self.run.relayed.is_none() {
            // Its encoding loads off this task while the first chunks are awaited.
            crate::tokens::preload(&self.run.model);
            self.run.relayed = Some(Relayed::default());
        }
    }

    /// Builder form of [`RunStream::on_finish`].
    pub fn with_on_finish(mut self, callback: impl FnOnce(RunReport) + Send + 'static) -> Self {
        self.on_finish(callback);
        self
    }

    /// The model that was requested (the upstream's own name for it once seen in the stream).
    pub fn model(&self) -> &str {
        &self.run.model
    }

    /// Delivers the report once.
    fn finish(&mut self, status: RunStatus, error: Option<(&str, String)>) {
        let model = &self.run.model;
        let relayed_tokens = self.run.relayed.as_mut().map(|r| r.settle(model));
        let report = RunReport {
            status,
            usage: self.run.usage,
            ttft_ms: self.run.ttft_ms,
            latency_ms: u64::try_from(self.run.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            model: self.run.model.clone(),
            error_code: error.as_ref().map(|(c, _)| (*c).to_owned()),
            error_message: error.map(|(_, m)| m),
            relayed_tokens,
        };
        match self.on_finish.take() {
            Some(callback) => callback(report),
            None => self.report = Some(report),
        }
    }

    /// Ends the stream with an in-band error frame then `[DONE]`; drops the upstream body.
    fn fail(&mut self, code: ErrorCode, message: String) -> Bytes {
        let message = sanitize_upstream(&message, Some(&self.run.secret), MAX_MESSAGE_CHARS);
        self.fail_with(code, message, serde_json::Map::new())
    }

    /// Ends the stream with gc's own frame for an upstream error event.
    fn fail_upstream(&mut self, details: ErrorDetails) -> Bytes {
        let mut extra = serde_json::Map::new();
        if let Some(status) = details.status {
            extra.insert("upstream_status".into(), status.into());
        }
        if let Some(code) = details.code {
            extra.insert("upstream_code".into(), code.into());
        }
        if let Some(kind) = details.kind {
            extra.insert("upstream_type".into(), kind.into());
        }
        let message = match details.message {
            Some(m) => format!("the upstream reported an error: {m}"),
            None => "the upstream reported an error".to_owned(),
        };
        self.fail_with(ErrorCode::UpstreamError, message, extra)
    }

    /// Writes the error frame (`message` already sanitised) and `[DONE]`; ends.
    fn fail_with(
        &mut self,
        code: ErrorCode,
        message: String,
        extra: serde_json::Map<String, Value>,
    ) -> Bytes {
        self.body = None;
        let mut error = serde_json::Map::new();
        error.insert("code".into(), code.as_str().into());
        error.insert("message".into(), message.clone().into());
        error.insert("type".into(), code.as_str().into());
        error.extend(extra);
        let frame = serde_json::json!({ "error": error });
        self.out.put_slice(b"data: ");
        // Serialising a `Value` into a buffer cannot fail.
        let _ = serde_json::to_writer((&mut self.out).writer(), &frame);
        self.out.put_slice(b"\n\n");
        self.out.put_slice(DONE_FRAME);
        self.phase = Phase::Ended;
        tracing::debug!(code = code.as_str(), %message, "upstream stream failed");
        self.finish(RunStatus::Error, Some((code.as_str(), message)));
        self.out.split().freeze()
    }

    /// Produces the `[DONE]` frame (after any events already in `out`; not after a Responses
    /// stream's terminal event) and ends.
    fn complete(&mut self) -> Bytes {
        if self.run.done_marker || self.run.kind != RunKind::Responses {
            self.out.put_slice(DONE_FRAME);
        }
        self.phase = Phase::Ended;
        let grace = tokio::time::Instant::now() + DRAIN_GRACE.min(self.idle_timeout);
        self.idle.as_mut().reset(grace);
        self.finish(RunStatus::Ok, None);
        self.out.split().freeze()
    }

    /// Passes the complete events of `data` into `out`.
    fn feed(&mut self, data: &[u8]) -> Result<Fed, String> {
        let Self {
            parser, run, out, ..
        } = self;
        parser.feed(data, |kind, event| run.on_event(kind, event, out))?;
        Ok(run.fed())
    }
}

impl RunState {
    /// Where the run stands after the events fed so far.
    fn fed(&mut self) -> Fed {
        if let Some(details) = self.upstream_error.take() {
            // Later events are ignored: `done` stops `on_event`.
            self.done = true;
            Fed::UpstreamError(details)
        } else if self.done {
            Fed::Done
        } else {
            Fed::More
        }
    }

    /// One complete upstream event: `kind` is its `event:` type (empty when none).
    fn on_event(&mut self, kind: &[u8], data: &[u8], out: &mut BytesMut) {
        if self.done || self.upstream_error.is_some() {
            return;
        }
        if kind.eq_ignore_ascii_case(b"error") {
            self.keep_upstream_error(data);
            return;
        }
        if data == b"[DONE]" {
            self.done = true;
            self.done_marker = true;
            return;
        }
        let responses = self.kind == RunKind::Responses;
        let inspected = if responses {
            self.inspect_responses(data)
        } else {
            self.inspect(data)
        };
        match inspected {
            Inspected::Pass | Inspected::Terminal => {}
            Inspected::UpstreamError => return,
            Inspected::UsageOnly if self.strip_usage_chunk => return,
            Inspected::UsageOnly => {}
        }
        if self.ttft_ms.is_none() {
            self.ttft_ms =
                Some(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX));
        }
        if let Some(relayed) = self.relayed.as_mut() {
            let model = &self.model;
            let add = |text: &str| relayed.add(model, text);
            if responses {
                responses_output_text(data, add);
            } else {
                output_text(data, add);
            }
        }
        // A Responses event keeps its name when it is a short identifier.
        if responses
            && !kind.is_empty()
            && kind
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            out.put_slice(b"event: ");
            out.put_slice(kind);
            out.put_u8(b'\n');
        }
        let redacted;
        let data = if contains_key(data, self.secret.expose()) {
            redacted = redact_verbatim(data, self.secret.expose());
            &redacted[..]
        } else {
            data
        };
        // Each line of the data as its own `data:` line (a final newline gives an empty last
        // line, as splitting on every newline does).
        let mut rest = data;
        loop {
            let (line, next) = match memchr::memchr(b'\n', rest) {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            };
            out.put_slice(b"data: ");
            out.put_slice(line);
            out.put_u8(b'\n');
            match next {
                Some(next) => rest = next,
                None => break,
            }
        }
        out.put_u8(b'\n');
        if inspected == Inspected::Terminal {
            self.done = true;
        }
    }

    /// [`RunState::inspect`] for a Responses API event, parsing JSON only when the event can
    /// carry a model, a usage or an error (it names a `response` object or an `error`): an
    /// `error` event or `response.failed` is an upstream error (kept, not passed on);
    /// `response.completed` and `response.incomplete` are terminal and carry the usage.
    fn inspect_responses(&mut self, data: &[u8]) -> Inspected {
        if find(data, b"\"response\"").is_none() && find(data, b"\"error\"").is_none() {
            return Inspected::Pass;
        }
        #[derive(Deserialize)]
        struct EventPeek {
            #[serde(rename = "type", default)]
            kind: Option<String>,
            #[serde(default)]
            response: Option<Peek>,
        }
        let Ok(peek) = serde_json::from_slice::<EventPeek>(data) else {
            return Inspected::Pass;
        };
        let kind = peek.kind.unwrap_or_default();
        if kind == "error" {
            self.keep_upstream_error(data);
            return Inspected::UpstreamError;
        }
        let Some(response) = peek.response else {
            return Inspected::Pass;
        };
        if kind == "response.failed" {
            let error = serde_json::json!({ "error": response.error });
            self.keep_upstream_error(error.to_string().as_bytes());
            return Inspected::UpstreamError;
        }
        self.take_model(response.model);
        if let Some(usage) = response
            .usage
            .and_then(|u| Usage::of(RunKind::Responses, u))
        {
            self.usage = Some(usage);
        }
        if matches!(kind.as_str(), "response.completed" | "response.incomplete") {
            Inspected::Terminal
        } else {
            Inspected::Pass
        }
    }

    /// Keeps an upstream error event's details (sanitised, the key redacted); the event is not
    /// passed on.
    fn keep_upstream_error(&mut self, event: &[u8]) {
        self.upstream_error = Some(ErrorDetails::parse(
            event,
            Some(&self.secret),
            MAX_MESSAGE_CHARS,
        ));
    }

    /// Keeps the first non-empty model the upstream names (sanitised) in place of the
    /// requested one.
    fn take_model(&mut self, model: Option<String>) {
        if self.model_from_upstream {
            return;
        }
        if let Some(model) = model.filter(|m| !m.is_empty()) {
            let model = sanitize_upstream(&model, Some(&self.secret), MAX_MODEL_CHARS);
            if !model.is_empty() {
                self.model = model;
                self.model_from_upstream = true;
            }
        }
    }

    /// Reads the model, usage and errors out of a chunk, parsing JSON only when the chunk can
    /// carry something new (the first chunk with a model, a non-null usage, an error). Says
    /// whether the chunk is an upstream error event (kept in `upstream_error`, not passed on)
    /// or a usage-only chunk (`"choices": []` with a usage).
    fn inspect(&mut self, data: &[u8]) -> Inspected {
        let wants_model = !self.model_from_upstream && find(data, b"\"model\"").is_some();
        let has_usage = non_null_field(data, b"\"usage\"");
        let has_error = non_null_field(data, b"\"error\"");
        if !(wants_model || has_usage || has_error) {
            return Inspected::Pass;
        }
        let Ok(peek) = serde_json::from_slice::<Peek>(data) else {
            return Inspected::Pass;
        };
        if peek.error.as_ref().is_some_and(|e| !e.is_null()) {
            self.keep_upstream_error(data);
            return Inspected::UpstreamError;
        }
        self.take_model(peek.model);
        if let Some(usage) = peek
            .usage
            .and_then(|u| serde_json::from_value::<Usage>(u).ok())
        {
            self.usage = Some(usage);
            if peek.choices.is_none_or(|c| c.is_empty()) {
                return Inspected::UsageOnly;
            }
        }
        Inspected::Pass
    }
}

/// The output text in one chunk, piece by piece to `add`: each choice's delta `content`,
/// `refusal`, `reasoning_content` / `reasoning` and tool calls' function name and arguments
/// (the text a provider bills as completion). A chunk that is not such JSON has none.
fn output_text(data: &[u8], mut add: impl FnMut(&str)) {
    #[derive(Deserialize)]
    struct Chunk {
        #[serde(default)]
        choices: Vec<Choice>,
    }
    #[derive(Deserialize)]
    struct Choice {
        #[serde(default)]
        delta: Option<Delta>,
    }
    #[derive(Deserialize)]
    struct Delta {
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        refusal: Option<String>,
        #[serde(default)]
        reasoning_content: Option<String>,
        #[serde(default)]
        reasoning: Option<String>,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    }
    #[derive(Deserialize)]
    struct ToolCall {
        #[serde(default)]
        function: Option<Function>,
    }
    #[derive(Deserialize)]
    struct Function {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        arguments: Option<String>,
    }
    let Ok(chunk) = serde_json::from_slice::<Chunk>(data) else {
        return;
    };
    for delta in chunk.choices.into_iter().filter_map(|c| c.delta) {
        let calls = delta
            .tool_calls
            .into_iter()
            .filter_map(|t| t.function)
            .flat_map(|f| [f.name, f.arguments]);
        for text in [
            delta.content,
            delta.refusal,
            delta.reasoning_content,
            delta.reasoning,
        ]
        .into_iter()
        .chain(calls)
        .flatten()
        {
            add(&text);
        }
    }
}

/// The output text in one Responses API event, to `add`: the `delta` of a text, refusal,
/// reasoning or function-call arguments delta event (`response.*.delta`, audio excepted).
/// Any other event has none.
fn responses_output_text(data: &[u8], mut add: impl FnMut(&str)) {
    if find(data, b"\"delta\"").is_none() {
        return;
    }
    #[derive(Deserialize)]
    struct Delta {
        #[serde(rename = "type", default)]
        kind: String,
        #[serde(default)]
        delta: Option<Value>,
    }
    let Ok(event) = serde_json::from_slice::<Delta>(data) else {
        return;
    };
    match event.delta {
        Some(Value::String(text))
            if event.kind.ends_with(".delta") && !event.kind.contains("audio") =>
        {
            add(&text);
        }
        _ => {}
    }
}

/// What [`RunState::inspect`] reads of a chat chunk, and of a Responses event's `response`
/// object (which has no `choices`): everything else in them is passed on unread.
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    choices: Option<Vec<serde::de::IgnoredAny>>,
}

/// What [`RunState::inspect`] made of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inspected {
    /// Content to pass on.
    Pass,
    /// An upstream error event.
    UpstreamError,
    /// The usage-only chunk at the end of a stream.
    UsageOnly,
    /// A Responses stream's terminal event: passed on, then the stream ends.
    Terminal,
}

/// The first occurrence of `needle` in `haystack` (memchr's vector search: this runs up to
/// three times on every streamed chunk, where comparing every window cost about 2 k
/// instructions per 200-byte chunk and search).
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// True when `"field"` appears followed by `:` and a value other than `null`.
fn non_null_field(data: &[u8], field: &[u8]) -> bool {
    let Some(pos) = find(data, field) else {
        return false;
    };
    let mut rest = data[pos + field.len()..]
        .iter()
        .copied()
        .skip_while(|b| b.is_ascii_whitespace());
    if rest.next() != Some(b':') {
        return false;
    }
    !matches!(rest.find(|b| !b.is_ascii_whitespace()), Some(b'n') | None)
}

impl Stream for RunStream {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match this.phase {
                Phase::Streaming => {}
                Phase::Ended => {
                    if this.poll_drain(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.phase = Phase::Closed;
                    return Poll::Ready(None);
                }
                Phase::Closed => return Poll::Ready(None),
            }
            let Some(body) = this.body.as_mut() else {
                // Unreachable in practice: the body is only removed when the stream ends.
                return Poll::Ready(Some(Ok(
                    this.fail(ErrorCode::UpstreamError, "upstream stream closed".into())
                )));
            };
            match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    this.rearm = true;
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers
                    };
                    match this.feed(&data) {
                        Ok(Fed::Done) => return Poll::Ready(Some(Ok(this.complete()))),
                        Ok(Fed::UpstreamError(details)) => {
                            return Poll::Ready(Some(Ok(this.fail_upstream(details))))
                        }
                        Ok(Fed::More) if !this.out.is_empty() => {
                            return Poll::Ready(Some(Ok(this.out.split().freeze())))
                        }
                        Ok(Fed::More) => continue,
                        Err(message) => {
                            return Poll::Ready(Some(Ok(
                                this.fail(ErrorCode::UpstreamError, message)
                            )))
                        }
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let message = format!("upstream stream broke: {}", describe_chain(&e));
                    return Poll::Ready(Some(Ok(this.fail(ErrorCode::UpstreamError, message))));
                }
                Poll::Ready(None) => {
                    // Be lenient with a last event that lacks its blank line.
                    let Self {
                        parser, run, out, ..
                    } = &mut *this;
                    parser.finish(|kind, event| run.on_event(kind, event, out));
                    match this.run.fed() {
                        Fed::Done => {
                            this.body = None;
                            return Poll::Ready(Some(Ok(this.complete())));
                        }
                        Fed::UpstreamError(details) => {
                            return Poll::Ready(Some(Ok(this.fail_upstream(details))));
                        }
                        Fed::More => {}
                    }
                    let message = match this.run.kind {
                        RunKind::Responses => "upstream stream ended before its terminal event",
                        _ => "upstream stream ended without [DONE]",
                    }
                    .to_owned();
                    return Poll::Ready(Some(Ok(this.fail(ErrorCode::UpstreamError, message))));
                }
                Poll::Pending => {
                    // The upstream's silence is the time gc waits on it from here: not time
                    // spent handling its last bytes, nor time the consumer took to come back
                    // for more (a slow client, or a worker busy elsewhere), during which the
                    // upstream's next bytes may wait unread in the connection.
                    if std::mem::take(&mut this.rearm) {
                        let deadline = tokio::time::Instant::now() + this.idle_timeout;
                        this.idle.as_mut().reset(deadline);
                    }
                    if this.idle.as_mut().poll(cx).is_ready() {
                        let message = format!(
                            "upstream stream idle for more than {} ms",
                            this.idle_timeout.as_millis()
                        );
                        return Poll::Ready(Some(Ok(
                            this.fail(ErrorCode::UpstreamTimeout, message)
                        )));
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl RunStream {
    /// After `[DONE]`: waits (at most [`DRAIN_GRACE`]) for the upstream body to end, so its
    /// connection goes back to the pool; an upstream that keeps the body open is dropped
    /// (closing that connection). The client already has `[DONE]` at this point.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(());
        };
        loop {
            match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(_) => break,
                Poll::Pending => {
                    if self.idle.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    break;
                }
            }
        }
        self.body = None;
        Poll::Ready(())
    }
}

impl Drop for RunStream {
    fn drop(&mut self) {
        if self.phase == Phase::Streaming {
            // Dropping `body` (with `self`) closes the upstream connection.
            self.finish(RunStatus::Cancelled, None);
        }
    }
}

/// An incremental `text/event-stream` parser: complete events' type (`event:`, empty when
/// none) and `data` are handed out, the current line and event are kept. An event is
/// dispatched when it has data, or when its type is `error` (even without data).
#[derive(Default)]
struct EventParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    kind: Vec<u8>,
}

impl EventParser {
    fn feed(
        &mut self,
        mut chunk: &[u8],
        mut on_event: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), String> {
        while let Some(pos) = memchr::memchr(b'\n', chunk) {
            let (head, tail) = chunk.split_at(pos);
            chunk = &tail[1..];
            if self.line.is_empty() {
                self.line_done(head, &mut on_event)?;
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                self.line_done(&line, &mut on_event)?;
                line.clear();
                self.line = line;
            }
        }
        self.line.extend_from_slice(chunk);
        if self.line.len() > MAX_EVENT_BYTES {
            return Err(format!(
                "upstream sent an event larger than {MAX_EVENT_BYTES} bytes"
            ));
        }
        Ok(())
    }

    /// At the end of the body: treats an unterminated last line and event as complete.
    fn finish(&mut self, mut on_event: impl FnMut(&[u8], &[u8])) {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            let _ = self.line_done(&line, &mut on_event);
        }
        let _ = self.line_done(b"", &mut on_event);
    }

    fn line_done(
        &mut self,
        line: &[u8],
        on_event: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<(), String> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.has_data || self.kind.eq_ignore_ascii_case(b"error") {
                on_event(&self.kind, &self.data);
                self.data.clear();
                self.has_data = false;
            }
            self.kind.clear();
            return Ok(());
        }
        if let Some(value) = line.strip_prefix(b"event:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            self.kind.clear();
            self.kind.extend_from_slice(&value[..value.len().min(64)]);
            return Ok(());
        }
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
            if self.data.len() > MAX_EVENT_BYTES {
                return Err(format!(
                    "upstream sent an event larger than {MAX_EVENT_BYTES} bytes"
                ));
            }
        }
        // Comments (`:`), `id:` and `retry:` are not passed on.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        typed_events(chunks).into_iter().map(|(_, d)| d).collect()
    }

    fn typed_events(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut p = EventParser::default();
        let mut got = Vec::new();
        for c in chunks {
            p.feed(c, |k, e| {
                got.push((
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(e).into_owned(),
                ))
            })
            .unwrap();
        }
        got
    }

    #[test]
    fn event_types_are_kept_per_event() {
        assert_eq!(
            typed_events(&[
                b"event: error\ndata: {}\n\ndata: x\n\nevent: ping\n\nevent: error\n\n"
            ]),
            vec![
                ("error".to_owned(), "{}".to_owned()),
                (String::new(), "x".to_owned()),
                ("error".to_owned(), String::new()),
            ]
        );
    }

    fn run_state(secret: &str) -> RunState {
        RunState {
            started: Instant::now(),
            ttft_ms: None,
            usage: None,
            model: "requested".into(),
            model_from_upstream: false,
            upstream_error: None,
            done: false,
            secret: Secret::new(secret),
            strip_usage_chunk: false,
            relayed: None,
            kind: RunKind::Chat,
            done_marker: false,
        }
    }

    #[test]
    fn each_line_of_an_event_s_data_goes_out_as_a_data_line() {
        let passed = |data: &[u8]| {
            let mut out = BytesMut::new();
            run_state("sk-k").on_event(b"", data, &mut out);
            String::from_utf8(out.to_vec()).unwrap()
        };
        assert_eq!(passed(b"{\"a\":1}"), "data: {\"a\":1}\n\n");
        assert_eq!(passed(b"l1\nl2"), "data: l1\ndata: l2\n\n");
        // Empty lines are kept, first, inside and last, as splitting on every newline does.
        assert_eq!(
            passed(b"\nl1\n\nl2\n"),
            "data: \ndata: l1\ndata: \ndata: l2\ndata: \n\n"
        );
        // The searches find what they look for wherever it is, and nothing else.
        assert_eq!(find(b"xx\"model\"", b"\"model\""), Some(2));
        assert_eq!(find(b"\"mode\"", b"\"model\""), None);
        assert!(non_null_field(b"{\"usage\" : {\"a\":1}}", b"\"usage\""));
        assert!(!non_null_field(b"{\"usage\": null}", b"\"usage\""));
    }

    #[test]
    fn relayed_output_is_counted_only_when_asked() {
        let chunk = |content: &str| {
            format!(
                r#"{{"choices":[{{"index":0,"delta":{{"content":"{content}"}}}}],"usage":null}}"#
            )
        };
        let mut out = BytesMut::new();
        let mut quiet = run_state("sk-k");
        quiet.on_event(b"", chunk("hello world").as_bytes(), &mut out);
        assert!(quiet.relayed.is_none());
        let mut counting = run_state("sk-k");
        counting.relayed = Some(Relayed::default());
        counting.model = "gpt-4o".into();
        counting.on_event(b"", chunk("hello world").as_bytes(), &mut out);
        counting.on_event(b"", chunk(" again").as_bytes(), &mut out);
        let tool = r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}"#;
        counting.on_event(b"", tool.as_bytes(), &mut out);
        // 2 + 1 + (1 + 1); a chunk that is not JSON counts nothing.
        counting.on_event(b"", b"not json", &mut out);
        let model = counting.model.clone();
        assert_eq!(counting.relayed.map(|mut r| r.settle(&model)), Some(5));
    }

    #[test]
    fn text_waiting_for_its_encoding_is_counted_at_the_end() {
        // As if the encoding had not loaded yet when these pieces were relayed: each piece is
        // counted on its own ("hel" and "lo" are two tokens, "hello" one).
        let mut relayed = Relayed {
            tokens: 3,
            waiting: vec!["hello world".into(), "hel".into(), "lo".into()],
            waiting_bytes: 16,
        };
        assert_eq!(relayed.settle("gpt-4"), 3 + 2 + 1 + 1);
        assert!(relayed.waiting.is_empty());
        assert_eq!(relayed.settle("gpt-4"), 7, "counted once");
        // A piece added while others wait is counted after them, on its own.
        let mut relayed = Relayed {
            tokens: 0,
            waiting: vec!["hel".into()],
            waiting_bytes: 3,
        };
        relayed.add("gpt-4", "lo");
        assert_eq!(relayed.settle("gpt-4"), 2);
    }

    #[test]
    fn upstream_error_events_are_caught_not_passed_on() {
        let key = "sk-test-0123456789abcdef";
        for (kind, data) in [
            (&b""[..], &br#"{"error":{"message":"boom sk-test-0123456789abcdef","type":"server_error","code":"overloaded","status":503}}"#[..]),
            (b"error", br#"{"message":"boom sk-test-0123456789abcdef","type":"server_error","code":"overloaded","status":503}"#),
        ] {
            let mut run = run_state(key);
            let mut out = BytesMut::new();
            run.on_event(b"", br#"{"choices":[{"delta":{"content":"a"}}]}"#, &mut out);
            run.on_event(kind, data, &mut out);
            run.on_event(b"", br#"{"choices":[{"delta":{"content":"after"}}]}"#, &mut out);
            let text = String::from_utf8(out.to_vec()).unwrap();
            assert_eq!(text.matches("data: ").count(), 1, "{text}");
            assert!(!text.contains("boom") && !text.contains("after"), "{text}");
            let Fed::UpstreamError(d) = run.fed() else {
                panic!("no upstream error");
            };
            assert_eq!(d.message.as_deref(), Some("boom [redacted]"));
            assert_eq!(d.code.as_deref(), Some("overloaded"));
            assert_eq!(d.kind.as_deref(), Some("server_error"));
            assert_eq!(d.status, Some(503));
            assert!(matches!(run.fed(), Fed::Done));
        }
        // `"error": null` is not an error.
        let mut run = run_state(key);
        let mut out = BytesMut::new();
        run.on_event(b"", br#"{"choices":[],"error":null}"#, &mut out);
        assert!(matches!(run.fed(), Fed::More));
        assert_eq!(out.len(), br#"data: {"choices":[],"error":null}"#.len() + 2);
    }

    #[test]
    fn the_key_in_content_is_redacted() {
        let key = "sk-test-0123456789abcdef";
        let mut run = run_state(key);
        let mut out = BytesMut::new();
        run.on_event(
            b"",
            br#"{"choices":[{"delta":{"content":"k=SK-TEST-0123456789ABCDEF and sk-test-0123456789abcdef"}}]}"#,
            &mut out,
        );
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert_eq!(
            text,
            "data: {\"choices\":[{\"delta\":{\"content\":\"k=[redacted] and [redacted]\"}}]}\n\n"
        );
        // The model name is sanitised too.
        run.on_event(
            b"",
            br#"{"model":"sk-test-0123456789abcdef","choices":[]}"#,
            &mut out,
        );
        assert_eq!(run.model, "[redacted]");
    }

    #[test]
    fn parses_events_across_chunk_boundaries() {
        assert_eq!(events(&[b"data: a\n\ndata: b\n\n"]), vec!["a", "b"]);
        assert_eq!(
            events(&[b"da", b"ta: a\n", b"\nda", b"ta:b\r\n\r\n"]),
            vec!["a", "b"]
        );
        assert_eq!(
            events(&[b": keep-alive\n\n", b"event: x\nid: 1\ndata: c\n\n"]),
            vec!["c"]
        );
        assert_eq!(events(&[b"data: l1\ndata: l2\n\n"]), vec!["l1\nl2"]);
        assert_eq!(events(&[b"data: partial\n"]), Vec::<String>::new());
    }

    #[test]
    fn finish_accepts_an_unterminated_last_event() {
        let mut p = EventParser::default();
        let mut got = Vec::new();
        p.feed(b"data: [DONE]", |_, e| got.push(e.to_vec()))
            .unwrap();
        assert!(got.is_empty());
        p.finish(|_, e| got.push(e.to_vec()));
        assert_eq!(got, vec![b"[DONE]".to_vec()]);
    }

    #[test]
    fn detects_non_null_fields() {
        assert!(!non_null_field(br#"{"usage":null}"#, b"\"usage\""));
        assert!(!non_null_field(br#"{"usage" : null}"#, b"\"usage\""));
        assert!(non_null_field(
            br#"{"usage": {"total_tokens":1}}"#,
            b"\"usage\""
        ));
        assert!(!non_null_field(br#"{"x":"usage"}"#, b"\"usage\""));
    }

    #[test]
    fn run_state_reads_model_and_usage() {
        let mut run = run_state("sk-unused-key-000");
        let mut out = BytesMut::new();
        run.on_event(
            b"",
            br#"{"model":"real","choices":[],"usage":null}"#,
            &mut out,
        );
        run.on_event(
            b"",
            br#"{"model":"real","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#,
            &mut out,
        );
        run.on_event(b"", b"[DONE]", &mut out);
        run.on_event(b"", b"after", &mut out);
        assert_eq!(run.model, "real");
        assert_eq!(
            run.usage,
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 4,
                total_tokens: 7
            })
        );
        assert!(run.done && run.ttft_ms.is_some());
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert_eq!(text.matches("data: ").count(), 2);
        assert!(!text.contains("after") && !text.contains("[DONE]"));
    }

    #[test]
    fn the_usage_chunk_is_read_but_kept_from_clients_that_did_not_ask() {
        let usage = br#"{"model":"real","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#;
        let content =
            br#"{"model":"real","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}"#;
        // A last content chunk that also carries usage is content: it goes out either way.
        let both = br#"{"model":"real","choices":[{"index":0,"delta":{}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;
        for (strip, expect) in [(true, 2), (false, 3)] {
            let mut run = run_state("sk-unused-key-000");
            run.strip_usage_chunk = strip;
            let mut out = BytesMut::new();
            run.on_event(b"", content, &mut out);
            run.on_event(b"", both, &mut out);
            run.on_event(b"", usage, &mut out);
            let text = String::from_utf8(out.to_vec()).unwrap();
            assert_eq!(text.matches("data: ").count(), expect, "{text}");
            assert_eq!(text.contains(r#""choices":[]"#), !strip, "{text}");
            assert_eq!(
                run.usage.map(|u| u.total_tokens),
                Some(7),
                "read either way"
            );
        }
    }
}
