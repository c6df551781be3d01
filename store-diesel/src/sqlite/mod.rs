//! The embedded SQLite dialect: [`SqliteStore`], on diesel's
//! `SqliteConnection` (bundled libsqlite3) behind diesel-async's
//! `SyncConnectionWrapper`.
//!
//! How it works:
//! - Every port call is ONE hop to tokio's blocking pool
//!   (`SyncConnectionWrapper::spawn_blocking`): the closure runs all of the
//!   call's statements on the plain `SqliteConnection`, instead of one hop per
//!   statement through the async wrapper.
//! - Every multi-statement unit of work is one `BEGIN IMMEDIATE` transaction:
//!   it takes the write lock up front, so two writers queue on
//!   `busy_timeout` instead of deadlocking on a read-to-write lock upgrade
//!   (a deferred transaction that read first fails with `SQLITE_BUSY` at
//!   once, without waiting). Single statements run in autocommit, which
//!   SQLite retries through the busy handler by itself.
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
//! - Statements are raw SQL with bound parameters (`Sql` in `query.rs`, a
//!   cacheable `sql_query`): each connection parses and plans each text
//!   once, not on every call.
//! - A call whose future is dropped mid-flight cannot leave a dangling
//!   transaction: the blocking closure runs to its COMMIT or ROLLBACK
//!   regardless, and the connection goes back to the pool only once it has.

mod claim;
mod guards;
mod query;
mod runs;
mod sql;
mod steps;
mod transition;
mod versions;

use std::path::Path;

use deadpool::managed::Object;
use diesel::connection::SimpleConnection;
use diesel::result::Error as DieselError;
use diesel::{QueryResult, SqliteConnection};
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use futures_util::future::BoxFuture;

use crate::config::StoreConfig;
use crate::pool::ConnectionPool;

/// The dialect's name, as errors and logs print it.
const DIALECT: &str = "sqlite";

/// The pooled connection type: a blocking `SqliteConnection` made async.
pub type SqliteConn = SyncConnectionWrapper<SqliteConnection>;

/// A flowstate store on one SQLite file (or an in-memory database).
///
/// Open it with [`SqliteStore::connect`] after applying the schema with
/// [`crate::migrate::up`]; it implements every store port.
#[derive(Debug)]
pub struct SqliteStore {
    pool: ConnectionPool<SqliteConn>,
    config: StoreConfig,
}

impl SqliteStore {
    /// Opens a store on the SQLite file `url` (a path, as
    /// [`crate::DatabaseUrl`] leaves it once `sqlite://` is stripped),
    /// creating its parent directory if it is missing, and checks that a
    /// connection can be made. For `:memory:` the pool holds one connection
    /// and the schema is applied on it.
    pub async fn connect(url: &str, config: StoreConfig) -> crate::Result<Self> {
        let mut config = config;
        let in_memory = is_in_memory(url);
        if in_memory {
            // Each connection to `:memory:` is a database of its own.
            config.pool_size = 1;
        } else {
            create_parent_dir(url)?;
        }
        let busy_ms = u64::try_from(config.sqlite_busy_timeout.as_millis()).unwrap_or(u64::MAX);
        // busy_timeout first: switching to WAL takes a lock another
        // connection may hold for a moment.
        let pragmas = format!(
            "PRAGMA busy_timeout = {busy_ms}; PRAGMA journal_mode = WAL; \
             PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;"
        );
        let pool =
            ConnectionPool::build_with(DIALECT, url, &config, move |conn: &mut SqliteConn| {
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
        Ok(Self { pool, config })
    }

    /// Runs SQL text with no binds on a pooled connection: an escape hatch
    /// for tests and operators (it bypasses every guarantee of the ports).
    pub async fn batch_execute(&self, sql: &str) -> flowstate_core::Result<()> {
        let sql = sql.to_owned();
        self.read("batch_execute", move |conn| Ok(conn.batch_execute(&sql)?))
            .await
    }

    /// The connection pool (tests hold connections from it).
    pub fn pool(&self) -> &ConnectionPool<SqliteConn> {
        &self.pool
    }

    /// The time to stamp on rows, in microseconds, from the configured clock.
    fn now(&self) -> i64 {
        self.config.clock.now().as_micros()
    }

    /// Runs `work` on a pooled connection in one hop to the blocking pool,
    /// outside any transaction (single statements autocommit).
    async fn read<R, W>(&self, op: &'static str, work: W) -> flowstate_core::Result<R>
    where
        R: Send + 'static,
        W: FnOnce(&mut SqliteConnection) -> Result<R, Fail> + Send + 'static,
    {
        self.on_connection(op, work)
            .await
            .map_err(|fail| fail.into_error(op))
    }

    /// Runs `work` as one `BEGIN IMMEDIATE` transaction in one hop to the
    /// blocking pool: committed if it answers `Ok`, rolled back otherwise.
    async fn write<R, W>(&self, op: &'static str, work: W) -> flowstate_core::Result<R>
    where
        R: Send + 'static,
        W: FnOnce(&mut SqliteConnection) -> Result<R, Fail> + Send + 'static,
    {
        self.on_connection(op, move |conn| conn.immediate_transaction(work))
            .await
            .map_err(|fail| fail.into_error(op))
    }

    async fn on_connection<R, W>(&self, op: &'static str, work: W) -> Result<R, Fail>
    where
        R: Send + 'static,
        W: FnOnce(&mut SqliteConnection) -> Result<R, Fail> + Send + 'static,
    {
        let mut conn = self.pool.get(op).await.map_err(Fail::Port)?;
        let task = conn.spawn_blocking(move |conn| Ok(work(conn)));
        InFlight {
            conn: Some(conn),
            task: Some(task),
        }
        .finish()
        .await?
    }
}

/// Why a unit of work failed: the database, or an answer the port gives
/// (a typed not-found, an illegal move) that also rolls the transaction back.
#[derive(Debug)]
enum Fail {
    /// A diesel error, mapped by [`crate::error::backend`].
    Db(DieselError),
    /// The port's own answer.
    Port(flowstate_core::Error),
}

impl From<DieselError> for Fail {
    fn from(err: DieselError) -> Self {
        Self::Db(err)
    }
}

impl From<flowstate_core::Error> for Fail {
    fn from(err: flowstate_core::Error) -> Self {
        Self::Port(err)
    }
}

impl Fail {
    fn into_error(self, op: &'static str) -> flowstate_core::Error {
        match self {
            Self::Db(err) => crate::error::backend(op, err),
            Self::Port(err) => err,
        }
    }

    /// A foreign-key violation as `missing`, anything else as it is.
    fn fk_as(err: DieselError, missing: flowstate_core::Error) -> Self {
        if crate::error::is_foreign_key_violation(&err) {
            Self::Port(missing)
        } else {
            Self::Db(err)
        }
    }
}

/// A connection whose blocking work is under way.
///
/// If the caller's future is dropped before the work ends, the connection
/// must not go back to the pool while the blocking thread still holds it
/// (diesel-async's recycle check would find it shared and panic): the drop
/// hands both to a task that waits for the work, then releases them.
struct InFlight<R: Send + 'static> {
    conn: Option<Object<AsyncDieselConnectionManager<SqliteConn>>>,
    task: Option<BoxFuture<'static, QueryResult<R>>>,
}

impl<R: Send + 'static> InFlight<R> {
    async fn finish(mut self) -> QueryResult<R> {
        let out = match self.task.as_mut() {
            Some(task) => task.await,
            None => unreachable!("an in-flight call has its task until it finishes"),
        };
        self.task = None;
        out
    }
}

impl<R: Send + 'static> Drop for InFlight<R> {
    fn drop(&mut self) {
        let (Some(task), Some(conn)) = (self.task.take(), self.conn.take()) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _finished = task.await;
                drop(conn);
            });
        } else {
            // No runtime to wait on: take the connection out of the pool
            // instead; it closes once the blocking work lets go of it.
            drop(Object::take(conn));
        }
    }
}

/// Whether `url` names an in-memory database rather than a file.
fn is_in_memory(url: &str) -> bool {
    url == ":memory:" || url.starts_with("file::memory:") || url.contains("mode=memory")
}

/// Creates the directory the database file goes in, if it is missing.
fn create_parent_dir(url: &str) -> crate::Result<()> {
    if url.starts_with("file:") {
        return Ok(()); // a URI filename: SQLite reads it, not us
    }
    match Path::new(url).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            std::fs::create_dir_all(dir).map_err(|err| crate::Error::Connect {
                dialect: DIALECT,
                source: Box::new(err),
            })
        }
        _ => Ok(()),
    }
}

/// Applies the embedded migrations on `conn` itself (for `:memory:`, the
/// only connection that will ever see that database).
fn migrate_in_place(conn: &mut SqliteConnection) -> QueryResult<()> {
    use diesel_migrations::MigrationHarness;
    conn.run_pending_migrations(sql::Migrations)
        .map(drop)
        .map_err(DieselError::QueryBuilderError)
}
