//! Usage: requests, errors and tokens summed from the run records, by day, model, key or
//! tenant, over a range of UTC dates.
//!
//! Members read their tenant's usage with a `TenantScope` made for `workspace:read` (a session,
//! a Shadow view, or a key with the `workspace:read` scope, as every other GET under
//! `/workspace`); platform admins read every tenant's through an `AdminScope`.

use chrono::{Datelike, Months, NaiveDate};

use crate::error::{DomainError, DomainResult};
use crate::page::PageRequest;

/// The longest range one query may cover.
pub const MAX_RANGE_DAYS: i64 = 400;

/// How usage lines are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGroup {
    Day,
    Model,
    Key,
    Tenant,
}

impl UsageGroup {
    /// `day`, `model` or `key` (the workspace route's choices).
    pub fn parse(raw: Option<&str>) -> DomainResult<Self> {
        match raw.unwrap_or("day") {
            "day" => Ok(Self::Day),
            "model" => Ok(Self::Model),
            "key" => Ok(Self::Key),
            _ => Err(DomainError::invalid(
                "group_by",
                "must be day, model or key",
            )),
        }
    }
}

/// An inclusive range of UTC dates, at most [`MAX_RANGE_DAYS`] long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageRange {
    from: NaiveDate,
    to: NaiveDate,
}

impl UsageRange {
    /// `from` and `to` as `YYYY-MM-DD`; each defaults to the first and last day of `today`'s
    /// month.
    pub fn parse(from: Option<&str>, to: Option<&str>, today: NaiveDate) -> DomainResult<Self> {
        let first = today.with_day(1).unwrap_or(today);
        let last = first
            .checked_add_months(Months::new(1))
            .and_then(|d| d.pred_opt())
            .unwrap_or(today);
        let date = |field: &str, raw: Option<&str>, default: NaiveDate| match raw {
            None | Some("") => Ok(default),
            Some(raw) => NaiveDate::parse_from_str(raw, "%Y-%m-%d")
                .map_err(|_| DomainError::invalid(field, "must be a date such as 2026-11-01")),
        };
        let from = date("from", from, first)?;
        let to = date("to", to, last)?;
        if to < from {
            return Err(DomainError::invalid("to", "must not be before from"));
        }
        if (to - from).num_days() >= MAX_RANGE_DAYS {
            return Err(DomainError::invalid(
                "to",
                format!("the range may cover at most {MAX_RANGE_DAYS} days"),
            ));
        }
        Ok(Self { from, to })
    }

    /// The first day, `YYYY-MM-DD`.
    pub fn from_day(&self) -> String {
        self.from.format("%Y-%m-%d").to_string()
    }

    /// The last day, `YYYY-MM-DD`.
    pub fn to_day(&self) -> String {
        self.to.format("%Y-%m-%d").to_string()
    }
}

/// One usage query: the range, the grouping, and a keyset page over the group key
/// (descending: days newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    pub range: UsageRange,
    pub group: UsageGroup,
    pub limit: u32,
    /// Only groups whose key sorts below this one (the previous page's last).
    pub before: Option<String>,
}

impl UsageQuery {
    pub fn new(
        range: UsageRange,
        group: UsageGroup,
        limit: Option<u32>,
        before: Option<String>,
    ) -> DomainResult<Self> {
        let page = PageRequest::new(limit, None)?;
        Ok(Self {
            range,
            group,
            limit: page.limit(),
            before,
        })
    }
}

/// The sums of one group. `group` is the day (`YYYY-MM-DD`), the model, the key id (empty
/// for runs made with a session) or the tenant id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLine {
    pub group: String,
    pub requests: u64,
    pub errors: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// In nano-units of the deployment's currency (decision 0038).
    pub cost: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsagePage {
    pub items: Vec<UsageLine>,
    /// The group key to pass as `before` for the next page.
    pub next: Option<String>,
}

impl UsagePage {
    /// A page from up to `limit + 1` lines fetched in order.
    pub fn finish(query: &UsageQuery, mut lines: Vec<UsageLine>) -> Self {
        let limit = query.limit as usize;
        let next = if lines.len() > limit {
            lines.truncate(limit);
            lines.last().map(|l| l.group.clone())
        } else {
            None
        };
        Self { items: lines, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn ranges_default_to_the_month_and_are_checked() {
        let r = UsageRange::parse(None, None, d("2026-02-14")).unwrap();
        assert_eq!(
            (r.from_day(), r.to_day()),
            ("2026-02-01".into(), "2026-02-28".into())
        );
        let r = UsageRange::parse(Some("2026-01-05"), Some("2026-01-05"), d("2026-02-14")).unwrap();
        assert_eq!(r.from_day(), "2026-01-05");
        for (from, to) in [
            (Some("2026-01-05"), Some("2026-01-04")),
            (Some("2025-01-01"), Some("2026-02-05")),
            (Some("yesterday"), None),
            (Some("2026-02-30"), None),
        ] {
            let e = UsageRange::parse(from, to, d("2026-02-14")).unwrap_err();
            assert_eq!(e.code(), "validation_failed", "{from:?} {to:?}");
        }
        assert!(UsageGroup::parse(Some("tenant")).is_err());
        assert_eq!(UsageGroup::parse(None).unwrap(), UsageGroup::Day);
    }
}
