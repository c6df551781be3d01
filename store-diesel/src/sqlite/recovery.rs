//! The reaper of expired leases on SQLite: one `BEGIN IMMEDIATE`
//! transaction, in the diesel DSL.
//!
//! The write lock, taken up front, makes reapers (and claims) one at a
//! time, each seeing every earlier one, so two reapers never pick one run.
//! The expired leases are read first expired first (by
//! `flowstate_runs_lease_expiry_idx`), with the expiry the order needs and
//! the `UPDATE` clears, then exactly those ids are freed.

use diesel::prelude::*;

use flowstate_core::Result;

use super::{Pool, write};
use crate::config::StoreConfig;
use crate::store::{expired_first, free_leases, reaped};

/// [`RunRecoveryStore::reap_expired_leases`](flowstate_core::RunRecoveryStore::reap_expired_leases)
/// of at most `limit` runs (already the effective limit): each run reaped
/// and its old expiry.
pub(crate) async fn reap_expired_leases(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
) -> Result<Vec<(String, i64)>> {
    let offset = config.lease_clock_offset.micros();
    write(pool, "reap_expired_leases", move |conn| {
        let picked: Vec<(String, Option<i64>)> = expired_first!(conn, offset, limit).load(conn)?;
        if !picked.is_empty() {
            let ids: Vec<&String> = picked.iter().map(|(id, _)| id).collect();
            free_leases!(ids).execute(conn)?;
        }
        Ok(reaped(picked))
    })
    .await
}
