//! [`DieselStore`]: the one type a user opens from a URL, implementing every
//! port.
//!
//! Most of it is written once for all three dialects: the typed queries of
//! `runs.rs`, `steps.rs`, `state.rs` and `versions.rs` run through
//! [`on_connection!`], which binds a pooled connection of whichever dialect
//! the store speaks and monomorphises the same diesel DSL for each. Only the
//! hot writes that truly differ (claim, transition, retry, insert_step) are
//! handed to the dialect modules through the one seam, the
//! `crate::dialect::Dialect` trait, which [`by_dialect!`] dispatches
//! on; each of those modules has the same files. No file here names a
//! dialect module, except the [`Pools`] enum naming each dialect's type.

mod batch;
pub(crate) use batch::BatchItem;
mod children;
pub(crate) mod conflict;
mod definitions;
mod effects;
mod event_queue;
pub(crate) mod events;
mod fenced;
mod leases;
mod waits;
pub(crate) use leases::{db_time, held, leasable_texts, runnable};
mod recovery;
pub(crate) use recovery::{
    ExpiredRow, expired, expired_claims, expired_first, fail_expired, free_leases, reaped,
};
mod runs;
pub(crate) use runs::{IDEMPOTENT_TRIES, InsertKeyedRun};
mod state;
mod steps;
pub(crate) use steps::{Inserting, holder};
mod versions;
mod virtual_users;

use crate::config::StoreConfig;
use crate::dialect::PoolOf;
use crate::error::{Error, Result};
use crate::url::{DatabaseUrl, Dialect};

/// A flowstate store on PostgreSQL, MySQL/MariaDB or SQLite.
///
/// Open it with [`DieselStore::open`]; apply the schema first with
/// [`crate::migrate::up`] (or [`DieselStore::open_migrated`]). A build
/// with only some of the `postgres`, `mysql` and `sqlite` features compiles
/// only those drivers, and a URL naming another is a typed error.
#[derive(Debug)]
pub struct DieselStore {
    pub(crate) pools: Pools,
    pub(crate) config: StoreConfig,
}

/// The connection pool of the dialect a store speaks.
#[derive(Debug)]
pub(crate) enum Pools {
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(PoolOf<crate::postgres::Postgres>),
    /// MySQL or MariaDB.
    #[cfg(feature = "mysql")]
    Mysql(PoolOf<crate::mysql::Mysql>),
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(PoolOf<crate::sqlite::Sqlite>),
}

/// Runs `$body` (an expression of type `QueryResult<T>`, typically one
/// typed diesel query ending in `.await`) with `$conn` bound to a pooled
/// connection of the store's dialect: the same DSL, compiled for each.
/// A lock conflict runs the body again ([`conflict::retry_conflicts!`]);
/// a pool timeout returns from the enclosing function. Evaluates to
/// `flowstate_core::Result<T>`, a diesel error mapped by
/// [`crate::error::backend`]; with `parent: run`, a foreign-key violation
/// is that run missing ([`crate::error::or_missing_run`]).
macro_rules! on_connection {
    ($store:expr, $op:expr, $(parent: $run:expr,)? |$conn:ident| $body:expr) => {
        $crate::store::by_returning!($store, $op, $(parent: $run,)? |$conn| $body, mysql: |$conn| $body)
    };
}
pub(crate) use on_connection;

/// One arm of [`by_returning!`]: take a pooled connection, run the body
/// on it (again after a conflict).
macro_rules! leased {
    ($pool:expr, $op:expr, |$conn:ident| $body:expr) => {{
        let mut conn = $pool.get($op).await?;
        let $conn = &mut *conn;
        $crate::store::conflict::retry_conflicts!($op, async { $body }.await)
    }};
}
pub(crate) use leased;

/// Like [`on_connection!`], with one body for the dialects that have
/// `RETURNING` and `ON CONFLICT (target)` (PostgreSQL, SQLite) and another
/// for MySQL, which has neither.
macro_rules! by_returning {
    ($store:expr, $op:expr, |$conn:ident| $returning:expr, mysql: |$my:ident| $mysql:expr) => {
        $crate::store::by_returning!(
            $store, $op, parent: None::<flowstate_core::RunId>,
            |$conn| $returning, mysql: |$my| $mysql
        )
    };
    ($store:expr, $op:expr, parent: $run:expr, |$conn:ident| $returning:expr, mysql: |$my:ident| $mysql:expr) => {{
        let out: diesel::QueryResult<_> = match &$store.pools {
            #[cfg(feature = "postgres")]
            $crate::store::Pools::Postgres(pool) => {
                $crate::store::leased!(pool, $op, |$conn| $returning)
            }
            #[cfg(feature = "sqlite")]
            $crate::store::Pools::Sqlite(pool) => {
                $crate::store::leased!(pool, $op, |$conn| $returning)
            }
            #[cfg(feature = "mysql")]
            $crate::store::Pools::Mysql(pool) => $crate::store::leased!(pool, $op, |$my| $mysql),
        };
        out.map_err(|err| $crate::error::or_missing_run($op, $run, err))
    }};
}
pub(crate) use by_returning;

/// Why a unit of work run by [`in_transaction!`] failed: the database
/// (mapped by [`crate::error::backend`], a lock conflict running the work
/// again), or an answer of the port (a typed not-found, a corrupt row) that
/// also rolls the transaction back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TxError {
    /// A diesel error.
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
    /// The port's own answer.
    #[error(transparent)]
    Port(#[from] flowstate_core::Error),
}

/// Runs `$body` (an expression of type `Result<T, TxError>`, typed diesel
/// queries ending in `.await`) with `$conn` bound to a connection in a
/// transaction of the store's dialect: diesel-async's `transaction` on
/// PostgreSQL and MySQL, `BEGIN IMMEDIATE` on SQLite, so a SQLite writer
/// takes the write lock up front and queues on the busy timeout instead
/// of failing a read-to-write upgrade. Committed on `Ok`, rolled back
/// otherwise; a lock conflict runs the whole transaction again. Evaluates
/// to `flowstate_core::Result<T>`; a pool timeout returns from the
/// enclosing function.
macro_rules! in_transaction {
    ($store:expr, $op:expr, |$conn:ident| $body:expr) => {
        match &$store.pools {
            #[cfg(feature = "postgres")]
            $crate::store::Pools::Postgres(pool) => $crate::store::transacted!(pool, $op, |c| {
                diesel_async::AsyncConnection::transaction(c, async |$conn| $body).await
            }),
            #[cfg(feature = "mysql")]
            $crate::store::Pools::Mysql(pool) => $crate::store::transacted!(pool, $op, |c| {
                diesel_async::AsyncConnection::transaction(c, async |$conn| $body).await
            }),
            #[cfg(feature = "sqlite")]
            $crate::store::Pools::Sqlite(pool) => $crate::store::transacted!(pool, $op, |c| {
                c.immediate_transaction(async |$conn| $body).await
            }),
        }
    };
}
pub(crate) use in_transaction;

/// One arm of [`in_transaction!`]: a pooled connection, the transaction
/// run again after a lock conflict, its error mapped.
macro_rules! transacted {
    ($pool:expr, $op:expr, |$c:ident| $work:expr) => {{
        let mut conn = $pool.get($op).await?;
        let $c = &mut *conn;
        let out: Result<_, $crate::store::TxError> =
            $crate::store::conflict::retry_conflicts!($op, $work);
        match out {
            Ok(value) => Ok(value),
            Err($crate::store::TxError::Db(err)) => Err($crate::error::backend($op, err)),
            Err($crate::store::TxError::Port(err)) => Err(err),
        }
    }};
}
pub(crate) use transacted;

/// The one dispatch macro: calls operation `$op` of the [`Dialect`] trait
/// (`crate::dialect::Dialect`) on the dialect whose pool the store holds,
/// with that pool and the store's config, then `$args`, and awaits it. The
/// shared code reaches a dialect's own SQL only through here; it stands in
/// for diesel's `MultiConnection`, which diesel-async lacks.
///
/// [`Dialect`]: crate::dialect::Dialect
macro_rules! by_dialect {
    ($store:expr, $op:ident($($arg:expr),* $(,)?)) => {
        match &$store.pools {
            #[cfg(feature = "postgres")]
            $crate::store::Pools::Postgres(pool) => {
                <$crate::postgres::Postgres as $crate::dialect::Dialect>::$op(
                    pool, &$store.config, $($arg),*
                ).await
            }
            #[cfg(feature = "mysql")]
            $crate::store::Pools::Mysql(pool) => {
                <$crate::mysql::Mysql as $crate::dialect::Dialect>::$op(
                    pool, &$store.config, $($arg),*
                ).await
            }
            #[cfg(feature = "sqlite")]
            $crate::store::Pools::Sqlite(pool) => {
                <$crate::sqlite::Sqlite as $crate::dialect::Dialect>::$op(
                    pool, &$store.config, $($arg),*
                ).await
            }
        }
    };
}
pub(crate) use by_dialect;

impl DieselStore {
    /// Opens a store on `url` (see [`DatabaseUrl::parse`]) and checks that a
    /// connection can be made and that the schema is the one this library
    /// was written for: a database never migrated, or migrated by an older
    /// flowstate, is [`Error::NotMigrated`] (naming the command that fixes
    /// it), one migrated by a newer flowstate [`Error::SchemaAhead`]. It
    /// changes no table (diesel may create its own migrations table).
    pub async fn open(url: &str, config: StoreConfig) -> Result<Self> {
        let parsed = DatabaseUrl::parse(url)?;
        let mut config = config;
        let pools = match parsed.dialect {
            #[cfg(feature = "postgres")]
            Dialect::Postgres => Pools::Postgres(
                <crate::postgres::Postgres as crate::dialect::Dialect>::connect(
                    &parsed.target,
                    &mut config,
                )
                .await?,
            ),
            #[cfg(feature = "mysql")]
            Dialect::Mysql => Pools::Mysql(
                <crate::mysql::Mysql as crate::dialect::Dialect>::connect(
                    &parsed.target,
                    &mut config,
                )
                .await?,
            ),
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => Pools::Sqlite(
                <crate::sqlite::Sqlite as crate::dialect::Dialect>::connect(
                    &parsed.target,
                    &mut config,
                )
                .await?,
            ),
            #[allow(unreachable_patterns)]
            other => {
                return Err(Error::UnsupportedUrl {
                    url: format!("{other}://..."),
                    reason: "this build leaves that dialect out (enable its feature)",
                });
            }
        };
        // After connecting (which makes a missing SQLite file and its
        // folders); an in-memory SQLite database is migrated in place as it
        // opens, and another connection would see another database.
        let in_memory =
            parsed.dialect == Dialect::Sqlite && crate::url::is_sqlite_memory(&parsed.target);
        if config.check_schema && !in_memory {
            crate::migrate::check(url).await?;
        }
        let store = Self { pools, config };
        tracing::debug!(dialect = %store.dialect(), "flowstate store opened");
        Ok(store)
    }

    /// Applies pending migrations on `url`, then opens a store on it.
    pub async fn open_migrated(url: &str, config: StoreConfig) -> Result<Self> {
        let applied = crate::migrate::up(url).await?;
        if !applied.is_empty() {
            tracing::info!(?applied, "flowstate migrations applied");
        }
        Self::open(url, config).await
    }

    /// The dialect this store speaks.
    pub fn dialect(&self) -> Dialect {
        match self.pools {
            #[cfg(feature = "postgres")]
            Pools::Postgres(_) => Dialect::Postgres,
            #[cfg(feature = "mysql")]
            Pools::Mysql(_) => Dialect::Mysql,
            #[cfg(feature = "sqlite")]
            Pools::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// The settings the store was opened with (for SQLite `:memory:`, with
    /// its pool of one connection).
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Runs SQL text with no binds on a pooled connection: an escape hatch for
    /// tests and operators (it bypasses every guarantee of the ports).
    pub async fn batch_execute(&self, sql: &str) -> flowstate_core::Result<()> {
        use diesel_async::SimpleAsyncConnection;
        on_connection!(self, "batch_execute", |conn| conn.batch_execute(sql).await)
    }

    /// Takes one connection out of the pool and holds it until the answer
    /// drops, then gives it back: for tests and operators that want to see
    /// the acquire timeout, or to open every connection before a burst.
    pub async fn reserve_connection(&self) -> flowstate_core::Result<ReservedConnection> {
        let op = "reserve_connection";
        Ok(ReservedConnection(match &self.pools {
            #[cfg(feature = "postgres")]
            Pools::Postgres(pool) => Box::new(pool.get(op).await?),
            #[cfg(feature = "mysql")]
            Pools::Mysql(pool) => Box::new(pool.get(op).await?),
            #[cfg(feature = "sqlite")]
            Pools::Sqlite(pool) => Box::new(pool.get(op).await?),
        }))
    }

    /// Whether an insert that skips a taken key says so by affecting no
    /// row: not on MySQL, where a skipped duplicate still counts as a row
    /// (`INSERT IGNORE`, or a matched row under `CLIENT_FOUND_ROWS`), so
    /// the caller reads the holder of the key to know.
    pub(crate) fn inserts_tell_skips(&self) -> bool {
        self.dialect() != Dialect::Mysql
    }

    /// The time to stamp on rows written now, in microseconds.
    pub(crate) fn now(&self) -> i64 {
        self.config.clock.now().as_micros()
    }
}

/// A connection held out of its store's pool (see
/// [`DieselStore::reserve_connection`]); dropping it gives it back.
pub struct ReservedConnection(#[allow(dead_code)] Box<dyn std::any::Any + Send>);

impl std::fmt::Debug for ReservedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReservedConnection")
    }
}
