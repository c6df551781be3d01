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

use diesel::sql_types::Array;
use flowstate_core::step_claim::claim_expired_error;
use flowstate_core::{HistoryId, Result, StepStatus};

use super::Pool;
use super::sql::history_ctes;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::dialect::Connection;
use crate::error::backend;
use crate::rows::ExpiredRow;
use crate::schema::{Json, JsonText};
use crate::sql::StepMove;

/// The reap. Binds: `$1` the lease clock offset, `$2` how many. Rows: each
/// run reaped and when its lease ran out.
///
/// Hand-written because the order is the old expiry, which the `UPDATE`
/// clears: only `UPDATE ... FROM` a locking pick can return it, and diesel
/// has neither `UPDATE ... FROM` nor `WITH`; two statements would need a
/// transaction and a second round trip.
static REAP: LazyLock<String> = LazyLock::new(|| {
    let now = <AsyncPgConnection as Connection>::NOW_US;
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

/// [`RunRecoveryStore::reap_expired_leases`](flowstate_core::ports::RunRecoveryStore::reap_expired_leases)
/// of at most `limit` runs (already the effective limit): each run reaped
/// and its old expiry, in no order.
pub(super) async fn reap_expired_leases(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
) -> Result<Vec<(String, i64)>> {
    let op = "reap_expired_leases";
    let mut conn = pool.get(op).await?;
    let rows: Vec<Reaped> = diesel::sql_query(REAP.as_str())
        .bind::<BigInt, _>(config.lease_offset_us())
        .bind::<BigInt, _>(i64::from(limit))
        .cached()
        .load(&mut *conn)
        .await
        .map_err(|err| backend(op, err))?;
    Ok(rows.into_iter().map(|r| (r.id, r.expired_at)).collect())
}

/// The expiry of step claims. Binds: `$1` the lease clock offset, `$2`
/// how many, `$3` the claim-expired error, `$4` now, `$5` as many fresh
/// history ids as the limit. Rows: each step taken back ([`ExpiredRow`]).
///
/// The pick walks `flowstate_steps_claimed_until_idx` first deadline first
/// and locks what it answers, skipping rows a claimer holds (a completion
/// or a renewal under way); READ COMMITTED re-checks a row committed since
/// the statement began against the `UPDATE`'s guard, so a claim renewed or
/// completed meanwhile is left alone, and two expiries never answer one
/// step. The attempt's history row fails with it ([`history_ctes`]).
static EXPIRE: LazyLock<String> = LazyLock::new(|| {
    let now = <AsyncPgConnection as Connection>::NOW_US;
    let running = StepStatus::Running.as_str();
    let failed = StepMove::transition(StepStatus::Failed);
    let history = history_ctes(
        &failed,
        "expired",
        "expiry",
        "($5::text[])[row_number() OVER ()]",
        "$4",
    );
    format!(
        "WITH picked AS (SELECT id, claimed_until FROM flowstate_steps \
           WHERE claimed_until IS NOT NULL AND claimed_until <= {now} + $1 \
           ORDER BY claimed_until, id LIMIT $2 FOR UPDATE SKIP LOCKED), \
         expired AS (UPDATE flowstate_steps AS s SET status = '{failed_status}', error = $3, \
           updated_at = $4, claimed_until = NULL FROM picked \
           WHERE s.id = picked.id AND s.status = '{running}' AND s.claimed_until <= {now} + $1 \
           RETURNING s.id, s.run_id, s.name, s.current_attempt, s.retries, s.error, \
           picked.claimed_until AS expired_at), \
         {history} \
         SELECT id, run_id, name, current_attempt, retries, expired_at FROM expired",
        failed_status = StepStatus::Failed.as_str(),
    )
});

/// [`RecoveryStore::expire_step_claims`](flowstate_core::ports::RecoveryStore::expire_step_claims)
/// of at most `limit` steps (already the effective limit): each step taken
/// back, in no order.
pub(super) async fn expire_step_claims(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
) -> Result<Vec<ExpiredRow>> {
    let op = "expire_step_claims";
    let history_ids: Vec<String> = (0..limit)
        .map(|_| HistoryId::generate().to_string())
        .collect();
    let mut conn = pool.get(op).await?;
    diesel::sql_query(EXPIRE.as_str())
        .bind::<BigInt, _>(config.lease_offset_us())
        .bind::<BigInt, _>(i64::from(limit))
        .bind::<Json, _>(JsonText(claim_expired_error().to_string()))
        .bind::<BigInt, _>(config.clock.now().as_micros())
        .bind::<Array<Text>, _>(history_ids)
        .cached()
        .load(&mut *conn)
        .await
        .map_err(|err| backend(op, err))
}
