//! `/workspace/drafts/{kind}`: agent, workflow and app drafts, stored and never run. Any other
//! `{kind}` is an unknown route (404), answered before credentials are looked at.

use actix_web::web;
use gc_domain::model::workspace::RecordKind;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::records::{record_routes, RecordResource};
use crate::cursor::ListQuery;

/// The `{kind}` path segment: `agents`, `workflows` or `apps`. Anything else fails path
/// extraction, which the path error handler answers with 404.
#[derive(Debug, Clone, Copy)]
pub struct DraftKind(pub RecordKind);

impl<'de> Deserialize<'de> for DraftKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        RecordKind::draft_from_path(&raw)
            .map(DraftKind)
            .ok_or_else(|| serde::de::Error::custom("unknown draft kind"))
    }
}

/// The draft routes' resource: the `{kind}` segment names the kind.
pub struct Drafts;

impl RecordResource for Drafts {
    type Listing = web::Path<DraftKind>;
    type One = web::Path<(DraftKind, Uuid)>;

    fn listing(kind: Self::Listing) -> (RecordKind, Option<Uuid>) {
        (kind.0, None)
    }

    fn one(at: Self::One) -> (RecordKind, Option<Uuid>, Uuid) {
        let (kind, id) = at.into_inner();
        (kind.0, None, id)
    }
}

record_routes! {
    resource: Drafts,
    /// A stored draft.
    view: Draft {
        name: String,
        description: String,
        #[schema(value_type = Object)]
        definition: Map<String, Value>,
    },
    /// A page of drafts.
    list_view: DraftList,
    paths: "/api/v1/workspace/drafts/{kind}", "/api/v1/workspace/drafts/{kind}/{id}",
    parent: [("kind" = String, Path, description = "`agents`, `workflows` or `apps`")],
    parent_missing: [(status = 404, description = "not_found: unknown kind")],
    body: "The fields of a draft (schema generated from gc_domain::policy::records)",
    id: "Draft id", missing: "not_found", deleted: "Deleted",
    list_drafts: "The tenant's drafts of one kind, newest first.",
    create_draft: "Stores a draft (version 1).",
    get_draft: "One draft, with its version as `ETag`.",
    patch_draft: "Changes some fields of a draft; `If-Match: \"<version>\"` makes it conditional.",
    delete_draft: "Deletes a draft.",
}
