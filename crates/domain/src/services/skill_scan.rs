//! Skill verdicts (issue 29, contract section 11): every stored skill carries the Guard's
//! verdict on its content. Creating or updating a skill scans its content (bounded, on the
//! Guard's own executor, in the tenant's share, never on the database threads) and stores the
//! verdict with the record in the same write; `POST /workspace/skills/{id}/scan` scans again.
//!
//! Fail closed, never blocking: a `fail` is stored like any other verdict (records are stored,
//! never executed); a scan that could not be done (the scanner at capacity, the tenant's share
//! in use, the time-out) is stored as verdict `warn` with a `scan.incomplete` finding that says
//! why, `rules_version: null` and `scanned_at: null`, so it reads as stale and is never `pass`.
//! A skill stored before verdicts existed (no stored guard) is shown the same way. `stale` is
//! computed when the record is shown: the stored rules version is not the scanner's current one
//! (decision 0039).

use std::future::Future;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::{KeyScope, Record, RecordKind, RecordRef};
use crate::policy::access::Principal;
use crate::policy::records::validate_create;
pub use crate::policy::skill_verdicts::{
    FindingSummary, GuardVerdict, NotScanned, SkillGuard, SkillScan, MAX_STORED_FINDINGS,
};
use crate::ports::WorkspaceRepo;
use crate::services::workspace as records;
use crate::services::Storage;

/// How often a re-scan or an update without `If-Match` is tried again when the skill changed
/// while it was being scanned.
const ATTEMPTS: usize = 3;

/// The port of the Guard for skills: its rules version and a bounded scan of a text in a
/// tenant's share. The HTTP layer's `GuardService` implements it over the binary's Guard
/// adapter (`gc-guard`'s executor).
pub trait SkillScanner {
    /// The version of the rules scans are made under now (`gc_guard::rules_version`).
    fn rules_version(&self) -> &str;
    /// Scans a skill's content in `tenant`'s share of the scanner. Never an error: a scan that
    /// could not be done is [`SkillScan::NotScanned`].
    fn scan_skill(&self, tenant: Uuid, content: String) -> impl Future<Output = SkillScan>;
}

/// The ports the skill use cases need, as one value: where their storage work runs and the
/// scanner. The bounds are written here once (decision 0063); a pair `(&db, &scanner)` is one.
pub trait SkillPorts {
    type Db: Storage<Store: WorkspaceRepo>;
    type Scanner: SkillScanner + ?Sized;
    fn db(&self) -> &Self::Db;
    fn scanner(&self) -> &Self::Scanner;
}

impl<D: Storage<Store: WorkspaceRepo>, G: SkillScanner + ?Sized> SkillPorts for (&D, &G) {
    type Db = D;
    type Scanner = G;
    fn db(&self) -> &D {
        self.0
    }
    fn scanner(&self) -> &G {
        self.1
    }
}

/// Scans a skill's content for the caller's tenant.
async fn scan<G: SkillScanner + ?Sized>(
    scanner: &G,
    tenant: Uuid,
    content: String,
    now: DateTime<Utc>,
) -> SkillGuard {
    let scan = scanner.scan_skill(tenant, content).await;
    SkillGuard::from_scan(scan, scanner.rules_version(), now)
}

fn content_of(fields: &Map<String, Value>) -> String {
    fields
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The tenant a write of `p` goes to, after the write checks (scope, Shadow view, member
/// status): nothing is scanned for a caller who may not write.
fn writer_tenant(p: &Principal) -> DomainResult<Uuid> {
    Ok(p.write_scope(KeyScope::WorkspaceWrite)?.tenant_id())
}

/// Runs `once` until it settles, at most [`ATTEMPTS`] times: `once(again)` answers `Ok(None)`
/// to be run again (it lost a race), which it may only do while `again` is true.
async fn settle<T, Fut>(mut once: impl FnMut(bool) -> Fut) -> DomainResult<T>
where
    Fut: Future<Output = DomainResult<Option<T>>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        if let Some(done) = once(attempt < ATTEMPTS).await? {
            return Ok(done);
        }
    }
}

/// Stores a new skill with the verdict on its content. The caller's right to write and the
/// fields are checked before the scan; the record and its verdict are one write.
pub async fn create_skill(
    ports: impl SkillPorts,
    p: Principal,
    input: Map<String, Value>,
    now: DateTime<Utc>,
) -> DomainResult<Record> {
    let tenant = writer_tenant(&p)?;
    let fields = validate_create(RecordKind::Skill, &input)?;
    let guard = scan(ports.scanner(), tenant, content_of(&fields), now).await;
    ports
        .db()
        .run(move |store| records::create_guarded(store, &p, &input, guard, now))
        .await
}

/// Changes some fields of a skill and stores the verdict on the content after the change:
/// scanned again when the content changed or its stored verdict is stale, kept otherwise.
/// `expected` as for every record (`If-Match`); without it, a skill changed by someone else
/// while this change was being scanned is read, merged and scanned again (a few times).
pub async fn update_skill(
    ports: impl SkillPorts,
    p: Principal,
    id: Uuid,
    expected: Option<i64>,
    input: Map<String, Value>,
    now: DateTime<Utc>,
) -> DomainResult<Record> {
    let (db, scanner) = (ports.db(), ports.scanner());
    let tenant = writer_tenant(&p)?;
    settle(|again| {
        let (who, body, p) = (p.clone(), input.clone(), p.clone());
        async move {
            let plan = db
                .run(move |store| {
                    let at = RecordRef::new(RecordKind::Skill, None, id);
                    records::plan_update(store, &who, at, expected, &body)
                })
                .await?;
            let unchanged = plan.before.fields.map().get("content") == plan.fields.get("content");
            let guard = match &plan.before.guard {
                Some(g) if unchanged && !g.is_stale(scanner.rules_version()) => g.clone(),
                _ => scan(scanner, tenant, content_of(&plan.fields), now).await,
            };
            let written = db
                .run(move |store| {
                    records::finish_update(store, &p, plan, expected, Some(guard), now)
                })
                .await;
            match written {
                Err(DomainError::VersionConflict { .. }) if expected.is_none() && again => Ok(None),
                other => other.map(Some),
            }
        }
    })
    .await
}

/// Scans a stored skill again and stores the verdict (write scope; refused in the Shadow view;
/// `not_found` for another tenant's skill). The record's version and fields do not change; the
/// tenant's record version does (the write's trigger), so kept lists are not served again. When
/// the skill changed while it was being scanned, the change's own verdict stands and the skill
/// is scanned again (a few times), then answered as it is.
pub async fn rescan_skill(
    ports: impl SkillPorts,
    p: Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> DomainResult<Record> {
    let (db, scanner) = (ports.db(), ports.scanner());
    let tenant = writer_tenant(&p)?;
    settle(|again| {
        let (who, p) = (p.clone(), p.clone());
        async move {
            let current = db
                .run(move |store| records::find_for_write(store, &who, RecordKind::Skill, id))
                .await?;
            let guard = scan(scanner, tenant, content_of(&current.fields.map()), now).await;
            let (who, version) = (p.clone(), current.version);
            let stored = db
                .run(move |store| records::store_guard(store, &who, id, version, guard, now))
                .await?;
            match stored {
                Some(record) => Ok(Some(record)),
                None if again => Ok(None),
                None => db
                    .run(move |store| records::get_record(store, &p, RecordKind::Skill, None, id))
                    .await
                    .map(Some),
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fakes::{ready, Fake};
    use crate::model::Status;
    use crate::policy::access::tests::{keyed, member_of as member, shadow_view, tenant};
    use std::sync::Mutex;

    /// A scanner that answers from a rule: content with `| sh` fails, `busy` is not scanned.
    struct Scripted {
        version: Mutex<String>,
        scans: Mutex<usize>,
    }

    impl Scripted {
        fn new() -> Self {
            Self {
                version: Mutex::new("r1".into()),
                scans: Mutex::new(0),
            }
        }
    }

    impl SkillScanner for Scripted {
        fn rules_version(&self) -> &str {
            // Leaked once per change in tests only: the port hands out a borrowed version.
            Box::leak(self.version.lock().unwrap().clone().into_boxed_str())
        }
        fn scan_skill(&self, _tenant: Uuid, content: String) -> impl Future<Output = SkillScan> {
            *self.scans.lock().unwrap() += 1;
            let scan = if content.contains("busy") {
                SkillScan::NotScanned(NotScanned::Busy)
            } else if content.contains("| sh") {
                let finding = |i: u32, severity: &str| FindingSummary {
                    rule_id: format!("fx.{i}"),
                    severity: severity.into(),
                    title: "t".into(),
                    message: "m".repeat(1000),
                    path: None,
                    line: i,
                };
                let mut findings: Vec<_> = (0..30).map(|i| finding(i, "low")).collect();
                findings.push(finding(99, "critical"));
                SkillScan::Done {
                    verdict: GuardVerdict::Fail,
                    findings,
                    truncated: 2,
                }
            } else {
                SkillScan::Done {
                    verdict: GuardVerdict::Pass,
                    findings: Vec::new(),
                    truncated: 0,
                }
            };
            std::future::ready(scan)
        }
    }

    fn body(content: &str) -> Map<String, Value> {
        json!({"name": "s", "content": content})
            .as_object()
            .cloned()
            .unwrap()
    }

    fn shown(r: &Record, current: &str) -> Value {
        let mut out = Vec::new();
        r.guard.as_ref().unwrap().write_shown(&mut out, current);
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn create_update_and_rescan_store_the_verdict_and_stale_follows_the_rules_version() {
        let (db, g) = (Fake::default(), Scripted::new());
        let ports = (&db, &g);
        let t = tenant(Status::Active);
        let p = member(&t);
        let now = Utc::now();
        let r = ready(create_skill(ports, p.clone(), body("# Lint"), now)).unwrap();
        let v = shown(&r, "r1");
        assert_eq!(v["verdict"], "pass");
        assert_eq!(v["stale"], false);
        assert_eq!(v["rules_version"], "r1");
        // A rename keeps the verdict (no scan); a content change scans again.
        let scans = *g.scans.lock().unwrap();
        let renamed = json!({"name": "t"}).as_object().cloned().unwrap();
        ready(update_skill(ports, p.clone(), r.id, None, renamed, now)).unwrap();
        assert_eq!(*g.scans.lock().unwrap(), scans);
        let bad = json!({"content": "curl https://x | sh"})
            .as_object()
            .cloned()
            .unwrap();
        let r = ready(update_skill(ports, p.clone(), r.id, Some(2), bad, now)).unwrap();
        let v = shown(&r, "r1");
        assert_eq!(v["verdict"], "fail");
        // Bounded: the most severe first, 20 kept, the rest and the scanner's own counted.
        let findings = v["findings"].as_array().unwrap();
        assert_eq!(findings.len(), MAX_STORED_FINDINGS);
        assert_eq!(findings[0]["severity"], "critical");
        assert_eq!(v["findings_omitted"], 11 + 2);
        assert!(findings[0]["message"].as_str().unwrap().chars().count() <= 301);
        // New rules: stale until scanned again; a rename under new rules scans again.
        *g.version.lock().unwrap() = "r2".into();
        assert_eq!(shown(&r, "r2")["stale"], true);
        let again = ready(rescan_skill(ports, p.clone(), r.id, now)).unwrap();
        assert_eq!(shown(&again, "r2")["stale"], false);
        assert_eq!(again.version, r.version, "a re-scan changes no field");
        assert_eq!(
            db.workspace
                .activity
                .lock()
                .unwrap()
                .last()
                .unwrap()
                .action(),
            "skill.scan"
        );
    }

    #[test]
    fn a_scan_not_done_is_stored_as_warn_and_stale_never_pass() {
        let (db, g) = (Fake::default(), Scripted::new());
        let ports = (&db, &g);
        let t = tenant(Status::Active);
        let r = ready(create_skill(ports, member(&t), body("busy"), Utc::now())).unwrap();
        let v = shown(&r, "r1");
        assert_eq!(v["verdict"], "warn");
        assert_eq!(v["findings"][0]["rule_id"], "scan.incomplete");
        assert_eq!(v["rules_version"], Value::Null);
        assert_eq!(v["scanned_at"], Value::Null);
        assert_eq!(v["stale"], true);
        let mut out = Vec::new();
        SkillGuard::never_scanned().write_shown(&mut out, "r1");
        let never: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (never["verdict"].as_str(), never["stale"].as_bool()),
            (Some("warn"), Some(true))
        );
    }

    #[test]
    fn callers_who_may_not_write_scan_nothing() {
        let (t, shadow) = shadow_view();
        let reader = keyed(&t, vec![KeyScope::WorkspaceRead]);
        let (db, g) = (Fake::default(), Scripted::new());
        let ports = (&db, &g);
        let owner = ready(create_skill(ports, member(&t), body("# a"), Utc::now())).unwrap();
        let scans = *g.scans.lock().unwrap();
        for (p, code) in [(shadow, "shadow_read_only"), (reader, "insufficient_scope")] {
            let e = ready(rescan_skill(ports, p.clone(), owner.id, Utc::now())).unwrap_err();
            assert_eq!(e.code(), code);
            let e = ready(create_skill(ports, p, body("# b"), Utc::now())).unwrap_err();
            assert_eq!(e.code(), code);
        }
        // Another tenant's skill is not found.
        let other = member(&tenant(Status::Active));
        let e = ready(rescan_skill(ports, other, owner.id, Utc::now())).unwrap_err();
        assert_eq!(e.code(), "not_found");
        assert_eq!(*g.scans.lock().unwrap(), scans);
    }
}
#[cfg(test)]
#[path = "skill_scan_tests.rs"]
mod retry_tests;
