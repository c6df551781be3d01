//! The run claim on PostgreSQL: one statement, win or lose.
//!
//! `WITH cancelled AS (UPDATE ...), free AS (SELECT ...), due AS
//! (SELECT ...), run_out AS (SELECT ...) UPDATE ... RETURNING *`. The
//! first settles up to `n` runs with a cancel requested, picked from their
//! partial index (`flowstate_runs_cancel_requested_idx`). The lease's three
//! picks read apart what may be leased: up to `n` free runs that do not
//! sleep, oldest first, from `flowstate_runs_free_idx`; up to `n` sleeping
//! runs whose time has come, first to wake first, from
//! `flowstate_runs_sleeping_idx`; and up to `n` run-out leases, first run
//! out first, from `flowstate_runs_lease_expiry_idx`. The last two are
//! ranges that end at the clock. A run under a live lease or asleep is in
//! no range, so a claim reads no held or sleeping run however many an
//! engine has (one index of every unsettled run made each claim read past
//! all of them: 0.016x at 1,000,000 held). The `UPDATE` leases the `n`
//! oldest of the three picks. Each pick locks what
//! it reads with `FOR UPDATE SKIP LOCKED`, so concurrent claims skip each
//! other's rows instead of queueing on them, and a row another claim
//! committed first is re-checked against the pick's predicate (READ
//! COMMITTED), finds its lease taken and is left out; the up to `n` rows
//! picked and not leased are unlocked when the statement ends. All read
//! the time from the server ([`crate::lease_clock`]).

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
    let at = format!("{now} + $2");
    let runnable = crate::sql::waits::runnable_sql(&at);
    let free = crate::sql::waits::free_sql(&at);
    let due = crate::sql::waits::due_sql(&at);
    let run_out = crate::sql::waits::run_out_sql(&at);
    format!(
        "WITH cancelled AS (UPDATE flowstate_runs SET status = '{cancelled}', updated_at = $1, \
           lease_token = lease_token + 1, lease_owner = NULL, lease_expires_at = NULL, \
           cancel_requested = FALSE, wake_at = NULL, waiting_on = NULL WHERE id IN \
           (SELECT id FROM flowstate_runs WHERE {runnable} AND cancel_requested \
           ORDER BY created_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING id), \
         free AS (SELECT id, created_at FROM flowstate_runs WHERE {free} AND NOT cancel_requested \
           ORDER BY created_at, id LIMIT $3 FOR UPDATE SKIP LOCKED), \
         due AS (SELECT id, created_at FROM flowstate_runs WHERE {due} AND NOT cancel_requested \
           ORDER BY wake_at, id LIMIT $3 FOR UPDATE SKIP LOCKED), \
         run_out AS (SELECT id, created_at FROM flowstate_runs WHERE {run_out} \
           AND NOT cancel_requested ORDER BY lease_expires_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) \
         UPDATE flowstate_runs SET lease_token = lease_token + 1, lease_owner = $4, \
           lease_expires_at = {now} + $5, wake_at = NULL, waiting_on = NULL WHERE id IN \
           (SELECT id FROM (SELECT id, created_at FROM free UNION ALL \
           SELECT id, created_at FROM due UNION ALL \
           SELECT id, created_at FROM run_out) AS picked ORDER BY created_at, id LIMIT $3) \
         RETURNING *",
        cancelled = RunStatus::Cancelled.as_str(),
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
