//! `/workspace`: the tenant's stored records, settings, keys and activity.
//!
//! GET routes need a session or a key with `workspace:read`; writes need `workspace:write`
//! and are refused in a Shadow view (the scope types decide both). Key management takes a
//! session only.

pub mod activity;
pub mod ai_access;
pub mod api_keys;
pub mod drafts;
pub mod list_cache;
pub mod memory;
pub mod overview;
pub mod records;
pub mod settings;
pub mod skills;
pub mod sources;
pub mod usage;
pub mod usage_gate;
