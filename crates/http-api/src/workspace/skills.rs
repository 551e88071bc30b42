//! `/workspace/skills`: SKILL.md texts, stored and returned, never executed. Each carries the
//! Guard's verdict on its content (`guard`, issue 29): scanned on create and update, again on
//! `POST /workspace/skills/{id}/scan`. [`crate::guard::GuardService`] is the domain's `SkillScanner`
//! port (over the Guard adapter the binary wires).

use gc_domain::model::workspace::RecordKind;
use uuid::Uuid;

use super::records::{record_routes, TopLevel};
use crate::cursor::ListQuery;
use crate::reply::Reply;

/// The skill routes' resource.
pub struct Skills;

impl TopLevel for Skills {
    const KIND: RecordKind = RecordKind::Skill;
}

/// One finding stored with a skill's verdict (never an excerpt of the content).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SkillFinding {
    pub rule_id: String,
    /// `info`, `low`, `medium`, `high` or `critical`.
    pub severity: String,
    pub title: String,
    /// At most 300 characters.
    pub message: String,
    pub path: Option<String>,
    /// 1-based; 0 when the finding is about the whole skill.
    pub line: u32,
}

/// The Guard's stored verdict on a skill's content. A scan that could not be done (scanner at
/// capacity, the workspace's scans in flight, the time-out) or a skill stored before verdicts:
/// `verdict: "warn"` with a `scan.incomplete` finding, `rules_version` and `scanned_at` null,
/// `stale: true`; never `pass`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SkillGuardView {
    /// `pass`, `warn` or `fail`.
    pub verdict: String,
    /// At most 20, the most severe first.
    pub findings: Vec<SkillFinding>,
    /// Findings not stored (past the 20, or left out by the scanner's own caps).
    pub findings_omitted: u64,
    /// The Guard rules version of the scan; null when it was not scanned.
    pub rules_version: Option<String>,
    pub scanned_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The verdict was made under other rules than the Guard's now (or none): scan again.
    pub stale: bool,
}

record_routes! {
    resource: Skills,
    /// A stored skill.
    view: Skill {
        name: String,
        description: String,
        content: String,
        tags: Vec<String>,
        /// The Guard's verdict on `content`.
        guard: SkillGuardView,
    },
    /// A page of skills.
    list_view: SkillList,
    paths: "/api/v1/workspace/skills", "/api/v1/workspace/skills/{id}",
    top_level,
    body: "The fields of a skill (schema generated from gc_domain::policy::records)",
    id: "Skill id", missing: "not_found (also for another tenant's skill)", deleted: "Deleted",
    list_skills: "The tenant's skills, newest first.",
    create_skill: "Stores a skill (version 1), with the Guard's verdict on its content.",
    get_skill: "One skill, with its version as `ETag`.",
    patch_skill: "Changes some fields of a skill (its content is scanned again when it changes); `If-Match: \"<version>\"` makes it conditional.",
    delete_skill: "Deletes a skill.",
}

/// Scans a stored skill again with the Guard's rules now and stores the verdict. The skill's
/// fields and version do not change. A scan that cannot be done is stored as not scanned
/// (`warn`, `scan.incomplete`), never answered with an error.
#[utoipa::path(post, path = "/api/v1/workspace/skills/{id}/scan", tag = "workspace",
    params(("id" = Uuid, Path, description = "Skill id")),
    responses((status = 200, body = Skill, headers(("ETag" = String, description = "\"<version>\""))),
        (status = 404, description = "not_found (also for another tenant's skill)")))]
pub async fn scan_skill(id: actix_web::web::Path<Uuid>, auth: crate::extract::Auth) -> Reply {
    super::records::rescan(id, auth).await
}
