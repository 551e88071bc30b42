//! The skill scans' retries over the in-memory fakes: an update without `If-Match` that loses a
//! race is planned, scanned and written again, at most three times; a re-scan of a skill that
//! changed while it was scanned is scanned again, at most three times, then answered as it is.

use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::fakes::{ready, Fake};
use crate::model::Status;
use crate::policy::access::tests::{member_of as member, tenant};

/// A scanner that passes everything under `version`, counts its scans, and while `races` is
/// above 0 changes every stored record during a scan (as another writer would).
struct Racing<'a> {
    db: &'a Fake,
    version: &'static str,
    races: Mutex<usize>,
    scans: Mutex<usize>,
}

impl<'a> Racing<'a> {
    fn new(db: &'a Fake) -> Self {
        Self {
            db,
            version: "r1",
            races: Mutex::new(0),
            scans: Mutex::new(0),
        }
    }

    fn scans(&self) -> usize {
        *self.scans.lock().unwrap()
    }
}

impl SkillScanner for Racing<'_> {
    fn rules_version(&self) -> &str {
        self.version
    }
    fn scan_skill(&self, _tenant: Uuid, _content: String) -> impl Future<Output = SkillScan> {
        *self.scans.lock().unwrap() += 1;
        let mut races = self.races.lock().unwrap();
        if *races > 0 {
            *races -= 1;
            for (_, r) in self.db.workspace.records.lock().unwrap().iter_mut() {
                r.version += 1;
            }
        }
        std::future::ready(SkillScan::Done {
            verdict: GuardVerdict::Pass,
            findings: Vec::new(),
            truncated: 0,
        })
    }
}

fn fields(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

/// A stored skill of a member of a new tenant, scanned once.
fn stored(db: &Fake, g: &Racing<'_>) -> (Principal, Record) {
    let p = member(&tenant(Status::Active));
    let r = ready(create_skill(
        (db, g),
        p.clone(),
        fields(json!({"name": "s", "content": "# one"})),
        Utc::now(),
    ))
    .unwrap();
    assert_eq!(g.scans(), 1);
    (p, r)
}

fn change(
    db: &Fake,
    g: &Racing<'_>,
    p: &Principal,
    id: Uuid,
    expected: Option<i64>,
    n: u32,
) -> DomainResult<Record> {
    let input = fields(json!({ "content": format!("# change {n}") }));
    ready(update_skill(
        (db, g),
        p.clone(),
        id,
        expected,
        input,
        Utc::now(),
    ))
}

#[test]
fn an_update_without_if_match_that_loses_races_is_tried_three_times() {
    let db = Fake::default();
    let g = Racing::new(&db);
    let (p, r) = stored(&db, &g);
    // Two lost races: the third attempt is written, each attempt scanned.
    *db.workspace.lose_races.lock().unwrap() = 2;
    let updated = change(&db, &g, &p, r.id, None, 1).unwrap();
    assert_eq!(updated.fields.map()["content"], "# change 1");
    assert_eq!(g.scans(), 1 + 3);
    // Three lost races: the conflict is answered, after three attempts.
    *db.workspace.lose_races.lock().unwrap() = 3;
    let e = change(&db, &g, &p, r.id, None, 2).unwrap_err();
    assert_eq!(e.code().as_str(), "version_conflict");
    assert_eq!(g.scans(), 1 + 3 + 3);
    assert_eq!(*db.workspace.lose_races.lock().unwrap(), 0);
}

#[test]
fn an_update_with_if_match_that_loses_a_race_is_not_tried_again() {
    let db = Fake::default();
    let g = Racing::new(&db);
    let (p, r) = stored(&db, &g);
    *db.workspace.lose_races.lock().unwrap() = 1;
    let e = change(&db, &g, &p, r.id, Some(r.version), 1).unwrap_err();
    assert_eq!(e.code().as_str(), "version_conflict");
    assert_eq!(g.scans(), 2);
    // Without a lost race the same version is written.
    let updated = change(&db, &g, &p, r.id, Some(r.version), 2).unwrap();
    assert_eq!(updated.fields.map()["content"], "# change 2");
}

#[test]
fn a_rescan_of_a_skill_changed_meanwhile_is_scanned_again_up_to_three_times() {
    let db = Fake::default();
    let mut g = Racing::new(&db);
    let (p, r) = stored(&db, &g);
    // One change while scanning: scanned again and stored under the new rules.
    g.version = "r2";
    *g.races.lock().unwrap() = 1;
    let again = ready(rescan_skill((&db, &g), p.clone(), r.id, Utc::now())).unwrap();
    assert_eq!(g.scans(), 1 + 2);
    assert_eq!(again.guard.as_ref().unwrap().rules_version(), Some("r2"));
    // Three changes: after three scans the skill is answered as it is, its verdict unchanged.
    g.version = "r3";
    *g.races.lock().unwrap() = 3;
    let as_is = ready(rescan_skill((&db, &g), p.clone(), r.id, Utc::now())).unwrap();
    assert_eq!(g.scans(), 1 + 2 + 3);
    assert_eq!(as_is.guard.as_ref().unwrap().rules_version(), Some("r2"));
    assert_eq!(as_is.version, again.version + 3);
}
