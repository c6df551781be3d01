//! The reaper of expired leases on MySQL 8 / MariaDB 10.6+: one
//! transaction, in the diesel DSL.
//!
//! MySQL has no `UPDATE ... RETURNING`, so the expired leases are picked
//! first, `SELECT id, lease_expires_at ... FOR UPDATE SKIP LOCKED` first
//! expired first (by `flowstate_runs_lease_expiry`): a locking read sees
//! the latest committed row, not the transaction's snapshot, and skips the
//! rows another reaper holds, so two reapers never pick one run. Then the
//! `UPDATE` of exactly those ids, in the same transaction, guarded by the
//! pick's own test (the lease still run out; for the claim expiry, the
//! deadline still passed), which must match every id: on Galera the pick's
//! lock is local to its node, and a run claimed again meanwhile on another
//! node is a lost race run again ([`crate::conflict::lost_race`]), never a
//! fresh lease freed or a fresh claim failed.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use diesel::mysql::Mysql;
use flowstate_core::{Result, StepStatus};

use super::{Pool, transaction};
use crate::config::StoreConfig;
use crate::conflict::lost_race;
use crate::error::backend;
use crate::rows::ExpiredRow;
use crate::schema::{flowstate_runs as runs, flowstate_steps as steps};
use crate::sql::StepMove;
use crate::sql::in_list::{MAX_LISTED, history_query};
use crate::sql::typed::{
    db_time, expired_claims, expired_first, fail_expired, free_leases, now_sql, reaped,
};

/// [`RunRecoveryStore::reap_expired_leases`](flowstate_core::ports::RunRecoveryStore::reap_expired_leases)
/// of at most `limit` runs (already the effective limit): each run reaped
/// and its old expiry.
pub(super) async fn reap_expired_leases(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
) -> Result<Vec<(String, i64)>> {
    let op = "reap_expired_leases";
    let offset = config.lease_offset_us();
    transaction!(pool, op, |conn| {
        let picked: Vec<(String, Option<i64>)> = expired_first(now_sql(&*conn), offset, limit)
            .for_update()
            .skip_locked()
            .load(conn)
            .await?;
        if !picked.is_empty() {
            let ids: Vec<&String> = picked.iter().map(|(id, _)| id).collect();
            // Still run out: a lease claimed or renewed since the pick (by
            // another Galera node, whose commit the pick's lock did not
            // stop) ends later, and is not freed.
            let freed = free_leases(ids)
                .filter(runs::lease_expires_at.le(db_time(now_sql(&*conn), offset)))
                .execute(conn)
                .await?;
            if freed != picked.len() {
                return Err(lost_race(op));
            }
        }
        Ok(reaped(picked))
    })
    .map_err(|err| backend(op, err))
}

/// [`RecoveryStore::expire_step_claims`](flowstate_core::ports::RecoveryStore::expire_step_claims)
/// of at most `limit` steps (already the effective limit), one transaction:
/// the expired claims picked `FOR UPDATE SKIP LOCKED` first deadline first
/// (a locking read sees the latest committed row and skips one a claimer
/// holds), then those steps failed and their history rows with them.
pub(super) async fn expire_step_claims(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
) -> Result<Vec<ExpiredRow>> {
    let op = "expire_step_claims";
    let (offset, now) = (config.lease_offset_us(), config.clock.now().as_micros());
    transaction!(pool, op, |conn| {
        let picked: Vec<ExpiredRow> = expired_claims(now_sql(&*conn), offset, limit)
            .for_update()
            .skip_locked()
            .load(conn)
            .await?;
        let ids: Vec<String> = picked.iter().map(|row| row.id.clone()).collect();
        let failed = StepMove::transition(StepStatus::Failed);
        for chunk in ids.chunks(MAX_LISTED) {
            // Still past its deadline: a step failed and claimed again since
            // the pick (by another Galera node) has a new one, and is not
            // failed.
            let failed_now = fail_expired(chunk, now)
                .filter(steps::claimed_until.le(db_time(now_sql(&*conn), offset)))
                .execute(conn)
                .await?;
            if failed_now != chunk.len() {
                return Err(lost_race(op));
            }
            history_query::<Mysql>(&failed, chunk, now, super::UPSERT)
                .execute(conn)
                .await?;
        }
        Ok(picked)
    })
    .map_err(|err| backend(op, err))
}
