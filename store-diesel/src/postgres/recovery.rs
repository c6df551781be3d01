//! The reaper of expired leases on PostgreSQL: one statement.
//!
//! `WITH expired AS (SELECT ... FOR UPDATE SKIP LOCKED) UPDATE ... FROM
//! expired RETURNING`: the pick walks `flowstate_runs_lease_expiry_idx`
//! first expired first and locks what it answers, skipping rows another
//! reaper (or a claim, a renewal) holds; a row changed and committed since
//! the statement began is re-checked against the pick's guard (READ
//! COMMITTED), so a lease renewed or a run already reaped is left out. Two
//! reapers therefore never answer one run. The time is the server's
//! ([`crate::lease_clock`]).

use std::sync::LazyLock;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use flowstate_core::Result;

use super::Pool;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::backend;
use crate::lease_clock::DbClock;

/// The reap. Binds: `$1` the lease clock offset, `$2` how many. Rows: each
/// run reaped and when its lease ran out.
///
/// Hand-written because the order is the old expiry, which the `UPDATE`
/// clears: only `UPDATE ... FROM` a locking pick can return it, and diesel
/// has neither `UPDATE ... FROM` nor `WITH`; two statements would need a
/// transaction and a second round trip.
static REAP: LazyLock<String> = LazyLock::new(|| {
    let now = <AsyncPgConnection as DbClock>::NOW_US;
    format!(
        "WITH expired AS (SELECT id, lease_expires_at FROM flowstate_runs \
           WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= {now} + $1 \
           ORDER BY lease_expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) \
         UPDATE flowstate_runs AS r SET lease_owner = NULL, lease_expires_at = NULL \
         FROM expired WHERE r.id = expired.id \
         RETURNING r.id AS id, expired.lease_expires_at AS expired_at"
    )
});

/// A run the reap freed, and when its lease had run out.
#[derive(QueryableByName)]
struct Reaped {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = BigInt)]
    expired_at: i64,
}

/// [`RunRecoveryStore::reap_expired_leases`](flowstate_core::RunRecoveryStore::reap_expired_leases)
/// of at most `limit` runs (already the effective limit): each run reaped
/// and its old expiry, in no order.
pub(crate) async fn reap_expired_leases(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
) -> Result<Vec<(String, i64)>> {
    let op = "reap_expired_leases";
    let mut conn = pool.get(op).await?;
    let rows: Vec<Reaped> = diesel::sql_query(REAP.as_str())
        .bind::<BigInt, _>(config.lease_clock_offset.micros())
        .bind::<BigInt, _>(i64::from(limit))
        .cached()
        .load(&mut *conn)
        .await
        .map_err(|err| backend(op, err))?;
    Ok(rows.into_iter().map(|r| (r.id, r.expired_at)).collect())
}
