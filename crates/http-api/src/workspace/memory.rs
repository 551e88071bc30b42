//! `/workspace/memory`: memory collections. Deleting one deletes its sources in the same
//! transaction.

use gc_domain::model::workspace::RecordKind;
use uuid::Uuid;

use super::records::{record_routes, TopLevel};
use crate::cursor::ListQuery;

/// The memory collection routes' resource.
pub struct Collections;

impl TopLevel for Collections {
    const KIND: RecordKind = RecordKind::MemoryCollection;
}

record_routes! {
    resource: Collections,
    /// A stored memory collection.
    view: MemoryCollection {
        name: String,
        description: String,
    },
    /// A page of memory collections.
    list_view: MemoryCollectionList,
    paths: "/api/v1/workspace/memory", "/api/v1/workspace/memory/{id}",
    top_level,
    body: "The fields of a memory collection (schema generated from gc_domain::policy::records)",
    id: "Collection id", missing: "not_found (also for another tenant's collection)",
    deleted: "Deleted, with its sources",
    list_collections: "The tenant's memory collections, newest first.",
    create_collection: "Stores a memory collection (version 1).",
    get_collection: "One memory collection, with its version as `ETag`.",
    patch_collection: "Changes some fields of a memory collection; `If-Match: \"<version>\"` makes it conditional.",
    delete_collection: "Deletes a memory collection and all of its sources.",
}
