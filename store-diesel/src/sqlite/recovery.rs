//! The reaper of expired leases on SQLite: one `BEGIN IMMEDIATE`
//! transaction, in the diesel DSL.
//!
//! The write lock, taken up front, makes reapers (and claims) one at a
//! time, each seeing every earlier one, so two reapers never pick one run.
//! The expired leases are read first expired first (by
//! `flowstate_runs_lease_expiry_idx`), with the expiry the order needs and
//! the `UPDATE` clears, then exactly those ids are freed.

use diesel::prelude::*;

use diesel::sqlite::Sqlite;
use flowstate_core::{Result, StepStatus};

use super::{Pool, write};
use crate::config::StoreConfig;
use crate::rows::ExpiredRow;
use crate::sql::StepMove;
use crate::sql::in_list::{MAX_LISTED, history_query};
use crate::sql::typed::{
    expired_claims, expired_first, fail_expired, free_leases, now_sql, reaped,
};

/// [`RunRecoveryStore::reap_expired_leases`](flowstate_core::ports::RunRecoveryStore::reap_expired_leases)
/// of at most `limit` runs (already the effective limit): each run reaped
/// and its old expiry.
pub(super) async fn reap_expired_leases(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
) -> Result<Vec<(String, i64)>> {
    let offset = config.lease_offset_us();
    write(pool, "reap_expired_leases", move |conn| {
        let picked: Vec<(String, Option<i64>)> =
            expired_first(now_sql(&*conn), offset, limit).load(conn)?;
        if !picked.is_empty() {
            let ids: Vec<&String> = picked.iter().map(|(id, _)| id).collect();
            free_leases(ids).execute(conn)?;
        }
        Ok(reaped(picked))
    })
    .await
}

/// [`RecoveryStore::expire_step_claims`](flowstate_core::ports::RecoveryStore::expire_step_claims)
/// of at most `limit` steps (already the effective limit), one `BEGIN
/// IMMEDIATE` transaction: the expired claims read first deadline first
/// under the write lock, then those steps failed and their history rows
/// with them.
pub(super) async fn expire_step_claims(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
) -> Result<Vec<ExpiredRow>> {
    let (offset, now) = (config.lease_offset_us(), config.clock.now().as_micros());
    write(pool, "expire_step_claims", move |conn| {
        let picked: Vec<ExpiredRow> = expired_claims(now_sql(&*conn), offset, limit).load(conn)?;
        let ids: Vec<String> = picked.iter().map(|row| row.id.clone()).collect();
        let failed = StepMove::transition(StepStatus::Failed);
        for chunk in ids.chunks(MAX_LISTED) {
            fail_expired(chunk, now).execute(conn)?;
            history_query::<Sqlite>(&failed, chunk, now, super::UPSERT).execute(conn)?;
        }
        Ok(picked)
    })
    .await
}
