//! Workspace records, settings and the activity feed, always filtered by the scope's tenant.

use diesel::dsl::count_star;
use diesel::prelude::*;
use gc_domain::model::workspace::{
    Activity, NewActivity, Record, RecordCounts, RecordKind, RecordRef, Settings,
};
use gc_domain::page::{Page, PageRequest};
use gc_domain::policy::access::TenantScope;
use gc_domain::ports::{
    GuardStamp, RecordQuery, RecordUpdate, SettingsUpdate, TenantWrite, WorkspaceRepo,
};
use gc_domain::{DomainError, DomainResult};
use serde_json::Map;
use uuid::Uuid;

use super::{count, fetch_limit, newest_first, page_of};
use crate::error::{db_error, parent_missing};
use crate::rows::{
    json_object, json_text, ms, opt_text, text, time, ActivityRow, ListedRecordRow, RecordRow,
};
use crate::schema::{activity, api_keys, record_versions, records, settings};
use crate::store::{DbConnection, DbStore};

/// Appends an activity line to `tenant_id`'s feed (inside the caller's transaction).
pub(crate) fn append(
    conn: &mut DbConnection,
    op: &'static str,
    line: &NewActivity,
    tenant_id: Uuid,
) -> DomainResult<()> {
    let row = ActivityRow::from_domain(line, tenant_id);
    // On the concrete connection the prepared insert is reused: the run-record writer appends
    // thousands of lines a second under load.
    crate::store::on_backend!(conn, |c| diesel::insert_into(activity::table)
        .values(&row)
        .execute(c))
    .map_err(|e| db_error(op, e))?;
    Ok(())
}

/// The not-found noun of a record's parent: only sources have one.
const COLLECTION: &str = "memory collection";

/// One record of the tenant, matched by kind and parent as well as id.
fn load_record(
    conn: &mut DbConnection,
    tenant_id: &str,
    at: RecordRef,
) -> DomainResult<Option<RecordRow>> {
    let mut query = records::table
        .filter(records::id.eq(text(at.id)))
        .filter(records::tenant_id.eq(tenant_id))
        .filter(records::kind.eq(at.kind.as_str()))
        .select(RecordRow::as_select())
        .into_boxed();
    query = match opt_text(at.parent_id) {
        Some(parent_id) => query.filter(records::parent_id.eq(parent_id)),
        None => query.filter(records::parent_id.is_null()),
    };
    query
        .first(conn)
        .optional()
        .map_err(|e| db_error("find_record", e))
}

/// For sources: the parent must be a memory collection of the same tenant, else not found.
fn check_parent(
    conn: &mut DbConnection,
    tenant_id: &str,
    kind: RecordKind,
    parent_id: Option<Uuid>,
) -> DomainResult<()> {
    match (kind, parent_id) {
        (RecordKind::MemorySource, Some(parent_id)) => {
            let collection = RecordRef::new(RecordKind::MemoryCollection, None, parent_id);
            match load_record(conn, tenant_id, collection)? {
                Some(_) => Ok(()),
                None => Err(DomainError::NotFound(COLLECTION)),
            }
        }
        (RecordKind::MemorySource, None) => Err(DomainError::NotFound(COLLECTION)),
        // Nothing but sources has a parent.
        (_, Some(_)) => Err(DomainError::NotFound("record")),
        (_, None) => Ok(()),
    }
}

fn load_settings(conn: &mut DbConnection, tenant_id: &str) -> DomainResult<Settings> {
    let row = settings::table
        .find(tenant_id)
        .select((settings::fields, settings::version, settings::updated_at))
        .first::<(String, i64, Option<i64>)>(conn)
        .optional()
        .map_err(|e| db_error("settings", e))?;
    match row {
        Some((fields, version, updated_at)) => Ok(Settings {
            fields: json_object(&fields)?,
            version,
            updated_at: updated_at.map(time).transpose()?,
        }),
        None => Ok(Settings {
            fields: Map::new(),
            version: 0,
            updated_at: None,
        }),
    }
}

impl WorkspaceRepo for DbStore {
    fn list_records(&self, scope: &TenantScope, query: &RecordQuery) -> DomainResult<Page<Record>> {
        let RecordQuery {
            kind,
            parent_id,
            ref page,
        } = *query;
        let tenant_id = text(scope.tenant_id());
        let rows = self.read(|conn| {
            // A source list through a collection id of another tenant (or no collection at
            // all) is not found, never an empty list.
            check_parent(conn, &tenant_id, kind, parent_id)?;
            let parent_id = opt_text(parent_id);
            // Static (not boxed) queries, so diesel keeps them prepared. Ids are lower-case
            // hex and hyphens, so "~" sorts after every id: "no cursor" is `id < "~"`.
            let before = page.before().map_or_else(|| "~".to_owned(), text);
            match &parent_id {
                Some(parent_id) => crate::store::on_backend!(conn, |c| records::table
                    .filter(records::tenant_id.eq(&tenant_id))
                    .filter(records::kind.eq(kind.as_str()))
                    .filter(records::id.lt(&before))
                    .filter(records::parent_id.eq(parent_id))
                    .select(ListedRecordRow::as_select())
                    .order(records::id.desc())
                    .limit(fetch_limit(page))
                    .load(c)),
                None => crate::store::on_backend!(conn, |c| records::table
                    .filter(records::tenant_id.eq(&tenant_id))
                    .filter(records::kind.eq(kind.as_str()))
                    .filter(records::id.lt(&before))
                    .filter(records::parent_id.is_null())
                    .select(ListedRecordRow::as_select())
                    .order(records::id.desc())
                    .limit(fetch_limit(page))
                    .load(c)),
            }
            .map_err(|e| db_error("list_records", e))
        })?;
        page_of(page, rows, |row| row.into_domain(kind), |r| r.id)
    }

    fn find_record(&self, scope: &TenantScope, record: RecordRef) -> DomainResult<Option<Record>> {
        let tenant_id = text(scope.tenant_id());
        self.read(|conn| load_record(conn, &tenant_id, record))?
            .map(RecordRow::into_domain)
            .transpose()
    }

    fn insert_record(&self, write: TenantWrite<'_>, record: &Record) -> DomainResult<Record> {
        let tenant = write.tenant_id();
        let row = RecordRow {
            tenant_id: text(tenant),
            kind: record.kind.as_str().to_owned(),
            listed: ListedRecordRow {
                id: text(record.id),
                parent_id: opt_text(record.parent_id),
                version: 1,
                fields: record.fields.as_str().to_owned(),
                created_at: ms(record.created_at),
                updated_at: ms(record.updated_at),
                created_by: text(record.created_by),
                guard: record.guard.as_ref().map(|g| g.as_str().to_owned()),
                guard_rules_version: record
                    .guard
                    .as_ref()
                    .and_then(|g| g.rules_version().map(str::to_owned)),
            },
        };
        self.write("insert_record", |conn| {
            check_parent(conn, &row.tenant_id, record.kind, record.parent_id)?;
            diesel::insert_into(records::table)
                .values(&row)
                .execute(conn)
                .map_err(|e| match row.listed.parent_id {
                    // The collection was deleted after `check_parent` read it (PostgreSQL
                    // writers run concurrently): the parent is gone.
                    Some(_) => parent_missing("insert_record", COLLECTION, e),
                    None => db_error("insert_record", e),
                })?;
            append(conn, "insert_record", write.activity, tenant)
        })?;
        row.into_domain()
    }

    fn update_record(
        &self,
        write: TenantWrite<'_>,
        update: &RecordUpdate<'_>,
    ) -> DomainResult<Option<Record>> {
        let RecordUpdate {
            record,
            expected_version,
            fields,
            guard,
        } = *update;
        let tenant = write.tenant_id();
        let tenant_id = text(tenant);
        let id = text(record.id);
        let fields = fields.as_str();
        self.write("update_record", |conn| {
            if load_record(conn, &tenant_id, record)?.is_none() {
                return Ok(None);
            }
            let mine = records::table
                .filter(records::id.eq(&id))
                .filter(records::tenant_id.eq(&tenant_id));
            let changes = (
                records::fields.eq(fields),
                records::version.eq(records::version + 1),
                records::updated_at.eq(ms(write.at())),
            );
            // With `If-Match`, the update is conditional on the version in the same statement,
            // so a concurrent writer between the read above and here is caught as well.
            let n = match (expected_version, guard) {
                (Some(expected), None) => {
                    diesel::update(mine.filter(records::version.eq(expected)))
                        .set(changes)
                        .execute(conn)
                }
                (None, None) => diesel::update(mine).set(changes).execute(conn),
                (Some(expected), Some(g)) => {
                    diesel::update(mine.filter(records::version.eq(expected)))
                        .set((
                            changes,
                            records::guard.eq(g.as_str()),
                            records::guard_rules_version.eq(g.rules_version()),
                        ))
                        .execute(conn)
                }
                (None, Some(g)) => diesel::update(mine)
                    .set((
                        changes,
                        records::guard.eq(g.as_str()),
                        records::guard_rules_version.eq(g.rules_version()),
                    ))
                    .execute(conn),
            }
            .map_err(|e| db_error("update_record", e))?;
            if n == 0 {
                // Deleted between the read and the update: not found, whatever the version.
                let exists = load_record(conn, &tenant_id, record)?;
                return match (expected_version, exists) {
                    (Some(expected), Some(_)) => Err(DomainError::VersionConflict { expected }),
                    _ => Ok(None),
                };
            }
            append(conn, "update_record", write.activity, tenant)?;
            load_record(conn, &tenant_id, record)?
                .map(RecordRow::into_domain)
                .transpose()
        })
    }

    fn set_record_guard(
        &self,
        write: TenantWrite<'_>,
        stamp: &GuardStamp<'_>,
    ) -> DomainResult<Option<Record>> {
        let (record, guard) = (stamp.record, stamp.guard);
        let tenant = write.tenant_id();
        let tenant_id = text(tenant);
        let id = text(record.id);
        self.write("set_record_guard", |conn| {
            // Only the record still at the version that was scanned: a change in between
            // wrote its own verdict, which stands.
            let n = diesel::update(
                records::table
                    .filter(records::id.eq(&id))
                    .filter(records::tenant_id.eq(&tenant_id))
                    .filter(records::kind.eq(record.kind.as_str()))
                    .filter(records::version.eq(stamp.version)),
            )
            .set((
                records::guard.eq(guard.as_str()),
                records::guard_rules_version.eq(guard.rules_version()),
            ))
            .execute(conn)
            .map_err(|e| db_error("set_record_guard", e))?;
            if n == 0 {
                return Ok(None);
            }
            append(conn, "set_record_guard", write.activity, tenant)?;
            load_record(conn, &tenant_id, record)?
                .map(RecordRow::into_domain)
                .transpose()
        })
    }

    fn delete_record(&self, write: TenantWrite<'_>, record: RecordRef) -> DomainResult<bool> {
        let tenant = write.tenant_id();
        let tenant_id = text(tenant);
        let id = text(record.id);
        self.write("delete_record", |conn| {
            if load_record(conn, &tenant_id, record)?.is_none() {
                return Ok(false);
            }
            // The record and its children (a collection's sources), explicitly: the foreign
            // key's cascade is a second line, not the only one.
            diesel::delete(
                records::table
                    .filter(records::tenant_id.eq(&tenant_id))
                    .filter(records::id.eq(&id).or(records::parent_id.eq(&id))),
            )
            .execute(conn)
            .map_err(|e| db_error("delete_record", e))?;
            append(conn, "delete_record", write.activity, tenant)?;
            Ok(true)
        })
    }

    fn records_version(&self, scope: &TenantScope) -> DomainResult<i64> {
        let tenant_id = text(scope.tenant_id());
        // Raised by the `records_version*` triggers of migration 2026-12-01 in every record
        // write's transaction; no row yet is version 0.
        let version = self.read(|conn| {
            crate::store::on_backend!(conn, |c| record_versions::table
                .find(&tenant_id)
                .select(record_versions::version)
                .first::<i64>(c)
                .optional())
            .map_err(|e| db_error("records_version", e))
        })?;
        Ok(version.unwrap_or(0))
    }

    fn record_counts(&self, scope: &TenantScope) -> DomainResult<RecordCounts> {
        let tenant_id = text(scope.tenant_id());
        let (per_kind, keys) = self.read(|conn| {
            let per_kind = records::table
                .filter(records::tenant_id.eq(&tenant_id))
                .filter(records::parent_id.is_null())
                .group_by(records::kind)
                .select((records::kind, count_star()))
                .load::<(String, i64)>(conn)
                .map_err(|e| db_error("record_counts", e))?;
            let keys = api_keys::table
                .filter(api_keys::tenant_id.eq(&tenant_id))
                .filter(api_keys::revoked_at.is_null())
                // Expired keys no longer count as keys of the workspace.
                .filter(
                    api_keys::expires_at
                        .is_null()
                        .or(api_keys::expires_at.gt(ms(chrono::Utc::now()))),
                )
                .select(count_star())
                .first::<i64>(conn)
                .map_err(|e| db_error("record_counts", e))?;
            Ok((per_kind, keys))
        })?;
        let mut counts = RecordCounts {
            api_keys: count(keys),
            ..RecordCounts::default()
        };
        for (kind, n) in per_kind {
            let n = count(n);
            match RecordKind::from_stored(&kind) {
                Some(RecordKind::Skill) => counts.skills = n,
                Some(RecordKind::MemoryCollection) => counts.memory_collections = n,
                Some(RecordKind::AgentDraft) => counts.agents = n,
                Some(RecordKind::WorkflowDraft) => counts.workflows = n,
                Some(RecordKind::AppDraft) => counts.apps = n,
                Some(RecordKind::MemorySource) | None => {}
            }
        }
        Ok(counts)
    }

    fn settings(&self, scope: &TenantScope) -> DomainResult<Settings> {
        let tenant_id = text(scope.tenant_id());
        self.read(|conn| load_settings(conn, &tenant_id))
    }

    fn update_settings(
        &self,
        write: TenantWrite<'_>,
        update: &SettingsUpdate<'_>,
    ) -> DomainResult<Settings> {
        let expected_version = update.expected_version;
        let tenant = write.tenant_id();
        let tenant_id = text(tenant);
        let fields = json_text(update.fields);
        self.write("update_settings", |conn| {
            // Make sure the row exists (version 0 = never written), then update it
            // conditionally like a record. The insert is the one statement whose syntax is
            // the same on both backends but whose diesel type is not: a per-backend match.
            let blank = (
                settings::tenant_id.eq(&tenant_id),
                settings::fields.eq("{}"),
                settings::version.eq(0_i64),
                settings::updated_at.eq(None::<i64>),
            );
            let ensured = match conn {
                DbConnection::Pg(c) => diesel::insert_into(settings::table)
                    .values(blank)
                    .on_conflict_do_nothing()
                    .execute(c),
                DbConnection::Sqlite(c) => diesel::insert_into(settings::table)
                    .values(blank)
                    .on_conflict_do_nothing()
                    .execute(c),
            };
            ensured.map_err(|e| db_error("update_settings", e))?;
            let changes = (
                settings::fields.eq(&fields),
                settings::version.eq(settings::version + 1),
                settings::updated_at.eq(Some(ms(write.at()))),
            );
            let mine = settings::table.filter(settings::tenant_id.eq(&tenant_id));
            let n = match expected_version {
                Some(expected) => diesel::update(mine.filter(settings::version.eq(expected)))
                    .set(changes)
                    .execute(conn),
                None => diesel::update(mine).set(changes).execute(conn),
            }
            .map_err(|e| db_error("update_settings", e))?;
            if n == 0 {
                return Err(DomainError::VersionConflict {
                    expected: expected_version.unwrap_or(0),
                });
            }
            append(conn, "update_settings", write.activity, tenant)?;
            load_settings(conn, &tenant_id)
        })
    }

    fn list_activity(
        &self,
        scope: &TenantScope,
        page: &PageRequest,
    ) -> DomainResult<Page<Activity>> {
        let tenant_id = text(scope.tenant_id());
        newest_first!(
            self,
            "list_activity",
            activity,
            ActivityRow,
            page,
            |query| query.filter(activity::tenant_id.eq(&tenant_id))
        )
    }

    fn append_activity(&self, activity: &NewActivity) -> DomainResult<()> {
        self.write("append_activity", |conn| {
            append(conn, "append_activity", activity, activity.tenant_id())
        })
    }

    fn append_activities(&self, activities: &[NewActivity]) -> DomainResult<()> {
        if activities.is_empty() {
            return Ok(());
        }
        self.write("append_activities", |conn| {
            insert_activities(conn, activities, "append_activities")
        })
    }
}

/// Inserts activity lines in the caller's transaction, never a statement per line (the
/// run-record writer appends a line per run, and a statement each was a seventh of a run's
/// instructions, issue 14): on PostgreSQL one statement of columns for the whole batch
/// (`columns::ActivityColumns`, decision 0061), on SQLite multi-row statements of fixed row
/// counts (`store::insert_rows`); kept prepared either way.
pub(crate) fn insert_activities(
    conn: &mut DbConnection,
    activities: &[NewActivity],
    op: &'static str,
) -> DomainResult<()> {
    let rows: Vec<ActivityRow> = activities
        .iter()
        .map(|a| ActivityRow::from_domain(a, a.tenant_id()))
        .collect();
    insert_activity_rows(conn, rows, op)
}

/// [`insert_activities`] of rows already made.
pub(crate) fn insert_activity_rows(
    conn: &mut DbConnection,
    rows: Vec<ActivityRow>,
    op: &'static str,
) -> DomainResult<()> {
    match conn {
        // One statement of columns for any number of lines (decision 0061).
        DbConnection::Pg(c) if !rows.is_empty() => crate::columns::ActivityColumns::of(rows)
            .execute(c)
            .map(|_| ())
            .map_err(|e| db_error(op, e)),
        _ => crate::store::insert_rows!(conn, activity::table, &rows).map_err(|e| db_error(op, e)),
    }
}
