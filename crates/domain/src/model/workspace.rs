//! Entities of the workspace: stored records, settings, API keys and the activity feed.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::model::{Tenant, User};

/// The kinds of stored workspace record. Each has its own route family and field rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    Skill,
    MemoryCollection,
    MemorySource,
    AgentDraft,
    WorkflowDraft,
    AppDraft,
}

impl RecordKind {
    pub const ALL: [RecordKind; 6] = [
        Self::Skill,
        Self::MemoryCollection,
        Self::MemorySource,
        Self::AgentDraft,
        Self::WorkflowDraft,
        Self::AppDraft,
    ];

    /// The stored name of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skill => "skill",
            Self::MemoryCollection => "memory_collection",
            Self::MemorySource => "memory_source",
            Self::AgentDraft => "agent_draft",
            Self::WorkflowDraft => "workflow_draft",
            Self::AppDraft => "app_draft",
        }
    }

    pub fn from_stored(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == raw)
    }

    /// The draft kind named by the `{kind}` path segment (`agents`, `workflows`, `apps`).
    pub fn draft_from_path(segment: &str) -> Option<Self> {
        match segment {
            "agents" => Some(Self::AgentDraft),
            "workflows" => Some(Self::WorkflowDraft),
            "apps" => Some(Self::AppDraft),
            _ => None,
        }
    }

    /// The noun used in messages and activity targets.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Skill => "skill",
            Self::MemoryCollection => "memory collection",
            Self::MemorySource => "memory source",
            Self::AgentDraft => "agent draft",
            Self::WorkflowDraft => "workflow draft",
            Self::AppDraft => "app draft",
        }
    }
}

/// A stored workspace record (skill, memory collection or source, draft). Its fields are
/// validated by `crate::policy::records` before they are stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub id: Uuid,
    pub kind: RecordKind,
    pub parent_id: Option<Uuid>,
    pub version: i64,
    pub fields: RecordFields,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Uuid,
    /// A skill's stored Guard result (`None`: never scanned, or not a skill). Issue 29.
    pub guard: Option<crate::policy::skill_verdicts::SkillGuard>,
}

impl Record {
    /// Where this record is.
    pub fn reference(&self) -> RecordRef {
        RecordRef {
            kind: self.kind,
            parent_id: self.parent_id,
            id: self.id,
        }
    }

    /// Whether this is the record `at` names.
    pub fn is_at(&self, at: RecordRef) -> bool {
        self.reference() == at
    }
}

/// Where a record is: its kind, its parent (a source's collection; `None` for the others) and
/// its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef {
    pub kind: RecordKind,
    pub parent_id: Option<Uuid>,
    pub id: Uuid,
}

impl RecordRef {
    pub fn new(kind: RecordKind, parent_id: Option<Uuid>, id: Uuid) -> Self {
        Self {
            kind,
            parent_id,
            id,
        }
    }
}

/// A record's validated fields, kept as the compact JSON object text they are stored as.
///
/// A read sends this text as it is, spliced into the record's JSON (`members`), instead of
/// parsing it into a map and escaping every string again (issue 14: that was a third of a
/// list's work). A write parses it (`map`) to merge a change over it. The text is always one
/// JSON object: it is made from a map (`from_map`) or checked when it comes back from the
/// store (`from_stored`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFields(String);

impl RecordFields {
    /// The fields of a validated map.
    pub fn from_map(fields: &Map<String, Value>) -> Self {
        // A map of JSON values always serialises; `Value`'s `Display` is that serialisation.
        Self(Value::Object(fields.clone()).to_string())
    }

    /// Text read back from the store, which only ever stores `as_str()` of fields made by
    /// `from_map`. Checked for the shape of an object (braces), not parsed: reading every
    /// string of every listed record again cost a seventh of a list (issue 14). `None` when it
    /// is not braced, so a damaged row is an error, never a broken response.
    pub fn from_stored(text: String) -> Option<Self> {
        let t = text.trim();
        (t.starts_with('{') && t.ends_with('}')).then_some(Self(text))
    }

    /// The object's text, e.g. `{"name":"a"}`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The object's members without its braces, e.g. `"name":"a","content":"b"`; empty for
    /// `{}`. Spliced after other members of an object, behind a comma when not empty.
    pub fn members(&self) -> &str {
        let inner = self.0.trim();
        let inner = inner.strip_prefix('{').unwrap_or(inner);
        inner.strip_suffix('}').unwrap_or(inner).trim()
    }

    /// The fields as a map (parsed).
    pub fn map(&self) -> Map<String, Value> {
        match serde_json::from_str(&self.0) {
            Ok(Value::Object(map)) => map,
            // Unreachable: both constructors guarantee one object.
            _ => Map::new(),
        }
    }
}

/// Tenant settings, one row per tenant, versioned like records.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub fields: Map<String, Value>,
    pub version: i64,
    pub updated_at: Option<DateTime<Utc>>,
}

/// Record counts for the workspace overview.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordCounts {
    pub skills: u64,
    pub memory_collections: u64,
    pub agents: u64,
    pub workflows: u64,
    pub apps: u64,
    pub api_keys: u64,
}

/// The scopes a workspace API key can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum KeyScope {
    #[serde(rename = "workspace:read")]
    WorkspaceRead,
    #[serde(rename = "workspace:write")]
    WorkspaceWrite,
    #[serde(rename = "guard:scan")]
    GuardScan,
    #[serde(rename = "run")]
    Run,
}

impl KeyScope {
    pub const ALL: [KeyScope; 4] = [
        Self::WorkspaceRead,
        Self::WorkspaceWrite,
        Self::GuardScan,
        Self::Run,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::WorkspaceRead => "workspace:read",
            Self::WorkspaceWrite => "workspace:write",
            Self::GuardScan => "guard:scan",
            Self::Run => "run",
        }
    }

    pub fn parse(field: &str, raw: &str) -> DomainResult<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == raw)
            .ok_or_else(|| {
                DomainError::invalid(
                    field,
                    "each scope must be one of workspace:read, workspace:write, guard:scan, run",
                )
            })
    }
}

/// A scoped workspace API key. Only the SHA-256 of the secret is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub name: String,
    pub scopes: Vec<KeyScope>,
    pub hint: String,
    pub key_hash: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// The key's own per-minute limits, at most the tenant's when set.
    pub limits: crate::policy::quota::KeyLimits,
}

impl ApiKey {
    pub fn has_scope(&self, scope: KeyScope) -> bool {
        self.scopes.contains(&scope)
    }

    pub fn is_usable_at(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| at > now)
    }
}

/// A change to a key: its name and its own limits (each `Some(None)` removes one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiKeyPatch {
    pub name: Option<String>,
    pub requests_per_minute: Option<Option<u64>>,
    pub tokens_per_minute: Option<Option<u64>>,
    /// Nano-units (decision 0038).
    pub monthly_spend: Option<Option<u64>>,
}

/// A key with the member and tenant it acts for, loaded in one go.
#[derive(Debug, Clone)]
pub struct KeyContext {
    pub key: ApiKey,
    pub user: User,
    pub tenant: Option<Tenant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    Member,
    Admin,
    Key,
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Admin => "admin",
            Self::Key => "key",
        }
    }

    pub fn from_stored(raw: &str) -> Self {
        match raw {
            "admin" => Self::Admin,
            "key" => Self::Key,
            _ => Self::Member,
        }
    }
}

/// Who did something, as shown in the activity feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    pub kind: ActorKind,
    pub id: Uuid,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActivityTarget {
    pub kind: String,
    pub id: Uuid,
}

/// One line of a tenant's activity feed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Activity {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    pub actor: Actor,
    pub action: String,
    pub target: Option<ActivityTarget>,
    pub detail: Value,
}

/// An activity line to append, in the same transaction as the write it describes.
///
/// Architecture Invariant: an activity line is made only from a scope — a `WriteScope` (the
/// tenant's own writes), an `AdminScope` (Shadow entry and exit, membership changes), a
/// `RunScope` (runs) or a `TenantScope` (Guard scans by a signed-in caller) — so no port can
/// be handed a line for a tenant its caller was not proven to act for.
#[derive(Debug, Clone, PartialEq)]
pub struct NewActivity {
    id: Uuid,
    tenant_id: Uuid,
    at: DateTime<Utc>,
    actor: Actor,
    action: String,
    target: Option<ActivityTarget>,
    /// The detail object as JSON text, written once when the line is made.
    detail: String,
}

impl NewActivity {
    fn make(
        tenant_id: Uuid,
        actor: &Actor,
        at: DateTime<Utc>,
        action: &str,
        target: Option<ActivityTarget>,
        detail: &impl Serialize,
    ) -> Self {
        Self {
            id: crate::model::new_id(),
            tenant_id,
            at,
            actor: actor.clone(),
            action: action.to_owned(),
            target,
            // Details are maps of plain values (derived `Serialize` or JSON values), which
            // always serialise; the fallback is an empty object, never a panic.
            detail: serde_json::to_string(detail).unwrap_or_else(|_| "{}".to_owned()),
        }
    }

    /// A line for a write of the scope's tenant.
    pub fn write(
        scope: &crate::policy::access::WriteScope,
        at: DateTime<Utc>,
        action: &str,
        target: Option<ActivityTarget>,
        detail: Value,
    ) -> Self {
        Self::make(
            scope.tenant_id(),
            scope.actor(),
            at,
            action,
            target,
            &detail,
        )
    }

    /// A line an active platform admin writes into a tenant's feed.
    pub fn admin(
        scope: &crate::policy::access::AdminScope,
        tenant_id: Uuid,
        at: DateTime<Utc>,
        action: &str,
        target: Option<ActivityTarget>,
        detail: Value,
    ) -> Self {
        Self::make(tenant_id, scope.actor(), at, action, target, &detail)
    }

    /// A line read-scoped callers leave (a Guard scan by a member or key).
    pub fn read(
        scope: &crate::policy::access::TenantScope,
        at: DateTime<Utc>,
        action: &str,
        detail: Value,
    ) -> Self {
        Self::make(scope.tenant_id(), scope.actor(), at, action, None, &detail)
    }

    /// A run record. The detail is serialised straight from its own type: a line per run, so
    /// no `Value` map is built for it (issue 14).
    pub fn run(
        scope: &crate::policy::ai_access::RunScope,
        at: DateTime<Utc>,
        detail: &impl Serialize,
    ) -> Self {
        Self::make(scope.tenant().id, scope.actor(), at, "run", None, detail)
    }

    pub fn id(&self) -> Uuid {
        self.id
    }

    pub fn tenant_id(&self) -> Uuid {
        self.tenant_id
    }

    pub fn at(&self) -> DateTime<Utc> {
        self.at
    }

    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    pub fn action(&self) -> &str {
        &self.action
    }

    pub fn target(&self) -> Option<&ActivityTarget> {
        self.target.as_ref()
    }

    /// The detail object as JSON text.
    pub fn detail_json(&self) -> &str {
        &self.detail
    }

    /// The detail, parsed (`Value::Null` if it somehow is not JSON).
    pub fn detail(&self) -> Value {
        serde_json::from_str(&self.detail).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_fields_keep_their_text_and_splice_as_members() {
        let map = match serde_json::json!({"name": "a\"b", "tags": ["x"], "n": 1}) {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let f = RecordFields::from_map(&map);
        assert_eq!(f.as_str(), r#"{"n":1,"name":"a\"b","tags":["x"]}"#);
        assert_eq!(f.members(), r#""n":1,"name":"a\"b","tags":["x"]"#);
        assert_eq!(f.map(), map);
        let empty = RecordFields::from_map(&Map::new());
        assert_eq!(empty.members(), "");
        // Stored text is kept as it is, spaces and all.
        let stored = RecordFields::from_stored(" { \"a\": [1, 2] } ".into()).unwrap();
        assert_eq!(stored.members(), r#""a": [1, 2]"#);
        assert_eq!(stored.map()["a"], serde_json::json!([1, 2]));
        for bad in ["", "[]", "1", "\"x\"", "{", "}", "null", "{\"a\":1"] {
            assert!(RecordFields::from_stored(bad.into()).is_none(), "{bad}");
        }
    }
    use crate::policy::access::AdminAuthority;

    #[test]
    fn every_record_kind_reads_back_from_its_stored_name_and_nothing_else_does() {
        for kind in RecordKind::ALL {
            assert_eq!(RecordKind::from_stored(kind.as_str()), Some(kind));
        }
        assert_eq!(RecordKind::from_stored("agents"), None);
        assert_eq!(RecordKind::from_stored(""), None);
    }

    #[test]
    fn only_the_three_draft_segments_name_a_draft_kind() {
        assert_eq!(
            RecordKind::draft_from_path("agents"),
            Some(RecordKind::AgentDraft)
        );
        assert_eq!(
            RecordKind::draft_from_path("workflows"),
            Some(RecordKind::WorkflowDraft)
        );
        assert_eq!(
            RecordKind::draft_from_path("apps"),
            Some(RecordKind::AppDraft)
        );
        for other in ["skills", "agent_draft", "Agents", ""] {
            assert_eq!(RecordKind::draft_from_path(other), None);
        }
    }

    #[test]
    fn not_found_messages_name_the_kind_in_words() {
        let nouns: Vec<&str> = RecordKind::ALL.iter().map(|k| k.noun()).collect();
        assert_eq!(
            nouns,
            [
                "skill",
                "memory collection",
                "memory source",
                "agent draft",
                "workflow draft",
                "app draft"
            ]
        );
    }

    #[test]
    fn key_scopes_parse_from_their_contract_names_only() {
        let names = ["workspace:read", "workspace:write", "guard:scan", "run"];
        for (scope, name) in KeyScope::ALL.into_iter().zip(names) {
            assert_eq!(scope.as_str(), name);
            assert_eq!(KeyScope::parse("scopes", name).unwrap(), scope);
        }
        let e = KeyScope::parse("scopes", "workspace:admin").unwrap_err();
        assert!(matches!(e, DomainError::Validation { ref field, .. } if field == "scopes"));
    }

    fn api_key(scopes: Vec<KeyScope>) -> ApiKey {
        ApiKey {
            id: Uuid::now_v7(),
            tenant_id: Uuid::now_v7(),
            user_id: Uuid::now_v7(),
            name: "ci".into(),
            scopes,
            hint: "abcd".into(),
            key_hash: "h".into(),
            created_at: Utc::now(),
            last_used_at: None,
            expires_at: None,
            revoked_at: None,
            limits: crate::policy::quota::KeyLimits::default(),
        }
    }

    #[test]
    fn a_key_has_exactly_the_scopes_it_was_given() {
        let key = api_key(vec![KeyScope::WorkspaceRead, KeyScope::Run]);
        assert!(key.has_scope(KeyScope::WorkspaceRead));
        assert!(key.has_scope(KeyScope::Run));
        assert!(!key.has_scope(KeyScope::WorkspaceWrite));
        assert!(!key.has_scope(KeyScope::GuardScan));
    }

    #[test]
    fn a_key_is_usable_until_its_expiry_and_never_once_revoked() {
        let now = Utc::now();
        let second = chrono::Duration::seconds(1);
        let mut key = api_key(vec![KeyScope::WorkspaceRead]);
        assert!(key.is_usable_at(now));
        key.expires_at = Some(now + second);
        assert!(key.is_usable_at(now));
        key.expires_at = Some(now);
        assert!(!key.is_usable_at(now));
        key.expires_at = Some(now - second);
        assert!(!key.is_usable_at(now));
        // Revoked, whether or not it would still be valid.
        key.expires_at = Some(now + second);
        key.revoked_at = Some(now - second);
        assert!(!key.is_usable_at(now));
        key.expires_at = None;
        assert!(!key.is_usable_at(now));
    }

    #[test]
    fn actor_kinds_read_back_from_their_stored_names() {
        for (kind, name) in [
            (ActorKind::Member, "member"),
            (ActorKind::Admin, "admin"),
            (ActorKind::Key, "key"),
        ] {
            assert_eq!(kind.as_str(), name);
            assert_eq!(ActorKind::from_stored(name), kind);
        }
    }

    #[test]
    fn every_activity_line_gets_its_own_id() {
        let scope = crate::policy::access::LocalOperator::at_the_console("ops")
            .admin_scope()
            .unwrap();
        let tenant = Uuid::now_v7();
        let line = |action: &str| {
            NewActivity::admin(&scope, tenant, Utc::now(), action, None, Value::Null)
        };
        let (a, b) = (line("shadow.enter"), line("shadow.exit"));
        assert!(!a.id().is_nil());
        assert_ne!(a.id(), b.id());
        assert_eq!(a.tenant_id(), tenant);
    }

    #[test]
    fn an_activity_detail_is_kept_as_the_json_text_it_was_written_as() {
        let actor = Actor {
            kind: ActorKind::Member,
            id: Uuid::from_u128(1),
            label: "m".into(),
        };
        let detail = serde_json::json!({"b": [1, 2], "a": "x\"y"});
        let line = NewActivity::make(Uuid::from_u128(2), &actor, Utc::now(), "t", None, &detail);
        assert_eq!(line.detail_json(), r#"{"a":"x\"y","b":[1,2]}"#);
        assert_eq!(line.detail(), detail);
    }
}
