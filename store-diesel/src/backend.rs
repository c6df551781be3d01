//! [`Backend`]: the pool of the dialect a store speaks, and the dispatch
//! macros that run shared code on it. Together with the `Dialect` trait
//! (`crate::dialect`) this is the whole seam: the only module outside
//! `lib.rs` that names the dialect modules.
//!
//! diesel's `MultiConnection` is the model ("one DSL body, backend chosen
//! at run time"); diesel-async has none, so one macro, [`dispatch!`],
//! stands in for it: it matches the store's [`Backend`] and expands its
//! body once per dialect, so every call is monomorphic and its future
//! `Send`. Its three uses:
//! - [`by_dialect!`]: a dialect's own operation (`<D as Dialect>::op`).
//! - [`on_connection!`]: one typed diesel body on a pooled connection; what
//!   a dialect spells its own way inside it is a method of
//!   `crate::dialect::Connection` (`conn.move_run(..)`).
//! - [`in_transaction!`]: a body in the dialect's transaction
//!   (`Connection::write_transaction`).
//!
//! No body here spells a dialect's SQL: a macro arm differs per dialect
//! only in the types it names.

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
            // The nodes the URL lists, not only its first (`target`).
            Dialect::Mysql => Self::Mysql(
                crate::mysql::connect_nodes(&url.nodes, url.nodes_in_order, config).await?,
            ),
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

/// The one dispatch macro, standing in for diesel's `MultiConnection`
/// (which diesel-async lacks): matches the store's [`Backend`] and
/// evaluates `$body` once per dialect it holds, with `$pool` bound to that
/// dialect's pool and `$D` naming its [`Dialect`](crate::dialect::Dialect)
/// type, so every expansion is monomorphic and its future `Send`. The
/// macros below are its uses.
macro_rules! dispatch {
    ($store:expr, |$pool:ident, $D:ident| $body:expr) => {
        match &$store.backend {
            #[cfg(feature = "postgres")]
            $crate::backend::Backend::Postgres($pool) => {
                #[allow(dead_code)]
                type $D = $crate::postgres::Postgres;
                $body
            }
            #[cfg(feature = "mysql")]
            $crate::backend::Backend::Mysql($pool) => {
                #[allow(dead_code)]
                type $D = $crate::mysql::Mysql;
                $body
            }
            #[cfg(feature = "sqlite")]
            $crate::backend::Backend::Sqlite($pool) => {
                #[allow(dead_code)]
                type $D = $crate::sqlite::Sqlite;
                $body
            }
        }
    };
}
pub(crate) use dispatch;

/// Runs `$body` (an expression of type `QueryResult<T>`, typically one
/// typed diesel query ending in `.await`, or a method of
/// [`Connection`](crate::dialect::Connection)) with `$conn` bound to a
/// pooled connection of the store's dialect: the same DSL, compiled for
/// each. A lock conflict runs the body again
/// ([`crate::conflict::retry_conflicts!`]); a pool timeout returns from the
/// enclosing function. Evaluates to `flowstate_core::Result<T>`, a diesel
/// error mapped by [`crate::error::backend`]; with `parent: run`, a
/// foreign-key violation is that run missing
/// ([`crate::error::or_missing_run`]).
macro_rules! on_connection {
    ($store:expr, $op:expr, |$conn:ident| $body:expr) => {
        $crate::backend::on_connection!(
            $store, $op, parent: None::<flowstate_core::RunId>, |$conn| $body
        )
    };
    ($store:expr, $op:expr, parent: $run:expr, |$conn:ident| $body:expr) => {{
        let out: diesel::QueryResult<_> = $crate::backend::dispatch!($store, |pool, _D| {
            $crate::conflict::leased!(pool, $op, |$conn| $body)
        });
        out.map_err(|err| $crate::error::or_missing_run($op, $run, err))
    }};
}
pub(crate) use on_connection;

/// Runs `$body` (an expression of type `Result<T, TxError>`, typed diesel
/// queries ending in `.await`) with `$conn` bound to a connection in a
/// transaction of the store's dialect
/// ([`Connection::write_transaction`](crate::dialect::Connection::write_transaction):
/// `BEGIN IMMEDIATE` on SQLite). Committed on `Ok`, rolled back otherwise;
/// a lock conflict runs the whole transaction again. Evaluates to
/// `flowstate_core::Result<T>`; a pool timeout returns from the enclosing
/// function.
macro_rules! in_transaction {
    ($store:expr, $op:expr, |$conn:ident| $body:expr) => {
        $crate::backend::dispatch!($store, |pool, _D| {
            $crate::conflict::transacted!(pool, $op, |c| {
                $crate::dialect::Connection::write_transaction(c, async |$conn| $body).await
            })
        })
    };
}
pub(crate) use in_transaction;

/// Calls operation `$op` of the [`Dialect`] trait
/// (`crate::dialect::Dialect`) on the dialect whose pool the store holds,
/// with that pool and the store's config, then `$args`, and awaits it. The
/// shared code reaches a dialect's own hand-written SQL only through here.
///
/// [`Dialect`]: crate::dialect::Dialect
macro_rules! by_dialect {
    ($store:expr, $op:ident($($arg:expr),* $(,)?)) => {
        $crate::backend::dispatch!($store, |pool, D| {
            <D as $crate::dialect::Dialect>::$op(pool, &$store.config, $($arg),*).await
        })
    };
}
pub(crate) use by_dialect;
