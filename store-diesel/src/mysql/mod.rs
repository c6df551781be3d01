//! MySQL 8 / MariaDB 10.6+: the hot writes on `AsyncMysqlConnection`.
//!
//! MySQL has no `UPDATE ... RETURNING`, so each write that must answer what
//! it did is one short transaction (diesel-async's `transaction`): the
//! status-guarded `UPDATE` decides (its affected rows, which with
//! `CLIENT_FOUND_ROWS` are the rows it matched), and the history row is
//! upserted with `INSERT ... SELECT ... ON DUPLICATE KEY UPDATE` from the
//! step row just written. The per-step moves, the hottest writes, are the
//! exception: a trigger writes the history row inside the move's `UPDATE`
//! (migration `2026-12-06-000019_move_history`), so a transition, a retry
//! or a claimer's move is that one statement (`transition.rs`), and a
//! claim that `UPDATE` and a read of the step (`claim.rs`), with no
//! transaction around them. InnoDB may pick any of these as a deadlock victim under
//! contention; a rolled-back statement or transaction is run again whole,
//! a bounded number of times ([`crate::conflict`]), before the error
//! (retryable) is returned.
//!
//! Names and keys are stored as `VARBINARY(255)`, so they compare byte for
//! byte: `utf8mb4_bin` would still treat `"a"` and `"a "` as one key (it is
//! a PAD SPACE collation on MySQL and MariaDB alike).

mod batch;
mod children;
mod claim;
mod connection;
mod leases;
mod nodes;
mod recovery;
mod retention;
mod spread;
mod sql;
mod steps;
mod transition;
mod virtual_users;

#[cfg(feature = "test-support")]
pub use leases::interleave;

use diesel_async::{AsyncMysqlConnection, SimpleAsyncConnection};
use futures_util::FutureExt;

use crate::config::StoreConfig;
use crate::database::Dialect;
use crate::pool::ConnectionPool;

/// The dialect's name, as errors and logs print it.
const DIALECT: Dialect = Dialect::Mysql;

/// This dialect's pool.
pub(crate) type Pool = ConnectionPool<AsyncMysqlConnection>;

/// MySQL 8 / MariaDB 10.6+ as a [`Dialect`]: each hot write one short
/// transaction (the per-step moves excepted: one autocommitted statement).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mysql;

crate::dialect::wire_dialect!(Mysql, AsyncMysqlConnection);

/// How this dialect's hand-written history upserts say "or update"
/// ([`Connection::UPSERT`](crate::dialect::Connection::UPSERT)).
const UPSERT: crate::sql::Upsert =
    <diesel_async::AsyncMysqlConnection as crate::dialect::Connection>::UPSERT;

/// What every new connection runs before it is used.
///
/// - `READ COMMITTED`: every write here is a status-guarded `UPDATE` or an
///   upsert on a unique key, which take their locks with a locking current
///   read at any isolation level, so exclusion does not depend on it. What
///   `REPEATABLE READ` would add is gap and next-key locking on those
///   statements and on the `INSERT ... SELECT` history upserts: a wider set
///   of locks for workers to contend and deadlock on, bought for nothing,
///   since no transaction here reads twice expecting the same answer. Under
///   `READ COMMITTED` a guarded `UPDATE` also skips a locked row without
///   waiting when its committed version already fails the guard (InnoDB's
///   semi-consistent read). What was measured: SCHEMA.md, Decisions,
///   "MySQL's isolation level".
/// - A strict `sql_mode`, so an over-long value is an error, never silently
///   truncated, whatever the server's default.
const SESSION_SETUP: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; \
     SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,\
     ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'";

/// Runs `$body` (typed queries on `$conn`, a `QueryResult`) as one
/// transaction on a connection of `$pool`, and again whole after a lock
/// conflict ([`crate::conflict`]); evaluates to its last
/// `QueryResult`. A pool timeout returns from the enclosing function.
macro_rules! transaction {
    ($pool:expr, $op:expr, |$conn:ident| $body:expr) => {{
        let mut conn = $pool.get($op).await?;
        $crate::conflict::retry_conflicts!(
            $op,
            diesel_async::AsyncConnection::transaction(&mut *conn, async |$conn| $body).await,
            renew: conn = $pool
        )
    }};
}
use transaction;

/// Builds the pool for `url` (`mysql://user:password@host:port/database`)
/// and opens one connection, so a bad URL or a server that is down is
/// reported now.
async fn connect(url: &str, config: &mut StoreConfig) -> crate::Result<Pool> {
    connect_nodes(&[url.to_owned()], false, config).await
}

/// Builds the pool over the nodes of `urls` (one URL a node, as
/// [`DatabaseUrl::nodes`](crate::DatabaseUrl::nodes); in order if
/// `in_order`: [`nodes`] places each connection) and opens one
/// connection, so a bad URL or nodes that are all down are reported now:
/// with several nodes, [`Error::NoNodeAnswered`](crate::Error::NoNodeAnswered)
/// names each and why.
pub(crate) async fn connect_nodes(
    urls: &[String],
    in_order: bool,
    config: &mut StoreConfig,
) -> crate::Result<Pool> {
    let nodes = nodes::Nodes::new(
        urls,
        in_order,
        config.acquire_timeout,
        config.galera_sync_wait,
    );
    let placer = std::sync::Arc::clone(&nodes);
    let pool = ConnectionPool::build_placed(
        DIALECT,
        &urls[0],
        config,
        move |_url: &str| {
            let placer = std::sync::Arc::clone(&placer);
            async move {
                let (conn, placed) = placer.establish().await?;
                Ok((
                    conn,
                    Some(Box::new(placed) as Box<dyn crate::health::Placement>),
                ))
            }
            .boxed()
        },
        |conn: &mut AsyncMysqlConnection| conn.batch_execute(SESSION_SETUP).boxed(),
    )?;
    match pool.check(DIALECT).await {
        Ok(()) => Ok(pool),
        Err(_) if nodes.len() > 1 => Err(crate::Error::NoNodeAnswered {
            dialect: DIALECT,
            tried: nodes.tried(),
        }),
        Err(err) => Err(err),
    }
}
