//! Runs: a chat, Responses or embeddings request ([`RunKind`]) through the tenant's region
//! gateway.
//!
//! [`prepare_for`] (synchronous, on the blocking pool) applies every refusal and opens the keys:
//! the member rules and the `run` scope, then the body, then AI access, through
//! [`RunScope::authorize`], which loads the keys itself. [`Runs::execute`] (async) sends the
//! request through the [`ChatUpstream`] port, trying the next key only when the upstream
//! proves a key bad (401) — the only answer that marks a key `not_ready`. Every other upstream
//! refusal is the caller's and leaves the tenant's keys as they were. A connect failure or an
//! upstream 5xx (nothing has reached the client yet) is retried once, on the next ready key,
//! after the port's short jittered back-off; never once a response is on its way. The tenant's
//! and key's quotas are applied last in [`prepare_for`] ([`crate::policy::quota::admit`]), so a refused
//! run never reaches the upstream. Run records, usage lines and key verdicts leave through
//! the [`RunSink`] port (a bounded queue), off the request path; a run's record has its place
//! in that queue from before its admission ([`RunSlot`], decision 0033).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use serde_json::{Map, Value};

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::NewActivity;
use crate::policy::access::Principal;
use crate::policy::ai_access::{ai_key_binding, KeyVerdict, RunScope, TenantAiKey};
use crate::policy::quota::{NodeQuotas, QuotaWindow, RateLimitState, TokenReservation};
use crate::ports::{AiKeyRepo, KeySealer, QuotaRepo};
use crate::secret::SecretString;
use crate::values::Region;

/// Fields that would let a caller pick where the request goes: never accepted.
pub const PROVIDER_FIELDS: [&str; 5] = ["provider", "base_url", "api_key", "region", "gateway"];
const ROLES: [&str; 5] = ["system", "user", "assistant", "tool", "developer"];

/// Which OpenAI endpoint a run calls: chat completions (`/run`, `/chat/completions`), the
/// Responses API (`/responses`) or embeddings (`/embeddings`). Every kind goes through the
/// same preparation ([`prepare_for`]) and orchestration ([`Runs::execute`]) under the same
/// policy; only the body's checks, the token estimate and the upstream path differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunKind {
    #[default]
    Chat,
    Responses,
    Embeddings,
}

impl RunKind {
    /// The path appended to the region's base URL.
    pub fn upstream_path(self) -> &'static str {
        match self {
            Self::Chat => "/chat/completions",
            Self::Responses => "/responses",
            Self::Embeddings => "/embeddings",
        }
    }

    /// Checks a body of this kind (see [`validate_body`], [`validate_responses_body`],
    /// [`validate_embeddings_body`]).
    pub fn validate(self, body: &Value) -> DomainResult<&Map<String, Value>> {
        match self {
            Self::Chat => validate_body(body),
            Self::Responses => validate_responses_body(body),
            Self::Embeddings => validate_embeddings_body(body),
        }
    }

    /// What a checked body of this kind is expected to cost (decision 0025).
    pub fn estimate(
        self,
        body: &Map<String, Value>,
        default_completion: u64,
        count: &impl Fn(&str, &str) -> u64,
    ) -> crate::policy::quota::RunEstimate {
        match self {
            Self::Chat => estimate(body, default_completion, count),
            Self::Responses => estimate_responses(body, default_completion, count),
            Self::Embeddings => estimate_embeddings(body, count),
        }
    }
}

/// The checks every run body shares: a JSON object, no provider choice, a model name (or
/// `auto`) of at most 200 bytes, a boolean `stream`.
fn checked_object(body: &Value) -> DomainResult<&Map<String, Value>> {
    let map = object_without_provider(body)?;
    check_model_and_stream(map)?;
    Ok(map)
}

/// A JSON object that names no provider.
fn object_without_provider(body: &Value) -> DomainResult<&Map<String, Value>> {
    let Value::Object(map) = body else {
        return Err(DomainError::invalid("body", "must be a JSON object"));
    };
    if let Some(field) = PROVIDER_FIELDS.iter().find(|f| map.contains_key(**f)) {
        return Err(DomainError::ProviderNotAllowed((*field).to_owned()));
    }
    Ok(map)
}

/// A model name (or `auto`) of at most 200 bytes, a boolean `stream`; both optional.
fn check_model_and_stream(map: &Map<String, Value>) -> DomainResult<()> {
    optional_field(
        map,
        "model",
        |m| {
            m.as_str()
                .is_some_and(|s| !s.trim().is_empty() && s.len() <= 200)
        },
        "must be a model name or \"auto\"",
    )?;
    optional_field(map, "stream", Value::is_boolean, "must be a boolean")
}

/// Refuses `field` with `message` when it is there, not null, and not `fine`.
fn optional_field(
    map: &Map<String, Value>,
    field: &str,
    fine: impl Fn(&Value) -> bool,
    message: &str,
) -> DomainResult<()> {
    match map.get(field) {
        Some(v) if !v.is_null() && !fine(v) => Err(DomainError::invalid(field, message)),
        _ => Ok(()),
    }
}

/// A whole number of at least 1 (`5.0` counts: JSON Schema and OpenAI's clients say so).
fn positive_integer(v: &Value) -> bool {
    v.as_u64().is_some_and(|n| n >= 1)
        || v.as_f64()
            .is_some_and(|f| f.fract() == 0.0 && (1.0..=f64::from(u32::MAX)).contains(&f))
}

/// The most items an `input` array may hold (OpenAI's own limit for embeddings).
pub const MAX_INPUT_ITEMS: usize = 2048;

/// Checks a Responses API body (`POST /responses`): the shared checks, `input` a non-empty
/// string or a non-empty array (at most [`MAX_INPUT_ITEMS`]) of items, each an object (a
/// message `{role, content}` or a typed item) or a string, `instructions` a string,
/// `max_output_tokens` a positive integer. Unknown OpenAI parameters pass.
pub fn validate_responses_body(body: &Value) -> DomainResult<&Map<String, Value>> {
    let map = checked_object(body)?;
    match map.get("input") {
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_INPUT_ITEMS => {
            for (i, item) in items.iter().enumerate() {
                let Value::Object(item) = item else {
                    return Err(DomainError::invalid(
                        format!("input[{i}]"),
                        "must be an object (a message or an item)",
                    ));
                };
                if let Some(role) = item.get("role") {
                    if !role.as_str().is_some_and(|r| ROLES.contains(&r)) {
                        return Err(DomainError::invalid(
                            format!("input[{i}].role"),
                            "must be one of system, developer, user, assistant",
                        ));
                    }
                }
            }
        }
        _ => {
            return Err(DomainError::invalid(
                "input",
                format!("must be a non-empty string or an array of 1 to {MAX_INPUT_ITEMS} items"),
            ))
        }
    }
    optional_field(map, "instructions", Value::is_string, "must be a string")?;
    optional_field(
        map,
        "max_output_tokens",
        positive_integer,
        "must be a positive integer",
    )?;
    Ok(map)
}

/// Checks an embeddings body (`POST /embeddings`): the shared checks, a `model` named (not
/// `auto`, which names the region's chat model), `input` a non-empty string, or an array of
/// 1 to [`MAX_INPUT_ITEMS`] non-empty strings, token arrays (integers) or arrays of token
/// arrays; `encoding_format` `float` or `base64`; `dimensions` a positive integer; no
/// `stream: true` (embeddings do not stream). Unknown OpenAI parameters pass.
pub fn validate_embeddings_body(body: &Value) -> DomainResult<&Map<String, Value>> {
    let map = checked_object(body)?;
    if map
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(|m| m == "auto")
    {
        return Err(DomainError::invalid(
            "model",
            "embeddings need a model name (auto names the region's chat model)",
        ));
    }
    if map.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(DomainError::invalid("stream", "embeddings do not stream"));
    }
    // A whole float (`5.0`) is a token too: JSON Schema counts it as an integer, and so the
    // OpenAPI document cannot tell a client otherwise.
    let token = |v: &Value| {
        v.as_u64().is_some_and(|t| t <= u64::from(u32::MAX))
            || v.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f))
    };
    let fine = match map.get("input") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_INPUT_ITEMS => {
            items.iter().all(|v| match v {
                Value::String(s) => !s.is_empty(),
                Value::Number(_) => token(v),
                Value::Array(tokens) => !tokens.is_empty() && tokens.iter().all(token),
                _ => false,
            })
        }
        _ => false,
    };
    if !fine {
        return Err(DomainError::invalid(
            "input",
            format!(
                "must be a non-empty string or an array of 1 to {MAX_INPUT_ITEMS} non-empty strings or token arrays"
            ),
        ));
    }
    optional_field(
        map,
        "encoding_format",
        |f| matches!(f.as_str(), Some("float" | "base64")),
        "must be float or base64",
    )?;
    optional_field(
        map,
        "dimensions",
        positive_integer,
        "must be a positive integer",
    )?;
    Ok(map)
}

/// Checks a chat body: OpenAI's shape, no provider choice. Unknown OpenAI parameters pass.
pub fn validate_body(body: &Value) -> DomainResult<&Map<String, Value>> {
    let map = object_without_provider(body)?;
    let messages = map
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| DomainError::invalid("messages", "must be a non-empty array"))?;
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        if !ROLES.contains(&role) {
            return Err(DomainError::invalid(
                format!("messages[{i}].role"),
                "must be one of system, developer, user, assistant, tool",
            ));
        }
        match m.get("content") {
            Some(Value::String(_) | Value::Array(_)) => {}
            Some(Value::Null) | None if role == "assistant" => {}
            _ => {
                return Err(DomainError::invalid(
                    format!("messages[{i}].content"),
                    "must be a string or an array of content parts",
                ))
            }
        }
    }
    check_model_and_stream(map)?;
    optional_field(
        map,
        "max_tokens",
        positive_integer,
        "must be a positive integer",
    )?;
    Ok(map)
}

/// Token usage as the upstream reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// How a delivered run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Ok,
    Error,
    Cancelled,
}

impl RunEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The outcome of a delivered run, for its record. Never holds the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    pub end: RunEnd,
    pub model: String,
    pub latency_ms: u64,
    pub ttft_ms: Option<u64>,
    pub usage: Option<TokenUsage>,
    pub error_code: Option<String>,
    /// Tokens of the output passed on to the client, when the gateway counted them (streams
    /// asked to by [`ChatUpstream::on_finish`], completions without a usage).
    pub relayed_tokens: Option<u64>,
}

/// A chat answer that is reaching the client.
pub enum ChatAnswer<B, S> {
    /// A whole completion and its report.
    Complete { body: B, report: RunReport },
    /// An event stream; its report arrives through [`ChatUpstream::on_finish`].
    Stream(S),
}

/// Why an upstream call failed before anything reached the client. Messages are rebuilt by
/// the adapter from the upstream's status, code and type; they never hold a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// The upstream proved the key bad (401).
    KeyRejected,
    /// Any other 4xx: the caller's request was refused (bad model, no access to a model,
    /// rate limit, ...). The status reaches the caller.
    Refused {
        status: u16,
        message: String,
        retry_after_secs: Option<u64>,
    },
    /// A 5xx, a transport failure or a response that is not a completion. `retryable` when
    /// nothing was answered by the upstream (a connect failure) or it answered a 5xx: the run
    /// may try once more on the next key.
    Failed { message: String, retryable: bool },
    /// No answer in time.
    Timeout,
}

/// What a region's OpenAI-compatible gateway must do for a run. `gc-gateway` implements it.
pub trait ChatUpstream: Send + Sync + 'static {
    /// A complete response body, passed on as it is.
    type Body: Send + 'static;
    /// A response stream, passed on as it arrives.
    type Stream: Send + 'static;
    /// True when the region has a gateway URL configured.
    fn configured(&self, region: Region) -> bool;
    fn chat(
        &self,
        region: Region,
        key: &SecretString,
        body: Map<String, Value>,
    ) -> impl Future<Output = Result<ChatAnswer<Self::Body, Self::Stream>, UpstreamFailure>> + Send;
    /// Sends a run of `kind` to the region's gateway (`{base}` + [`RunKind::upstream_path`]),
    /// answered as [`ChatUpstream::chat`] answers. A port that implements only `chat` serves
    /// chat runs and fails the others without calling anything.
    fn call(
        &self,
        kind: RunKind,
        region: Region,
        key: &SecretString,
        body: Map<String, Value>,
    ) -> impl Future<Output = Result<ChatAnswer<Self::Body, Self::Stream>, UpstreamFailure>> + Send
    {
        let chat = (kind == RunKind::Chat).then(|| self.chat(region, key, body));
        async move {
            match chat {
                Some(chat) => chat.await,
                None => Err(UpstreamFailure::Failed {
                    message: format!("{} is not served by this gateway", kind.upstream_path()),
                    retryable: false,
                }),
            }
        }
    }
    /// The models configured for the region (its default model first), without `auto`.
    fn models(&self, region: Region) -> Vec<String>;
    /// Waits a short, jittered while before a retry.
    fn backoff(&self) -> impl Future<Output = ()> + Send;
    /// Registers what a stream does with its report when it ends (exactly once); with
    /// `count_relayed`, the report counts the output tokens passed on to the client
    /// (`RunReport::relayed_tokens`, for a run under a token limit).
    fn on_finish(
        &self,
        stream: Self::Stream,
        count_relayed: bool,
        done: Box<dyn FnOnce(RunReport) + Send>,
    ) -> Self::Stream;
    /// The tokens of `text` in `model`'s encoding (`auto` and unknown names: a default one).
    fn count_tokens(&self, model: &str, text: &str) -> u64;
}

/// Where run records and key verdicts go, off the request path: a bounded queue drained by
/// the run writer (decisions 0003 and 0033).
///
/// A run's own record never waits for a free place when it ends: [`prepare_for`] takes a place
/// with [`RunSink::reserve`] before the run is admitted, and the record goes through that
/// [`RunSlot`]. With no place free the run is refused (503 `busy`), before its quotas are
/// counted, so no admitted run's usage line, activity line or token settlement is lost.
pub trait RunSink: Send + Sync + 'static {
    /// Best effort, for entries that are not a run's record: key verdicts (a rejected key is
    /// judged again at its next 401) and the Guard's activity lines. When the queue is full
    /// the entry is dropped with a warning (and counted by the HTTP layer's sink).
    fn send(&self, event: RunEvent);
    /// A place in the queue for one run's record, held until the record is sent through it or
    /// the slot is dropped unused (which frees it). `None` when no place is free — or, for a
    /// `stream`, when streams already hold their share of the places, so that long streams
    /// cannot keep short runs out.
    fn reserve(&self, stream: bool) -> Option<RunSlot>;
}

/// A place taken in the run writer's queue ([`RunSink::reserve`]): sending through it cannot
/// fail for want of room. Dropped unused (the client went away before the upstream answered,
/// a panic), it frees its place.
pub struct RunSlot(Box<dyn FnOnce(RunEvent) + Send>);

impl RunSlot {
    /// A slot that hands its one event to `send` (which must not need a further place).
    pub fn new(send: impl FnOnce(RunEvent) + Send + 'static) -> Self {
        Self(Box::new(send))
    }

    /// Sends the run's record into the place taken for it.
    pub fn send(self, event: RunEvent) {
        (self.0)(event)
    }
}

impl std::fmt::Debug for RunSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunSlot")
    }
}

/// One entry for the run writer.
#[derive(Debug, Clone)]
pub enum RunEvent {
    Activity(NewActivity),
    KeyVerdict(KeyVerdict),
    /// A finished run: its activity line and its usage line.
    Run(NewActivity, Box<RunLine>),
}

/// The usage record of one finished run (delivered or failed), made only from a [`RunScope`].
/// Its tokens count toward the tenant's and key's quotas when it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLine {
    id: uuid::Uuid,
    tenant_id: uuid::Uuid,
    key_id: Option<uuid::Uuid>,
    at: chrono::DateTime<Utc>,
    region: Region,
    model: String,
    outcome: &'static str,
    usage: TokenUsage,
    latency_ms: u64,
    /// The tokens reserved for the run at admission (a token limit applied), which the writer
    /// settles to [`RunLine::usage`]'s total.
    reservation: Option<TokenReservation>,
    /// What the run cost at its model's price (nano-units; 0 without a known price), and the
    /// money reserved at admission (a spend limit applied), which the writer settles to it.
    cost: crate::policy::prices::Money,
    spend: Option<crate::policy::quota::SpendReservation>,
}

impl RunLine {
    pub fn id(&self) -> uuid::Uuid {
        self.id
    }
    pub fn tenant_id(&self) -> uuid::Uuid {
        self.tenant_id
    }
    /// The workspace key the run was made with (`None` for a session).
    pub fn key_id(&self) -> Option<uuid::Uuid> {
        self.key_id
    }
    pub fn at(&self) -> chrono::DateTime<Utc> {
        self.at
    }
    pub fn region(&self) -> Region {
        self.region
    }
    pub fn model(&self) -> &str {
        &self.model
    }
    /// `ok`, `cancelled`, or an error code (`upstream_error`, `upstream_rejected`, ...).
    pub fn outcome(&self) -> &'static str {
        self.outcome
    }
    /// True unless the run ended `ok` or was cancelled by the client.
    pub fn failed(&self) -> bool {
        !matches!(self.outcome, "ok" | "cancelled")
    }
    /// The upstream's usage; for a run under a token limit whose upstream reported none
    /// (cancelled, broken, timed out), what was sent and relayed: the prompt's tokens as
    /// counted at admission and the output tokens passed on (issue 28).
    pub fn usage(&self) -> TokenUsage {
        self.usage
    }
    /// The run's token reservation, when a token limit applied.
    pub fn reservation(&self) -> Option<TokenReservation> {
        self.reservation
    }
    /// What the writer adds to each quota window for this run: the windows its tokens count
    /// in and the change (decision 0025). A reserved run settles the windows of its admission
    /// to its true tokens (`true - reserved`, negative when it used less); any other run adds
    /// its tokens to the windows of its end.
    pub fn token_changes(&self) -> (Vec<QuotaWindow>, i64) {
        let total = self.usage.total_tokens.max(
            self.usage
                .prompt_tokens
                .saturating_add(self.usage.completion_tokens),
        );
        match self.reservation {
            Some(r) => (
                crate::policy::quota::token_windows(self.tenant_id, self.key_id, r.at),
                crate::policy::quota::settle_delta(r.tokens, total),
            ),
            None => (
                self.token_windows(),
                crate::policy::quota::settle_delta(0, total),
            ),
        }
    }
    pub fn latency_ms(&self) -> u64 {
        self.latency_ms
    }
    /// What the run cost, in nano-units of the deployment's currency (decision 0038).
    pub fn cost(&self) -> crate::policy::prices::Money {
        self.cost
    }
    /// What the writer adds to each spend window for this run: a run reserved at admission
    /// settles the windows of its admission to its cost; any other adds its cost to the
    /// windows of its end.
    pub fn spend_changes(&self) -> (Vec<QuotaWindow>, i64) {
        match self.spend {
            Some(r) => (
                crate::policy::quota::spend_windows(self.tenant_id, self.key_id, r.at),
                crate::policy::quota::settle_delta(r.nanos, self.cost),
            ),
            None => (
                crate::policy::quota::spend_windows(self.tenant_id, self.key_id, self.at),
                crate::policy::quota::settle_delta(0, self.cost),
            ),
        }
    }
    /// The UTC day of the run, `YYYY-MM-DD`.
    pub fn day(&self) -> String {
        // Not chrono's `format`, which parses its pattern again for every line (the writer
        // makes one per run, issue 14).
        // Nor `format!` with padded fields (about 1.5 k instructions a call, twice per run in
        // the writer): the ten digits and dashes are written directly.
        use chrono::Datelike;
        let d = self.at.date_naive();
        let year = match u32::try_from(d.year()) {
            Ok(year) if year <= 9999 => year,
            _ => return format!("{:04}-{:02}-{:02}", d.year(), d.month(), d.day()),
        };
        let digit = |n: u32| char::from(b'0' + (n % 10) as u8);
        let (month, day) = (d.month(), d.day());
        let mut out = String::with_capacity(10);
        out.extend([
            digit(year / 1000),
            digit(year / 100),
            digit(year / 10),
            digit(year),
            '-',
            digit(month / 10),
            digit(month),
            '-',
            digit(day / 10),
            digit(day),
        ]);
        out
    }
    /// The quota windows its tokens count in.
    pub fn token_windows(&self) -> Vec<QuotaWindow> {
        crate::policy::quota::token_windows(self.tenant_id, self.key_id, self.at)
    }
}

/// A run that may go ahead: its scope, the opened keys, the checked body.
#[derive(Debug)]
pub struct RunPlan {
    kind: RunKind,
    scope: RunScope,
    keys: Vec<(TenantAiKey, SecretString)>,
    body: Map<String, Value>,
    stream: bool,
    limits: RateLimitState,
    /// The token reservation and the prompt's counted tokens, when a token limit applies.
    reserved: Option<(TokenReservation, u64)>,
    /// The model's price and the money reservation (decision 0038).
    cost: crate::policy::quota::RunCost,
    /// The run writer's place for this run's record, taken before admission.
    slot: RunSlot,
}

impl RunPlan {
    /// The endpoint the run calls.
    pub fn kind(&self) -> RunKind {
        self.kind
    }

    pub fn scope(&self) -> &RunScope {
        &self.scope
    }

    /// The quotas that apply to the run, for its response headers.
    pub fn limits(&self) -> RateLimitState {
        self.limits
    }
}

/// Every refusal of a run before the upstream is called, in the contract's order: the
/// caller (member rules, `run` scope, no Shadow view), then the body (`body` is the HTTP
/// layer's parse result, held back until now), then AI access, then the quotas (which count
/// the request). Keys that do not open with the master key are marked `not_ready` and skipped.
/// Just before the quotas, a place for the run's record is taken from `slots`
/// ([`RunSink::reserve`]); with none free the run is refused with [`DomainError::Busy`], and
/// nothing is counted or reserved against its quotas (decision 0033).
///
/// The body is taken out of `body` only after the last store call, or with the parse error
/// it holds: a store call refused on a thread that serves connections (see
/// `ports::InlineRepo`) leaves it in place for the attempt on the blocking pool.
///
/// `kind` says which body the run takes and how its cost is estimated.
#[allow(clippy::too_many_arguments)]
pub fn prepare_for<P: AiKeyRepo + QuotaRepo + ?Sized, E>(
    kind: RunKind,
    store: &P,
    sealer: &dyn KeySealer,
    quotas: &NodeQuotas,
    slots: &dyn RunSink,
    principal: &Principal,
    body: &mut Option<Result<Value, E>>,
    gateway_configured: impl Fn(Region) -> bool,
    count_tokens: impl Fn(&str, &str) -> u64,
) -> DomainResult<Result<RunPlan, E>> {
    let tenant = RunScope::caller_tenant(principal)?;
    let stream = match body {
        Some(Ok(value)) => kind
            .validate(value)?
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        _ => {
            return match body.take() {
                Some(Err(e)) => Ok(Err(e)),
                _ => Err(DomainError::Internal(
                    "the run's body was already used".into(),
                )),
            }
        }
    };
    let region = tenant.region;
    let scope = RunScope::authorize_for(principal, tenant, store, gateway_configured(region))?;
    let mut keys = Vec::new();
    for key in scope.keys_from(0) {
        match sealer.open(&key.sealed_secret, &ai_key_binding(key.tenant_id, key.id)) {
            Some(secret) => keys.push((key.clone(), secret)),
            None => {
                let reason = "the key cannot be decrypted with the current master key";
                if let Some(v) = KeyVerdict::rejected(&scope, key, reason, Utc::now()) {
                    store.set_ai_key_status(&v)?;
                }
            }
        }
    }
    if keys.is_empty() {
        return Err(DomainError::AiAccessNotReady(
            "no key of the region can be decrypted".into(),
        ));
    }
    // The model allow-list and price (decision 0038), before anything is counted or sent.
    let model = crate::policy::models::choose(quotas.catalog(), scope.tenant(), body.as_ref())?;
    // The prompt is counted in the encoding of the model the run goes to: `auto` (or no model)
    // as the region's default, the model the upstream counts the answer with (decision 0047).
    let counted = quotas
        .catalog()
        .priced_model(scope.tenant(), model.model.as_deref());
    let count_tokens = |m: &str, text: &str| count_tokens(counted.as_deref().unwrap_or(m), text);
    // A place for the run's record before anything is counted: a refusal here costs the
    // caller no quota and leaves no reservation behind.
    let Some(slot) = slots.reserve(stream) else {
        return Err(DomainError::Busy {
            retry_after_secs: 1,
        });
    };
    // The prompt is counted only when a token limit applies (the estimate is lazy).
    let mut prompt = 0;
    let admission = {
        let Some(Ok(Value::Object(map))) = body.as_ref() else {
            return Err(DomainError::Internal(
                "the run's body was already used".into(),
            ));
        };
        crate::policy::quota::admit_run(
            store,
            quotas.gate(),
            &scope,
            Utc::now(),
            model.price,
            || {
                let e = kind.estimate(map, quotas.completion_default(), &count_tokens);
                prompt = e.prompt_tokens;
                e
            },
        )?
    };
    let Some(Ok(Value::Object(mut body))) = body.take() else {
        return Err(DomainError::Internal(
            "the run's body was already used".into(),
        ));
    };
    model.apply(&mut body);
    Ok(Ok(RunPlan {
        kind,
        scope,
        keys,
        body,
        stream,
        limits: admission.state,
        reserved: admission.reservation.map(|r| (r, prompt)),
        cost: crate::policy::quota::RunCost {
            price: model.price,
            spend: admission.spend,
            prompt_tokens: admission.prompt_tokens,
        },
        slot,
    }))
}

/// Tokens a chat message costs besides its text (OpenAI's count for current chat models), and
/// the tokens every reply is primed with.
const TOKENS_PER_MESSAGE: u64 = 3;
const TOKENS_PER_NAME: u64 = 1;
const REPLY_PRIMING: u64 = 3;
/// An image part, counted at OpenAI's low-detail price (the least an image costs).
const TOKENS_PER_IMAGE: u64 = 85;

/// What a chat body is expected to cost (decision 0025): the prompt counted as OpenAI counts
/// chat messages (each message's role, text parts and name, 3 tokens per message and 1 per
/// name, 3 for the reply; tool calls' names and arguments; images at 85; the `tools` and
/// `functions` definitions as their JSON text), and the completion allowance:
/// `max_completion_tokens`, else `max_tokens`, else `default_completion`. Sums saturate.
pub fn estimate(
    body: &Map<String, Value>,
    default_completion: u64,
    count: &impl Fn(&str, &str) -> u64,
) -> crate::policy::quota::RunEstimate {
    let mut prompt = Prompt::of(body, count);
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        // The role: every chat role's name is one token in both encodings (not counted, to
        // spare a call of the encoder per message).
        prompt.add(TOKENS_PER_MESSAGE.saturating_add(1));
        if let Some(name) = m.get("name").and_then(Value::as_str) {
            prompt.add(TOKENS_PER_NAME);
            prompt.add_text(name);
        }
        match m.get("content") {
            Some(Value::String(s)) => prompt.add_text(s),
            Some(Value::Array(parts)) => prompt.add_parts(parts, |p| {
                p.get("type").and_then(Value::as_str) == Some("image_url")
            }),
            _ => {}
        }
        for call in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let f = &call["function"];
            for field in ["name", "arguments"] {
                if let Some(t) = f.get(field).and_then(Value::as_str) {
                    prompt.add_text(t);
                }
            }
        }
    }
    for defs in ["tools", "functions"] {
        prompt.add_definitions(body, defs);
    }
    let completion = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|f| body.get(*f).and_then(whole_tokens))
        .unwrap_or(default_completion);
    prompt.estimate(completion)
}

/// What a Responses body is expected to cost (decision 0025): `instructions`, then each
/// `input` item as a chat message (3 tokens, its text: a string content, the `text` of each
/// part, images and files at [`TOKENS_PER_IMAGE`] without reading their data; a typed item's
/// other string fields, such as a function call's name and arguments or a tool's output),
/// the `tools` as their JSON text, 3 for the reply; the completion allowance is
/// `max_output_tokens`, else `default_completion`. Sums saturate.
pub fn estimate_responses(
    body: &Map<String, Value>,
    default_completion: u64,
    count: &impl Fn(&str, &str) -> u64,
) -> crate::policy::quota::RunEstimate {
    /// Parts and items whose data is not text: priced as a low-detail image.
    fn opaque(v: &Value) -> bool {
        matches!(
            v.get("type").and_then(Value::as_str),
            Some("input_image" | "input_file" | "input_audio" | "image_url")
        )
    }
    let mut prompt = Prompt::of(body, count);
    if let Some(i) = body.get("instructions").and_then(Value::as_str) {
        prompt.add(TOKENS_PER_MESSAGE);
        prompt.add_text(i);
    }
    match body.get("input") {
        Some(Value::String(s)) => {
            prompt.add(TOKENS_PER_MESSAGE);
            prompt.add_text(s);
        }
        Some(Value::Array(items)) => {
            for item in items {
                prompt.add(TOKENS_PER_MESSAGE);
                let Value::Object(item) = item else {
                    continue;
                };
                for (field, value) in item {
                    match (field.as_str(), value) {
                        ("type" | "role" | "id" | "call_id" | "status", _) => {}
                        (_, Value::String(s)) => prompt.add_text(s),
                        ("content", Value::Array(parts)) => prompt.add_parts(parts, opaque),
                        (_, Value::Null | Value::Bool(_) | Value::Number(_)) => {}
                        (_, other) => prompt.add_text(&other.to_string()),
                    }
                }
            }
        }
        _ => {}
    }
    prompt.add_definitions(body, "tools");
    let completion = body
        .get("max_output_tokens")
        .and_then(whole_tokens)
        .unwrap_or(default_completion);
    prompt.estimate(completion)
}

/// A prompt's tokens as an estimate counts them: 3 for the reply's priming, then what each
/// part adds, saturating; text is counted in the encoding of the body's model (in a run,
/// [`prepare_for`]'s count takes `auto` as the model the run goes to).
struct Prompt<'a, C> {
    model: &'a str,
    count: &'a C,
    tokens: u64,
}

impl<'a, C: Fn(&str, &str) -> u64> Prompt<'a, C> {
    fn of(body: &'a Map<String, Value>, count: &'a C) -> Self {
        Self {
            model: body.get("model").and_then(Value::as_str).unwrap_or("auto"),
            count,
            tokens: REPLY_PRIMING,
        }
    }

    fn add(&mut self, tokens: u64) {
        self.tokens = self.tokens.saturating_add(tokens);
    }

    fn add_text(&mut self, text: &str) {
        self.add((self.count)(self.model, text));
    }

    /// Content parts: each part's `text`, an `image` part at [`TOKENS_PER_IMAGE`] without
    /// reading its data, any other part as its JSON text.
    fn add_parts(&mut self, parts: &[Value], image: impl Fn(&Value) -> bool) {
        for p in parts {
            match p.get("text").and_then(Value::as_str) {
                Some(t) => self.add_text(t),
                None if image(p) => self.add(TOKENS_PER_IMAGE),
                None => self.add_text(&p.to_string()),
            }
        }
    }

    /// Tool or function definitions (`field`), as their JSON text.
    fn add_definitions(&mut self, body: &Map<String, Value>, field: &str) {
        if let Some(v) = body.get(field).filter(|v| !v.is_null()) {
            self.add_text(&v.to_string());
        }
    }

    fn estimate(self, completion_tokens: u64) -> crate::policy::quota::RunEstimate {
        crate::policy::quota::RunEstimate {
            prompt_tokens: self.tokens,
            completion_tokens,
        }
    }
}

/// What an embeddings body is expected to cost: the tokens of its `input` (a string's or each
/// string's tokens, a token array's length); no completion.
pub fn estimate_embeddings(
    body: &Map<String, Value>,
    count: &impl Fn(&str, &str) -> u64,
) -> crate::policy::quota::RunEstimate {
    let model = body.get("model").and_then(Value::as_str).unwrap_or("auto");
    let len = |a: &Vec<Value>| u64::try_from(a.len()).unwrap_or(u64::MAX);
    let prompt = match body.get("input") {
        Some(Value::String(s)) => count(model, s),
        Some(Value::Array(items)) if items.iter().all(Value::is_number) => len(items),
        Some(Value::Array(items)) => items.iter().fold(0u64, |n, v| {
            n.saturating_add(match v {
                Value::String(s) => count(model, s),
                Value::Array(tokens) => len(tokens),
                _ => 1,
            })
        }),
        _ => 0,
    };
    crate::policy::quota::RunEstimate {
        prompt_tokens: prompt,
        completion_tokens: 0,
    }
}

/// A token count given as a whole JSON number (`5.0` too), huge values saturating.
fn whole_tokens(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 1.0)
            .map(|f| if f >= 1.8e19 { u64::MAX } else { f as u64 })
    })
}

/// The models a caller may name on a run: `auto` first, then the region's configured ones.
/// The same caller rules as a run (the `run` scope for keys, active member and tenant, no
/// Shadow view).
/// `configured` lists a region's models ([`ChatUpstream::models`]).
pub fn models(
    configured: impl FnOnce(Region) -> Vec<String>,
    principal: &Principal,
) -> DomainResult<Vec<String>> {
    let tenant = RunScope::caller_tenant(principal)?;
    let mut out = vec!["auto".to_owned()];
    for m in configured(tenant.region) {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// Why a run failed before anything reached the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    Upstream(UpstreamFailure),
    /// Every ready key of the region answered 401.
    AllKeysRejected(Region),
}

/// The run orchestration: key rotation, failover on a proven-bad key, records.
pub struct Runs<U> {
    upstream: Arc<U>,
    sink: Arc<dyn RunSink>,
    next: AtomicUsize,
    quotas: NodeQuotas,
}

impl<U: ChatUpstream> Runs<U> {
    pub fn new(upstream: Arc<U>, sink: Arc<dyn RunSink>) -> Self {
        Self {
            upstream,
            sink,
            next: AtomicUsize::new(0),
            quotas: NodeQuotas::default(),
        }
    }

    pub fn upstream(&self) -> &U {
        &self.upstream
    }

    /// This process's share of the quota counts (request leases, recent token reads), for
    /// [`prepare_for`].
    pub fn quotas(&self) -> &NodeQuotas {
        &self.quotas
    }

    /// Where this process's run records go: [`prepare_for`] takes each run's place from it.
    pub fn sink(&self) -> &dyn RunSink {
        self.sink.as_ref()
    }

    /// Sends the planned request, starting at a rotating key. A 401 moves on to the next key
    /// (and marks the refused one `not_ready`); a connect failure or a 5xx is retried once on
    /// the next key not proven bad, after a short back-off; anything else ends the run.
    pub async fn execute(
        &self,
        plan: RunPlan,
        route: &'static str,
    ) -> Result<ChatAnswer<U::Body, U::Stream>, RunError> {
        let RunPlan {
            kind,
            scope,
            keys,
            body,
            stream,
            reserved,
            cost,
            slot,
            ..
        } = plan;
        // Taken by whichever outcome records the run; dropped unused (every key rejected, or
        // the caller gone before an answer) it frees its place.
        let mut slot = Some(slot);
        let scope = Arc::new(scope);
        let requested_model = body
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| *m != "auto")
            .map(str::to_owned);
        let n = keys.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let mut rejected = vec![false; n];
        let mut retried = false;
        let mut at = start;
        // Each turn takes the next key not proven bad; the loop ends when all are.
        while let Some(i) = (at..at + n).map(|j| j % n).find(|i| !rejected[*i]) {
            at = i + 1;
            let (key, secret) = &keys[i];
            let record = RunRecord {
                scope: Arc::clone(&scope),
                key_id: key.id,
                stream,
                route,
                retried,
                requested_model: requested_model.clone(),
                reserved,
                cost,
            };
            match self
                .upstream
                .call(kind, scope.region(), secret, body.clone())
                .await
            {
                Ok(ChatAnswer::Complete { body, report }) => {
                    if let Some(slot) = slot.take() {
                        slot.send(record.delivered(&report));
                    }
                    return Ok(ChatAnswer::Complete { body, report });
                }
                Ok(ChatAnswer::Stream(s)) => {
                    let slot = slot.take();
                    let s = self.upstream.on_finish(
                        s,
                        reserved.is_some() || cost.spend.is_some(),
                        Box::new(move |report| {
                            if let Some(slot) = slot {
                                slot.send(record.delivered(&report));
                            }
                        }),
                    );
                    return Ok(ChatAnswer::Stream(s));
                }
                Err(UpstreamFailure::KeyRejected) => {
                    rejected[i] = true;
                    if let Some(v) =
                        KeyVerdict::rejected(&scope, key, "rejected by the gateway", Utc::now())
                    {
                        self.sink.send(RunEvent::KeyVerdict(v));
                    }
                }
                Err(UpstreamFailure::Failed {
                    retryable: true, ..
                }) if !retried => {
                    retried = true;
                    self.upstream.backoff().await;
                }
                Err(failure) => {
                    // `auto` (or no model) is recorded as the region's default model.
                    let model = record.requested_model.clone().unwrap_or_else(|| {
                        let models = self.upstream.models(scope.region());
                        models
                            .into_iter()
                            .next()
                            .unwrap_or_else(|| "auto".to_owned())
                    });
                    if let Some(slot) = slot.take() {
                        slot.send(record.failed(&failure, started, &model));
                    }
                    return Err(RunError::Upstream(failure));
                }
            }
        }
        Err(RunError::AllKeysRejected(scope.region()))
    }
}

/// What every run record of one request shares.
struct RunRecord {
    scope: Arc<RunScope>,
    key_id: uuid::Uuid,
    stream: bool,
    route: &'static str,
    /// A first attempt failed (connect failure or 5xx) and this one is the retry.
    retried: bool,
    /// The model the caller named (`None` for `auto` or none), for failed runs' usage lines.
    requested_model: Option<String>,
    /// The run's token reservation and its prompt's counted tokens (a token limit applied).
    reserved: Option<(TokenReservation, u64)>,
    /// The model's price and the money reservation.
    cost: crate::policy::quota::RunCost,
}

impl RunRecord {
    fn line(
        &self,
        at: chrono::DateTime<Utc>,
        model: &str,
        outcome: &'static str,
        usage: Option<TokenUsage>,
        relayed: Option<u64>,
        latency_ms: u64,
    ) -> Box<RunLine> {
        // A run under a token limit without a reported usage is counted from what was sent
        // and relayed (issue 28), never as zero.
        // A run under a spend limit alone likewise (decision 0038).
        let counted = self
            .reserved
            .map(|(_, prompt)| prompt)
            .or(self.cost.spend.map(|_| self.cost.prompt_tokens));
        let usage = match (usage, counted) {
            (Some(u), _) => u,
            (None, Some(prompt)) => {
                let completion = relayed.unwrap_or(0);
                let total = crate::policy::quota::settled_tokens(None, prompt, relayed);
                TokenUsage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: total,
                }
            }
            (None, None) => TokenUsage::default(),
        };
        Box::new(RunLine {
            id: crate::model::new_id(),
            tenant_id: self.scope.tenant().id,
            key_id: self.scope.key().map(|(id, _)| id),
            at,
            region: self.scope.region(),
            model: model.to_owned(),
            outcome,
            usage,
            latency_ms,
            reservation: self.reserved.map(|(r, _)| r),
            cost: self
                .cost
                .price
                .map_or(0, |p| p.cost(usage.prompt_tokens, usage.completion_tokens)),
            spend: self.cost.spend,
        })
    }

    fn delivered(&self, report: &RunReport) -> RunEvent {
        let at = Utc::now();
        let outcome = match report.end {
            RunEnd::Ok => "ok",
            RunEnd::Cancelled => "cancelled",
            RunEnd::Error => "upstream_error",
        };
        let line = self.line(
            at,
            &report.model,
            outcome,
            report.usage,
            report.relayed_tokens,
            report.latency_ms,
        );
        RunEvent::Run(self.delivered_activity(report, at), line)
    }

    fn delivered_activity(&self, report: &RunReport, at: chrono::DateTime<Utc>) -> NewActivity {
        NewActivity::run(
            &self.scope,
            at,
            &DeliveredDetail {
                error: report.error_code.as_deref(),
                key_id: self.key_id,
                latency_ms: report.latency_ms,
                model: &report.model,
                region: self.scope.region().as_str(),
                retried: self.retried,
                route: self.route,
                status: report.end.as_str(),
                stream: self.stream,
                ttft_ms: report.ttft_ms,
                usage: report.usage.map(|u| UsageDetail {
                    completion_tokens: u.completion_tokens,
                    prompt_tokens: u.prompt_tokens,
                    total_tokens: u.total_tokens,
                }),
            },
        )
    }

    fn failed(&self, failure: &UpstreamFailure, started: Instant, model: &str) -> RunEvent {
        let (code, status) = match failure {
            UpstreamFailure::Timeout => ("upstream_timeout", None),
            UpstreamFailure::Refused { status: 429, .. } => ("upstream_rate_limited", Some(429)),
            UpstreamFailure::Refused { status, .. } => ("upstream_rejected", Some(*status)),
            _ => ("upstream_error", None),
        };
        let at = Utc::now();
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let line = self.line(at, model, code, None, None, latency_ms);
        let activity = NewActivity::run(
            &self.scope,
            at,
            &FailedDetail {
                error: code,
                key_id: self.key_id,
                latency_ms,
                region: self.scope.region().as_str(),
                retried: self.retried,
                route: self.route,
                status: "error",
                stream: self.stream,
                upstream_status: status,
            },
        );
        RunEvent::Run(activity, line)
    }
}

/// The activity detail of a run that reached the client (fields in the order a JSON map of
/// them would have, so the stored text is the same as before it had its own type).
#[derive(serde::Serialize)]
struct DeliveredDetail<'a> {
    error: Option<&'a str>,
    key_id: uuid::Uuid,
    latency_ms: u64,
    model: &'a str,
    region: &'static str,
    retried: bool,
    route: &'static str,
    status: &'static str,
    stream: bool,
    ttft_ms: Option<u64>,
    usage: Option<UsageDetail>,
}

#[derive(serde::Serialize)]
struct UsageDetail {
    completion_tokens: u64,
    prompt_tokens: u64,
    total_tokens: u64,
}

/// The activity detail of a run that failed before anything reached the client.
#[derive(serde::Serialize)]
struct FailedDetail {
    error: &'static str,
    key_id: uuid::Uuid,
    latency_ms: u64,
    region: &'static str,
    retried: bool,
    route: &'static str,
    status: &'static str,
    stream: bool,
    upstream_status: Option<u16>,
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::fakes::{ready, Fake, FakeSealer};
    use crate::model::Status;
    use crate::policy::ai_access::tests::{key, member, session};
    use crate::policy::ai_access::AiKeyStatus;
    use crate::test_support::{ChatAnswers, ChatOnlyUpstream};
    use serde_json::json;

    /// Answers each call with the next scripted result (then fails every further call) and
    /// remembers which key was used.
    struct Script {
        answers: Mutex<VecDeque<Result<(), UpstreamFailure>>>,
        used: Mutex<Vec<String>>,
    }

    impl ChatAnswers for Script {
        fn answer(&self, secret: &str) -> Result<RunReport, UpstreamFailure> {
            self.used.lock().unwrap().push(secret.to_owned());
            match self.answers.lock().unwrap().pop_front() {
                Some(Ok(())) => Ok(RunReport {
                    ttft_ms: Some(1),
                    ..crate::fakes::answered("m")
                }),
                Some(Err(e)) => Err(e),
                None => Err(UpstreamFailure::Failed {
                    message: "unscripted".into(),
                    retryable: false,
                }),
            }
        }
    }

    type Scripted = ChatOnlyUpstream<Script>;

    /// A gateway answering with `answers` in turn, then failing every further call.
    fn scripted(answers: Vec<Result<(), UpstreamFailure>>) -> Scripted {
        let script = Script {
            answers: Mutex::new(answers.into()),
            used: Mutex::new(Vec::new()),
        };
        ChatOnlyUpstream::new(&["m-default", "m-large", "auto"], words, script)
    }

    /// The tests' tokenizer: one token per word.
    fn words(text: &str) -> u64 {
        text.split_whitespace().count() as u64
    }

    /// Keeps every event; `1` is the number of free places (`None`: room for every run). A
    /// place is taken by [`RunSink::reserve`] and given back when its slot is used or dropped.
    #[derive(Default)]
    struct Sink(Arc<Mutex<Vec<RunEvent>>>, Arc<Mutex<Option<usize>>>);

    impl Sink {
        fn with_places(n: usize) -> Self {
            Self(Arc::default(), Arc::new(Mutex::new(Some(n))))
        }
    }

    /// A place of a [`Sink`], given back when dropped.
    struct Place(Arc<Mutex<Option<usize>>>);

    impl Drop for Place {
        fn drop(&mut self) {
            if let Some(n) = self.0.lock().unwrap().as_mut() {
                *n += 1;
            }
        }
    }

    impl RunSink for Sink {
        fn send(&self, event: RunEvent) {
            self.0.lock().unwrap().push(event);
        }
        fn reserve(&self, _stream: bool) -> Option<RunSlot> {
            if let Some(n) = self.1.lock().unwrap().as_mut() {
                *n = n.checked_sub(1)?;
            }
            let (events, place) = (Arc::clone(&self.0), Place(Arc::clone(&self.1)));
            Some(RunSlot::new(move |e| {
                events.lock().unwrap().push(e);
                drop(place);
            }))
        }
    }

    /// [`prepare_for`] (a chat run) for a session of a member of `t`, with the fakes' sealer and every region's
    /// gateway configured.
    fn prepare_as<E>(
        store: &Fake,
        leases: &NodeQuotas,
        t: &crate::model::Tenant,
        body: &mut Option<Result<Value, E>>,
    ) -> DomainResult<Result<RunPlan, E>> {
        prepare_with(store, leases, &Sink::default(), t, body)
    }

    /// [`prepare_as`] with the places of `slots`.
    fn prepare_with<E>(
        store: &Fake,
        leases: &NodeQuotas,
        slots: &Sink,
        t: &crate::model::Tenant,
        body: &mut Option<Result<Value, E>>,
    ) -> DomainResult<Result<RunPlan, E>> {
        prepare_for(
            RunKind::Chat,
            store,
            &FakeSealer,
            leases,
            slots,
            &member(t, session()),
            body,
            |_| true,
            |_, text| words(text),
        )
    }

    /// The plan of a run of `body` that [`prepare_with`] admits, with fresh leases.
    fn planned(store: &Fake, slots: &Sink, t: &crate::model::Tenant, body: Value) -> RunPlan {
        prepare_with(
            store,
            &NodeQuotas::default(),
            slots,
            t,
            &mut Some(Ok::<_, ()>(body)),
        )
        .unwrap()
        .unwrap()
    }

    fn setup(
        answers: Vec<Result<(), UpstreamFailure>>,
    ) -> (Runs<Scripted>, Arc<Sink>, RunPlan, Fake) {
        let t = crate::policy::access::tests::tenant(Status::Active);
        let mut keys = vec![
            key(&t, Region::Aihk, true, AiKeyStatus::Ready),
            key(&t, Region::Aihk, true, AiKeyStatus::Ready),
        ];
        for (i, k) in keys.iter_mut().enumerate() {
            k.sealed_secret = format!("sealed:key-{i}");
        }
        let store = Fake::with_keys(keys);
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        let sink = Arc::new(Sink::default());
        let plan = planned(&store, &sink, &t, body);
        let upstream = Arc::new(scripted(answers));
        (Runs::new(upstream, sink.clone()), sink, plan, store)
    }

    fn verdicts(sink: &Sink) -> usize {
        sink.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, RunEvent::KeyVerdict(_)))
            .count()
    }

    #[test]
    fn a_refusal_of_the_request_reaches_the_caller_and_marks_no_key() {
        let refused = UpstreamFailure::Refused {
            status: 403,
            message: "no access to model".into(),
            retry_after_secs: None,
        };
        let (runs, sink, plan, _) = setup(vec![Err(refused.clone())]);
        let out = ready(runs.execute(plan, "/run"));
        assert_eq!(out.err(), Some(RunError::Upstream(refused)));
        assert_eq!(verdicts(&sink), 0);
        assert_eq!(runs.upstream().answers.used.lock().unwrap().len(), 1);
    }

    #[test]
    fn only_a_401_marks_the_key_and_tries_the_next() {
        let (runs, sink, plan, store) = setup(vec![Err(UpstreamFailure::KeyRejected), Ok(())]);
        assert!(ready(runs.execute(plan, "/run")).is_ok());
        assert_eq!(verdicts(&sink), 1);
        let used = runs.upstream().answers.used.lock().unwrap().clone();
        assert_eq!(used.len(), 2);
        assert_ne!(used[0], used[1]);
        let events = sink.0.lock().unwrap();
        let RunEvent::KeyVerdict(v) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(v.status(), AiKeyStatus::NotReady);
        assert_eq!(v.reason(), Some("rejected by the gateway"));
        // The verdict names the key that was refused, in its own tenant.
        let first = store
            .keys
            .lock()
            .unwrap()
            .iter()
            .find(|k| k.id == v.key_id())
            .cloned();
        let first = first.expect("the verdict names a key of the tenant");
        assert_eq!(v.tenant_id(), first.tenant_id);
        assert_ne!(v.tenant_id(), uuid::Uuid::nil());
    }

    #[test]
    fn every_key_rejected_is_a_gateway_error() {
        let (runs, sink, plan, _) = setup(vec![
            Err(UpstreamFailure::KeyRejected),
            Err(UpstreamFailure::KeyRejected),
        ]);
        let out = ready(runs.execute(plan, "/run"));
        assert_eq!(out.err(), Some(RunError::AllKeysRejected(Region::Aihk)));
        assert_eq!(verdicts(&sink), 2);
    }

    #[test]
    fn timeouts_and_invalid_answers_are_not_retried() {
        for failure in [
            UpstreamFailure::Timeout,
            UpstreamFailure::Failed {
                message: "not a completion".into(),
                retryable: false,
            },
        ] {
            let (runs, sink, plan, _) = setup(vec![Err(failure.clone()), Ok(())]);
            let out = ready(runs.execute(plan, "/run"));
            assert_eq!(out.err(), Some(RunError::Upstream(failure)));
            assert_eq!(verdicts(&sink), 0);
            assert_eq!(runs.upstream().answers.used.lock().unwrap().len(), 1);
            assert_eq!(runs.upstream().backoffs(), 0);
        }
    }

    fn server_error() -> UpstreamFailure {
        UpstreamFailure::Failed {
            message: "upstream answered status 503".into(),
            retryable: true,
        }
    }

    #[test]
    fn a_server_error_is_retried_once_on_the_next_key_after_a_backoff() {
        let (runs, sink, plan, _) = setup(vec![Err(server_error()), Ok(())]);
        assert!(ready(runs.execute(plan, "/run")).is_ok());
        let used = runs.upstream().answers.used.lock().unwrap().clone();
        assert_eq!(used.len(), 2);
        assert_ne!(used[0], used[1], "the retry goes to the next key");
        assert_eq!(runs.upstream().backoffs(), 1);
        assert_eq!(verdicts(&sink), 0, "a 5xx says nothing about the key");
        let events = sink.0.lock().unwrap();
        let RunEvent::Run(activity, line) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(activity.detail()["retried"], true);
        assert_eq!(line.outcome(), "ok");
    }

    #[test]
    fn a_second_server_error_ends_the_run() {
        let (runs, sink, plan, _) = setup(vec![Err(server_error()), Err(server_error()), Ok(())]);
        let out = ready(runs.execute(plan, "/run"));
        assert_eq!(out.err(), Some(RunError::Upstream(server_error())));
        assert_eq!(runs.upstream().answers.used.lock().unwrap().len(), 2);
        let events = sink.0.lock().unwrap();
        let RunEvent::Run(_, line) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(line.outcome(), "upstream_error");
        assert!(line.failed());
    }

    #[test]
    fn a_retry_skips_keys_proven_bad() {
        let (runs, sink, plan, _) = setup(vec![
            Err(UpstreamFailure::KeyRejected),
            Err(server_error()),
            Err(server_error()),
        ]);
        let out = ready(runs.execute(plan, "/run"));
        assert_eq!(out.err(), Some(RunError::Upstream(server_error())));
        let used = runs.upstream().answers.used.lock().unwrap().clone();
        assert_eq!(used.len(), 3);
        assert_eq!(used[1], used[2], "the only key left is retried");
        assert_eq!(verdicts(&sink), 1);
    }

    #[test]
    fn models_list_auto_first_without_duplicates() {
        let t = crate::policy::access::tests::tenant(Status::Active);
        let upstream = scripted(Vec::new());
        let list = models(|r| upstream.models(r), &member(&t, session())).unwrap();
        assert_eq!(list, vec!["auto", "m-default", "m-large"]);
        let no_run = crate::policy::access::Credential::ApiKey {
            key_id: uuid::Uuid::now_v7(),
            name: "k".into(),
            scopes: vec![crate::model::workspace::KeyScope::WorkspaceRead],
            limits: crate::policy::quota::KeyLimits::default(),
        };
        let e = models(|r| upstream.models(r), &member(&t, no_run)).unwrap_err();
        assert_eq!(e.code(), "insufficient_scope");
    }

    /// An active tenant with the limits `set` sets, and a ready AIHK key of it that opens.
    fn limited_tenant(
        set: impl FnOnce(&mut crate::policy::quota::TenantLimits),
    ) -> (crate::model::Tenant, TenantAiKey) {
        let mut t = crate::policy::access::tests::tenant(Status::Active);
        set(&mut t.limits);
        let mut k = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        k.sealed_secret = "sealed:k".into();
        (t, k)
    }

    #[test]
    fn a_refused_store_call_leaves_the_body_and_the_leases_for_the_next_attempt() {
        // `Caller::read` runs `prepare_for` again on the blocking pool when the serving thread's
        // store refused a call (a lease refill is a write).
        let (t, k) = limited_tenant(|l| l.requests_per_minute = Some(100));
        let store = Fake::with_keys(vec![k]);
        let leases = NodeQuotas::default();
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        let mut slot = Some(Ok::<_, ()>(body.clone()));
        *store.refuse_takes.lock().unwrap() = 1;
        let e = prepare_as(&store, &leases, &t, &mut slot).unwrap_err();
        assert_eq!(e.code(), "service_unavailable");
        assert_eq!(
            slot,
            Some(Ok(body.clone())),
            "the body stays for the next attempt"
        );
        let plan = prepare_as(&store, &leases, &t, &mut slot).unwrap().unwrap();
        assert!(slot.is_none());
        assert_eq!(plan.body.get("messages"), body.get("messages"));
        // The refused attempt counted nothing: this is the minute's first request.
        assert_eq!(plan.limits().requests.unwrap().remaining, 99);
        // A slot already used is a bug, never a run without a body.
        let e = prepare_as(&store, &leases, &t, &mut slot).unwrap_err();
        assert_eq!(e.code(), "internal_error");
    }

    #[test]
    fn a_run_over_its_quota_is_refused_before_any_upstream_call() {
        let (t, k) = limited_tenant(|l| l.requests_per_minute = Some(1));
        let store = Fake::with_keys(vec![k]);
        let body = || json!({"messages": [{"role": "user", "content": "hi"}]});
        let plan = planned(&store, &Sink::default(), &t, body());
        assert_eq!(plan.limits().requests.unwrap().remaining, 0);
        let e = prepare_as(
            &store,
            &NodeQuotas::default(),
            &t,
            &mut Some(Ok::<_, ()>(body())),
        )
        .unwrap_err();
        assert_eq!(e.code(), "rate_limited");
    }

    #[test]
    fn a_run_without_a_place_for_its_record_is_refused_before_admission() {
        let (t, k) = limited_tenant(|l| {
            l.requests_per_minute = Some(2);
            l.monthly_tokens = Some(1000);
        });
        let store = Fake::with_keys(vec![k]);
        let leases = NodeQuotas::default();
        let body = || json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5});
        let sink = Arc::new(Sink::with_places(1));
        let first = prepare_with(&store, &leases, &sink, &t, &mut Some(Ok::<_, ()>(body())))
            .unwrap()
            .unwrap();
        assert_eq!(first.limits().requests.unwrap().remaining, 1);
        // The first run holds the only place: the second is refused, 503 busy, and counts
        // nothing against the quotas.
        let e =
            prepare_with(&store, &leases, &sink, &t, &mut Some(Ok::<_, ()>(body()))).unwrap_err();
        assert!(
            matches!(
                e,
                DomainError::Busy {
                    retry_after_secs: 1
                }
            ),
            "{e:?}"
        );
        assert_eq!((e.code().as_str(), e.code().status()), ("busy", 503));
        // The first run's record reaches the queue through its place.
        let upstream = Arc::new(scripted(vec![Ok(())]));
        let runs = Runs::new(upstream, sink.clone());
        assert!(ready(runs.execute(first, "/run")).is_ok());
        {
            let events = sink.0.lock().unwrap();
            assert!(
                matches!(&events[..], [RunEvent::Run(_, line)] if line.reservation().is_some()),
                "{events:?}"
            );
        }
        // Its place is free again, and the refused run had left the request quota whole.
        let second = prepare_with(&store, &leases, &sink, &t, &mut Some(Ok::<_, ()>(body())))
            .unwrap()
            .unwrap();
        assert_eq!(second.limits().requests.unwrap().remaining, 0);
        // A plan dropped before its run (the client went away) frees its place too.
        drop(second);
        assert_eq!(*sink.1.lock().unwrap(), Some(1));
    }

    #[test]
    fn the_estimate_counts_messages_as_openai_does_and_never_overflows() {
        let body = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "name": "ann", "content": [{"type": "text", "text": "hello there world"},
                {"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": null,
                "tool_calls": [{"function": {"name": "f", "arguments": "a b"}}]}
        ], "max_tokens": 16});
        let map = body.as_object().unwrap();
        let e = estimate(map, 1024, &|_: &str, t: &str| words(t));
        // Reply 3; system 3+1+2; user 3+1+(1+1)+3+85; assistant 3+1+1+2.
        assert_eq!(e.prompt_tokens, 3 + 6 + 94 + 7);
        assert_eq!(e.completion_tokens, 16);
        let mut m = map.clone();
        m.remove("max_tokens");
        assert_eq!(
            estimate(&m, 1024, &|_: &str, t: &str| words(t)).completion_tokens,
            1024
        );
        m.insert("max_completion_tokens".into(), json!(40));
        m.insert("max_tokens".into(), json!(16));
        assert_eq!(
            estimate(&m, 1024, &|_: &str, t: &str| words(t)).completion_tokens,
            40
        );
        for hostile in [json!(1u64 << 63), json!(u64::MAX), json!(1e300)] {
            m.insert("max_completion_tokens".into(), hostile);
            let e = estimate(&m, 1024, &|_: &str, _: &str| u64::MAX);
            assert_eq!(e.prompt_tokens, u64::MAX);
            let r = crate::policy::quota::reservation_size(e, 100);
            assert_eq!(r, 100);
        }
    }

    #[test]
    fn a_run_under_a_token_limit_reserves_and_a_run_without_usage_settles_to_its_prompt() {
        let (t, k) = limited_tenant(|l| l.monthly_tokens = Some(1000));
        let store = Fake::with_keys(vec![k]);
        let body =
            json!({"messages": [{"role": "user", "content": "one two three"}], "max_tokens": 50});
        let sink = Arc::new(Sink::default());
        let plan = planned(&store, &sink, &t, body);
        // 3 + (3 + 1 + 3) prompt, 50 allowance.
        let (reservation, prompt) = plan.reserved.unwrap();
        assert_eq!((reservation.tokens, prompt), (60, 10));
        let upstream = Arc::new(scripted(vec![Err(UpstreamFailure::Timeout)]));
        let runs = Runs::new(upstream, sink.clone());
        assert!(ready(runs.execute(plan, "/run")).is_err());
        let events = sink.0.lock().unwrap();
        let Some(RunEvent::Run(_, line)) = events.first() else {
            panic!("{events:?}")
        };
        // Timed out, no usage: counted from its prompt, never zero; settles 60 -> 10.
        assert_eq!(line.usage().total_tokens, 10);
        assert_eq!(line.reservation(), Some(reservation));
        let (windows, change) = line.token_changes();
        assert_eq!(change, -50);
        assert_eq!(windows.len(), 2);
    }

    #[test]
    fn responses_reserve_input_and_max_output_tokens_and_embeddings_input_only() {
        let (t, k) = limited_tenant(|l| l.monthly_tokens = Some(1000));
        let sink = Sink::default();
        // Each plan on a fresh store: its reservation alone in the month.
        let plan = |kind: RunKind, body: Value| {
            prepare_for(
                kind,
                &Fake::with_keys(vec![k.clone()]),
                &FakeSealer,
                &NodeQuotas::default(),
                &sink,
                &member(&t, session()),
                &mut Some(Ok::<_, ()>(body)),
                |_| true,
                |_, text| words(text),
            )
            .unwrap()
            .unwrap()
        };
        // 3 for the reply, instructions 3 + 2, the input 3 + 3; 40 allowance.
        let p = plan(
            RunKind::Responses,
            json!({"input": "one two three", "instructions": "be brief", "max_output_tokens": 40}),
        );
        assert_eq!(p.kind(), RunKind::Responses);
        assert_eq!(p.reserved.unwrap(), (p.reserved.unwrap().0, 14));
        assert_eq!(p.reserved.unwrap().0.tokens, 54);
        // Items: each 3, its text; an image part at 85 without reading its data.
        let p = plan(
            RunKind::Responses,
            json!({"input": [{"role": "user", "content": [{"type": "input_text", "text": "a b"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA AAAA AAAA"}]},
                {"type": "function_call_output", "call_id": "c1", "output": "x y z"}],
                "max_output_tokens": 10}),
        );
        assert_eq!(p.reserved.unwrap().1, 3 + (3 + 2 + 85) + (3 + 3));
        // Embeddings: the input's tokens (strings' words, token arrays' lengths), nothing more.
        let p = plan(
            RunKind::Embeddings,
            json!({"model": "e", "input": ["one two", "three"]}),
        );
        assert_eq!(p.kind(), RunKind::Embeddings);
        assert_eq!(p.reserved.unwrap().0.tokens, 3);
        let p = plan(
            RunKind::Embeddings,
            json!({"model": "e", "input": [[1, 2, 3, 4], [5]]}),
        );
        assert_eq!(p.reserved.unwrap().0.tokens, 5);
        let p = plan(RunKind::Embeddings, json!({"model": "e", "input": [7, 8]}));
        assert_eq!(p.reserved.unwrap().0.tokens, 2);
        // A chat plan is a chat plan.
        let p = plan(
            RunKind::Chat,
            json!({"messages": [{"role": "user", "content": "hi"}]}),
        );
        assert_eq!(p.kind(), RunKind::Chat);
    }

    #[test]
    fn the_prompt_is_counted_in_the_encoding_of_the_model_the_run_goes_to() {
        let (t, k) = limited_tenant(|l| l.monthly_tokens = Some(1000));
        let regions = [(
            Region::Aihk,
            crate::policy::models::RegionModels {
                default_model: "m-wide".into(),
                allowed: None,
            },
        )];
        let with_default = NodeQuotas::default();
        with_default.set_catalog(crate::policy::models::Catalog::new(
            regions.into(),
            Default::default(),
        ));
        // `m-wide`'s encoding counts two tokens a word, every other encoding one.
        let prompt = |quotas: &NodeQuotas, body: Value| {
            let plan = prepare_for(
                RunKind::Chat,
                &Fake::with_keys(vec![k.clone()]),
                &FakeSealer,
                quotas,
                &Sink::default(),
                &member(&t, session()),
                &mut Some(Ok::<_, ()>(body)),
                |_| true,
                |model, text| words(text) * if model == "m-wide" { 2 } else { 1 },
            );
            plan.unwrap().unwrap().reserved.unwrap().1
        };
        let messages = json!([{"role": "user", "content": "one two three"}]);
        // 3 for the reply, 3 + 1 for the message, its text in the region default's encoding.
        for body in [
            json!({"messages": messages}),
            json!({"model": "auto", "messages": messages}),
        ] {
            assert_eq!(prompt(&with_default, body.clone()), 3 + 4 + 6, "{body}");
            // A region the catalog does not know: counted as the body names it.
            assert_eq!(prompt(&NodeQuotas::default(), body), 3 + 4 + 3);
        }
        // A named model is counted in its own encoding.
        let named = json!({"model": "m-narrow", "messages": messages});
        assert_eq!(prompt(&with_default, named), 3 + 4 + 3);
    }

    #[test]
    fn responses_and_embeddings_bodies_are_checked() {
        for fine in [
            json!({"input": "hi"}),
            json!({"input": "hi", "model": "auto", "stream": true, "max_output_tokens": 5.0}),
            json!({"input": [{"role": "developer", "content": "x"}, {"type": "function_call_output", "call_id": "c", "output": "o"}]}),
            json!({"input": "hi", "instructions": null, "tools": [{"type": "web_search"}]}),
        ] {
            assert!(validate_responses_body(&fine).is_ok(), "{fine}");
        }
        for fine in [
            json!({"model": "e", "input": "hi"}),
            json!({"model": "e", "input": ["a", "b"], "encoding_format": "base64", "dimensions": 256}),
            json!({"model": "e", "input": [1, 2, 3]}),
            json!({"model": "e", "input": [[1], [2, 3]], "stream": false}),
            // A whole float is a token (JSON Schema reads `5.0` as an integer).
            json!({"model": "e", "input": [5.0, 0.0]}),
            json!({"model": "e", "input": [[4_294_967_295.0_f64]]}),
        ] {
            assert!(validate_embeddings_body(&fine).is_ok(), "{fine}");
        }
        let many: Vec<Value> = (0..=MAX_INPUT_ITEMS).map(|_| json!("x")).collect();
        for bad in [
            json!({}),
            json!({"input": ""}),
            json!({"input": []}),
            json!({"input": [3]}),
            json!({"input": many.clone()}),
            json!({"input": [{"role": "robot", "content": "x"}]}),
            json!({"input": "x", "max_output_tokens": 0}),
            json!({"input": "x", "instructions": ["x"]}),
            json!({"input": "x", "stream": 1}),
            json!("input"),
        ] {
            assert_eq!(
                validate_responses_body(&bad).unwrap_err().code(),
                "validation_failed",
                "{bad}"
            );
        }
        for bad in [
            json!({"input": "x"}),
            json!({"model": "auto", "input": "x"}),
            json!({"model": "e"}),
            json!({"model": "e", "input": [""]}),
            json!({"model": "e", "input": [[]]}),
            json!({"model": "e", "input": [1.5]}),
            json!({"model": "e", "input": [-1.0]}),
            json!({"model": "e", "input": [4_294_967_296.0_f64]}),
            json!({"model": "e", "input": [null]}),
            json!({"model": "e", "input": many}),
            json!({"model": "e", "input": "x", "stream": true}),
            json!({"model": "e", "input": "x", "encoding_format": "hex"}),
            json!({"model": "e", "input": "x", "dimensions": -1}),
        ] {
            assert_eq!(
                validate_embeddings_body(&bad).unwrap_err().code(),
                "validation_failed",
                "{bad}"
            );
        }
        for field in PROVIDER_FIELDS {
            let b = json!({"model": "e", "input": "x", field: "y"});
            assert_eq!(
                RunKind::Embeddings.validate(&b).unwrap_err().code(),
                "provider_not_allowed"
            );
            assert_eq!(
                RunKind::Responses.validate(&b).unwrap_err().code(),
                "provider_not_allowed"
            );
        }
        assert_eq!(RunKind::Responses.upstream_path(), "/responses");
        assert_eq!(RunKind::Embeddings.upstream_path(), "/embeddings");
        assert_eq!(RunKind::Chat.upstream_path(), "/chat/completions");
    }

    #[test]
    fn a_port_without_the_kind_fails_it_without_a_call() {
        let (runs, sink, mut plan, _) = setup(vec![Ok(())]);
        plan.kind = RunKind::Embeddings;
        let e = ready(runs.execute(plan, "/embeddings"));
        assert!(matches!(
            e,
            Err(RunError::Upstream(UpstreamFailure::Failed { .. }))
        ));
        assert!(
            runs.upstream().answers.used.lock().unwrap().is_empty(),
            "nothing was sent"
        );
        let events = sink.0.lock().unwrap();
        let Some(RunEvent::Run(activity, _)) = events.first() else {
            panic!("{events:?}")
        };
        assert_eq!(activity.detail()["route"], "/embeddings");
    }

    #[test]
    fn a_key_that_does_not_open_is_marked_and_skipped() {
        let t = crate::policy::access::tests::tenant(Status::Active);
        let mut good = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        good.sealed_secret = "sealed:good".into();
        let mut bad = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        bad.sealed_secret = "garbage".into();
        let store = Fake::with_keys(vec![bad.clone(), good]);
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        let plan = planned(&store, &Sink::default(), &t, body);
        assert_eq!(plan.keys.len(), 1);
        let verdicts = store.verdicts.lock().unwrap();
        assert_eq!(verdicts.len(), 1);
        assert_eq!(verdicts[0].key_id(), bad.id);
    }

    #[test]
    fn refusals_come_before_the_body_and_the_body_before_ai_access() {
        let t = crate::policy::access::tests::tenant(Status::Suspended);
        let store = Fake::default();
        let e = prepare_as(
            &store,
            &NodeQuotas::default(),
            &t,
            &mut Some(Err::<Value, _>("bad body")),
        );
        assert_eq!(e.unwrap_err().code(), "tenant_suspended");
        let mut t = crate::policy::access::tests::tenant(Status::Active);
        t.ai_enabled = false;
        let out = prepare_as(
            &store,
            &NodeQuotas::default(),
            &t,
            &mut Some(Err::<Value, _>("bad body")),
        );
        assert!(matches!(out, Ok(Err("bad body"))));
        let e = prepare_as(
            &store,
            &NodeQuotas::default(),
            &t,
            &mut Some(Ok::<_, ()>(json!({"messages": []}))),
        );
        assert_eq!(e.unwrap_err().code(), "validation_failed");
        let ok_body = json!({"messages": [{"role": "user", "content": "x"}]});
        let e = prepare_as(
            &store,
            &NodeQuotas::default(),
            &t,
            &mut Some(Ok::<_, ()>(ok_body)),
        );
        assert_eq!(e.unwrap_err().code(), "ai_access_disabled");
    }

    #[test]
    fn bodies_are_checked_and_providers_refused() {
        let ok = json!({"messages": [{"role": "user", "content": "hi"}], "temperature": 0.2, "stream": true});
        assert!(validate_body(&ok).is_ok());
        let whole = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5.0});
        assert!(validate_body(&whole).is_ok());
        let user = || json!({"role": "user", "content": "hi"});
        for fine in [
            json!({"messages": [user()], "max_tokens": 1}),
            // An assistant turn that only called tools has no content.
            json!({"messages": [user(), {"role": "assistant", "content": null}]}),
            json!({"messages": [user(), {"role": "assistant"}]}),
            json!({"messages": [user()], "model": "gpt-4o"}),
            json!({"messages": [user()], "model": "m".repeat(200)}),
        ] {
            assert!(validate_body(&fine).is_ok(), "{fine}");
        }
        for bad_model in [json!(""), json!("   "), json!("m".repeat(201))] {
            let b = json!({"messages": [user()], "model": bad_model});
            assert_eq!(
                validate_body(&b).unwrap_err().to_string().split(':').next(),
                Some("model"),
                "{b}"
            );
        }
        for field in PROVIDER_FIELDS {
            let mut b = ok.clone();
            b[field] = json!("x");
            assert_eq!(
                validate_body(&b).unwrap_err().code(),
                "provider_not_allowed"
            );
        }
        for bad in [
            json!({"messages": []}),
            json!({}),
            json!({"messages": [{"role": "wizard", "content": "x"}]}),
            json!({"messages": [{"role": "user"}]}),
            json!({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}),
            json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}),
            json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2.5}),
            json!({"messages": [{"role": "user", "content": "x"}], "model": 3}),
            json!([1]),
        ] {
            assert_eq!(
                validate_body(&bad).unwrap_err().code(),
                "validation_failed",
                "{bad}"
            );
        }
    }

    #[test]
    fn run_details_are_stored_as_the_json_maps_they_replaced() {
        let key_id = uuid::Uuid::now_v7();
        let delivered = DeliveredDetail {
            error: None,
            key_id,
            latency_ms: 12,
            model: "gpt-4o",
            region: "AIHK",
            retried: false,
            route: "/run",
            status: "ok",
            stream: true,
            ttft_ms: Some(3),
            usage: Some(UsageDetail {
                completion_tokens: 2,
                prompt_tokens: 1,
                total_tokens: 3,
            }),
        };
        let map = json!({
            "route": "/run", "model": "gpt-4o", "region": "AIHK", "key_id": key_id,
            "stream": true, "status": "ok", "latency_ms": 12, "ttft_ms": 3,
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
            "error": null, "retried": false,
        });
        assert_eq!(
            serde_json::to_string(&delivered).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        let failed = FailedDetail {
            error: "upstream_rejected",
            key_id,
            latency_ms: 5,
            region: "AICA",
            retried: true,
            route: "/chat/completions",
            status: "error",
            stream: false,
            upstream_status: Some(400),
        };
        let map = json!({
            "route": "/chat/completions", "region": "AICA", "key_id": key_id, "stream": false,
            "status": "error", "latency_ms": 5, "error": "upstream_rejected",
            "upstream_status": 400, "retried": true,
        });
        assert_eq!(
            serde_json::to_string(&failed).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
    }

    /// An answered run of a new tenant ended `at`, without a key, cost or reservation.
    fn line_at(at: chrono::DateTime<Utc>) -> RunLine {
        RunLine {
            id: uuid::Uuid::now_v7(),
            tenant_id: uuid::Uuid::now_v7(),
            key_id: None,
            at,
            region: Region::Aihk,
            model: "m".into(),
            outcome: "ok",
            usage: TokenUsage::default(),
            latency_ms: 1,
            reservation: None,
            cost: 0,
            spend: None,
        }
    }

    #[test]
    fn a_run_line_s_spend_settles_its_reservation_or_adds_its_cost() {
        let tenant_id = uuid::Uuid::from_u128(7);
        let key_id = uuid::Uuid::from_u128(8);
        let admitted = chrono::DateTime::parse_from_rfc3339("2026-01-31T23:59:00Z")
            .unwrap()
            .to_utc();
        let ended = chrono::DateTime::parse_from_rfc3339("2026-02-01T00:00:30Z")
            .unwrap()
            .to_utc();
        let line = |spend| RunLine {
            tenant_id,
            key_id: Some(key_id),
            cost: 300,
            spend,
            ..line_at(ended)
        };
        // Reserved at admission: the admission's month (January) settles 1,000 to 300.
        let reserved = line(Some(crate::policy::quota::SpendReservation {
            nanos: 1000,
            at: admitted,
        }));
        assert_eq!(
            reserved.spend_changes(),
            (
                crate::policy::quota::spend_windows(tenant_id, Some(key_id), admitted),
                -700
            )
        );
        // Nothing reserved: the cost is added to the month of the run's end (February).
        let unreserved = line(None);
        let (windows, change) = unreserved.spend_changes();
        assert_eq!(
            windows,
            crate::policy::quota::spend_windows(tenant_id, Some(key_id), ended)
        );
        assert_eq!(windows.len(), 2, "the tenant's and the key's spend");
        assert_eq!(change, 300);
        assert_ne!(windows, reserved.spend_changes().0, "another month");
    }

    #[test]
    fn the_estimate_counts_content_parts_and_tool_definitions() {
        let count = |_: &str, t: &str| words(t);
        let parts = |content: serde_json::Value| {
            let body = json!({"messages": [{"role": "user", "content": content}]});
            estimate(body.as_object().unwrap(), 0, &count).prompt_tokens
        };
        // Reply 3 and the message's 3 + 1, then the parts.
        let base = 3 + 3 + 1;
        assert_eq!(parts(json!([])), base);
        assert_eq!(parts(json!([{"type": "text", "text": "a b c"}])), base + 3);
        assert_eq!(
            parts(json!([{"type": "image_url", "image_url": {"url": "data:x"}}])),
            base + TOKENS_PER_IMAGE
        );
        // A part neither text nor image is counted as its JSON text (one "word" here).
        assert_eq!(parts(json!([{"type": "input_audio"}])), base + 1);
        let with_tools = |field: &str, defs: serde_json::Value| {
            let mut body = json!({"messages": [{"role": "user", "content": ""}]});
            body[field] = defs;
            estimate(body.as_object().unwrap(), 0, &count).prompt_tokens
        };
        let none = with_tools("tools", serde_json::Value::Null);
        assert_eq!(none, base + words(""));
        let tools = json!([{"type": "function", "function": {"name": "lookup city weather"}}]);
        assert_eq!(
            with_tools("tools", tools.clone()),
            none + words(&tools.to_string())
        );
        assert_eq!(
            with_tools("functions", tools.clone()),
            none + words(&tools.to_string())
        );
    }

    #[test]
    fn a_run_line_s_day_is_its_utc_date() {
        for (at, day) in [
            ("2026-03-05T23:59:59.999Z", "2026-03-05"),
            ("2026-12-31T00:00:00Z", "2026-12-31"),
            ("0987-01-09T12:00:00Z", "0987-01-09"),
            ("0001-10-31T00:00:00Z", "0001-10-31"),
            ("9999-11-20T00:00:00Z", "9999-11-20"),
        ] {
            let line = line_at(chrono::DateTime::parse_from_rfc3339(at).unwrap().to_utc());
            assert_eq!(line.day(), day);
            assert_eq!(line.day(), line.at.format("%Y-%m-%d").to_string());
        }
        // Years outside 0..=9999 keep the padded form chrono writes.
        for year in [-5, 10_000] {
            let at = chrono::NaiveDate::from_ymd_opt(year, 2, 3)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc());
            let line = line_at(at.expect("a valid date"));
            assert_eq!(line.day(), format!("{year:04}-02-03"));
        }
    }

    #[test]
    fn a_delivered_run_is_recorded_whole() {
        let (runs, sink, plan, store) = setup(vec![Ok(())]);
        let tenant_id = store.keys.lock().unwrap()[0].tenant_id;
        assert!(ready(runs.execute(plan, "/run")).is_ok());
        let events = sink.0.lock().unwrap();
        let RunEvent::Run(activity, line) = &events[0] else {
            panic!("{events:?}")
        };
        assert_ne!(line.id(), uuid::Uuid::nil());
        assert_eq!(line.tenant_id(), tenant_id);
        assert_eq!(line.key_id(), None, "a session's run");
        assert_eq!(line.model(), "m");
        assert!(!line.failed());
        assert_eq!(
            line.usage(),
            TokenUsage {
                prompt_tokens: 2,
                completion_tokens: 3,
                total_tokens: 5,
            }
        );
        assert_eq!(line.latency_ms(), 7);
        assert_eq!(
            line.token_windows(),
            crate::policy::quota::token_windows(tenant_id, None, line.at())
        );
        assert_eq!(activity.detail()["status"], "ok");
        assert_eq!(activity.detail()["usage"]["total_tokens"], 5);
    }

    #[test]
    fn a_key_s_run_is_recorded_under_the_key() {
        let t = crate::policy::access::tests::tenant(Status::Active);
        let mut k = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        k.sealed_secret = "sealed:k".into();
        let store = Fake::with_keys(vec![k]);
        let key_id = uuid::Uuid::from_u128(42);
        let credential = crate::policy::access::Credential::ApiKey {
            key_id,
            name: "ci".into(),
            scopes: vec![crate::model::workspace::KeyScope::Run],
            limits: crate::policy::quota::KeyLimits::default(),
        };
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        let sink = Arc::new(Sink::default());
        let plan = prepare_for(
            RunKind::Chat,
            &store,
            &FakeSealer,
            &NodeQuotas::default(),
            sink.as_ref(),
            &member(&t, credential),
            &mut Some(Ok::<_, ()>(body)),
            |_| true,
            |_, text| words(text),
        )
        .unwrap()
        .unwrap();
        let upstream = Arc::new(scripted(vec![Ok(())]));
        let runs = Runs::new(upstream, sink.clone());
        assert!(ready(runs.execute(plan, "/run")).is_ok());
        let events = sink.0.lock().unwrap();
        let RunEvent::Run(_, line) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(line.key_id(), Some(key_id));
        assert_eq!(line.token_windows().len(), 3, "the key's minute too");
    }

    #[test]
    fn failed_runs_are_recorded_with_their_reason_and_model() {
        for (failure, code, status) in [
            (UpstreamFailure::Timeout, "upstream_timeout", Value::Null),
            (
                UpstreamFailure::Refused {
                    status: 429,
                    message: "slow down".into(),
                    retry_after_secs: Some(3),
                },
                "upstream_rate_limited",
                json!(429),
            ),
            (
                UpstreamFailure::Refused {
                    status: 400,
                    message: "bad".into(),
                    retry_after_secs: None,
                },
                "upstream_rejected",
                json!(400),
            ),
        ] {
            for (model, recorded) in [("gpt-x", "gpt-x"), ("auto", "m-default")] {
                let (runs, sink, mut plan, _) = setup(vec![Err(failure.clone())]);
                plan.body.insert("model".into(), json!(model));
                assert!(ready(runs.execute(plan, "/run")).is_err());
                let events = sink.0.lock().unwrap();
                let RunEvent::Run(activity, line) = &events[0] else {
                    panic!("{events:?}")
                };
                assert_eq!(line.outcome(), code);
                assert!(line.failed());
                assert_eq!(line.model(), recorded, "{model}");
                assert_eq!(activity.detail()["error"], code);
                assert_eq!(activity.detail()["upstream_status"], status);
                assert_eq!(activity.detail()["status"], "error");
            }
        }
    }

    #[test]
    fn one_process_keeps_one_set_of_quota_counts() {
        let (runs, _, _, _) = setup(vec![]);
        assert!(std::ptr::eq(runs.quotas(), runs.quotas()));
    }
}
