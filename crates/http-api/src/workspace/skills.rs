//! `/workspace/skills`: SKILL.md texts, stored and returned, never executed.

use gc_domain::workspace::RecordKind;
use uuid::Uuid;

use super::records::{record_routes, TopLevel};
use crate::cursor::ListQuery;

/// The skill routes' resource.
pub struct Skills;

impl TopLevel for Skills {
    const KIND: RecordKind = RecordKind::Skill;
}

record_routes! {
    resource: Skills,
    /// A stored skill.
    view: Skill {
        name: String,
        description: String,
        content: String,
        tags: Vec<String>,
    },
    /// A page of skills.
    list_view: SkillList,
    paths: "/api/v1/workspace/skills", "/api/v1/workspace/skills/{id}",
    parent: [], parent_missing: [],
    list_answers: [(status = 401, description = "unauthenticated"),
        (status = 403, description = "insufficient_scope or a member refusal")],
    body: "The fields of a skill (schema generated from gc_domain::records)",
    id: "Skill id", missing: "not_found (also for another tenant's skill)", deleted: "Deleted",
    list_skills: "The tenant's skills, newest first.",
    create_skill: "Stores a skill (version 1).",
    get_skill: "One skill, with its version as `ETag`.",
    patch_skill: "Changes some fields of a skill; `If-Match: \"<version>\"` makes it conditional.",
    delete_skill: "Deletes a skill.",
}
