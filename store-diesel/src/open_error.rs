//! [`Error`]: why opening or migrating a store failed (the ports answer
//! [`flowstate_core::Error`]; see `error.rs` for how diesel's errors map
//! into it).

use crate::database::Dialect;

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
        dialect: Dialect,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No node of those the URL lists answered and was ready to serve (a
    /// Galera node must say `wsrep_ready = ON` and `Synced`): each node
    /// is named with why it was not used. A node that comes up may
    /// answer: retryable.
    #[error("no {dialect} node answered: {}", tried.join("; "))]
    NoNodeAnswered {
        /// Which dialect.
        dialect: Dialect,
        /// Every node tried (`host:port`, no credentials) and why it was
        /// not used.
        tried: Vec<String>,
    },
    /// The connection pool could not be built.
    #[error("cannot build the {dialect} connection pool: {detail}")]
    Pool {
        /// Which dialect.
        dialect: Dialect,
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
        dialect: Dialect,
        /// The versions not applied, oldest first.
        pending: Vec<String>,
    },
    /// The database has migrations this library does not know: a newer
    /// flowstate migrated it. Nothing was opened.
    #[error(
        "the {dialect} database is at flowstate migration {newest_applied}, newer than this \
         library's newest, {newest_known} (it lacks {}): it was migrated by a newer flowstate; \
         upgrade this program",
        unknown.join(", ")
    )]
    SchemaAhead {
        /// Which dialect.
        dialect: Dialect,
        /// The applied versions this library lacks, oldest first.
        unknown: Vec<String>,
        /// The newest version applied to the database.
        newest_applied: String,
        /// The newest version this library has.
        newest_known: String,
    },
    /// A migration failed; the ones before it stay applied.
    #[error("migration failed on {dialect}")]
    Migration {
        /// Which dialect.
        dialect: Dialect,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// Whether opening again may succeed: a database (or a node) that
    /// could not be reached may come up; a bad URL, a pool that cannot be built or a
    /// failed migration stay as they are.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Connect { .. } | Self::NoNodeAnswered { .. })
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
