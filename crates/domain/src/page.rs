//! Keyset pagination. Identifiers are UUID v7, so "newest first" is "highest id first" and a
//! cursor is the last identifier of the previous page.

use uuid::Uuid;

use crate::error::{DomainError, DomainResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    limit: u32,
    before: Option<Uuid>,
}

impl PageRequest {
    pub const DEFAULT_LIMIT: u32 = 50;
    pub const MAX_LIMIT: u32 = 200;

    pub fn new(limit: Option<u32>, before: Option<Uuid>) -> DomainResult<Self> {
        let limit = limit.unwrap_or(Self::DEFAULT_LIMIT);
        if !(1..=Self::MAX_LIMIT).contains(&limit) {
            return Err(DomainError::invalid("limit", "must be between 1 and 200"));
        }
        Ok(Self { limit, before })
    }

    /// The first page with the default size.
    pub fn first() -> Self {
        Self {
            limit: Self::DEFAULT_LIMIT,
            before: None,
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Only rows with an id below this one belong on the page.
    pub fn before(&self) -> Option<Uuid> {
        self.before
    }

    /// Builds a page from up to `limit + 1` rows fetched newest first.
    pub fn finish<T>(&self, mut rows: Vec<T>, id_of: impl Fn(&T) -> Uuid) -> Page<T> {
        let limit = self.limit as usize;
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(id_of)
        } else {
            None
        };
        Page { items: rows, next }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The cursor of the next page, if there is one.
    pub next: Option<Uuid>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_bounded() {
        assert!(PageRequest::new(Some(0), None).is_err());
        assert!(PageRequest::new(Some(201), None).is_err());
        assert_eq!(PageRequest::new(None, None).unwrap().limit(), 50);
    }

    #[test]
    fn a_page_has_a_next_cursor_only_when_more_rows_exist() {
        let req = PageRequest::new(Some(2), None).unwrap();
        let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
        let page = req.finish(ids.clone(), |id| *id);
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.next, Some(ids[1]));
        let page = req.finish(ids[..2].to_vec(), |id| *id);
        assert_eq!(page.next, None);
    }
}
