//! The port implementations, one module per area.

mod accounts;
mod admin_tokens;
pub(crate) mod ai_keys;
mod api_keys;
pub(crate) mod quota;
mod usage;
pub(crate) mod workspace;

use gc_domain::page::{Page, PageRequest};
use gc_domain::DomainResult;
use uuid::Uuid;

/// Rows per page plus one, to know whether a next page exists.
pub(crate) fn fetch_limit(page: &PageRequest) -> i64 {
    i64::from(page.limit()) + 1
}

/// One page of a table's rows, newest id first, after the page's cursor, as domain values:
/// `newest_first!(store, "op", table, Row, page, |query| narrowed)` reads the rows with the
/// boxed query (ordered, limited to [`fetch_limit`] and past the cursor) that `narrowed`
/// makes of `query` (extra filters, or `query` itself), and finishes them with [`page_of`]
/// through `Row::into_domain` (the items keyed by their `id`). A macro: the query is a
/// different diesel type for each table.
macro_rules! newest_first {
    ($store:expr, $op:literal, $table:ident, $row:ty, $page:expr, |$query:ident| $narrowed:expr) => {{
        let page: &gc_domain::page::PageRequest = $page;
        $store
            .read(|conn| {
                let $query = $table::table
                    .select(<$row>::as_select())
                    .order($table::id.desc())
                    .limit($crate::repos::fetch_limit(page))
                    .into_boxed();
                let $query = match page.before() {
                    Some(before) => $query.filter($table::id.lt($crate::rows::text(before))),
                    None => $query,
                };
                $narrowed
                    .load(conn)
                    .map_err(|e| $crate::error::db_error($op, e))
            })
            .and_then(|rows| {
                $crate::repos::page_of(page, rows, <$row>::into_domain, |item| item.id)
            })
    }};
}
pub(crate) use newest_first;

/// A credential and its owner in one query: `with_owner!(store, "op", Row where
/// table::column = value)` reads the row of `table` (a table with a `user_id`) whose `column`
/// is `value`, the user it belongs to and that user's tenant, as domain values
/// (`Row::into_domain`, the user, the tenant if any). On the concrete connection
/// (`on_backend!`): credential lookups are on every request's path.
macro_rules! with_owner {
    ($store:expr, $op:literal, $row:ty where $table:ident :: $column:ident = $value:expr) => {{
        use $crate::rows::{TenantRow, UserRow};
        use $crate::schema::{tenants, users};
        $store
            .read(|conn| {
                $crate::store::on_backend!(conn, |c| $table::table
                    .inner_join(users::table)
                    .left_join(tenants::table.on(users::tenant_id.eq(tenants::id.nullable())))
                    .filter($table::$column.eq($value))
                    .select((
                        <$row>::as_select(),
                        UserRow::as_select(),
                        Option::<TenantRow>::as_select(),
                    ))
                    .first::<($row, UserRow, Option<TenantRow>)>(c))
                .optional()
                .map_err(|e| $crate::error::db_error($op, e))
            })
            .and_then(|found| {
                found
                    .map(|(row, user, tenant)| -> gc_domain::DomainResult<_> {
                        Ok((
                            <$row>::into_domain(row)?,
                            user.into_domain()?,
                            tenant.map(TenantRow::into_domain).transpose()?,
                        ))
                    })
                    .transpose()
            })
    }};
}
pub(crate) use with_owner;

/// The first row `query` finds, as a domain value (`Row::into_domain`), or `None`:
/// `first_row!(conn, "op", Row, query)` in a function answering a `DomainResult`, a failure
/// being `db_error(op)`. A macro: the query is a different diesel type for each table.
macro_rules! first_row {
    ($conn:expr, $op:literal, $row:ty, $query:expr) => {
        $query
            .select(<$row>::as_select())
            .first::<$row>($conn)
            .optional()
            .map_err(|e| $crate::error::db_error($op, e))?
            .map(<$row>::into_domain)
            .transpose()
    };
}
pub(crate) use first_row;

/// One row inserted into `table` in a statement of its own: `insert_one!(store, "op", table,
/// &row)`, a failure being `db_error(op)`. A macro: the insert is a different diesel type for
/// each table.
macro_rules! insert_one {
    ($store:expr, $op:literal, $table:ident, $row:expr) => {
        $store.write_one(|conn| {
            diesel::insert_into($table::table)
                .values($row)
                .execute(conn)
                .map_err(|e| $crate::error::db_error($op, e))
        })
    };
}
pub(crate) use insert_one;

/// Deletes the row of `table` with this id that belongs to this owner, in a statement of its
/// own: `delete_owned!(store, "op", table, id, owner_column = owner)` answers whether there
/// was one (ids and owners as stored text).
macro_rules! delete_owned {
    ($store:expr, $op:literal, $table:ident, $id:expr, $owner:ident = $owner_id:expr) => {
        $store.write_one(|conn| {
            diesel::delete(
                $table::table
                    .filter($table::id.eq($id))
                    .filter($table::$owner.eq($owner_id)),
            )
            .execute(conn)
            .map(|n| n > 0)
            .map_err(|e| $crate::error::db_error($op, e))
        })
    };
}
pub(crate) use delete_owned;

/// A page of domain values made from up to `limit + 1` rows read newest first.
pub(crate) fn page_of<R, T>(
    page: &PageRequest,
    rows: Vec<R>,
    into_domain: impl Fn(R) -> DomainResult<T>,
    id_of: impl Fn(&T) -> Uuid,
) -> DomainResult<Page<T>> {
    let items = rows
        .into_iter()
        .map(into_domain)
        .collect::<DomainResult<Vec<_>>>()?;
    Ok(page.finish(items, id_of))
}

/// A `COUNT(*)` as an unsigned number.
pub(crate) fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A number of affected rows as an unsigned number.
pub(crate) fn affected(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
