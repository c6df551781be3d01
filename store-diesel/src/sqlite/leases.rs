//! The run claim on SQLite: one `BEGIN IMMEDIATE` transaction.
//!
//! SQLite has no `SKIP LOCKED` and needs none: the write lock, taken up
//! front, makes the claims one at a time, and each sees every earlier one.
//! 1. Settle up to `n` runnable runs with a cancel requested, as cancelled.
//! 2. Lease the `n` oldest of up to `n` free runs (no lease) that do not
//!    sleep, from `flowstate_runs_free_idx` in creation order, up to `n`
//!    sleeping runs whose time has come, from
//!    `flowstate_runs_sleeping_idx` first to wake first, and up to `n`
//!    run-out leases, from `flowstate_runs_lease_expiry_idx` first run out
//!    first, `RETURNING *`.
//!
//! Both read the time as SQLite's `'now'` ([`crate::lease_clock`]); the
//! settling walks `flowstate_runs_cancel_requested_idx`. A run under a
//! live lease or asleep is in none of the lease's ranges, so a claim reads
//! no held or sleeping run, however many there are: one index of every
//! unsettled run made each claim read past all of them, holding the one
//! writer while it did (`database is locked` for the others at 1,000,000
//! held).

use std::sync::LazyLock;
use std::time::Duration;

use diesel::RunQueryDsl;
use diesel::sql_types::{BigInt, Text};

use flowstate_core::lease::lease_micros;
use flowstate_core::{Result, RunStatus};

use super::{Pool, SqliteConn, write};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::dialect::Connection;
use crate::rows::IdRow;
use crate::rows::leases::LeasedRunRow;

/// The `IN (SELECT ...)` of runnable runs with a cancel requested. Binds:
/// the lease clock offset (twice), how many.
///
/// `INDEXED BY` names the partial index the predicate matches: without
/// statistics the planner may prefer `flowstate_runs_status_created` and
/// sort every unsettled run, which is the scan the index exists to avoid.
fn cancel_pick() -> String {
    let now = <SqliteConn as Connection>::NOW_US;
    format!(
        "SELECT id FROM flowstate_runs INDEXED BY flowstate_runs_cancel_requested_idx \
         WHERE {runnable} AND cancel_requested = 1 ORDER BY created_at, id LIMIT ?",
        runnable = crate::sql::waits::runnable_sql(&format!("{now} + ?")),
    )
}

/// The `IN (SELECT ...)` of the runs to lease: the oldest `n` of the
/// oldest `n` free runs that do not sleep, the first `n` sleeping runs to
/// wake whose time has come, and the first `n` run-out leases, each read
/// from its own index (named, as [`cancel_pick`]'s). Binds: the lease
/// clock offset (once), how many; the offset (once), how many; the offset
/// (twice), how many; how many.
fn lease_pick() -> String {
    let now = <SqliteConn as Connection>::NOW_US;
    let at = format!("{now} + ?");
    format!(
        "SELECT id FROM (\
         SELECT id, created_at FROM (SELECT id, created_at FROM flowstate_runs \
         INDEXED BY flowstate_runs_free_idx WHERE {free} AND cancel_requested = 0 \
         ORDER BY created_at, id LIMIT ?) \
         UNION ALL \
         SELECT id, created_at FROM (SELECT id, created_at FROM flowstate_runs \
         INDEXED BY flowstate_runs_sleeping_idx WHERE {due} AND cancel_requested = 0 \
         ORDER BY wake_at, id LIMIT ?) \
         UNION ALL \
         SELECT id, created_at FROM (SELECT id, created_at FROM flowstate_runs \
         INDEXED BY flowstate_runs_lease_expiry_idx WHERE {run_out} AND cancel_requested = 0 \
         ORDER BY lease_expires_at, id LIMIT ?)) \
         ORDER BY created_at, id LIMIT ?",
        free = crate::sql::waits::free_sql(&at),
        due = crate::sql::waits::due_sql(&at),
        run_out = crate::sql::waits::run_out_sql(&at),
    )
}

/// Binds: the `updated_at` stamp, then [`cancel_pick`]'s.
static CANCEL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE flowstate_runs SET status = '{}', updated_at = ?, lease_token = lease_token + 1, \
         lease_owner = NULL, lease_expires_at = NULL, cancel_requested = 0, \
         wake_at = NULL, waiting_on = NULL \
         WHERE id IN ({}) RETURNING id",
        RunStatus::Cancelled.as_str(),
        cancel_pick()
    )
});

/// Binds: the worker, the offset plus the lease length, then
/// [`lease_pick`]'s.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE flowstate_runs SET lease_token = lease_token + 1, lease_owner = ?, \
         lease_expires_at = {} + ?, wake_at = NULL, waiting_on = NULL \
         WHERE id IN ({}) RETURNING *",
        <SqliteConn as Connection>::NOW_US,
        lease_pick()
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
    let now = config.clock.now().as_micros();
    let worker = worker.to_owned();
    let until = offset.saturating_add(lease_micros(lease_for));
    write(pool, "claim_run", move |conn| {
        let _cancelled: Vec<IdRow> = diesel::sql_query(CANCEL.as_str())
            .bind::<BigInt, _>(now)
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(i64::from(n))
            .cached()
            .load(conn)?;
        let claimed: Vec<LeasedRunRow> = diesel::sql_query(CLAIM.as_str())
            .bind::<Text, _>(&worker)
            .bind::<BigInt, _>(until)
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(i64::from(n))
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(i64::from(n))
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(i64::from(n))
            .bind::<BigInt, _>(i64::from(n))
            .cached()
            .load(conn)?;
        Ok(claimed)
    })
    .await
}
