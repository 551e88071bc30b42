//! Errors of the adapter.
//!
//! Error policy: `PersistenceError` is only for setting the store up (`open`, `migrate`); it
//! carries the real cause for the operator, never a password (database URLs are redacted).
//! Once running, every port method answers with a `DomainError`: a pool that cannot hand out a
//! connection in time (or SQLite still locked after its busy timeout, or a PostgreSQL
//! connection lost mid-query) is `Unavailable { retry_after_secs: 2 }`, a unique email is
//! `EmailTaken`, and any other database failure is logged at error level and becomes
//! `Internal`, whose message names the operation but never a value (no tokens, hashes or
//! secrets).

use std::fmt;

use gc_domain::DomainError;

/// A failure to open or migrate the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersistenceError {
    /// The database URL has a scheme this adapter does not know.
    UnsupportedUrl(String),
    /// The database could not be reached or opened; the message is the driver's cause.
    Connect(String),
    /// The SQLite folder could not be created or a pragma could not be set.
    Setup(String),
    /// Applying the embedded migrations failed.
    Migration(String),
    /// The pool could not hand out a connection in time.
    Unavailable(String),
}

impl fmt::Display for PersistenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedUrl(url) => write!(
                f,
                "unsupported database URL `{url}`: use sqlite://PATH or postgres://..."
            ),
            Self::Connect(cause) => write!(f, "cannot connect to the database: {cause}"),
            Self::Setup(cause) => write!(f, "cannot set the database up: {cause}"),
            Self::Migration(cause) => write!(f, "cannot migrate the database: {cause}"),
            Self::Unavailable(cause) => write!(f, "the database is unavailable: {cause}"),
        }
    }
}

impl std::error::Error for PersistenceError {}

impl From<PersistenceError> for DomainError {
    fn from(e: PersistenceError) -> Self {
        match e {
            PersistenceError::Unavailable(_) => DomainError::Unavailable {
                retry_after_secs: crate::store::RETRY_AFTER_SECS,
            },
            other => DomainError::Internal(other.to_string()),
        }
    }
}

/// Maps a diesel error of operation `op` into a domain error, logging the unexpected ones.
pub(crate) fn db_error(op: &'static str, e: diesel::result::Error) -> DomainError {
    use diesel::result::{DatabaseErrorKind, Error};
    // Overload, not a bug: SQLite still locked after `busy_timeout`, or a PostgreSQL
    // connection lost mid-query. The caller may retry.
    let overloaded = match &e {
        Error::DatabaseError(DatabaseErrorKind::ClosedConnection, _) => true,
        Error::DatabaseError(_, info) => info.message().contains("database is locked"),
        _ => false,
    };
    // Anything that is not the statement's own fault (a constraint, a conflict, no row) may be
    // a connection the server dropped: test connections before use for a while.
    let statements_fault = matches!(
        &e,
        Error::NotFound
            | Error::DatabaseError(
                DatabaseErrorKind::UniqueViolation
                    | DatabaseErrorKind::ForeignKeyViolation
                    | DatabaseErrorKind::NotNullViolation
                    | DatabaseErrorKind::CheckViolation
                    | DatabaseErrorKind::SerializationFailure,
                _
            )
    );
    if !statements_fault {
        crate::store::doubt_connections();
    }
    if overloaded {
        tracing::warn!(operation = op, error = %e, "database busy or gone");
        return DomainError::Unavailable {
            retry_after_secs: crate::store::RETRY_AFTER_SECS,
        };
    }
    tracing::error!(operation = op, error = %e, "database error");
    DomainError::Internal(format!("database error in {op}"))
}

/// Maps the error of an insert whose row names a `parent` row by foreign key: a parent that
/// does not exist (or was deleted meanwhile) is `NotFound(parent)`, anything else [`db_error`].
pub(crate) fn parent_missing(
    op: &'static str,
    parent: &'static str,
    e: diesel::result::Error,
) -> DomainError {
    use diesel::result::{DatabaseErrorKind, Error};
    match e {
        Error::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => {
            DomainError::NotFound(parent)
        }
        e => db_error(op, e),
    }
}

/// A stored value that does not parse (an id that is not a UUID, a bad JSON text, ...).
pub(crate) fn corrupt(what: &'static str) -> DomainError {
    tracing::error!(value = what, "stored value does not parse");
    DomainError::Internal(format!("stored {what} does not parse"))
}

/// Replaces the password of a URL (`scheme://user:password@host`, or a `password=` query
/// parameter as libpq accepts it) with `***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_owned(),
                })
                .collect();
            format!("{path}?{}", params.join("&"))
        }
        None => tail.to_owned(),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => format!("{scheme}://{authority}{tail}"),
        },
        None => format!("{scheme}://{authority}{tail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_password() {
        assert_eq!(
            redact_url("postgres://gc:s3cret@db:5432/gc?sslmode=require"),
            "postgres://gc:***@db:5432/gc?sslmode=require"
        );
        assert_eq!(redact_url("postgres://gc@db/gc"), "postgres://gc@db/gc");
        assert_eq!(redact_url("sqlite://data/gc.db"), "sqlite://data/gc.db");
        assert_eq!(
            redact_url("postgres://db/gc?user=gc&PASSWORD=s3cret&sslmode=require"),
            "postgres://db/gc?user=gc&PASSWORD=***&sslmode=require"
        );
    }
}
