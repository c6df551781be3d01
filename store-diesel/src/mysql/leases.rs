//! The run claim on MySQL 8 / MariaDB 10.6+: one transaction.
//!
//! MySQL has no `UPDATE ... RETURNING` and cannot `UPDATE` a table it
//! selects from in a subquery, so the runs are taken first:
//! `SELECT id ... FOR UPDATE SKIP LOCKED` over the runnable runs (by
//! `flowstate_runs_leasable`, on a virtual column of the leasable
//! statuses), which locks what it answers and skips what other claims
//! hold; then the `UPDATE` of exactly those ids, and the
//! runs read back, in the same transaction. Runs with a cancel requested
//! are taken and settled the same way, before. Sleeping and waiting runs
//! are left out by [`crate::sql_waits::awake`]. The time is the server's
//! ([`crate::lease_clock`]).

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::lease::lease_micros;
use flowstate_core::{Result, RunStatus};

use super::{Pool, transaction};
use crate::config::StoreConfig;
use crate::error::backend;
use crate::rows_leases::LeasedRunRow;
use crate::schema::flowstate_runs as runs;
use crate::store::{db_time, runnable};

/// What one claim binds.
struct Claim<'a> {
    worker: &'a str,
    n: i64,
    offset: i64,
    until: i64,
    now: i64,
}

/// [`RunLeaseStore::claim_runs`](flowstate_core::RunLeaseStore::claim_runs),
/// its input already checked: the runs it leased, as written.
pub(crate) async fn claim_runs(
    pool: &Pool,
    config: &StoreConfig,
    worker: &str,
    n: u32,
    lease_for: Duration,
) -> Result<Vec<LeasedRunRow>> {
    let offset = config.lease_clock_offset.micros();
    let claim = Claim {
        worker,
        n: i64::from(n),
        offset,
        until: offset.saturating_add(lease_micros(lease_for)),
        now: config.clock.now().as_micros(),
    };
    transaction!(pool, "claim_run", |conn| {
        let cancelled = pick(conn, &claim, true).await?;
        if !cancelled.is_empty() {
            diesel::update(runs::table.filter(runs::id.eq_any(&cancelled)))
                .set((
                    runs::status.eq(RunStatus::Cancelled.as_str()),
                    runs::updated_at.eq(claim.now),
                    runs::lease_token.eq(runs::lease_token + 1),
                    runs::lease_owner.eq(None::<String>),
                    runs::lease_expires_at.eq(None::<i64>),
                    runs::cancel_requested.eq(false),
                    runs::wake_at.eq(None::<i64>),
                    runs::waiting_on.eq(None::<String>),
                ))
                .execute(conn)
                .await?;
        }
        let ids = pick(conn, &claim, false).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        diesel::update(runs::table.filter(runs::id.eq_any(&ids)))
            .set((
                runs::lease_token.eq(runs::lease_token + 1),
                runs::lease_owner.eq(claim.worker),
                runs::lease_expires_at.eq(db_time!(conn, claim.until)),
                runs::wake_at.eq(None::<i64>),
                runs::waiting_on.eq(None::<String>),
            ))
            .execute(conn)
            .await?;
        runs::table
            .filter(runs::id.eq_any(&ids))
            .select(LeasedRunRow::as_select())
            .load(conn)
            .await
    })
    .map_err(|err| backend("claim_run", err))
}

/// Up to `n` runnable runs with (or without) a cancel requested, locked.
async fn pick(
    conn: &mut AsyncMysqlConnection,
    claim: &Claim<'_>,
    cancel: bool,
) -> QueryResult<Vec<String>> {
    // `leasable = 1` leads for the index on MySQL's virtual column
    // (migration `2026-12-01-000007_lease_claim`): without it the pick
    // sorts every unsettled run.
    runs::table
        .filter(diesel::dsl::sql::<diesel::sql_types::Bool>("leasable = 1"))
        .filter(runs::cancel_requested.eq(cancel))
        .filter(runnable!(conn, claim.offset))
        .order((runs::created_at, runs::id))
        .limit(claim.n)
        .select(runs::id)
        .for_update()
        .skip_locked()
        .load(conn)
        .await
}
