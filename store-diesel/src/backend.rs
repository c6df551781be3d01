//! [`Backend`]: the pool of the dialect a store speaks, and the dispatch
//! macros that run shared code on it. Together with the `Dialect` trait
//! (`crate::dialect`) this is the whole seam: the only module outside
//! `lib.rs` that names the dialect modules.
//!
//! diesel's `MultiConnection` is the model ("one DSL body, backend chosen
//! at run time"); diesel-async has none, so these macros stand in for it:
//! each matches the store's [`Backend`] and expands its body once per
//! dialect, so every call is monomorphic and its future `Send`.
//! - [`by_dialect!`]: a dialect's own operation (`<D as Dialect>::op`).
//! - [`on_connection!`]: one typed diesel body on a pooled connection.
//! - [`by_returning!`]: one body for the dialects with `RETURNING` and
//!   `ON CONFLICT (target)`, another for MySQL.
//! - [`in_transaction!`]: a body in a transaction (`BEGIN IMMEDIATE` on
//!   SQLite, which diesel-async spells as a method of its wrapper only).

use crate::config::StoreConfig;
use crate::database::Dialect;
use crate::dialect::{Dialect as _, PoolOf};
use crate::open_error::{Error, Result};
use crate::url::DatabaseUrl;

/// The connection pool of the dialect a store speaks: one dialect's
/// backend.
#[derive(Debug)]
pub(crate) enum Backend {
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

impl Backend {
    /// Connects to `url` (read by [`DatabaseUrl::parse`]) with the dialect
    /// it names; the dialect may change `config` to say what it chose.
    pub(crate) async fn connect(url: &DatabaseUrl, config: &mut StoreConfig) -> Result<Self> {
        Ok(match url.dialect {
            #[cfg(feature = "postgres")]
            Dialect::Postgres => {
                Self::Postgres(crate::postgres::Postgres::connect(&url.target, config).await?)
            }
            #[cfg(feature = "mysql")]
            Dialect::Mysql => Self::Mysql(crate::mysql::Mysql::connect(&url.target, config).await?),
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => {
                Self::Sqlite(crate::sqlite::Sqlite::connect(&url.target, config).await?)
            }
            #[allow(unreachable_patterns)]
            other => {
                return Err(Error::UnsupportedUrl {
                    url: format!("{other}://..."),
                    reason: "this build leaves that dialect out (enable its feature)",
                });
            }
        })
    }

    /// The dialect of this backend.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => Dialect::Postgres,
            #[cfg(feature = "mysql")]
            Self::Mysql(_) => Dialect::Mysql,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Takes one connection out of the pool, type-erased, for `op`.
    #[cfg(feature = "test-support")]
    pub(crate) async fn reserve(
        &self,
        op: &'static str,
    ) -> flowstate_core::Result<Box<dyn std::any::Any + Send>> {
        Ok(match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(pool) => Box::new(pool.get(op).await?),
            #[cfg(feature = "mysql")]
            Self::Mysql(pool) => Box::new(pool.get(op).await?),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(pool) => Box::new(pool.get(op).await?),
        })
    }

    /// Whether an insert that skips a taken key says so by affecting no
    /// row ([`crate::dialect::Connection::INSERTS_TELL_SKIPS`]).
    pub(crate) fn inserts_tell_skips(&self) -> bool {
        use crate::dialect::Connection;
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => {
                <<crate::postgres::Postgres as crate::dialect::Dialect>::Conn as Connection>::INSERTS_TELL_SKIPS
            }
            #[cfg(feature = "mysql")]
            Self::Mysql(_) => {
                <<crate::mysql::Mysql as crate::dialect::Dialect>::Conn as Connection>::INSERTS_TELL_SKIPS
            }
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => {
                <<crate::sqlite::Sqlite as crate::dialect::Dialect>::Conn as Connection>::INSERTS_TELL_SKIPS
            }
        }
    }
}

/// Runs `$body` (an expression of type `QueryResult<T>`, typically one
/// typed diesel query ending in `.await`) with `$conn` bound to a pooled
/// connection of the store's dialect: the same DSL, compiled for each.
/// A lock conflict runs the body again ([`crate::conflict::retry_conflicts!`]);
/// a pool timeout returns from the enclosing function. Evaluates to
/// `flowstate_core::Result<T>`, a diesel error mapped by
/// [`crate::error::backend`]; with `parent: run`, a foreign-key violation
/// is that run missing ([`crate::error::or_missing_run`]).
macro_rules! on_connection {
    ($store:expr, $op:expr, $(parent: $run:expr,)? |$conn:ident| $body:expr) => {
        $crate::backend::by_returning!($store, $op, $(parent: $run,)? |$conn| $body, mysql: |$conn| $body)
    };
}
pub(crate) use on_connection;

/// Like [`on_connection!`], with one body for the dialects that have
/// `RETURNING` and `ON CONFLICT (target)` (PostgreSQL, SQLite) and another
/// for MySQL, which has neither.
macro_rules! by_returning {
    ($store:expr, $op:expr, |$conn:ident| $returning:expr, mysql: |$my:ident| $mysql:expr) => {
        $crate::backend::by_returning!(
            $store, $op, parent: None::<flowstate_core::RunId>,
            |$conn| $returning, mysql: |$my| $mysql
        )
    };
    ($store:expr, $op:expr, parent: $run:expr, |$conn:ident| $returning:expr, mysql: |$my:ident| $mysql:expr) => {{
        let out: diesel::QueryResult<_> = match &$store.backend {
            #[cfg(feature = "postgres")]
            $crate::backend::Backend::Postgres(pool) => {
                $crate::conflict::leased!(pool, $op, |$conn| $returning)
            }
            #[cfg(feature = "sqlite")]
            $crate::backend::Backend::Sqlite(pool) => {
                $crate::conflict::leased!(pool, $op, |$conn| $returning)
            }
            #[cfg(feature = "mysql")]
            $crate::backend::Backend::Mysql(pool) => $crate::conflict::leased!(pool, $op, |$my| $mysql),
        };
        out.map_err(|err| $crate::error::or_missing_run($op, $run, err))
    }};
}
pub(crate) use by_returning;

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
        match &$store.backend {
            #[cfg(feature = "postgres")]
            $crate::backend::Backend::Postgres(pool) => {
                $crate::conflict::transacted!(pool, $op, |c| {
                    diesel_async::AsyncConnection::transaction(c, async |$conn| $body).await
                })
            }
            #[cfg(feature = "mysql")]
            $crate::backend::Backend::Mysql(pool) => {
                $crate::conflict::transacted!(pool, $op, |c| {
                    diesel_async::AsyncConnection::transaction(c, async |$conn| $body).await
                })
            }
            #[cfg(feature = "sqlite")]
            $crate::backend::Backend::Sqlite(pool) => {
                $crate::conflict::transacted!(pool, $op, |c| {
                    c.immediate_transaction(async |$conn| $body).await
                })
            }
        }
    };
}
pub(crate) use in_transaction;

/// The one dispatch macro: calls operation `$op` of the [`Dialect`] trait
/// (`crate::dialect::Dialect`) on the dialect whose pool the store holds,
/// with that pool and the store's config, then `$args`, and awaits it. The
/// shared code reaches a dialect's own SQL only through here; it stands in
/// for diesel's `MultiConnection`, which diesel-async lacks.
///
/// [`Dialect`]: crate::dialect::Dialect
macro_rules! by_dialect {
    ($store:expr, $op:ident($($arg:expr),* $(,)?)) => {
        match &$store.backend {
            #[cfg(feature = "postgres")]
            $crate::backend::Backend::Postgres(pool) => {
                <$crate::postgres::Postgres as $crate::dialect::Dialect>::$op(
                    pool, &$store.config, $($arg),*
                ).await
            }
            #[cfg(feature = "mysql")]
            $crate::backend::Backend::Mysql(pool) => {
                <$crate::mysql::Mysql as $crate::dialect::Dialect>::$op(
                    pool, &$store.config, $($arg),*
                ).await
            }
            #[cfg(feature = "sqlite")]
            $crate::backend::Backend::Sqlite(pool) => {
                <$crate::sqlite::Sqlite as $crate::dialect::Dialect>::$op(
                    pool, &$store.config, $($arg),*
                ).await
            }
        }
    };
}
pub(crate) use by_dialect;
