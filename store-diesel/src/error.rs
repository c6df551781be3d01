//! Errors: the ones opening and migrating a store can raise, and the mapping
//! of diesel's errors into the ports' [`flowstate_core::Error`].

use std::time::Duration;

use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// Why opening or migrating a store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL names no supported database, or a dialect this build leaves out.
    #[error("unsupported database url {url:?}: {reason}")]
    UnsupportedUrl {
        /// The URL as given (passwords are not printed: only the scheme is kept).
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The database could not be reached or refused the connection.
    #[error("cannot connect to the {dialect} database")]
    Connect {
        /// Which dialect.
        dialect: &'static str,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The connection pool could not be built.
    #[error("cannot build the {dialect} connection pool: {detail}")]
    Pool {
        /// Which dialect.
        dialect: &'static str,
        /// What went wrong.
        detail: String,
    },
    /// The database lacks migrations this library needs: it was never
    /// migrated, or by an older flowstate. Nothing was opened.
    #[error(
        "the {dialect} database lacks {} flowstate migration(s) ({}): apply them with \
         `cargo xtask migrate up --database-url <url>`, `migrate::up`, or open the store with \
         `DieselStore::open_migrated`",
        pending.len(),
        pending.join(", ")
    )]
    NotMigrated {
        /// Which dialect.
        dialect: &'static str,
        /// The versions not applied, oldest first.
        pending: Vec<String>,
    },
    /// The database has migrations this library does not know: a newer
    /// flowstate migrated it. Nothing was opened.
    #[error(
        "the {dialect} database has flowstate migration(s) this library does not know ({}): \
         it was migrated by a newer flowstate; upgrade this program",
        unknown.join(", ")
    )]
    SchemaAhead {
        /// Which dialect.
        dialect: &'static str,
        /// The applied versions this library lacks.
        unknown: Vec<String>,
    },
    /// A migration failed; the ones before it stay applied.
    #[error("migration failed on {dialect}")]
    Migration {
        /// Which dialect.
        dialect: &'static str,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// Whether opening again may succeed: a database that could not be
    /// reached may come up; a bad URL, a pool that cannot be built or a
    /// failed migration stay as they are.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Connect { .. })
    }
}

/// Opening a store and using it fail with one error type for callers that
/// want one: `?` on [`DieselStore::open`](crate::DieselStore::open) works in
/// a function returning [`flowstate_core::Result`].
impl From<Error> for flowstate_core::Error {
    fn from(err: Error) -> Self {
        let retryable = err.is_retryable();
        flowstate_core::Error::backend("open", retryable, err)
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Maps a diesel error raised during `operation` into the ports' error,
/// deciding whether it is worth retrying.
///
/// Unique and foreign-key violations are not (the same call fails the same
/// way); a dropped connection, a serialization failure or a deadlock victim
/// are (the transaction was rolled back whole).
pub(crate) fn backend(operation: &'static str, err: DieselError) -> flowstate_core::Error {
    let retryable = is_retryable(&err);
    flowstate_core::Error::backend(operation, retryable, err)
}

/// Maps a diesel error raised during `operation` on a row that references
/// run `parent` by foreign key (its steps, state, effects, signals,
/// children): a foreign-key violation is that run missing
/// ([`flowstate_core::Error::RunNotFound`]); anything else, or no parent, is
/// [`backend`].
pub(crate) fn or_missing_run(
    operation: &'static str,
    parent: impl Into<Option<flowstate_core::RunId>>,
    err: DieselError,
) -> flowstate_core::Error {
    match parent.into() {
        Some(run) if is_foreign_key_violation(&err) => flowstate_core::Error::RunNotFound(run),
        _ => backend(operation, err),
    }
}

/// Whether a diesel error is transient.
pub(crate) fn is_retryable(err: &DieselError) -> bool {
    match err {
        DieselError::DatabaseError(kind, info) => match kind {
            DatabaseErrorKind::SerializationFailure | DatabaseErrorKind::ClosedConnection => true,
            DatabaseErrorKind::UniqueViolation
            | DatabaseErrorKind::ForeignKeyViolation
            | DatabaseErrorKind::NotNullViolation
            | DatabaseErrorKind::CheckViolation => false,
            _ => is_transient_message(info.message()),
        },
        DieselError::BrokenTransactionManager => true,
        _ => false,
    }
}

/// Deadlocks, lock timeouts and busy databases, by the servers' own words
/// (MySQL 1213/1205 and SQLite BUSY/LOCKED come through as `Unknown`).
fn is_transient_message(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "deadlock",
        "lock wait timeout",
        "database is locked",
        "database table is locked",
        "busy",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// Whether a diesel error is a foreign-key violation.
pub(crate) fn is_foreign_key_violation(err: &DieselError) -> bool {
    matches!(
        err,
        DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _)
    )
}

/// Maps a pool error: a timeout is [`flowstate_core::Error::PoolTimeout`],
/// anything else a retryable backend error (the database went away).
pub(crate) fn pool(
    operation: &'static str,
    waited: Duration,
    err: diesel_async::pooled_connection::deadpool::PoolError,
) -> flowstate_core::Error {
    use deadpool::managed::PoolError;
    match err {
        PoolError::Timeout(_) => flowstate_core::Error::PoolTimeout {
            waited_ms: waited.as_millis() as u64,
        },
        other => flowstate_core::Error::backend(operation, true, other),
    }
}
