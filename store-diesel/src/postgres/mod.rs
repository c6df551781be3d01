//! PostgreSQL: [`PgStore`], every port on `AsyncPgConnection`, each hot
//! operation in one statement.
//!
//! A claim, a step transition and a retry are each one statement: a CTE
//! whose status-guarded `UPDATE ... RETURNING` decides, an
//! `INSERT ... ON CONFLICT (step_id, attempt) DO UPDATE` that writes the
//! history row of the attempt the `UPDATE` returned, and a final `SELECT`
//! that also reports what the step was (from the statement's snapshot), so a
//! refused write is diagnosed without another round trip. Under READ
//! COMMITTED a racing `UPDATE` re-checks its `WHERE` on the row the winner
//! committed, so exactly one of any number of racing claims wins.
//!
//! Every statement is prepared once per connection and cached (`sql_query`
//! alone is prepared anew each call: two round trips): after its first use
//! on a connection a statement is one round trip. No transaction is ever
//! opened, and the pool sends no ping on checkout.

mod claim;
mod run_state;
mod runs;
mod sql;
mod state;
mod steps;
mod versions;

use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use futures_util::FutureExt;

use flowstate_core::Timestamp;

use crate::config::StoreConfig;
use crate::pool::ConnectionPool;

/// The name this dialect reports in errors.
const DIALECT: &str = "postgres";

/// flowstate's store on PostgreSQL.
///
/// Open it with [`PgStore::connect`] on a migrated database (see
/// [`crate::migrate::up`]); usually through [`DieselStore`](crate::DieselStore).
#[derive(Debug)]
pub struct PgStore {
    pool: ConnectionPool<AsyncPgConnection>,
    config: StoreConfig,
}

impl PgStore {
    /// Builds the pool for `url` and opens one connection, so a bad URL or a
    /// server that is down is reported now.
    pub async fn connect(url: &str, config: StoreConfig) -> crate::Result<Self> {
        let pool = ConnectionPool::build(DIALECT, url, &config, setup)?;
        pool.check(DIALECT).await?;
        Ok(Self { pool, config })
    }

    /// Runs SQL text with no binds on a pooled connection: an escape hatch
    /// for tests and operators that bypasses every guarantee of the ports.
    pub async fn batch_execute(&self, sql: &str) -> flowstate_core::Result<()> {
        let mut conn = self.pool.get("batch_execute").await?;
        conn.batch_execute(sql)
            .await
            .map_err(|err| crate::error::backend("batch_execute", err))
    }

    /// The connection pool (tests hold its connections to prove the acquire
    /// timeout).
    pub fn pool(&self) -> &ConnectionPool<AsyncPgConnection> {
        &self.pool
    }

    /// The time to stamp on rows written now.
    fn now(&self) -> Timestamp {
        self.config.clock.now()
    }
}

/// What runs on every new connection: nothing (the defaults of a session
/// are what the SQL expects: READ COMMITTED, UTC-free BIGINT timestamps).
fn setup(
    _conn: &mut AsyncPgConnection,
) -> futures_util::future::BoxFuture<'_, diesel::QueryResult<()>> {
    async { Ok(()) }.boxed()
}
