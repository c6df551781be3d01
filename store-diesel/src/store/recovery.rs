//! [`RecoveryStore`] and [`RunRecoveryStore`] for [`DieselStore`]: the two
//! recovery queries and `lease_run`, written once in the diesel DSL; the
//! reaping of expired leases, which differs per dialect, is in
//! `{postgres,mysql,sqlite}/recovery.rs`.
//!
//! Each query walks an index that holds no settled run (migration
//! `2026-12-01-000006_recovery`; the relay reuses the batch claim's), and
//! every term an index is chosen by is spelled with SQL literals of core's
//! statuses, not binds: PostgreSQL can match a partial index's predicate
//! only against literals once it plans a prepared statement generically.
//! The rules are core's ([`flowstate_core::recovery`]): the relay's
//! claimable test is the batch claim's own SQL ([`crate::sql::batch_claimable`]),
//! the lease clock is the database's ([`crate::lease_clock`]).

use std::time::Duration;

use diesel::dsl::{case_when, exists, not, sql};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::lease::lease_micros;
use flowstate_core::ports::checks;
use flowstate_core::ports::{RecoveryStore, RunLeaseStore, RunRecoveryStore};
use flowstate_core::recovery::effective_limit;
use flowstate_core::{
    Error, ExpiredClaim, Result, RetryPolicy, RunId, RunLease, RunStatus, StalledRun, StepStatus,
    Timestamp, UndispatchedStep,
};

use super::{
    DieselStore, by_dialect, by_returning, db_time, leasable_texts, on_connection, runnable,
};
use crate::rows::{parse_id, parse_status, to_u32};
use crate::rows_leases::LeasedRunRow;
use crate::schema::{flowstate_runs as runs, flowstate_steps as steps};
use crate::sql::batch_claimable_around_now;

/// A step the relay found, as read.
#[derive(Queryable)]
struct UndispatchedRow {
    run_id: String,
    id: String,
    name: String,
    status: String,
    updated_at: i64,
}

impl TryFrom<UndispatchedRow> for UndispatchedStep {
    type Error = Error;

    fn try_from(row: UndispatchedRow) -> Result<Self> {
        Ok(Self {
            run: parse_id("step run id", &row.id, &row.run_id)?,
            step: parse_id("step id", &row.id, &row.id)?,
            status: parse_status::<StepStatus>(&row.id, &row.status)?,
            name: row.name,
            updated_at: Timestamp::from_micros(row.updated_at),
        })
    }
}

/// A run the stalled sweep found: its id, its own `updated_at` and the
/// latest `updated_at` of its steps (none if it has none).
type StalledRow = (String, i64, Option<i64>);

/// What a `lease_run` write found.
enum Leased {
    /// The run is leased: the row as written.
    Won(Box<LeasedRunRow>),
    /// The run had a cancel requested and is settled as cancelled.
    Cancelled,
    /// No run was runnable under that id (it may not exist).
    Refused,
    /// The run exists and is not runnable (MySQL, whose locked read tells).
    NotRunnable,
    /// No run has that id (MySQL, whose locked read tells).
    Missing,
}

/// [`crate::sql::batch_claimable`] on `$dialect`, now being the lease
/// clock's (the database's time plus `$offset`) for connection `$conn`.
macro_rules! claimable {
    ($conn:expr, $dialect:expr, $offset:expr) => {{
        let (before, after) = batch_claimable_around_now($dialect, None);
        sql::<Bool>(&format!(
            "{before}({} + ",
            crate::lease_clock::now_sql(&*$conn)
        ))
        .bind::<BigInt, _>($offset)
        .sql(&format!("){after}"))
    }};
}

/// `idle_for` in microseconds, saturating.
fn idle_micros(idle_for: Duration) -> i64 {
    i64::try_from(idle_for.as_micros()).unwrap_or(i64::MAX)
}

/// The assignments of a won `lease_run`, the run claim's two outcomes in
/// one `UPDATE`: a run with a cancel requested is settled as cancelled
/// (stamped `$now`, lease cleared), any other is leased to `$worker` until
/// the database's time plus `$until`; either way the token rises and the
/// wait ends. `cancel_requested` is assigned last: MySQL evaluates
/// single-table `SET` assignments left to right, so every `CASE` reads the
/// flag the run had (PostgreSQL and SQLite read the old row whatever the
/// order).
macro_rules! lease_set {
    ($conn:expr, $now:expr, $worker:expr, $until:expr) => {
        (
            runs::status.eq(case_when(
                runs::cancel_requested,
                RunStatus::Cancelled.as_str().into_sql::<Text>(),
            )
            .otherwise(runs::status)),
            runs::updated_at.eq(case_when(runs::cancel_requested, $now.into_sql::<BigInt>())
                .otherwise(runs::updated_at)),
            runs::lease_token.eq(runs::lease_token + 1),
            runs::lease_owner.eq(case_when(
                runs::cancel_requested,
                None::<String>.into_sql::<Nullable<Text>>(),
            )
            .otherwise(Some($worker).into_sql::<Nullable<Text>>())),
            runs::lease_expires_at.eq(case_when(
                runs::cancel_requested,
                None::<i64>.into_sql::<Nullable<BigInt>>(),
            )
            .otherwise(db_time!($conn, $until))),
            runs::wake_at.eq(None::<i64>),
            runs::waiting_on.eq(None::<String>),
            runs::cancel_requested.eq(false),
        )
    };
}

impl RecoveryStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(idle_ms = idle_for.as_millis(), limit = limit))]
    async fn undispatched_steps(
        &self,
        idle_for: Duration,
        limit: u32,
    ) -> Result<Vec<UndispatchedStep>> {
        let op = "undispatched_steps";
        // One clock: now is the lease clock's (the database's), read in
        // the statement, for the cutoff and for a retry's delay alike.
        let offset = self.lease_offset();
        let ago = idle_micros(idle_for);
        // `created_at < cutoff` follows from `updated_at < cutoff` (a row is
        // never updated before it is created) and bounds the walk of the
        // claimable index, which is in `(created_at, id)` order.
        let rows: Vec<UndispatchedRow> = on_connection!(self, op, |conn| steps::table
            .filter(claimable!(conn, self.dialect(), offset))
            .filter(
                steps::updated_at
                    .nullable()
                    .lt(db_time!(conn, offset - ago))
            )
            .filter(
                steps::created_at
                    .nullable()
                    .lt(db_time!(conn, offset - ago))
            )
            .filter(exists(
                runs::table
                    .filter(runs::id.eq(steps::run_id))
                    .filter(runs::status.eq_any(leasable_texts()))
                    .select(runs::id),
            ))
            .order((steps::created_at, steps::id))
            .limit(i64::from(effective_limit(limit)))
            .select((
                steps::run_id,
                steps::id,
                steps::name,
                steps::status,
                steps::updated_at,
            ))
            .load(conn)
            .await)?;
        let found = rows
            .into_iter()
            .map(UndispatchedStep::try_from)
            .collect::<Result<Vec<_>>>()?;
        tracing::debug!(found = found.len(), "undispatched steps");
        Ok(found)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(idle_ms = idle_for.as_millis(), limit = limit))]
    async fn stalled_runs(&self, idle_for: Duration, limit: u32) -> Result<Vec<StalledRun>> {
        let op = "stalled_runs";
        let offset = self.lease_offset();
        // One clock: the cutoff on the lease clock (the database's).
        let cutoff = offset.saturating_sub(idle_micros(idle_for));
        // A literal, not a bind: the predicate of the running-runs index.
        let running = format!("status = '{}'", RunStatus::Running.as_str());
        // A step a worker has, or one the run sleeps on.
        let busy = vec![StepStatus::Running.as_str(), StepStatus::Scheduled.as_str()];
        let rows: Vec<StalledRow> = on_connection!(self, op, |conn| runs::table
            .filter(sql::<Bool>(&running))
            .filter(runs::updated_at.nullable().lt(db_time!(conn, cutoff)))
            .filter(
                runs::lease_expires_at
                    .is_null()
                    .or(runs::lease_expires_at.le(db_time!(conn, offset))),
            )
            .filter(runs::waiting_on.is_null())
            .filter(
                runs::wake_at
                    .is_null()
                    .or(runs::wake_at.le(db_time!(conn, offset))),
            )
            .filter(not(exists(
                steps::table
                    .filter(steps::run_id.eq(runs::id))
                    .filter(
                        steps::updated_at
                            .nullable()
                            .ge(db_time!(conn, cutoff))
                            .or(steps::status.eq_any(busy.clone()).nullable()),
                    )
                    .select(steps::id),
            )))
            .order((runs::updated_at, runs::id))
            .limit(i64::from(effective_limit(limit)))
            .select((
                runs::id,
                runs::updated_at,
                steps::table
                    .filter(steps::run_id.eq(runs::id))
                    .select(diesel::dsl::max(steps::updated_at))
                    .single_value(),
            ))
            .load(conn)
            .await)?;
        let found = rows
            .into_iter()
            .map(|(id, updated_at, steps_at)| {
                Ok(StalledRun {
                    run: parse_id("run id", &id, &id)?,
                    last_activity: Timestamp::from_micros(
                        steps_at.map_or(updated_at, |at| at.max(updated_at)),
                    ),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        tracing::debug!(found = found.len(), "stalled runs");
        Ok(found)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(limit = limit))]
    async fn expire_step_claims(&self, limit: u32) -> Result<Vec<ExpiredClaim>> {
        let rows: Vec<ExpiredRow> = by_dialect!(self, expire_step_claims(effective_limit(limit)))?;
        let mut expired = rows
            .into_iter()
            .map(ExpiredClaim::try_from)
            .collect::<Result<Vec<_>>>()?;
        expired.sort_by_key(|claim| (claim.claimed_until, claim.step));
        if !expired.is_empty() {
            tracing::info!(
                expired = expired.len(),
                retrying = expired.iter().filter(|c| c.retrying).count(),
                "expired step claims taken back"
            );
        }
        Ok(expired)
    }
}

/// A step whose claim a dialect's expiry took back, as it read it: the
/// step, its run and name, the attempt that failed, its retries and when
/// the claim had run out.
#[derive(Debug, diesel::QueryableByName, Queryable)]
pub(crate) struct ExpiredRow {
    #[diesel(sql_type = Text)]
    pub id: String,
    #[diesel(sql_type = Text)]
    pub run_id: String,
    #[diesel(sql_type = Text)]
    pub name: String,
    #[diesel(sql_type = BigInt)]
    pub current_attempt: i64,
    #[diesel(sql_type = BigInt)]
    pub retries: i64,
    #[diesel(sql_type = BigInt)]
    pub expired_at: i64,
}

impl TryFrom<ExpiredRow> for ExpiredClaim {
    type Error = Error;

    fn try_from(row: ExpiredRow) -> Result<Self> {
        let key = row.id.clone();
        let attempt = to_u32("step attempt", &key, row.current_attempt)?;
        let retries = to_u32("step retries", &key, row.retries)?;
        Ok(Self {
            run: parse_id("step run id", &key, &row.run_id)?,
            step: parse_id("step id", &key, &row.id)?,
            name: row.name,
            attempt,
            claimed_until: Timestamp::from_micros(row.expired_at),
            retrying: RetryPolicy::with_retries(retries).has_attempts_left(attempt),
        })
    }
}

/// The typed expiry's pick (MySQL, SQLite): at most `$limit` running steps
/// whose claim ran out on the database's clock plus `$offset`, first
/// expired first (by the deadline index), as [`ExpiredRow`]s. MySQL adds
/// its row locks to it.
macro_rules! expired_claims_impl {
    ($conn:expr, $offset:expr, $limit:expr) => {
        $crate::schema::flowstate_steps::table
            .filter($crate::schema::flowstate_steps::claimed_until.is_not_null())
            .filter(
                $crate::schema::flowstate_steps::claimed_until
                    .le($crate::store::db_time!($conn, $offset)),
            )
            .order((
                $crate::schema::flowstate_steps::claimed_until,
                $crate::schema::flowstate_steps::id,
            ))
            .limit(i64::from($limit))
            .select((
                $crate::schema::flowstate_steps::id,
                $crate::schema::flowstate_steps::run_id,
                $crate::schema::flowstate_steps::name,
                $crate::schema::flowstate_steps::current_attempt,
                $crate::schema::flowstate_steps::retries,
                diesel::dsl::sql::<diesel::sql_types::BigInt>("claimed_until"),
            ))
    };
}
pub(crate) use expired_claims_impl as expired_claims;

/// The typed expiry's write (MySQL, SQLite): the picked steps `$ids`, still
/// running, fail with core's claim-expired error stamped `$now`, their
/// deadline cleared; the history upsert follows.
macro_rules! fail_expired_impl {
    ($ids:expr, $now:expr) => {
        diesel::update(
            $crate::schema::flowstate_steps::table
                .filter($crate::schema::flowstate_steps::id.eq_any($ids))
                .filter(
                    $crate::schema::flowstate_steps::status
                        .eq(flowstate_core::StepStatus::Running.as_str()),
                ),
        )
        .set((
            $crate::schema::flowstate_steps::status.eq(flowstate_core::StepStatus::Failed.as_str()),
            $crate::schema::flowstate_steps::error.eq(Some($crate::schema::JsonText(
                flowstate_core::step_claim::claim_expired_error().to_string(),
            ))),
            $crate::schema::flowstate_steps::updated_at.eq($now),
            $crate::schema::flowstate_steps::claimed_until.eq(None::<i64>),
        ))
    };
}
pub(crate) use fail_expired_impl as fail_expired;

impl RunRecoveryStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, worker = %worker))]
    async fn lease_run(
        &self,
        run: RunId,
        worker: &str,
        lease_for: Duration,
    ) -> Result<Option<RunLease>> {
        let op = "lease_run";
        checks::lease_run(&self.config.limits, worker, lease_for)?;
        let (id, offset, now) = (run.to_string(), self.lease_offset(), self.now());
        let until = offset.saturating_add(lease_micros(lease_for));
        let leased: Leased = by_returning!(self, op, |conn| {
            // One guarded `UPDATE ... RETURNING`: of concurrent calls, the
            // first takes the row lock (SQLite: the write lock) and every
            // later one re-reads the row it wrote, finds its lease taken
            // and matches nothing.
            let row: Option<LeasedRunRow> = diesel::update(
                runs::table
                    .filter(runs::id.eq(&id))
                    .filter(runnable!(conn, offset)),
            )
            .set(lease_set!(conn, now, worker, until))
            .returning(LeasedRunRow::as_select())
            .get_result(conn)
            .await
            .optional()?;
            Ok(match row {
                None => Leased::Refused,
                Some(row) if row.run.status == RunStatus::Cancelled.as_str() => Leased::Cancelled,
                Some(row) => Leased::Won(Box::new(row)),
            })
        },
        mysql: |conn| {
            // MySQL cannot `UPDATE` a table its `WHERE` reads in a subquery
            // (the awake test reads the children), so the run is read
            // locked first, with whether it is runnable; the write and the
            // read-back follow in the same transaction.
            use diesel_async::AsyncConnection;
            conn.transaction(async |conn| {
                let found: Option<(bool, Option<bool>)> = runs::table
                    .filter(runs::id.eq(&id))
                    .select((runs::cancel_requested, runnable!(conn, offset)))
                    .for_update()
                    .first(conn)
                    .await
                    .optional()?;
                let cancel = match found {
                    None => return Ok(Leased::Missing),
                    Some((cancel, Some(true))) => cancel,
                    Some(_) => return Ok(Leased::NotRunnable),
                };
                diesel::update(runs::table.filter(runs::id.eq(&id)))
                    .set(lease_set!(conn, now, worker, until))
                    .execute(conn)
                    .await?;
                if cancel {
                    return Ok(Leased::Cancelled);
                }
                runs::table
                    .filter(runs::id.eq(&id))
                    .select(LeasedRunRow::as_select())
                    .first(conn)
                    .await
                    .map(|row| Leased::Won(Box::new(row)))
            })
            .await
        })?;
        match leased {
            Leased::Won(row) => {
                let lease = RunLease::try_from(*row)?;
                tracing::debug!(token = lease.token, "run leased");
                Ok(Some(lease))
            }
            Leased::Cancelled => {
                tracing::debug!("run cancelled instead of leased");
                Ok(None)
            }
            Leased::NotRunnable => Ok(None),
            Leased::Missing => Err(Error::RunNotFound(run)),
            Leased::Refused => {
                // Not runnable, or missing.
                self.lease_state(run).await?;
                Ok(None)
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(limit = limit))]
    async fn reap_expired_leases(&self, limit: u32) -> Result<Vec<RunId>> {
        let reaped: Vec<(String, i64)> =
            by_dialect!(self, reap_expired_leases(effective_limit(limit)))?;
        let mut reaped = reaped
            .into_iter()
            .map(|(id, expired_at)| Ok((expired_at, parse_id::<RunId>("run id", &id, &id)?)))
            .collect::<Result<Vec<_>>>()?;
        reaped.sort();
        tracing::debug!(reaped = reaped.len(), "expired leases reaped");
        Ok(reaped.into_iter().map(|(_, id)| id).collect())
    }
}

/// The lease-expiry guard of the reaper on a row of `flowstate_runs`, for
/// the dialects whose reap is typed (MySQL, SQLite): a lease is held (the
/// predicate of the expiry index, stated as is so every planner sees it
/// applies) and ran out on the database's clock plus `$offset`. A settled
/// run still holding one (settled by `set_run_status` under its lease) is
/// freed too: the lease has run out like any other.
macro_rules! expired_impl {
    ($conn:expr, $offset:expr) => {
        $crate::schema::flowstate_runs::table
            .filter($crate::schema::flowstate_runs::lease_expires_at.is_not_null())
            .filter(
                $crate::schema::flowstate_runs::lease_expires_at
                    .le($crate::store::db_time!($conn, $offset)),
            )
    };
}
pub(crate) use expired_impl as expired;

/// The typed reapers' pick (MySQL, SQLite): at most `$limit` expired
/// leases, first expired first (by the expiry index), each run's id with
/// the expiry the answer reports. MySQL adds its row locks to it.
macro_rules! expired_first_impl {
    ($conn:expr, $offset:expr, $limit:expr) => {
        $crate::store::expired!($conn, $offset)
            .order((
                $crate::schema::flowstate_runs::lease_expires_at,
                $crate::schema::flowstate_runs::id,
            ))
            .limit(i64::from($limit))
            .select((
                $crate::schema::flowstate_runs::id,
                $crate::schema::flowstate_runs::lease_expires_at,
            ))
    };
}
pub(crate) use expired_first_impl as expired_first;

/// The typed reapers' `UPDATE` (MySQL, SQLite): frees the leases of the
/// runs `$ids` the pick answered.
macro_rules! free_leases_impl {
    ($ids:expr) => {
        diesel::update(
            $crate::schema::flowstate_runs::table
                .filter($crate::schema::flowstate_runs::id.eq_any($ids)),
        )
        .set((
            $crate::schema::flowstate_runs::lease_owner.eq(None::<String>),
            $crate::schema::flowstate_runs::lease_expires_at.eq(None::<i64>),
        ))
    };
}
pub(crate) use free_leases_impl as free_leases;

/// The typed reapers' answer from what their pick read: each run and its
/// old expiry (never null: the pick takes held leases only).
pub(crate) fn reaped(picked: Vec<(String, Option<i64>)>) -> Vec<(String, i64)> {
    picked
        .into_iter()
        .map(|(id, at)| (id, at.unwrap_or_default()))
        .collect()
}
