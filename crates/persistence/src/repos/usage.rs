//! Usage reports: run lines summed per day, model, key or tenant.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use gc_domain::access::{AdminScope, TenantScope};
use gc_domain::usage::{UsageGroup, UsageLine, UsagePage, UsageQuery};
use gc_domain::DomainResult;
use uuid::Uuid;

use super::count;
use crate::error::db_error;
use crate::rows::text;
use crate::store::{on_backend, DbConnection, DbStore};

#[derive(QueryableByName)]
struct UsageRow {
    #[diesel(sql_type = Text)]
    grp: String,
    #[diesel(sql_type = BigInt)]
    requests: i64,
    #[diesel(sql_type = BigInt)]
    errors: i64,
    #[diesel(sql_type = BigInt)]
    prompt: i64,
    #[diesel(sql_type = BigInt)]
    completion: i64,
    #[diesel(sql_type = BigInt)]
    total: i64,
}

/// The usage query for `column`, with `$n` placeholders (PostgreSQL) or `?` (SQLite). Binds,
/// in order: from, to, tenant (twice; empty for every tenant), before (twice; empty for the
/// first page), limit.
fn usage_sql(column: &str, pg: bool) -> String {
    let mut n = 0;
    let mut p = || {
        n += 1;
        if pg {
            format!("CAST(${n} AS TEXT)")
        } else {
            "CAST(? AS TEXT)".to_owned()
        }
    };
    let (from, to, t1, t2, b1, b2) = (p(), p(), p(), p(), p(), p());
    let lim = if pg { "$7".to_owned() } else { "?".to_owned() };
    format!(
        "SELECT {column} AS grp, COUNT(*) AS requests, \
         CAST(SUM(CASE WHEN failed THEN 1 ELSE 0 END) AS BIGINT) AS errors, \
         CAST(SUM(prompt_tokens) AS BIGINT) AS prompt, \
         CAST(SUM(completion_tokens) AS BIGINT) AS completion, \
         CAST(SUM(total_tokens) AS BIGINT) AS total \
         FROM run_usage WHERE day >= {from} AND day <= {to} \
         AND ({t1} = '' OR tenant_id = {t2}) AND ({b1} = '' OR {column} < {b2}) \
         GROUP BY {column} ORDER BY {column} DESC LIMIT {lim}"
    )
}

fn usage(store: &DbStore, tenant_id: Option<Uuid>, query: &UsageQuery) -> DomainResult<UsagePage> {
    let column = match query.group {
        UsageGroup::Day => "day",
        UsageGroup::Model => "model",
        UsageGroup::Key => "key_id",
        UsageGroup::Tenant => "tenant_id",
    };
    let tenant = tenant_id.map(text).unwrap_or_default();
    let before = query.before.clone().unwrap_or_default();
    let (from, to) = (query.range.from_day(), query.range.to_day());
    let fetch = i64::from(query.limit) + 1;
    let rows: Vec<UsageRow> = store.read(|conn| {
        let pg = matches!(conn, DbConnection::Pg(_));
        let sql = usage_sql(column, pg);
        on_backend!(conn, |c| diesel::sql_query(&sql)
            .bind::<Text, _>(&from)
            .bind::<Text, _>(&to)
            .bind::<Text, _>(&tenant)
            .bind::<Text, _>(&tenant)
            .bind::<Text, _>(&before)
            .bind::<Text, _>(&before)
            .bind::<BigInt, _>(fetch)
            .load(c))
        .map_err(|e| db_error("usage", e))
    })?;
    let lines = rows
        .into_iter()
        .map(|r| UsageLine {
            group: r.grp,
            requests: count(r.requests),
            errors: count(r.errors),
            prompt_tokens: count(r.prompt),
            completion_tokens: count(r.completion),
            total_tokens: count(r.total),
        })
        .collect();
    Ok(UsagePage::finish(query, lines))
}

/// The usage reports (the run-line writer is `UsageRepo::record_runs` in `quota.rs`).
impl DbStore {
    pub(crate) fn tenant_usage_report(
        &self,
        scope: &TenantScope,
        query: &UsageQuery,
    ) -> DomainResult<UsagePage> {
        usage(self, Some(scope.tenant_id()), query)
    }

    pub(crate) fn all_usage_report(
        &self,
        _scope: &AdminScope,
        tenant_id: Option<Uuid>,
        query: &UsageQuery,
    ) -> DomainResult<UsagePage> {
        usage(self, tenant_id, query)
    }
}
