//! The run claim on PostgreSQL: one statement, win or lose.
//!
//! `WITH cancelled AS (UPDATE ...) UPDATE ... RETURNING *`: each `UPDATE`
//! takes its runs with `WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED)`
//! over a partial index of the unsettled runs (`flowstate_runs_claimable_idx`,
//! or `flowstate_runs_cancel_requested_idx` for those with a cancel
//! requested), so concurrent claims skip each other's rows
//! instead of queueing on them, and a row another claim committed first is
//! re-checked against the guard (READ COMMITTED), finds its lease taken and
//! is left out. The first settles up to `n` runs with a cancel requested;
//! the second leases up to `n` others. Both read the time from the server
//! ([`crate::lease_clock`]).

use std::sync::LazyLock;
use std::time::Duration;

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use flowstate_core::lease::lease_micros;
use flowstate_core::{Result, RunStatus};

use super::Pool;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::dialect::Connection;
use crate::error::backend;
use crate::rows::leases::LeasedRunRow;

/// The claim. Binds: `$1` the `updated_at` stamp of a cancelled run, `$2`
/// the lease clock offset, `$3` how many runs, `$4` the worker, `$5` the
/// offset plus the lease length.
static CLAIM_RUNS: LazyLock<String> = LazyLock::new(|| {
    let now = <AsyncPgConnection as Connection>::NOW_US;
    let runnable = crate::sql::waits::runnable_sql(&format!("{now} + $2"));
    let pick = |cancel: &str| {
        format!(
            "SELECT id FROM flowstate_runs WHERE {runnable} AND {cancel}cancel_requested \
             ORDER BY created_at, id LIMIT $3 FOR UPDATE SKIP LOCKED"
        )
    };
    format!(
        "WITH cancelled AS (UPDATE flowstate_runs SET status = '{cancelled}', updated_at = $1, \
           lease_token = lease_token + 1, lease_owner = NULL, lease_expires_at = NULL, \
           cancel_requested = FALSE, wake_at = NULL, waiting_on = NULL WHERE id IN ({cancel_pick}) RETURNING id) \
         UPDATE flowstate_runs SET lease_token = lease_token + 1, lease_owner = $4, \
           lease_expires_at = {now} + $5, wake_at = NULL, waiting_on = NULL WHERE id IN ({claim_pick}) RETURNING *",
        cancelled = RunStatus::Cancelled.as_str(),
        cancel_pick = pick(""),
        claim_pick = pick("NOT "),
    )
});

/// [`RunLeaseStore::claim_runs`](flowstate_core::ports::RunLeaseStore::claim_runs),
/// its input already checked: the runs it leased, as written.
pub(super) async fn claim_runs(
    pool: &Pool,
    config: &StoreConfig,
    worker: &str,
    n: u32,
    lease_for: Duration,
) -> Result<Vec<LeasedRunRow>> {
    let offset = config.lease_offset_us();
    let mut conn = pool.get("claim_run").await?;
    diesel::sql_query(CLAIM_RUNS.as_str())
        .bind::<BigInt, _>(config.clock.now().as_micros())
        .bind::<BigInt, _>(offset)
        .bind::<BigInt, _>(i64::from(n))
        .bind::<Text, _>(worker)
        .bind::<BigInt, _>(offset.saturating_add(lease_micros(lease_for)))
        .cached()
        .load(&mut *conn)
        .await
        .map_err(|err| backend("claim_run", err))
}
