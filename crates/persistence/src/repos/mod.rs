//! The port implementations, one module per area.

mod accounts;
mod admin_tokens;
pub(crate) mod ai_keys;
mod api_keys;
mod quota;
mod usage;
mod workspace;

use gc_domain::page::{Page, PageRequest};
use gc_domain::DomainResult;
use uuid::Uuid;

/// Rows per page plus one, to know whether a next page exists.
pub(crate) fn fetch_limit(page: &PageRequest) -> i64 {
    i64::from(page.limit()) + 1
}

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
