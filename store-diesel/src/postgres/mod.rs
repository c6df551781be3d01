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
mod leases;
mod recovery;
mod sql;
mod steps;
mod transition;
mod virtual_users;

use std::collections::HashSet;
use std::time::Duration;

use diesel_async::AsyncPgConnection;
use futures_util::FutureExt;

use flowstate_core::{ClaimOutcome, RunId, StepId};

use crate::config::StoreConfig;
use crate::dialect::Dialect;
use crate::guard::Guarded;
use crate::pool::ConnectionPool;
use crate::rows::{RunRow, StepRow};
use crate::rows_leases::LeasedRunRow;
use crate::sql::Move;
use crate::store::{BatchItem, ExpiredRow, Inserting};

/// The name this dialect reports in errors.
const DIALECT: &str = "postgres";

/// This dialect's pool.
pub(crate) type Pool = ConnectionPool<AsyncPgConnection>;

/// PostgreSQL as a [`Dialect`]: each hot write one statement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Postgres;

impl Dialect for Postgres {
    type Conn = AsyncPgConnection;

    async fn connect(url: &str, config: &mut StoreConfig) -> crate::Result<Pool> {
        connect(url, config).await
    }

    async fn claim(
        pool: &Pool,
        config: &StoreConfig,
        run: RunId,
        name: &str,
        function: &str,
    ) -> flowstate_core::Result<ClaimOutcome> {
        claim::claim(pool, config, run, name, function).await
    }

    async fn claim_batch(
        pool: &Pool,
        config: &StoreConfig,
        limit: u32,
        function: Option<&str>,
    ) -> flowstate_core::Result<Vec<StepRow>> {
        batch::claim_batch(pool, config, limit, function).await
    }

    async fn complete_batch(
        pool: &Pool,
        config: &StoreConfig,
        items: &[BatchItem],
    ) -> flowstate_core::Result<HashSet<String>> {
        batch::complete_batch(pool, config, items).await
    }

    async fn claim_runs(
        pool: &Pool,
        config: &StoreConfig,
        worker: &str,
        n: u32,
        lease_for: Duration,
    ) -> flowstate_core::Result<Vec<LeasedRunRow>> {
        leases::claim_runs(pool, config, worker, n, lease_for).await
    }

    async fn expire_step_claims(
        pool: &Pool,
        config: &StoreConfig,
        limit: u32,
    ) -> flowstate_core::Result<Vec<ExpiredRow>> {
        recovery::expire_step_claims(pool, config, limit).await
    }

    async fn reap_expired_leases(
        pool: &Pool,
        config: &StoreConfig,
        limit: u32,
    ) -> flowstate_core::Result<Vec<(String, i64)>> {
        recovery::reap_expired_leases(pool, config, limit).await
    }

    async fn insert_step(
        pool: &Pool,
        config: &StoreConfig,
        run: RunId,
        row: &StepRow,
        token: Option<i64>,
    ) -> flowstate_core::Result<Inserting> {
        steps::insert_step(pool, config, run, row, token).await
    }

    async fn guarded_move(
        pool: &Pool,
        config: &StoreConfig,
        id: StepId,
        step_move: Move,
        payload: Option<String>,
        attempt: Option<u32>,
    ) -> flowstate_core::Result<Guarded> {
        transition::guarded_move(pool, config, id, step_move, payload, attempt).await
    }

    async fn insert_children(
        pool: &Pool,
        config: &StoreConfig,
        parent: RunId,
        rows: Vec<RunRow>,
    ) -> flowstate_core::Result<usize> {
        children::insert_children(pool, config, parent, rows).await
    }

    async fn append_transcript(
        pool: &Pool,
        config: &StoreConfig,
        id: String,
        entries: Vec<String>,
        now: i64,
    ) -> flowstate_core::Result<Option<i64>> {
        virtual_users::append_transcript(pool, config, id, entries, now).await
    }
}

/// Builds the pool for `url` and opens one connection, so a bad URL or a
/// server that is down is reported now.
async fn connect(url: &str, config: &mut StoreConfig) -> crate::Result<Pool> {
    // Nothing to set per session: READ COMMITTED and no time zone in play
    // are what the statements expect.
    let pool = ConnectionPool::build(DIALECT, url, config, |_conn: &mut AsyncPgConnection| {
        async { Ok(()) }.boxed()
    })?;
    pool.check(DIALECT).await?;
    Ok(pool)
}
