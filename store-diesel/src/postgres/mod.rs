//! PostgreSQL: the hot writes, each one statement, on `AsyncPgConnection`.
//!
//! A claim, a step transition, a retry and an insert are each one
//! statement: a CTE whose status-guarded `UPDATE ... RETURNING` (or
//! `INSERT ... ON CONFLICT DO NOTHING RETURNING`) decides, an
//! `INSERT ... ON CONFLICT (step_id, attempt) DO UPDATE` that writes the
//! history row of the attempt it returned, and a final `SELECT` that also
//! reports what the step was (from the statement's snapshot), so a refused
//! write is diagnosed without another round trip. Under READ COMMITTED a
//! racing `UPDATE` re-checks its `WHERE` on the row the winner committed, so
//! exactly one of any number of racing claims wins.
//!
//! Every statement is prepared once per connection ([`crate::cached`]); no
//! transaction is ever opened, and the pool sends no ping on checkout.

mod batch;
mod children;
mod claim;
mod connection;
mod leases;
pub(crate) mod pooler;
mod recovery;
mod retention;
mod sql;
mod steps;
mod transition;
mod virtual_users;

use diesel_async::AsyncPgConnection;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::config::StoreConfig;
use crate::database::Dialect;
use crate::pool::ConnectionPool;

/// The name this dialect reports in errors.
const DIALECT: Dialect = Dialect::Postgres;

/// This dialect's pool.
pub(crate) type Pool = ConnectionPool<AsyncPgConnection>;

/// PostgreSQL as a [`Dialect`]: each hot write one statement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Postgres;

crate::dialect::wire_dialect!(Postgres, AsyncPgConnection);

/// How this dialect's hand-written history upserts say "or update"
/// ([`Connection::UPSERT`](crate::dialect::Connection::UPSERT)).
const UPSERT: crate::sql::Upsert =
    <diesel_async::AsyncPgConnection as crate::dialect::Connection>::UPSERT;

/// Builds the pool for `url` and opens one connection, so a bad URL or a
/// server that is down is reported now.
///
/// [`StoreConfig::transaction_pooler`] (or `?pool_mode=transaction` in
/// the URL, which `url.rs` reads) opens every connection
/// through [`pooler`], safe on a server connection a transaction-mode
/// pooler shares. A URL may name several hosts (`postgres://a:5432,b:5432/db`
/// with `target_session_attrs=read-write`): each new connection tries
/// them in order and takes the first that writes, so after a failover the
/// pool's new connections reach the new primary.
async fn connect(url: &str, config: &mut StoreConfig) -> crate::Result<Pool> {
    // Nothing to set per session: READ COMMITTED and no time zone in play
    // are what the statements expect.
    let pool = if config.transaction_pooler {
        ConnectionPool::build_with(DIALECT, url, config, establish_pooled, no_setup)?
    } else {
        ConnectionPool::build(DIALECT, url, config, no_setup)?
    };
    pool.check(DIALECT).await?;
    Ok(pool)
}

/// A new connection's setup: nothing.
fn no_setup(_conn: &mut AsyncPgConnection) -> BoxFuture<'_, diesel::QueryResult<()>> {
    async { Ok(()) }.boxed()
}

/// A connection for a transaction-mode pooler ([`pooler::establish`]).
fn establish_pooled(url: &str) -> BoxFuture<'_, diesel::ConnectionResult<AsyncPgConnection>> {
    pooler::establish(url).boxed()
}
