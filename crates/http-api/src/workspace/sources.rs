//! `/workspace/memory/{collectionId}/sources`: the sources of a memory collection. A `url`
//! source is stored as text and never fetched. The collection must be the caller's tenant's;
//! a source reached through another collection's id is not found.

use actix_web::web;
use gc_domain::model::workspace::RecordKind;
use uuid::Uuid;

use super::records::{record_routes, RecordResource};
use crate::cursor::ListQuery;

/// The source routes' resource: under a collection (`{collectionId}`).
pub struct Sources;

impl RecordResource for Sources {
    type Listing = web::Path<Uuid>;
    type One = web::Path<(Uuid, Uuid)>;

    fn listing(collection: Self::Listing) -> (RecordKind, Option<Uuid>) {
        (RecordKind::MemorySource, Some(collection.into_inner()))
    }

    fn one(at: Self::One) -> (RecordKind, Option<Uuid>, Uuid) {
        let (collection, id) = at.into_inner();
        (RecordKind::MemorySource, Some(collection), id)
    }
}

record_routes! {
    resource: Sources,
    /// A stored memory source.
    view: MemorySource {
        /// The collection it belongs to.
        collection_id: Uuid,
        title: String,
        kind: String,
        content: String,
    },
    /// A page of memory sources.
    list_view: MemorySourceList,
    paths: "/api/v1/workspace/memory/{collectionId}/sources",
        "/api/v1/workspace/memory/{collectionId}/sources/{id}",
    parent: [("collectionId" = Uuid, Path, description = "Collection id")],
    parent_missing: [(status = 404, description = "not_found: no such collection in your tenant")],
    body: "The fields of a memory source (schema generated from gc_domain::policy::records)",
    id: "Source id", missing: "not_found (also under another collection or tenant)",
    deleted: "Deleted",
    list_sources: "The sources of a collection, newest first.",
    create_source: "Adds a source to a collection (version 1).",
    get_source: "One source of a collection, with its version as `ETag`.",
    patch_source: "Changes some fields of a source; `If-Match: \"<version>\"` makes it conditional.",
    delete_source: "Deletes a source.",
}
