//! The run service's decisions over the in-memory fakes: every refusal reaches the caller in
//! the contract's order, quota refusals and answered runs are measured, the upstream's answer
//! or failure is returned with the quotas that applied and recorded, and lease refills start in
//! the background.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use chrono::Duration as Days;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::*;
use crate::fakes::{
    ready, FakeCodec, FakeMetrics, FakeProbe, FakeRunStorage, FakeSealer, FakeSink, FakeUpstream,
};
use crate::model::workspace::{ApiKey, KeyScope};
use crate::model::{Role, Session, Status, Tenant, User};
use crate::policy::access::tests::{tenant, user};
use crate::policy::admin_tokens::{AdminToken, AdminTokenScope, NewAdminToken};
use crate::policy::ai_access::tests::key;
use crate::policy::ai_access::AiKeyStatus;
use crate::policy::quota::TenantLimits;
use crate::policy::runs::RunEvent;
use crate::services::accounts::{check_credential, Presented};

type Body = Map<String, Value>;
type Outcome = Ran<Body, String, &'static str>;

/// The session token of the tenant's member, Ann.
const ANN: &str = "session_ann";

/// One tenant (region AIHK) with two ready keys that open (`key-0`, `key-1`), its active
/// member Ann signed in, and the run service's ports over fakes.
struct World {
    storage: FakeRunStorage,
    fake_upstream: Arc<FakeUpstream>,
    upstream: Arc<dyn RunUpstream<Body, String>>,
    sink: Arc<FakeSink>,
    sealer: Arc<dyn KeySealer>,
    metrics: FakeMetrics,
    tenant: Tenant,
    ann: User,
}

impl World {
    fn new() -> Self {
        Self::build(|_| {}, FakeUpstream::default())
    }

    /// A world whose tenant `change` adjusts.
    fn with(change: impl FnOnce(&mut Tenant)) -> Self {
        Self::build(change, FakeUpstream::default())
    }

    /// A world whose tenant has the quota `limits`.
    fn limited(limits: TenantLimits) -> Self {
        Self::with(|t| t.limits = limits)
    }

    /// A world over `upstream`.
    fn over(upstream: FakeUpstream) -> Self {
        Self::build(|_| {}, upstream)
    }

    /// A world whose tenant `change` adjusts, over `upstream`.
    fn build(change: impl FnOnce(&mut Tenant), upstream: FakeUpstream) -> Self {
        let mut t = tenant(Status::Active);
        change(&mut t);
        let storage = FakeRunStorage::default();
        let store = &storage.store;
        let mut keys = vec![
            key(&t, Region::Aihk, true, AiKeyStatus::Ready),
            key(&t, Region::Aihk, true, AiKeyStatus::Ready),
        ];
        for (i, k) in keys.iter_mut().enumerate() {
            k.sealed_secret = format!("sealed:key-{i}");
        }
        *store.keys.lock().unwrap() = keys;
        store.tenants.lock().unwrap().push(t.clone());
        let ann = user(Role::Member, Status::Active, Some(&t));
        store.users.lock().unwrap().push(ann.clone());
        store.sessions.lock().unwrap().push(session_of(&ann, ANN));
        let fake_upstream = Arc::new(upstream);
        let sink = Arc::new(FakeSink::default());
        let runs = Runs::new(
            Arc::clone(&fake_upstream),
            Arc::clone(&sink) as Arc<dyn RunSink>,
        );
        let upstream: Arc<dyn RunUpstream<Body, String>> =
            Arc::new(Served::new(runs, |n: u32| format!("stream {n}")));
        Self {
            storage,
            fake_upstream,
            upstream,
            sink,
            sealer: Arc::new(FakeSealer),
            metrics: FakeMetrics::default(),
            tenant: t,
            ann,
        }
    }

    fn store(&self) -> &crate::fakes::Fake {
        &self.storage.store
    }

    fn run(&self, credential: CheckedCredential, body: Result<Value, &'static str>) -> Outcome {
        self.run_kind(RunKind::Chat, credential, body)
    }

    fn run_kind(
        &self,
        kind: RunKind,
        credential: CheckedCredential,
        body: Result<Value, &'static str>,
    ) -> Outcome {
        let ports = RunPorts {
            storage: &self.storage,
            upstream: &self.upstream,
            sealer: &self.sealer,
            metrics: &self.metrics,
            policy: AccountPolicy::default(),
        };
        ready(run(
            &ports,
            RunRequest {
                kind,
                route: "/run",
                credential,
                body,
            },
        ))
    }

    /// A user of `role` and `status`, member of `tenant`, in the store.
    fn add_user(&self, role: Role, status: Status, tenant: Option<&Tenant>) -> User {
        let u = user(role, status, tenant);
        self.store().users.lock().unwrap().push(u.clone());
        u
    }

    /// A workspace key of Ann's with `scopes`; its credential.
    fn api_key(&self, scopes: Vec<KeyScope>) -> CheckedCredential {
        let raw = format!("gc_test_{}", Uuid::now_v7().simple());
        self.store().api_keys.lock().unwrap().push(ApiKey {
            id: Uuid::now_v7(),
            tenant_id: self.tenant.id,
            user_id: self.ann.id,
            name: "script".into(),
            scopes,
            hint: "gc_…abcd".into(),
            key_hash: FakeCodec::hash_of(&raw),
            created_at: Utc::now(),
            last_used_at: None,
            expires_at: None,
            revoked_at: None,
            limits: Default::default(),
        });
        check_credential(&FakeCodec, Presented::Bearer(&raw)).unwrap()
    }

    /// The run records sent to the run writer: activity lines' details and usage lines.
    fn run_lines(&self) -> Vec<(Value, crate::policy::runs::RunLine)> {
        self.sink
            .events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                RunEvent::Run(activity, line) => {
                    Some((activity.detail().clone(), (**line).clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// `ran` was refused with `code`, its caller `by`, and nothing was sent upstream,
    /// recorded or measured.
    fn assert_refused_untouched(&self, ran: &Outcome, code: &str, by: Option<Uuid>) {
        assert_eq!(refusal(ran).code().as_str(), code);
        assert_eq!(caller(ran), by);
        self.assert_untouched();
    }

    /// Nothing was sent upstream, recorded or measured.
    fn assert_untouched(&self) {
        assert!(self.fake_upstream.calls.lock().unwrap().is_empty());
        assert!(self.run_lines().is_empty());
        assert!(self.metrics.latencies.lock().unwrap().is_empty());
    }
}

fn session_of(user: &User, raw: &str) -> Session {
    let now = Utc::now();
    Session {
        id: Uuid::now_v7(),
        user_id: user.id,
        token_hash: FakeCodec::hash_of(raw),
        created_at: now,
        last_seen_at: now,
        expires_at: now + Days::days(1),
        user_agent: "test".into(),
        ip: "203.0.113.9".into(),
        shadow_tenant_id: None,
        shadow_since: None,
    }
}

fn session(raw: &str) -> CheckedCredential {
    check_credential(&FakeCodec, Presented::SessionToken(raw)).unwrap()
}

fn chat() -> Result<Value, &'static str> {
    Ok(json!({"messages": [{"role": "user", "content": "hello there"}]}))
}

/// The refusal of a run that did not reach the upstream.
fn refusal(ran: &Outcome) -> &DomainError {
    match &ran.outcome {
        Err(RunFailure::Refused(e)) => e,
        Err(RunFailure::Body(e)) => panic!("the body's own error {e}"),
        Err(RunFailure::Upstream { error, .. }) => panic!("an upstream failure {error:?}"),
        Ok(_) => panic!("the run was served"),
    }
}

fn code(ran: &Outcome) -> &'static str {
    refusal(ran).code().as_str()
}

/// The principal's user id (`None`: authentication failed).
fn caller(ran: &Outcome) -> Option<Uuid> {
    ran.principal.as_ref().map(|p| p.user().id)
}

#[test]
fn an_unknown_session_is_refused_before_the_body_and_has_no_principal() {
    let w = World::new();
    for body in [chat(), Err("not JSON")] {
        let ran = w.run(session("session_nobody"), body);
        assert_eq!(code(&ran), "unauthenticated");
        assert!(ran.principal.is_none());
    }
    w.assert_untouched();
    assert!(w.metrics.refused.lock().unwrap().is_empty());
}

#[test]
fn a_store_that_cannot_answer_refuses_the_run_unavailable() {
    let w = World::new();
    *w.storage.unavailable.lock().unwrap() = 1;
    let ran = w.run(session(ANN), chat());
    w.assert_refused_untouched(&ran, "service_unavailable", None);
    // The next read answers: the same caller runs.
    let ran = w.run(session(ANN), chat());
    assert!(ran.outcome.is_ok());
    assert_eq!(*w.storage.reads.lock().unwrap(), 2);
}

#[test]
fn a_key_without_the_run_scope_is_refused_with_its_principal() {
    let w = World::new();
    let ran = w.run(w.api_key(vec![KeyScope::WorkspaceRead]), chat());
    w.assert_refused_untouched(&ran, "insufficient_scope", Some(w.ann.id));
    let ran = w.run(w.api_key(vec![KeyScope::Run]), chat());
    assert!(ran.outcome.is_ok());
    let (_, line) = &w.run_lines()[0];
    assert!(line.key_id().is_some(), "recorded under the key");
}

#[test]
fn a_shadow_view_is_read_only() {
    let w = World::new();
    let admin = w.add_user(Role::PlatformAdmin, Status::Active, None);
    let mut s = session_of(&admin, "session_admin");
    s.shadow_tenant_id = Some(w.tenant.id);
    s.shadow_since = Some(Utc::now());
    w.store().sessions.lock().unwrap().push(s);
    let ran = w.run(session("session_admin"), chat());
    w.assert_refused_untouched(&ran, "shadow_read_only", Some(admin.id));
}

#[test]
fn a_suspended_member_is_refused_before_the_body_is_looked_at() {
    let w = World::new();
    let bob = w.add_user(Role::Member, Status::Suspended, Some(&w.tenant));
    w.store()
        .sessions
        .lock()
        .unwrap()
        .push(session_of(&bob, "session_bob"));
    let ran = w.run(session("session_bob"), Err("not JSON"));
    w.assert_refused_untouched(&ran, "member_suspended", Some(bob.id));
}

#[test]
fn an_admin_token_is_recorded_then_refused_a_run() {
    let w = World::new();
    let admin = w.add_user(Role::PlatformAdmin, Status::Active, None);
    let raw = "gca_test_run";
    w.store().admin_tokens.lock().unwrap().push(NewAdminToken {
        token: AdminToken {
            id: Uuid::now_v7(),
            user_id: admin.id,
            name: "ops".into(),
            scope: AdminTokenScope::Admin,
            created_at: Utc::now(),
            expires_at: None,
            last_used_at: None,
        },
        token_hash: FakeCodec::hash_of(raw),
    });
    let credential = check_credential(
        &FakeCodec,
        Presented::AdminToken {
            raw,
            admin_route: true,
            writes: true,
            route: "POST /run",
        },
    )
    .unwrap();
    let ran = w.run(credential, chat());
    // An admin token is a credential on `/admin/**` only.
    assert_eq!(code(&ran), "invalid_api_key");
    assert_eq!(caller(&ran), Some(admin.id));
    let uses = w.store().admin_token_uses.lock().unwrap().clone();
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0].0.route, "POST /run");
    w.assert_untouched();
}

#[test]
fn the_bodys_own_error_comes_after_the_caller_checks() {
    let w = World::new();
    let ran = w.run(session(ANN), Err("not JSON"));
    assert_eq!(caller(&ran), Some(w.ann.id));
    assert!(matches!(ran.outcome, Err(RunFailure::Body("not JSON"))));
    w.assert_untouched();
}

#[test]
fn an_invalid_body_is_refused_before_ai_access() {
    let w = World::with(|t| t.ai_enabled = false);
    let ran = w.run(session(ANN), Ok(json!({"messages": []})));
    assert_eq!(code(&ran), "validation_failed");
    w.assert_untouched();
}

#[test]
fn ai_turned_off_is_refused_disabled() {
    let w = World::with(|t| t.ai_enabled = false);
    let ran = w.run(session(ANN), chat());
    w.assert_refused_untouched(&ran, "ai_access_disabled", Some(w.ann.id));
}

#[test]
fn a_region_without_a_gateway_is_not_ready() {
    let w = World::over(FakeUpstream {
        unconfigured: vec![Region::Aihk],
        ..FakeUpstream::default()
    });
    let ran = w.run(session(ANN), chat());
    assert_eq!(code(&ran), "ai_access_not_ready");
    w.assert_untouched();
}

#[test]
fn no_usable_key_is_not_ready_and_a_key_that_does_not_open_is_marked() {
    let w = World::new();
    // Keys of another region, or not chat-enabled, do not count.
    for k in w.store().keys.lock().unwrap().iter_mut() {
        k.chat_enabled = false;
    }
    let ran = w.run(session(ANN), chat());
    assert_eq!(code(&ran), "ai_access_not_ready");
    // Usable keys whose secrets do not open: each is marked, the run refused.
    for k in w.store().keys.lock().unwrap().iter_mut() {
        k.chat_enabled = true;
        k.sealed_secret = "bad:secret".into();
    }
    let ran = w.run(session(ANN), chat());
    assert_eq!(code(&ran), "ai_access_not_ready");
    assert_eq!(w.store().verdicts.lock().unwrap().len(), 2);
    w.assert_untouched();
}

#[test]
fn a_full_run_writer_queue_refuses_busy_and_counts_no_quota() {
    let w = World::limited(per_minute(1));
    w.sink.full.store(true, Ordering::Relaxed);
    let ran = w.run(session(ANN), chat());
    assert_eq!(code(&ran), "busy");
    assert!(w.metrics.refused.lock().unwrap().is_empty());
    w.assert_untouched();
    // The one request of the minute is still there.
    w.sink.full.store(false, Ordering::Relaxed);
    assert!(w.run(session(ANN), chat()).outcome.is_ok());
}

#[test]
fn a_rate_limit_refusal_is_counted_by_its_reason() {
    let w = World::limited(per_minute(1));
    assert!(w.run(session(ANN), chat()).outcome.is_ok());
    let ran = w.run(session(ANN), chat());
    assert_eq!(code(&ran), "rate_limited");
    assert_eq!(caller(&ran), Some(w.ann.id));
    assert_eq!(*w.metrics.refused.lock().unwrap(), vec!["rate_limited"]);
    assert_eq!(w.fake_upstream.calls.lock().unwrap().len(), 1);
}

#[test]
fn a_spent_budget_is_counted_by_its_reason() {
    let w = World::limited(TenantLimits {
        monthly_tokens: Some(10),
        ..TenantLimits::default()
    });
    let month = crate::policy::quota::token_windows(w.tenant.id, None, Utc::now());
    w.store().add_tokens_now(month, 10);
    let ran = w.run(session(ANN), chat());
    assert_eq!(code(&ran), "budget_exhausted");
    assert_eq!(*w.metrics.refused.lock().unwrap(), vec!["budget_exhausted"]);
    w.assert_untouched();
}

#[test]
fn a_read_run_again_after_a_store_failure_still_has_the_body() {
    let mut w = World::limited(per_minute(100));
    w.storage.retry_refused = true;
    // The first attempt's quota write fails; the second attempt runs with the same body.
    *w.store().refuse_takes.lock().unwrap() = 1;
    let ran = w.run(session(ANN), chat());
    assert!(ran.outcome.is_ok());
    let calls = w.fake_upstream.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].3["messages"][0]["content"], "hello there");
}

#[test]
fn an_answered_run_is_served_with_its_limits_recorded_and_measured() {
    let w = World::limited(per_minute(100));
    let ran = w.run(session(ANN), chat());
    assert_eq!(caller(&ran), Some(w.ann.id));
    let Ok(RunAnswer { answer, limits }) = ran.outcome else {
        panic!("the run was not served")
    };
    let ChatAnswer::Complete { body, report } = answer else {
        panic!("a stream")
    };
    assert_eq!(body["messages"][0]["content"], "hello there");
    assert_eq!(report.usage.map(|u| u.total_tokens), Some(5));
    assert_eq!(
        limits.requests.map(|r| (r.limit, r.remaining)),
        Some((100, 99))
    );
    // Sent with one of the tenant's keys, in its region.
    let calls = w.fake_upstream.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].0, calls[0].1), (RunKind::Chat, Region::Aihk));
    assert!(calls[0].2.starts_with("key-"));
    // Recorded once, as delivered, under the route.
    let lines = w.run_lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].1.outcome(), "ok");
    assert_eq!(lines[0].1.tenant_id(), w.tenant.id);
    assert_eq!(lines[0].0["route"], "/run");
    // Measured once, in the tenant's region and the route.
    let latencies = w.metrics.latencies.lock().unwrap().clone();
    assert_eq!(latencies.len(), 1);
    assert_eq!((latencies[0].0, latencies[0].1), ("AIHK", "/run"));
    assert!(w.metrics.refused.lock().unwrap().is_empty());
}

#[test]
fn the_run_goes_to_the_endpoint_of_its_kind() {
    let w = World::new();
    let ran = w.run_kind(
        RunKind::Embeddings,
        session(ANN),
        Ok(json!({"model": "m-embed", "input": "hello there"})),
    );
    assert!(ran.outcome.is_ok());
    assert_eq!(
        w.fake_upstream.calls.lock().unwrap()[0].0,
        RunKind::Embeddings
    );
}

#[test]
fn a_stream_reaches_the_caller_in_its_type_and_is_recorded_when_it_ends() {
    let w = World::new();
    let ran = w.run(
        session(ANN),
        Ok(json!({"stream": true, "messages": [{"role": "user", "content": "hi"}]})),
    );
    let Ok(RunAnswer {
        answer: ChatAnswer::Stream(s),
        ..
    }) = ran.outcome
    else {
        panic!("not a stream")
    };
    assert_eq!(s, "stream 1");
    assert!(w.run_lines().is_empty(), "recorded when it ends");
    let done = w.fake_upstream.finishing.lock().unwrap().pop().unwrap();
    done(crate::policy::runs::RunReport {
        end: crate::policy::runs::RunEnd::Ok,
        model: "m-default".into(),
        latency_ms: 3,
        ttft_ms: Some(1),
        usage: None,
        error_code: None,
        relayed_tokens: None,
    });
    assert_eq!(w.run_lines()[0].1.outcome(), "ok");
}

#[test]
fn an_upstream_failure_is_returned_with_the_limits_and_recorded_with_its_code() {
    let w = World::limited(per_minute(100));
    w.fake_upstream
        .failures
        .lock()
        .unwrap()
        .push_back(UpstreamFailure::Timeout);
    let ran = w.run(session(ANN), chat());
    assert_eq!(caller(&ran), Some(w.ann.id));
    let Err(RunFailure::Upstream { error, limits }) = ran.outcome else {
        panic!("not an upstream failure")
    };
    assert_eq!(error, RunError::Upstream(UpstreamFailure::Timeout));
    assert_eq!(limits.requests.map(|r| r.remaining), Some(99));
    let lines = w.run_lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].1.outcome(), "upstream_timeout");
    assert_eq!(lines[0].0["error"], "upstream_timeout");
    assert!(
        w.metrics.latencies.lock().unwrap().is_empty(),
        "not an answered run"
    );
    assert!(w.metrics.refused.lock().unwrap().is_empty());
}

#[test]
fn every_key_rejected_marks_both_and_fails_the_run() {
    let w = World::new();
    let mut failures = w.fake_upstream.failures.lock().unwrap();
    failures.push_back(UpstreamFailure::KeyRejected);
    failures.push_back(UpstreamFailure::KeyRejected);
    drop(failures);
    let ran = w.run(session(ANN), chat());
    let Err(RunFailure::Upstream { error, .. }) = ran.outcome else {
        panic!("not an upstream failure")
    };
    assert_eq!(error, RunError::AllKeysRejected(Region::Aihk));
    let mut secrets = w.fake_upstream.secrets();
    secrets.sort();
    assert_eq!(secrets, ["key-0", "key-1"]);
    let verdicts = w
        .sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, RunEvent::KeyVerdict(_)))
        .count();
    assert_eq!(verdicts, 2);
}

/// Counts the warnings `gc_domain::services::run` logs on the thread while it is the default.
struct Warnings(Arc<AtomicUsize>);

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let m = event.metadata();
        if *m.level() == tracing::Level::WARN
            && m.target() == module_path!().trim_end_matches("::tests")
        {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Runs the detached work; answers what it was and the warnings it logged.
fn run_detached(w: &World) -> (Vec<&'static str>, usize) {
    let warnings = Arc::new(AtomicUsize::new(0));
    let ran = tracing::subscriber::with_default(Warnings(Arc::clone(&warnings)), || {
        w.storage.run_detached()
    });
    (ran, warnings.load(Ordering::Relaxed))
}

/// Runs Ann's chats until a lease refill is due (a large lease down to a quarter); answers how
/// many it took.
fn run_until_a_refill_is_detached(w: &World) -> usize {
    for n in 1..=200 {
        assert!(w.run(session(ANN), chat()).outcome.is_ok());
        if !w.storage.detached_names().is_empty() {
            return n;
        }
    }
    panic!("no refill was started")
}

/// Limits of `n` requests a minute.
fn per_minute(n: u64) -> TenantLimits {
    TenantLimits {
        requests_per_minute: Some(n),
        ..TenantLimits::default()
    }
}

#[test]
fn a_due_lease_refill_starts_in_the_background_once() {
    let w = World::limited(per_minute(1_000_000));
    let n = run_until_a_refill_is_detached(&w);
    assert!(n > 1, "small leases are taken on the request path");
    assert_eq!(w.storage.detached_names(), ["the quota refiller"]);
    // Not run by the run itself: the store has counted only the leases taken so far.
    let counted =
        |w: &World| -> u64 { w.store().quota.lock().unwrap().values().map(|c| c.0).sum() };
    let before = counted(&w);
    // While it waits, no other refiller is started.
    assert!(w.run(session(ANN), chat()).outcome.is_ok());
    assert_eq!(w.storage.detached_names().len(), 1);
    let (ran, warnings) = run_detached(&w);
    assert_eq!(ran, ["the quota refiller"]);
    assert_eq!(warnings, 0, "a refill that counted warns of nothing");
    assert!(counted(&w) > before, "the refiller took the next lease");
}

#[test]
fn a_refill_that_could_not_count_is_logged() {
    let w = World::limited(per_minute(1_000_000));
    run_until_a_refill_is_detached(&w);
    *w.store().refuse_takes.lock().unwrap() = 1;
    let (ran, warnings) = run_detached(&w);
    assert_eq!(ran, ["the quota refiller"]);
    assert_eq!(warnings, 1);
}

#[test]
fn no_refill_is_started_for_a_tenant_without_limits() {
    let w = World::new();
    for _ in 0..60 {
        assert!(w.run(session(ANN), chat()).outcome.is_ok());
    }
    assert!(w.storage.detached_names().is_empty());
}

#[test]
fn models_lists_auto_then_the_regions_models_narrowed_to_the_tenants() {
    let w = World::new();
    let listed = |w: &World, credential: &CheckedCredential| {
        let p =
            accounts::authenticate(w.store(), &AccountPolicy::default(), credential, Utc::now());
        models(w.upstream.as_ref(), &p.unwrap()).map_err(|e| e.code().as_str())
    };
    assert_eq!(
        listed(&w, &session(ANN)).unwrap(),
        ["auto", "m-default", "m-large"]
    );
    let w = World::with(|t| t.allowed_models = Some(vec!["m-large".into()]));
    assert_eq!(listed(&w, &session(ANN)).unwrap(), ["auto", "m-large"]);
    // The run's caller rules: a key without the `run` scope may not list them.
    let key = w.api_key(vec![KeyScope::WorkspaceRead]);
    assert_eq!(listed(&w, &key).unwrap_err(), "insufficient_scope");
}

#[test]
fn served_passes_the_adapters_answers_through() {
    let w = World::over(FakeUpstream {
        unconfigured: vec![Region::Aihk],
        models: vec!["m-one".into()],
        ..FakeUpstream::default()
    });
    let up = w.upstream.as_ref();
    assert!(!up.configured(Region::Aihk));
    assert!(up.configured(Region::Aica));
    assert_eq!(up.count_tokens("auto", "three words here"), 3);
    assert_eq!(up.models(Region::Aihk), ["m-one"]);
}

#[test]
fn the_checks_of_a_key_probe_reach_it_through_the_dyn_port() {
    let mut probe = FakeProbe::default();
    probe.keys.insert(
        "sk-good".into(),
        KeyProbeAnswer {
            accepted: true,
            reason: None,
        },
    );
    probe.gateways.insert(
        Region::Aihk,
        GatewayCheck {
            reachable: true,
            status_code: Some(200),
            latency_ms: 5,
            reason: None,
        },
    );
    let checks: &dyn UpstreamChecks = &probe;
    let answer = ready(checks.probe_key(Region::Aihk, &SecretString::new("sk-good")));
    assert!(answer.is_some_and(|a| a.accepted));
    assert!(ready(checks.check_gateway(Region::Aihk)).is_some());
    assert!(ready(checks.check_gateway(Region::Aica)).is_none());
    assert_eq!(probe.probed.lock().unwrap().len(), 1);
    assert_eq!(*probe.checked.lock().unwrap(), [Region::Aihk, Region::Aica]);
}
