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

use diesel::dsl::{exists, not};
use diesel::prelude::*;
use diesel::sql_types::Bool;
use diesel_async::RunQueryDsl;

use flowstate_core::lease::lease_micros;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use flowstate_core::ports::RunLeaseStore;
use flowstate_core::ports::checks;
use flowstate_core::ports::{RecoveryStore, RunRecoveryStore};
use flowstate_core::recovery::effective_limit;
use flowstate_core::{
    Error, ExpiredClaim, Result, RunId, RunLease, RunStatus, StalledRun, StepStatus, Timestamp,
    UndispatchedStep,
};

use crate::backend::{by_dialect, on_connection};
use crate::dialect::{Connection, RunLeasing};
use crate::rows::ExpiredRow;
use crate::rows::leases::Leased;
use crate::rows::{parse_id, parse_status};
use crate::schema::{flowstate_runs as runs, flowstate_steps as steps};
use crate::sql::batch_claimable_around_now;
use crate::sql::bound::{BoundSql, literal_in};
use crate::sql::typed::{db_time, now_sql, unsettled};
use crate::sql::waits::AwakeAt;
use crate::store::DieselStore;

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

/// [`crate::sql::batch_claimable`] on connection `C`'s dialect, now being
/// the lease clock's: the database's time plus `offset` (bound).
fn claimable<C: Connection>(_conn: &C, offset: i64) -> AwakeAt {
    let (before, after) = batch_claimable_around_now(C::CLAIMABLE_COLUMN, None);
    let now_us = C::NOW_US;
    BoundSql::text(format!("{before}({now_us} + "))
        .bind(offset)
        .sql(format!("){after}"))
}

/// `idle_for` in microseconds, saturating.
fn idle_micros(idle_for: Duration) -> i64 {
    i64::try_from(idle_for.as_micros()).unwrap_or(i64::MAX)
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
            .filter(claimable(&*conn, offset))
            .filter(
                steps::updated_at
                    .nullable()
                    .lt(db_time(now_sql(&*conn), offset - ago))
            )
            .filter(
                steps::created_at
                    .nullable()
                    .lt(db_time(now_sql(&*conn), offset - ago))
            )
            .filter(exists(
                runs::table
                    .filter(runs::id.eq(steps::run_id))
                    .filter(unsettled())
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
        let running = BoundSql::<Bool>::text(format!("status = '{}'", RunStatus::Running.as_str()));
        // A step a worker has, or one the run sleeps on.
        let busy = literal_in(
            steps::status,
            &[StepStatus::Running.as_str(), StepStatus::Scheduled.as_str()],
        );
        let rows: Vec<StalledRow> = on_connection!(self, op, |conn| runs::table
            .filter(running.clone())
            .filter(
                runs::updated_at
                    .nullable()
                    .lt(db_time(now_sql(&*conn), cutoff))
            )
            .filter(
                runs::lease_expires_at
                    .is_null()
                    .or(runs::lease_expires_at.le(db_time(now_sql(&*conn), offset))),
            )
            .filter(runs::waiting_on.is_null())
            .filter(
                runs::wake_at
                    .is_null()
                    .or(runs::wake_at.le(db_time(now_sql(&*conn), offset))),
            )
            .filter(not(exists(
                steps::table
                    .filter(steps::run_id.eq(runs::id))
                    .filter(
                        steps::updated_at
                            .nullable()
                            .ge(db_time(now_sql(&*conn), cutoff))
                            .or(busy.clone().nullable()),
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
        let lease = RunLeasing {
            id: &id,
            worker,
            now,
            offset,
            until,
        };
        let leased = on_connection!(self, op, |conn| conn.lease_run(lease).await)?;
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
            #[cfg(feature = "mysql")]
            Leased::NotRunnable => Ok(None),
            #[cfg(feature = "mysql")]
            Leased::Missing => Err(Error::RunNotFound(run)),
            #[cfg(any(feature = "postgres", feature = "sqlite"))]
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
