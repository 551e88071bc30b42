//! The workspace's application services: stored records (skills, memory collections and
//! sources, drafts), settings, the activity feed, the overview and the AI-access view.
//!
//! Each function takes the caller's [`Principal`] and decides access itself (the scope a key
//! needs, the Shadow view's read-only rule) before it touches a port; every write carries its
//! activity line in the same transaction. Handlers only extract, call one of these and map.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::{
    Activity, ActivityTarget, KeyScope, NewActivity, Record, RecordCounts, RecordFields,
    RecordKind, RecordRef, Settings,
};
use crate::model::{new_id, Tenant};
use crate::page::{Page, PageRequest};
use crate::policy::access::{Principal, TenantScope, WriteScope};
use crate::policy::ai_access::AiAccess;
use crate::policy::records::{
    settings_with_defaults, validate_create, validate_patch, validate_settings,
};
use crate::policy::skill_verdicts::SkillGuard;
use crate::ports::{
    AiKeyRepo, GuardStamp, RecordQuery, RecordUpdate, SessionRepo, SessionWindow, SettingsUpdate,
    TenantRepo, TenantWrite, WorkspaceRepo,
};
use crate::services::admin;

/// How often a write without `If-Match` is retried when another writer got there first.
const WRITE_ATTEMPTS: usize = 3;

/// The tenant's records of one kind (for sources, of one collection), newest first.
pub fn list_records<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    page: &PageRequest,
) -> DomainResult<Page<Record>> {
    let scope = p.read_scope(KeyScope::WorkspaceRead)?;
    ports.list_records(&scope, &RecordQuery::new(kind, parent, *page))
}

/// The version of the tenant's records as the caller may read them (the scope of a list):
/// an answer computed from the records after reading it may be served again while the version
/// stays the same (decision 0019).
pub fn records_version<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
) -> DomainResult<RecordsVersion> {
    let scope = p.read_scope(KeyScope::WorkspaceRead)?;
    Ok(RecordsVersion {
        tenant_id: scope.tenant_id(),
        version: ports.records_version(&scope)?,
    })
}

/// A tenant's record version (see [`WorkspaceRepo::records_version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordsVersion {
    pub tenant_id: Uuid,
    pub version: i64,
}

/// Which record list a kept answer answers: the tenant, the kind, the parent (sources) and the
/// page asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListKey {
    pub tenant: Uuid,
    pub kind: RecordKind,
    pub parent: Option<Uuid>,
    pub before: Option<Uuid>,
    pub limit: u32,
}

/// The port of a node's kept answers to record lists (decision 0019). The rule of when a kept
/// answer may be served is here ([`list_records_kept`]); the adapter only keeps answers within
/// its bounds and hands back the one kept under exactly the version asked for.
pub trait KeptLists {
    /// A list's rendered answer (the HTTP adapter keeps the body's bytes).
    type Answer: Clone;
    /// The answer kept for `key` under exactly `version`, if any.
    fn kept(&self, key: &ListKey, version: i64) -> Option<Self::Answer>;
    /// Offers the answer to `key` read under `version`; the adapter may keep it or not.
    fn offer(&self, key: ListKey, version: i64, answer: Self::Answer);
}

/// What a record list found: an answer kept under the tenant's current record version, or a
/// page read now (to be rendered and offered back with [`Listed::answer`]).
#[derive(Debug)]
pub enum Listed<A> {
    Kept(A),
    Read(ReadList),
}

/// A page read under a record version, with the key it answers.
#[derive(Debug)]
pub struct ReadList {
    page: Page<Record>,
    key: ListKey,
    version: i64,
}

impl<A> Listed<A> {
    /// Whether a kept answer was found (no records read).
    pub fn was_kept(&self) -> bool {
        matches!(self, Self::Kept(_))
    }

    /// The answer: the kept one, or the page read, rendered now and offered to `lists`.
    ///
    /// Apart from [`list_records_kept`] because a read may run twice (`Fn` work that is
    /// repeated on the blocking pool), and an offer counts: the second offer under one version
    /// is the one kept. Rendering and offering happen once per request.
    pub fn answer<K>(
        self,
        lists: &K,
        render: impl FnOnce(Page<Record>) -> DomainResult<A>,
    ) -> DomainResult<A>
    where
        K: KeptLists<Answer = A> + ?Sized,
        A: Clone,
    {
        match self {
            Self::Kept(answer) => Ok(answer),
            Self::Read(ReadList { page, key, version }) => {
                let answer = render(page)?;
                lists.offer(key, version, answer.clone());
                Ok(answer)
            }
        }
    }
}

/// A page of the caller's records of `kind` (under `parent` for sources), served from `lists`
/// while the tenant's records are unchanged since it was kept (decision 0019).
///
/// The caller's right to list comes first: a bad query (`page`'s own error, handed back as
/// `Ok(Err(_))`) from a caller who may not list is still a refusal. The tenant's record
/// version is read before the records, so a kept answer is never older than its version.
pub fn list_records_kept<P, K, E>(
    ports: &P,
    lists: &K,
    p: &Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    page: &Result<PageRequest, E>,
) -> DomainResult<Result<Listed<K::Answer>, E>>
where
    P: WorkspaceRepo + ?Sized,
    K: KeptLists + ?Sized,
    E: Clone,
{
    let page = match page {
        Ok(page) => page,
        Err(e) => {
            return p
                .read_scope(KeyScope::WorkspaceRead)
                .map(|_| Err(e.clone()))
        }
    };
    let at = records_version(ports, p)?;
    let key = ListKey {
        tenant: at.tenant_id,
        kind,
        parent,
        before: page.before(),
        limit: page.limit(),
    };
    if let Some(answer) = lists.kept(&key, at.version) {
        return Ok(Ok(Listed::Kept(answer)));
    }
    let page = list_records(ports, p, kind, parent, page)?;
    Ok(Ok(Listed::Read(ReadList {
        page,
        key,
        version: at.version,
    })))
}

/// Stores a new record from the client's fields (validated for `kind`). A skill stored here
/// carries no verdict (it is shown as never scanned); `services::skill_scan::create_skill`
/// scans it first.
pub fn create_record<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    input: &Map<String, Value>,
    now: DateTime<Utc>,
) -> DomainResult<Record> {
    create_with(ports, p, kind, parent, input, None, now)
}

/// Stores a new skill with its Guard result, in one write.
pub(crate) fn create_guarded<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    input: &Map<String, Value>,
    guard: SkillGuard,
    now: DateTime<Utc>,
) -> DomainResult<Record> {
    create_with(ports, p, RecordKind::Skill, None, input, Some(guard), now)
}

fn create_with<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    input: &Map<String, Value>,
    guard: Option<SkillGuard>,
    now: DateTime<Utc>,
) -> DomainResult<Record> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    let fields = validate_create(kind, input)?;
    let record = Record {
        id: new_id(),
        kind,
        parent_id: parent,
        version: 1,
        fields: RecordFields::from_map(&fields),
        created_at: now,
        updated_at: now,
        created_by: p.user().id,
        guard,
    };
    let line = record_activity(&scope, kind, "create", &record, &fields, now);
    ports.insert_record(TenantWrite::new(&scope, &line), &record)
}

/// One record of the caller's tenant; `NotFound` for any other tenant's.
pub fn get_record<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
) -> DomainResult<Record> {
    let scope = p.read_scope(KeyScope::WorkspaceRead)?;
    ports
        .find_record(&scope, RecordRef::new(kind, parent, id))?
        .ok_or(DomainError::NotFound(kind.noun()))
}

/// Changes some fields. With `expected` (the client's `If-Match`) a stale version is a
/// `VersionConflict`; without it a concurrent change is retried a few times.
///
/// A skill whose content changes here gets no verdict on it: its stored verdict is replaced by
/// "not scanned" (fail closed); `services::skill_scan::update_skill` scans it.
#[allow(clippy::too_many_arguments)]
pub fn update_record<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
    expected: Option<i64>,
    input: &Map<String, Value>,
    now: DateTime<Utc>,
) -> DomainResult<Record> {
    p.write_scope(KeyScope::WorkspaceWrite)?;
    retrying(expected, || {
        let at = RecordRef::new(kind, parent, id);
        let plan = plan_update(ports, p, at, expected, input)?;
        finish_update(ports, p, plan, expected, None, now)
    })
}

/// Runs `write` again when it loses a race (`VersionConflict`) and there is no `expected`
/// version (`If-Match`) to hold it to, up to `WRITE_ATTEMPTS` runs in all; with `expected`,
/// a lost race is answered at once.
fn retrying<T>(
    expected: Option<i64>,
    mut write: impl FnMut() -> DomainResult<T>,
) -> DomainResult<T> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match write() {
            Err(DomainError::VersionConflict { .. })
                if expected.is_none() && attempt < WRITE_ATTEMPTS =>
            {
                continue
            }
            other => return other,
        }
    }
}

/// A change read and merged, not yet written: the record as read and its fields after it.
#[derive(Debug, Clone)]
pub(crate) struct UpdatePlan {
    pub before: Record,
    pub fields: Map<String, Value>,
}

/// Reads the record at `at` and merges the change over it (`VersionConflict` at once when
/// `expected` is not its version).
pub(crate) fn plan_update<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    at: RecordRef,
    expected: Option<i64>,
    input: &Map<String, Value>,
) -> DomainResult<UpdatePlan> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    let before = ports
        .find_record(&scope.as_read(), at)?
        .ok_or(DomainError::NotFound(at.kind.noun()))?;
    if let Some(expected) = expected {
        if expected != before.version {
            return Err(DomainError::VersionConflict { expected });
        }
    }
    let fields = validate_patch(at.kind, input, &before.fields.map())?;
    Ok(UpdatePlan { before, fields })
}

/// Writes a planned change, conditional on the version it was planned on, with the skill's
/// new Guard result when there is one.
pub(crate) fn finish_update<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    plan: UpdatePlan,
    expected: Option<i64>,
    guard: Option<SkillGuard>,
    now: DateTime<Utc>,
) -> DomainResult<Record> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    let UpdatePlan { before, fields } = plan;
    let kind = before.kind;
    let content_changed = before.fields.map().get("content") != fields.get("content");
    let after = Record {
        fields: RecordFields::from_map(&fields),
        ..before
    };
    let line = record_activity(&scope, kind, "update", &after, &fields, now);
    let version = Some(expected.unwrap_or(after.version));
    // A skill's content never keeps a verdict made on other content.
    let guard = match guard {
        Some(guard) => Some(guard),
        None if kind == RecordKind::Skill && content_changed => {
            Some(SkillGuard::changed_unscanned())
        }
        None => None,
    };
    let update = RecordUpdate {
        record: after.reference(),
        expected_version: version,
        fields: &after.fields,
        guard: guard.as_ref(),
    };
    ports
        .update_record(TenantWrite::new(&scope, &line), &update)?
        .ok_or(DomainError::NotFound(kind.noun()))
}

/// A record of the caller's tenant, for a write (the write checks first).
pub(crate) fn find_for_write<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    kind: RecordKind,
    id: Uuid,
) -> DomainResult<Record> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    ports
        .find_record(&scope.as_read(), RecordRef::new(kind, None, id))?
        .ok_or(DomainError::NotFound(kind.noun()))
}

/// Stores a skill's new Guard result when the skill is still at `version` (with a
/// `skill.scan` activity line naming the verdict); `None` when it changed in between.
pub(crate) fn store_guard<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    id: Uuid,
    version: i64,
    guard: SkillGuard,
    now: DateTime<Utc>,
) -> DomainResult<Option<Record>> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    let kind = RecordKind::Skill;
    let line = NewActivity::write(
        &scope,
        now,
        "skill.scan",
        Some(ActivityTarget {
            kind: kind.as_str().to_owned(),
            id,
        }),
        json!({ "verdict": guard.verdict(), "rules_version": guard.rules_version() }),
    );
    let stamp = GuardStamp {
        record: RecordRef::new(kind, None, id),
        version,
        guard: &guard,
    };
    ports.set_record_guard(TenantWrite::new(&scope, &line), &stamp)
}

/// Deletes a record of the caller's tenant; `NotFound` when there is none.
pub fn delete_record<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    kind: RecordKind,
    parent: Option<Uuid>,
    id: Uuid,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    let at = RecordRef::new(kind, parent, id);
    let Some(current) = ports.find_record(&scope.as_read(), at)? else {
        return Err(DomainError::NotFound(kind.noun()));
    };
    let line = record_activity(&scope, kind, "delete", &current, &current.fields.map(), now);
    if ports.delete_record(TenantWrite::new(&scope, &line), at)? {
        Ok(())
    } else {
        Err(DomainError::NotFound(kind.noun()))
    }
}

/// The activity line of a record write: `{kind}.{verb}` naming the record (`fields` are its
/// fields as a map: the writes have them at hand, so they are not parsed again).
fn record_activity(
    scope: &WriteScope,
    kind: RecordKind,
    verb: &str,
    r: &Record,
    fields: &Map<String, Value>,
    now: DateTime<Utc>,
) -> NewActivity {
    let label = fields
        .get("name")
        .or_else(|| fields.get("title"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut detail = json!({ "name": label });
    if let (Some(parent), Some(obj)) = (r.parent_id, detail.as_object_mut()) {
        obj.insert("collection_id".into(), json!(parent));
    }
    NewActivity::write(
        scope,
        now,
        &format!("{}.{verb}", kind.as_str()),
        Some(ActivityTarget {
            kind: kind.as_str().to_owned(),
            id: r.id,
        }),
        detail,
    )
}

/// The tenant's activity feed, newest first.
pub fn list_activity<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    page: &PageRequest,
) -> DomainResult<Page<Activity>> {
    let scope = p.read_scope(KeyScope::WorkspaceRead)?;
    ports.list_activity(&scope, page)
}

/// The tenant's settings.
pub fn settings<P: WorkspaceRepo + ?Sized>(ports: &P, p: &Principal) -> DomainResult<Settings> {
    let scope = p.read_scope(KeyScope::WorkspaceRead)?;
    ports.settings(&scope)
}

/// Changes some settings, merged over the defaults; `expected` as for records.
pub fn update_settings<P: WorkspaceRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    expected: Option<i64>,
    input: &Map<String, Value>,
    now: DateTime<Utc>,
) -> DomainResult<Settings> {
    let scope = p.write_scope(KeyScope::WorkspaceWrite)?;
    retrying(expected, || {
        let current = ports.settings(&scope.as_read())?;
        if let Some(expected) = expected {
            if expected != current.version {
                return Err(DomainError::VersionConflict { expected });
            }
        }
        // Merge over the defaults, so fields never written keep their defaults
        // (`default_model` stays `auto`) rather than becoming empty.
        let mut fields = validate_settings(input, &settings_with_defaults(&current.fields))?;
        // An empty (or reset) default model means the default, `auto`.
        if fields.get("default_model").and_then(Value::as_str) == Some("") {
            fields.insert("default_model".into(), json!("auto"));
        }
        let changed: Vec<&String> = input.keys().collect();
        let line = NewActivity::write(
            &scope,
            now,
            "settings.update",
            Some(ActivityTarget {
                kind: "settings".into(),
                id: scope.tenant_id(),
            }),
            json!({ "fields": changed }),
        );
        let update = SettingsUpdate {
            expected_version: Some(expected.unwrap_or(current.version)),
            fields: &fields,
        };
        ports.update_settings(TenantWrite::new(&scope, &line), &update)
    })
}

/// What the workspace overview shows.
#[derive(Debug, Clone)]
pub struct Overview {
    pub tenant: Tenant,
    pub counts: RecordCounts,
    pub ai_access: AiAccess,
    /// The platform admin looking through the Shadow view, if any: `(email, since)`.
    pub support_view: Option<(String, DateTime<Utc>)>,
}

/// The caller's read scope and its tenant (`not_found` when the tenant is gone).
fn readers_tenant<P: TenantRepo + ?Sized>(
    ports: &P,
    p: &Principal,
) -> DomainResult<(TenantScope, Tenant)> {
    let scope = p.read_scope(KeyScope::WorkspaceRead)?;
    let tenant = ports
        .find_tenant(scope.tenant_id())?
        .ok_or(DomainError::NotFound("tenant"))?;
    Ok((scope, tenant))
}

/// The overview of the caller's workspace. A Shadow viewer counts when seen within `idle`.
pub fn overview<P: WorkspaceRepo + TenantRepo + AiKeyRepo + SessionRepo + ?Sized>(
    ports: &P,
    p: &Principal,
    idle: Duration,
    now: DateTime<Utc>,
) -> DomainResult<Overview> {
    let (scope, tenant) = readers_tenant(ports, p)?;
    let counts = ports.record_counts(&scope)?;
    let ai_access = admin::ai_access(ports, &tenant)?;
    let window = SessionWindow {
        seen_after: now - idle,
        now,
    };
    let support_view = ports.shadow_viewers(tenant.id, window)?.into_iter().next();
    Ok(Overview {
        tenant,
        counts,
        ai_access,
        support_view,
    })
}

/// The tenant's AI access as its members see it.
#[derive(Debug, Clone)]
pub struct AiAccessView {
    pub tenant: Tenant,
    pub status: AiAccess,
    /// Ready, chat-enabled keys of the tenant's region.
    pub usable_keys: usize,
}

/// The caller's tenant's AI access, computed as the administrators' view computes it.
pub fn ai_access<P: TenantRepo + AiKeyRepo + ?Sized>(
    ports: &P,
    p: &Principal,
) -> DomainResult<AiAccessView> {
    let (_, tenant) = readers_tenant(ports, p)?;
    // One key lookup for both the status and the count.
    let keys = ports.usable_ai_keys(&tenant)?;
    let status = AiAccess::of(&tenant, &keys);
    let usable_keys = keys.len();
    Ok(AiAccessView {
        tenant,
        status,
        usable_keys,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::FakeWorkspace;
    use crate::model::{Role, Status};
    use crate::policy::access::tests::{
        code, keyed, member_of, session, shadow_view, tenant, user,
    };

    fn skill() -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("name".into(), json!("s"));
        m.insert("content".into(), json!("c"));
        m
    }

    #[test]
    fn a_record_is_read_and_deleted_by_its_own_id() {
        let (ws, p, now) = member_workspace();
        let a = create_record(&ws, &p, RecordKind::Skill, None, &skill(), now).unwrap();
        let b = create_record(&ws, &p, RecordKind::Skill, None, &skill(), now).unwrap();
        let read = |id| get_record(&ws, &p, RecordKind::Skill, None, id).map(|r| r.id);
        assert_eq!((read(a.id).unwrap(), read(b.id).unwrap()), (a.id, b.id));
        delete_record(&ws, &p, RecordKind::Skill, None, a.id, now).unwrap();
        assert_eq!(read(a.id).unwrap_err().code(), "not_found");
        assert_eq!(
            read(b.id).unwrap(),
            b.id,
            "only the named record is deleted"
        );
    }

    #[test]
    fn a_write_records_its_activity_in_the_callers_tenant() {
        let ws = FakeWorkspace::default();
        let t = tenant(Status::Active);
        let r = create_record(
            &ws,
            &member_of(&t),
            RecordKind::Skill,
            None,
            &skill(),
            Utc::now(),
        )
        .unwrap();
        assert_eq!(ws.records.lock().unwrap()[0].0, t.id);
        let lines = ws.activity.lock().unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].tenant_id(), t.id);
        assert_eq!(lines[0].action(), "skill.create");
        assert_eq!(lines[0].target().map(|t| t.id), Some(r.id));
    }

    #[test]
    fn refusals_come_before_any_port_call() {
        let (t, shadow) = shadow_view();
        let reader = keyed(&t, vec![KeyScope::WorkspaceRead]);
        let runner = keyed(&t, vec![KeyScope::Run]);
        let suspended = session(
            user(Role::Member, Status::Suspended, Some(&t)),
            Some(t.clone()),
            None,
        );
        let id = Uuid::now_v7();
        let now = Utc::now();
        for (p, code) in [
            (&shadow, "shadow_read_only"),
            (&reader, "insufficient_scope"),
            (&suspended, "member_suspended"),
        ] {
            let ws = FakeWorkspace::default();
            let kind = RecordKind::Skill;
            let errs = [
                create_record(&ws, p, kind, None, &skill(), now).map(|_| ()),
                update_record(&ws, p, kind, None, id, None, &skill(), now).map(|_| ()),
                delete_record(&ws, p, kind, None, id, now),
                update_settings(&ws, p, None, &Map::new(), now).map(|_| ()),
            ];
            for e in errs {
                assert_eq!(e.unwrap_err().code(), code);
            }
            assert!(ws.calls.lock().unwrap().is_empty(), "{code}");
        }
        let ws = FakeWorkspace::default();
        for p in [&runner, &suspended] {
            assert!(list_records(&ws, p, RecordKind::Skill, None, &PageRequest::first()).is_err());
            assert!(get_record(&ws, p, RecordKind::Skill, None, id).is_err());
            assert!(list_activity(&ws, p, &PageRequest::first()).is_err());
            assert!(settings(&ws, p).is_err());
        }
        assert!(ws.calls.lock().unwrap().is_empty());
        // The Shadow view reads.
        assert!(list_records(&ws, &shadow, RecordKind::Skill, None, &PageRequest::first()).is_ok());
    }

    #[test]
    fn another_tenants_record_is_not_found_for_every_verb() {
        let ws = FakeWorkspace::default();
        let (a, b) = (tenant(Status::Active), tenant(Status::Active));
        let now = Utc::now();
        let r = create_record(&ws, &member_of(&a), RecordKind::Skill, None, &skill(), now).unwrap();
        let other = member_of(&b);
        let kind = RecordKind::Skill;
        assert_eq!(
            get_record(&ws, &other, kind, None, r.id)
                .unwrap_err()
                .code(),
            "not_found"
        );
        assert_eq!(
            update_record(&ws, &other, kind, None, r.id, None, &skill(), now)
                .unwrap_err()
                .code(),
            "not_found"
        );
        assert_eq!(
            delete_record(&ws, &other, kind, None, r.id, now)
                .unwrap_err()
                .code(),
            "not_found"
        );
        assert_eq!(ws.records.lock().unwrap().len(), 1);
        assert_eq!(ws.activity.lock().unwrap().len(), 1);
    }

    /// An empty workspace and a member of its active tenant, now.
    fn member_workspace() -> (FakeWorkspace, Principal, DateTime<Utc>) {
        let t = tenant(Status::Active);
        (FakeWorkspace::default(), member_of(&t), Utc::now())
    }

    /// A member's workspace holding one skill, `r`, stored at `now`.
    struct OneSkill {
        ws: FakeWorkspace,
        p: Principal,
        now: DateTime<Utc>,
        r: Record,
    }

    impl OneSkill {
        fn new() -> Self {
            let (ws, p, now) = member_workspace();
            let r = create_record(&ws, &p, RecordKind::Skill, None, &skill(), now).unwrap();
            Self { ws, p, now, r }
        }

        /// Updates the skill as the member, with `If-Match: if_match` when given.
        fn update(
            &self,
            if_match: Option<i64>,
            fields: &Map<String, Value>,
        ) -> DomainResult<Record> {
            let (ws, p, id) = (&self.ws, &self.p, self.r.id);
            update_record(
                ws,
                p,
                RecordKind::Skill,
                None,
                id,
                if_match,
                fields,
                self.now,
            )
        }
    }

    #[test]
    fn an_update_without_if_match_retries_a_lost_race_and_one_with_it_does_not() {
        let one = OneSkill::new();
        *one.ws.lose_races.lock().unwrap() = 2;
        assert_eq!(one.update(None, &skill()).unwrap().version, 2);
        // Three lost races in a row: the caller hears about it.
        *one.ws.lose_races.lock().unwrap() = 3;
        assert_eq!(code(one.update(None, &skill())), "version_conflict");
        *one.ws.lose_races.lock().unwrap() = 0;
        // A stale If-Match is a conflict at once, and writes nothing.
        assert_eq!(code(one.update(Some(1), &skill())), "version_conflict");
        assert_eq!(one.ws.activity.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_matching_if_match_updates_and_the_activity_names_the_new_fields() {
        let one = OneSkill::new();
        let mut rename = Map::new();
        rename.insert("name".into(), json!("renamed"));
        let updated = one.update(Some(1), &rename).unwrap();
        assert_eq!(updated.fields.map()["name"], "renamed");
        let lines = one.ws.activity.lock().unwrap();
        assert_eq!(lines[1].action(), "skill.update");
        assert_eq!(lines[1].detail()["name"], "renamed");
    }

    /// Keeps every answer offered (the bounds are the adapter's; the rule is the service's).
    #[derive(Default)]
    struct KeepAll(std::sync::Mutex<std::collections::HashMap<ListKey, (i64, String)>>);

    impl KeptLists for KeepAll {
        type Answer = String;
        fn kept(&self, key: &ListKey, version: i64) -> Option<String> {
            match self.0.lock().unwrap().get(key) {
                Some((v, answer)) if *v == version => Some(answer.clone()),
                _ => None,
            }
        }
        fn offer(&self, key: ListKey, version: i64, answer: String) {
            self.0.lock().unwrap().insert(key, (version, answer));
        }
    }

    #[test]
    fn a_kept_list_is_served_only_while_the_tenants_records_are_unchanged() {
        let (ws, lists) = (FakeWorkspace::default(), KeepAll::default());
        let t = tenant(Status::Active);
        let p = member_of(&t);
        let page: Result<PageRequest, ()> = Ok(PageRequest::first());
        let render = |page: Page<Record>| Ok(format!("{} records", page.items.len()));
        let list = |kind| {
            let listed = list_records_kept(&ws, &lists, &p, kind, None, &page)
                .unwrap()
                .unwrap();
            let kept = listed.was_kept();
            (kept, listed.answer(&lists, render).unwrap())
        };
        assert_eq!(list(RecordKind::Skill), (false, "0 records".to_owned()));
        assert_eq!(list(RecordKind::Skill), (true, "0 records".to_owned()));
        // Another kind is another list.
        assert_eq!(
            list(RecordKind::AgentDraft),
            (false, "0 records".to_owned())
        );
        // A kept answer costs the version only: no records are read.
        ws.calls.lock().unwrap().clear();
        assert!(list(RecordKind::Skill).0);
        assert_eq!(*ws.calls.lock().unwrap(), ["records_version"]);
        // A write raises the version: the list is read again, then kept again.
        create_record(&ws, &p, RecordKind::Skill, None, &skill(), Utc::now()).unwrap();
        assert_eq!(list(RecordKind::Skill), (false, "1 records".to_owned()));
        assert_eq!(list(RecordKind::Skill), (true, "1 records".to_owned()));
        // Another tenant never sees this tenant's kept answer.
        let other = member_of(&tenant(Status::Active));
        let listed = list_records_kept(&ws, &lists, &other, RecordKind::Skill, None, &page);
        assert!(!listed.unwrap().unwrap().was_kept());
    }

    #[test]
    fn a_bad_list_query_is_answered_only_to_a_caller_who_may_list() {
        let (ws, lists) = (FakeWorkspace::default(), KeepAll::default());
        let t = tenant(Status::Active);
        let bad: Result<PageRequest, &str> = Err("bad cursor");
        let runner = keyed(&t, vec![KeyScope::Run]);
        let refused = list_records_kept(&ws, &lists, &runner, RecordKind::Skill, None, &bad);
        assert_eq!(refused.unwrap_err().code(), "insufficient_scope");
        let allowed = list_records_kept(&ws, &lists, &member_of(&t), RecordKind::Skill, None, &bad);
        assert_eq!(allowed.unwrap().unwrap_err(), "bad cursor");
        assert!(ws.calls.lock().unwrap().is_empty());
    }

    #[test]
    fn settings_follow_the_record_rules_for_versions_and_races() {
        let (ws, p, now) = member_workspace();
        let mut input = Map::new();
        input.insert("default_model".into(), json!(""));
        // Never written: version 0; an empty default model means `auto`.
        let s = update_settings(&ws, &p, Some(0), &input, now).unwrap();
        assert_eq!(s.version, 1);
        assert_eq!(s.fields["default_model"], "auto");
        // A stale If-Match is a conflict; a matching one is not.
        let e = update_settings(&ws, &p, Some(0), &input, now).unwrap_err();
        assert_eq!(e.code(), "version_conflict");
        assert_eq!(
            update_settings(&ws, &p, Some(1), &input, now)
                .unwrap()
                .version,
            2
        );
        // Without If-Match, up to two lost races are retried; a third is reported.
        *ws.lose_races.lock().unwrap() = 2;
        assert_eq!(
            update_settings(&ws, &p, None, &input, now).unwrap().version,
            3
        );
        *ws.lose_races.lock().unwrap() = 3;
        let e = update_settings(&ws, &p, None, &input, now).unwrap_err();
        assert_eq!(e.code(), "version_conflict");
        // With If-Match, a lost race is reported at once.
        *ws.lose_races.lock().unwrap() = 1;
        let e = update_settings(&ws, &p, Some(3), &input, now).unwrap_err();
        assert_eq!(e.code(), "version_conflict");
        assert_eq!(*ws.lose_races.lock().unwrap(), 0);
        assert_eq!(settings(&ws, &p).unwrap().version, 3);
        assert_eq!(ws.activity.lock().unwrap().len(), 3);
    }

    #[test]
    fn the_overview_shows_a_shadow_viewer_seen_within_the_idle_time_only() {
        let store = crate::fakes::Fake::default();
        let t = store.stored_tenant(Status::Active);
        let mut admin = user(Role::PlatformAdmin, Status::Active, None);
        admin.email = crate::values::Email::parse("email", "root@example.com").unwrap();
        store.users.lock().unwrap().push(admin.clone());
        let now = Utc::now();
        let idle = Duration::hours(24);
        let since = now - Duration::hours(30);
        let viewing = |last_seen: DateTime<Utc>| crate::model::Session {
            id: Uuid::now_v7(),
            user_id: admin.id,
            token_hash: "tok".into(),
            created_at: since,
            last_seen_at: last_seen,
            expires_at: now + Duration::days(1),
            user_agent: String::new(),
            ip: String::new(),
            shadow_tenant_id: Some(t.id),
            shadow_since: Some(since),
        };
        let p = member_of(&t);
        *store.sessions.lock().unwrap() = vec![viewing(now - idle + Duration::seconds(1))];
        let seen = overview(&store, &p, idle, now).unwrap();
        assert_eq!(
            seen.support_view,
            Some(("root@example.com".to_owned(), since))
        );
        *store.sessions.lock().unwrap() = vec![viewing(now - idle - Duration::seconds(1))];
        assert_eq!(overview(&store, &p, idle, now).unwrap().support_view, None);
    }
}
