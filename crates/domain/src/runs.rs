//! Runs: a chat request through the tenant's region gateway.
//!
//! [`prepare`] (synchronous, on the blocking pool) applies every refusal and opens the keys:
//! the member rules and the `run` scope, then the body, then AI access, through
//! [`RunScope::authorize`], which loads the keys itself. [`Runs::execute`] (async) sends the
//! request through the [`ChatUpstream`] port, trying the next key only when the upstream
//! proves a key bad (401) — the only answer that marks a key `not_ready`. Every other upstream
//! refusal is the caller's and leaves the tenant's keys as they were. Run records and key
//! verdicts leave through the [`RunSink`] port (a bounded queue), off the request path.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use serde_json::{json, Map, Value};

use crate::access::Principal;
use crate::error::{DomainError, DomainResult};
use crate::gateway::{ai_key_binding, KeyVerdict, RunScope, TenantAiKey};
use crate::ports::{AiKeyRepo, KeySealer};
use crate::secret::SecretString;
use crate::values::Region;
use crate::workspace::NewActivity;

/// Fields that would let a caller pick where the request goes: never accepted.
pub const PROVIDER_FIELDS: [&str; 5] = ["provider", "base_url", "api_key", "region", "gateway"];
const ROLES: [&str; 5] = ["system", "user", "assistant", "tool", "developer"];

/// Checks a chat body: OpenAI's shape, no provider choice. Unknown OpenAI parameters pass.
pub fn validate_body(body: Value) -> DomainResult<Map<String, Value>> {
    let Value::Object(map) = body else {
        return Err(DomainError::invalid("body", "must be a JSON object"));
    };
    if let Some(field) = PROVIDER_FIELDS.iter().find(|f| map.contains_key(**f)) {
        return Err(DomainError::ProviderNotAllowed((*field).to_owned()));
    }
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
    match map.get("model") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= 200 => {}
        Some(_) => {
            return Err(DomainError::invalid(
                "model",
                "must be a model name or \"auto\"",
            ))
        }
    }
    if map
        .get("stream")
        .is_some_and(|s| !s.is_boolean() && !s.is_null())
    {
        return Err(DomainError::invalid("stream", "must be a boolean"));
    }
    if let Some(t) = map.get("max_tokens").filter(|t| !t.is_null()) {
        // JSON Schema counts `5.0` as an integer, and so do OpenAI's clients.
        let whole = t.as_u64().or_else(|| {
            t.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 1.0 && *f <= f64::from(u32::MAX))
                .map(|f| f as u64)
        });
        if whole.is_none_or(|n| n < 1) {
            return Err(DomainError::invalid(
                "max_tokens",
                "must be a positive integer",
            ));
        }
    }
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
    /// A 5xx, a transport failure or a response that is not a completion.
    Failed { message: String },
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
    /// Registers what a stream does with its report when it ends (exactly once).
    fn on_finish(
        &self,
        stream: Self::Stream,
        done: Box<dyn FnOnce(RunReport) + Send>,
    ) -> Self::Stream;
}

/// Where run records and key verdicts go, off the request path (a bounded queue; when full,
/// an entry is dropped with a warning — a rejected key is judged again at its next 401).
pub trait RunSink: Send + Sync + 'static {
    fn send(&self, event: RunEvent);
}

/// One entry for the run writer.
#[derive(Debug, Clone)]
pub enum RunEvent {
    Activity(NewActivity),
    KeyVerdict(KeyVerdict),
}

/// A run that may go ahead: its scope, the opened keys, the checked body.
#[derive(Debug)]
pub struct RunPlan {
    scope: RunScope,
    keys: Vec<(TenantAiKey, SecretString)>,
    body: Map<String, Value>,
    stream: bool,
}

impl RunPlan {
    pub fn scope(&self) -> &RunScope {
        &self.scope
    }
}

/// Every refusal of a run before the upstream is called, in the contract's order: the
/// caller (member rules, `run` scope, no Shadow view), then the body (`body` is the HTTP
/// layer's parse result, held back until now), then AI access. Keys that do not open with the
/// master key are marked `not_ready` and skipped.
pub fn prepare<P: AiKeyRepo + ?Sized, E>(
    store: &P,
    sealer: &dyn KeySealer,
    principal: &Principal,
    body: Result<Value, E>,
    gateway_configured: impl Fn(Region) -> bool,
) -> DomainResult<Result<RunPlan, E>> {
    let tenant = RunScope::caller_tenant(principal)?;
    let body = match body {
        Ok(body) => validate_body(body)?,
        Err(e) => return Ok(Err(e)),
    };
    let scope = RunScope::authorize(principal, store, gateway_configured(tenant.region))?;
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
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Ok(Ok(RunPlan {
        scope,
        keys,
        body,
        stream,
    }))
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
}

impl<U: ChatUpstream> Runs<U> {
    pub fn new(upstream: Arc<U>, sink: Arc<dyn RunSink>) -> Self {
        Self {
            upstream,
            sink,
            next: AtomicUsize::new(0),
        }
    }

    pub fn upstream(&self) -> &U {
        &self.upstream
    }

    /// Sends the planned request, starting at a rotating key. Only a 401 moves on to the next
    /// key (and marks the refused one `not_ready`); anything else ends the run.
    pub async fn execute(
        &self,
        plan: RunPlan,
        route: &'static str,
    ) -> Result<ChatAnswer<U::Body, U::Stream>, RunError> {
        let RunPlan {
            scope,
            keys,
            body,
            stream,
        } = plan;
        let scope = Arc::new(scope);
        let n = keys.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        for i in 0..n {
            let (key, secret) = &keys[(start + i) % n];
            let record = RunRecord {
                scope: Arc::clone(&scope),
                key_id: key.id,
                stream,
                route,
            };
            match self
                .upstream
                .chat(scope.region(), secret, body.clone())
                .await
            {
                Ok(ChatAnswer::Complete { body, report }) => {
                    self.sink
                        .send(RunEvent::Activity(record.delivered(&report)));
                    return Ok(ChatAnswer::Complete { body, report });
                }
                Ok(ChatAnswer::Stream(s)) => {
                    let sink = Arc::clone(&self.sink);
                    let s = self.upstream.on_finish(
                        s,
                        Box::new(move |report| {
                            sink.send(RunEvent::Activity(record.delivered(&report)))
                        }),
                    );
                    return Ok(ChatAnswer::Stream(s));
                }
                Err(UpstreamFailure::KeyRejected) => {
                    if let Some(v) =
                        KeyVerdict::rejected(&scope, key, "rejected by the gateway", Utc::now())
                    {
                        self.sink.send(RunEvent::KeyVerdict(v));
                    }
                }
                Err(failure) => {
                    self.sink
                        .send(RunEvent::Activity(record.failed(&failure, started)));
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
}

impl RunRecord {
    fn delivered(&self, report: &RunReport) -> NewActivity {
        NewActivity::run(
            &self.scope,
            Utc::now(),
            json!({
                "route": self.route,
                "model": report.model,
                "region": self.scope.region().as_str(),
                "key_id": self.key_id,
                "stream": self.stream,
                "status": report.end.as_str(),
                "latency_ms": report.latency_ms,
                "ttft_ms": report.ttft_ms,
                "usage": report.usage.map(|u| json!({
                    "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens,
                    "total_tokens": u.total_tokens,
                })),
                "error": report.error_code,
            }),
        )
    }

    fn failed(&self, failure: &UpstreamFailure, started: Instant) -> NewActivity {
        let (code, status) = match failure {
            UpstreamFailure::Timeout => ("upstream_timeout", None),
            UpstreamFailure::Refused { status, .. } => ("upstream_rejected", Some(*status)),
            _ => ("upstream_error", None),
        };
        NewActivity::run(
            &self.scope,
            Utc::now(),
            json!({
                "route": self.route,
                "region": self.scope.region().as_str(),
                "key_id": self.key_id,
                "stream": self.stream,
                "status": "error",
                "latency_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "error": code,
                "upstream_status": status,
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::fakes::{ready, Fake, FakeSealer};
    use crate::gateway::tests::{key, member, session};
    use crate::gateway::AiKeyStatus;
    use crate::model::Status;

    /// Answers each call with the next scripted result and remembers which key was used.
    struct Scripted {
        answers: Mutex<VecDeque<Result<(), UpstreamFailure>>>,
        used: Mutex<Vec<String>>,
    }

    impl ChatUpstream for Scripted {
        type Body = ();
        type Stream = ();
        fn configured(&self, _: Region) -> bool {
            true
        }
        fn chat(
            &self,
            _: Region,
            key: &SecretString,
            _: Map<String, Value>,
        ) -> impl Future<Output = Result<ChatAnswer<(), ()>, UpstreamFailure>> + Send {
            self.used.lock().unwrap().push(key.expose().to_owned());
            let next = self.answers.lock().unwrap().pop_front();
            async move {
                match next {
                    Some(Ok(())) => Ok(ChatAnswer::Complete {
                        body: (),
                        report: RunReport {
                            end: RunEnd::Ok,
                            model: "m".into(),
                            latency_ms: 1,
                            ttft_ms: Some(1),
                            usage: None,
                            error_code: None,
                        },
                    }),
                    Some(Err(e)) => Err(e),
                    None => Err(UpstreamFailure::Failed {
                        message: "unscripted".into(),
                    }),
                }
            }
        }
        fn on_finish(&self, s: (), _: Box<dyn FnOnce(RunReport) + Send>) {
            s
        }
    }

    #[derive(Default)]
    struct Sink(Mutex<Vec<RunEvent>>);

    impl RunSink for Sink {
        fn send(&self, event: RunEvent) {
            self.0.lock().unwrap().push(event);
        }
    }

    fn setup(
        answers: Vec<Result<(), UpstreamFailure>>,
    ) -> (Runs<Scripted>, Arc<Sink>, RunPlan, Fake) {
        let t = crate::access::tests::tenant(Status::Active);
        let mut keys = vec![
            key(&t, Region::Aihk, true, AiKeyStatus::Ready),
            key(&t, Region::Aihk, true, AiKeyStatus::Ready),
        ];
        for (i, k) in keys.iter_mut().enumerate() {
            k.sealed_secret = format!("sealed:key-{i}");
        }
        let store = Fake::with_keys(keys);
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        let plan = prepare(
            &store,
            &FakeSealer,
            &member(&t, session()),
            Ok::<_, ()>(body),
            |_| true,
        )
        .unwrap()
        .unwrap();
        let sink = Arc::new(Sink::default());
        let upstream = Arc::new(Scripted {
            answers: Mutex::new(answers.into()),
            used: Mutex::new(Vec::new()),
        });
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
        assert_eq!(runs.upstream().used.lock().unwrap().len(), 1);
    }

    #[test]
    fn only_a_401_marks_the_key_and_tries_the_next() {
        let (runs, sink, plan, _) = setup(vec![Err(UpstreamFailure::KeyRejected), Ok(())]);
        assert!(ready(runs.execute(plan, "/run")).is_ok());
        assert_eq!(verdicts(&sink), 1);
        let used = runs.upstream().used.lock().unwrap().clone();
        assert_eq!(used.len(), 2);
        assert_ne!(used[0], used[1]);
        let events = sink.0.lock().unwrap();
        let RunEvent::KeyVerdict(v) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(v.status(), AiKeyStatus::NotReady);
        assert_eq!(v.reason(), Some("rejected by the gateway"));
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
    fn server_failures_and_timeouts_do_not_fail_over() {
        for failure in [
            UpstreamFailure::Timeout,
            UpstreamFailure::Failed {
                message: "502".into(),
            },
        ] {
            let (runs, sink, plan, _) = setup(vec![Err(failure.clone()), Ok(())]);
            let out = ready(runs.execute(plan, "/run"));
            assert_eq!(out.err(), Some(RunError::Upstream(failure)));
            assert_eq!(verdicts(&sink), 0);
        }
    }

    #[test]
    fn a_key_that_does_not_open_is_marked_and_skipped() {
        let t = crate::access::tests::tenant(Status::Active);
        let mut good = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        good.sealed_secret = "sealed:good".into();
        let mut bad = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        bad.sealed_secret = "garbage".into();
        let store = Fake::with_keys(vec![bad.clone(), good]);
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        let plan = prepare(
            &store,
            &FakeSealer,
            &member(&t, session()),
            Ok::<_, ()>(body),
            |_| true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(plan.keys.len(), 1);
        let verdicts = store.verdicts.lock().unwrap();
        assert_eq!(verdicts.len(), 1);
        assert_eq!(verdicts[0].key_id(), bad.id);
    }

    #[test]
    fn refusals_come_before_the_body_and_the_body_before_ai_access() {
        let t = crate::access::tests::tenant(Status::Suspended);
        let store = Fake::default();
        let e = prepare(
            &store,
            &FakeSealer,
            &member(&t, session()),
            Err::<Value, _>("bad body"),
            |_| true,
        );
        assert_eq!(e.unwrap_err().code(), "tenant_suspended");
        let mut t = crate::access::tests::tenant(Status::Active);
        t.ai_enabled = false;
        let out = prepare(
            &store,
            &FakeSealer,
            &member(&t, session()),
            Err::<Value, _>("bad body"),
            |_| true,
        );
        assert!(matches!(out, Ok(Err("bad body"))));
        let e = prepare(
            &store,
            &FakeSealer,
            &member(&t, session()),
            Ok::<_, ()>(json!({"messages": []})),
            |_| true,
        );
        assert_eq!(e.unwrap_err().code(), "validation_failed");
        let ok_body = json!({"messages": [{"role": "user", "content": "x"}]});
        let e = prepare(
            &store,
            &FakeSealer,
            &member(&t, session()),
            Ok::<_, ()>(ok_body),
            |_| true,
        );
        assert_eq!(e.unwrap_err().code(), "ai_access_disabled");
    }

    #[test]
    fn bodies_are_checked_and_providers_refused() {
        let ok = json!({"messages": [{"role": "user", "content": "hi"}], "temperature": 0.2, "stream": true});
        assert!(validate_body(ok.clone()).is_ok());
        let whole = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5.0});
        assert!(validate_body(whole).is_ok());
        for field in PROVIDER_FIELDS {
            let mut b = ok.clone();
            b[field] = json!("x");
            assert_eq!(validate_body(b).unwrap_err().code(), "provider_not_allowed");
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
                validate_body(bad.clone()).unwrap_err().code(),
                "validation_failed",
                "{bad}"
            );
        }
    }
}
