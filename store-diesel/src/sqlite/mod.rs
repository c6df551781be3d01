//! The embedded SQLite dialect: diesel's `SqliteConnection` (bundled
//! libsqlite3) behind diesel-async's `SyncConnectionWrapper`.
//!
//! How it works:
//! - The typed queries of [`crate::ports`] run through the async wrapper,
//!   one hop to tokio's blocking pool per statement. Each hot write
//!   (claim, transition, retry, insert) is ONE hop ([`write`]): a closure
//!   that runs all of its statements on the plain connection, as one
//!   `BEGIN IMMEDIATE` transaction, which takes the write lock up front, so
//!   two writers queue on `busy_timeout` instead of deadlocking on a
//!   read-to-write upgrade.
//! - Each connection is set up with `busy_timeout` (from
//!   [`StoreConfig::sqlite_busy_timeout`], first, so the pragmas after it
//!   already wait on a lock), `journal_mode = WAL` (readers never block the
//!   writer; other processes see every commit), `foreign_keys = ON` (the
//!   cascades and the `RunNotFound` answers ride on them) and
//!   `synchronous = NORMAL` (no fsync per commit; a power cut may lose the
//!   last commits, never corrupt the file).
//! - `:memory:` (or any in-memory URI) gets a pool of ONE connection, since
//!   each connection to it is a database of its own, and that connection
//!   applies the embedded migrations when it opens: nothing else could
//!   reach it to do so.
//! - A hot write whose future is dropped mid-flight cannot leave a
//!   dangling transaction, and does not block the caller: the blocking
//!   closure runs to its COMMIT or ROLLBACK in the background, then its
//!   connection goes back to the pool ([`InFlight`]). A typed read dropped
//!   mid-statement waits for its statement in place (diesel-async's
//!   `SyncConnectionWrapper` does so).

mod batch;
mod children;
mod claim;
mod connection;
mod leases;
mod recovery;
mod retention;
mod sql;
mod steps;
mod transition;
mod virtual_users;

use diesel::connection::SimpleConnection;
use diesel::result::Error as DieselError;
use diesel::{QueryResult, SqliteConnection};
use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use futures_util::future::BoxFuture;

use crate::config::StoreConfig;
use crate::database::Dialect;
use crate::error::TxError;
use crate::pool::ConnectionPool;

/// The dialect's name, as errors and logs print it.
const DIALECT: Dialect = Dialect::Sqlite;

/// The pooled connection type: a blocking `SqliteConnection` made async.
pub(crate) type SqliteConn = SyncConnectionWrapper<SqliteConnection>;

/// This dialect's pool.
pub(crate) type Pool = ConnectionPool<SqliteConn>;

/// Embedded SQLite as a [`Dialect`]: each hot write one `BEGIN IMMEDIATE`
/// hop to the blocking pool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sqlite;

crate::dialect::wire_dialect!(Sqlite, SqliteConn);

/// How this dialect's hand-written history upserts say "or update"
/// ([`Connection::UPSERT`](crate::dialect::Connection::UPSERT)).
const UPSERT: crate::sql::Upsert = <SqliteConn as crate::dialect::Connection>::UPSERT;

/// Opens a pool on the SQLite file `url` (a path, as [`crate::DatabaseUrl`]
/// leaves it once `sqlite://` is stripped), creating its parent directory
/// if it is missing, and checks that a connection can be made. For
/// `:memory:` the pool holds one connection and the schema is applied on
/// it, and `config` is changed to say so.
async fn connect(url: &str, config: &mut StoreConfig) -> crate::Result<Pool> {
    let in_memory = crate::url::is_sqlite_memory(url);
    if in_memory {
        // Each connection to `:memory:` is a database of its own.
        config.pool_size = 1;
    } else {
        crate::url::create_parent_dir(url)?;
    }
    let busy_ms = u64::try_from(config.sqlite_busy_timeout.as_millis()).unwrap_or(u64::MAX);
    // busy_timeout first: switching to WAL takes a lock another connection
    // may hold for a moment.
    let pragmas = format!(
        "PRAGMA busy_timeout = {busy_ms}; PRAGMA journal_mode = WAL; \
         PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;"
    );
    let pool = ConnectionPool::build(DIALECT, url, config, move |conn: &mut SqliteConn| {
        let pragmas = pragmas.clone();
        conn.spawn_blocking(move |conn| {
            conn.batch_execute(&pragmas)?;
            if in_memory {
                migrate_in_place(conn)?;
            }
            Ok(())
        })
    })?;
    pool.check(DIALECT).await?;
    tracing::debug!(
        url,
        in_memory,
        pool_size = config.pool_size,
        "sqlite store opened"
    );
    Ok(pool)
}

/// Runs `work` as one `BEGIN IMMEDIATE` transaction in one hop to the
/// blocking pool: committed if it answers `Ok`, rolled back otherwise.
async fn write<R, W>(pool: &Pool, op: &'static str, work: W) -> flowstate_core::Result<R>
where
    R: Send + 'static,
    W: FnOnce(&mut SqliteConnection) -> Result<R, TxError> + Send + 'static,
{
    let mut conn = pool.get(op).await?;
    let task = conn.spawn_blocking(move |conn| Ok(conn.immediate_transaction(work)));
    let outcome = InFlight {
        task: Some(task),
        conn: Some(conn),
    }
    .finish()
    .await;
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(TxError::Port(err))) => Err(err),
        Ok(Err(TxError::Db(err))) | Err(err) => Err(crate::error::backend(op, err)),
    }
}

/// A hot write under way on the blocking pool, with its connection.
///
/// If the caller's future is dropped before the work ends, dropping the
/// work's future would block the dropping thread until it is done
/// (diesel-async's `SyncConnectionWrapper` waits in place, and panics on a
/// current-thread runtime). Instead, the drop hands the work and its
/// connection to a task that waits for the work, then gives the
/// connection back to the pool: the caller returns at once, and the
/// transaction still runs to its `COMMIT` or `ROLLBACK`.
struct InFlight<R: Send + 'static> {
    task: Option<BoxFuture<'static, QueryResult<R>>>,
    conn: Option<Object<SqliteConn>>,
}

impl<R: Send + 'static> InFlight<R> {
    async fn finish(mut self) -> QueryResult<R> {
        let out = match self.task.as_mut() {
            Some(task) => task.await,
            None => unreachable!("an in-flight write has its task until it finishes"),
        };
        self.task = None;
        self.conn = None; // back to the pool: the work is done
        out
    }
}

impl<R: Send + 'static> Drop for InFlight<R> {
    fn drop(&mut self) {
        let (Some(task), Some(conn)) = (self.task.take(), self.conn.take()) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(async move {
                let _finished = task.await;
                drop(conn);
            })),
            // No runtime to wait on: take the connection out of the pool
            // instead; it closes once the blocking work lets go of it.
            Err(_) => drop(Object::take(conn)),
        }
    }
}

/// Runs a cached write that ends in `RETURNING id` as a query (so its
/// prepared statement is kept, see `sql::RETURNING`); answers whether it
/// wrote a row.
fn wrote<Q>(conn: &mut SqliteConnection, write: Q) -> QueryResult<bool>
where
    Q: diesel::query_builder::QueryFragment<diesel::sqlite::Sqlite>
        + diesel::query_builder::QueryId
        + diesel::query_builder::Query<SqlType = diesel::sql_types::Untyped>,
{
    use diesel::{OptionalExtension, RunQueryDsl};
    crate::cached::CacheExt::cached(write)
        .get_result::<crate::rows::IdRow>(conn)
        .optional()
        .map(|row| row.is_some())
}

/// Applies the embedded migrations on `conn` itself (for `:memory:`, the
/// only connection that will ever see that database).
fn migrate_in_place(conn: &mut SqliteConnection) -> QueryResult<()> {
    use diesel_migrations::MigrationHarness;
    conn.run_pending_migrations(crate::migrate::StaticSource(&crate::migrate::SQLITE))
        .map(drop)
        .map_err(DieselError::QueryBuilderError)
}
