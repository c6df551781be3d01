//! [`RunLeaseStore`] for [`DieselStore`]: renew, finish, release, cancel
//! and the lease read, written once in the diesel DSL; the claim, which
//! differs per dialect, is in `{postgres,mysql,sqlite}/leases.rs`.
//!
//! Every lease write is one `UPDATE` guarded by the fencing token, the
//! holder being set, the run unsettled and the lease unexpired on the
//! database's clock ([`crate::lease_clock`]); its affected rows decide.
//! Only when it matched nothing is the run read, to tell
//! [`Error::RunNotFound`] from [`Error::LeaseLost`].

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::Value;

use flowstate_core::lease::lease_micros;
use flowstate_core::ports::RunLeaseStore;
use flowstate_core::ports::checks;
use flowstate_core::{
    Error, LeaseState, Release, Released, Result, RunId, RunLease, RunOutcome, RunStatus,
};

use super::runs::checked_output;
use crate::backend::{by_dialect, on_connection};
use crate::cached::CacheExt;
use crate::dialect::{Connection, Fence, Held, LeaseRelease};
use crate::rows::leases::{LeaseRow, claimed};
use crate::rows::parse_status;
use crate::schema::flowstate_runs as runs;
use crate::sql::typed::{db_time, held, json_or_stored, now_sql, unsettled};
use crate::store::DieselStore;

/// A fencing token as stored (tokens never exceed `i64::MAX`: each claim
/// adds one); a larger one can hold no lease and matches nothing.
pub(super) fn stored_token(token: u64) -> i64 {
    i64::try_from(token).unwrap_or(-1)
}

impl DieselStore {
    /// Why a guarded lease write of `token` matched nothing: the run is
    /// missing, or the lease is lost (error path only).
    pub(super) async fn lease_refused<T>(
        &self,
        op: &'static str,
        run: RunId,
        token: u64,
    ) -> Result<T> {
        let id = run.to_string();
        let found: Option<String> = on_connection!(self, op, |conn| runs::table
            .find(&id)
            .select(runs::id)
            .first(conn)
            .await
            .optional())?;
        Err(match found {
            Some(_) => Error::LeaseLost { run, token },
            None => Error::RunNotFound(run),
        })
    }

    /// Up to `n` runs leased to `worker` by the dialect's claim, oldest
    /// first; its input already checked.
    async fn leased_runs(
        &self,
        worker: &str,
        n: u32,
        lease_for: Duration,
    ) -> Result<Vec<RunLease>> {
        let leases = claimed(by_dialect!(self, claim_runs(worker, n, lease_for))?)?;
        tracing::debug!(claimed = leases.len(), "runs claimed");
        Ok(leases)
    }

    /// The lease clock offset, in microseconds.
    pub(super) fn lease_offset(&self) -> i64 {
        self.config.lease_offset_us()
    }
}

impl RunLeaseStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(worker = %worker))]
    async fn claim_run(&self, worker: &str, lease_for: Duration) -> Result<Option<RunLease>> {
        checks::claim_run(&self.config.limits, worker, lease_for)?;
        let leases = self.leased_runs(worker, 1, lease_for).await?;
        Ok(leases.into_iter().next())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(worker = %worker, n))]
    async fn claim_runs(&self, worker: &str, n: u32, lease_for: Duration) -> Result<Vec<RunLease>> {
        checks::claim_runs(&self.config.limits, worker, n, lease_for)?;
        self.leased_runs(worker, n, lease_for).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, token))]
    async fn renew(&self, run: RunId, token: u64, lease_for: Duration) -> Result<()> {
        checks::renew(&self.config.limits, lease_for)?;
        let (id, offset) = (run.to_string(), self.lease_offset());
        let until = offset.saturating_add(lease_micros(lease_for));
        let renewed = on_connection!(self, "renew", |conn| diesel::update(held(
            now_sql(&*conn),
            &id,
            stored_token(token),
            offset
        ))
        .set(runs::lease_expires_at.eq(db_time(now_sql(&*conn), until)))
        .cached()
        .execute(conn)
        .await)?;
        if renewed == 0 {
            return self.lease_refused("renew", run, token).await;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, token))]
    async fn finish(&self, run: RunId, token: u64, outcome: RunOutcome) -> Result<()> {
        self.finish_under(run, token, outcome, None).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, token))]
    async fn finish_with_output(
        &self,
        run: RunId,
        token: u64,
        outcome: RunOutcome,
        output: &Value,
    ) -> Result<()> {
        self.finish_under(run, token, outcome, Some(output)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, token))]
    async fn release(&self, run: RunId, token: u64, release: Release) -> Result<Released> {
        checks::release(&self.config.limits, &release)?;
        let (id, offset, now) = (run.to_string(), self.lease_offset(), self.now());
        let lease = Held {
            id: &id,
            fence: Fence {
                token: stored_token(token),
                offset,
            },
        };
        let release = if let Release::Failure { reason, limit } = &release {
            // `fails_run` in SQL: a limit of 0 reads as 1.
            LeaseRelease::Failure {
                reason,
                limit: i64::from((*limit).max(1)),
                now,
            }
        } else {
            LeaseRelease::Yield
        };
        // The held-guarded release, answering the run's status and failure
        // count afterwards.
        let released: Option<(String, i64)> = on_connection!(self, "release", |conn| conn
            .release_lease(lease, release)
            .await)?;
        let Some((status, failures)) = released else {
            return self.lease_refused("release", run, token).await;
        };
        let released = Released {
            status: parse_status::<RunStatus>(&id, &status)?,
            failures: u32::try_from(failures).unwrap_or(u32::MAX),
        };
        tracing::debug!(status = %released.status, failures = released.failures, "run released");
        Ok(released)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    async fn request_cancel(&self, run: RunId) -> Result<()> {
        let id = run.to_string();
        let marked = on_connection!(self, "request_cancel", |conn| diesel::update(
            runs::table.filter(runs::id.eq(&id)).filter(unsettled())
        )
        .set(runs::cancel_requested.eq(true))
        .cached()
        .execute(conn)
        .await)?;
        if marked == 0 {
            // Settled (nothing to do) or missing.
            self.lease_state(run).await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    async fn lease_state(&self, run: RunId) -> Result<LeaseState> {
        let id = run.to_string();
        let row: Option<LeaseRow> = on_connection!(self, "lease_state", |conn| runs::table
            .find(&id)
            .select(LeaseRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(LeaseState::from).ok_or(Error::RunNotFound(run))
    }
}

impl DieselStore {
    /// [`RunLeaseStore::finish`], recording `output` when given (a `NULL`
    /// bound keeps the stored one: one statement text either way).
    async fn finish_under(
        &self,
        run: RunId,
        token: u64,
        outcome: RunOutcome,
        output: Option<&Value>,
    ) -> Result<()> {
        checks::finish(&self.config.limits, &outcome)?;
        let output = checked_output(&self.config.limits, output)?;
        let output = output.as_ref();
        let (id, offset, now) = (run.to_string(), self.lease_offset(), self.now());
        let finished = on_connection!(self, "finish", |conn| diesel::update(held(
            now_sql(&*conn),
            &id,
            stored_token(token),
            offset
        ))
        .set((
            runs::status.eq(outcome.status().as_str()),
            runs::updated_at.eq(now),
            runs::lease_owner.eq(None::<String>),
            runs::lease_expires_at.eq(None::<i64>),
            runs::failure_reason.eq(outcome.reason()),
            runs::output.eq(json_or_stored(output, runs::output)),
        ))
        .cached()
        .execute(conn)
        .await)?;
        if finished == 0 {
            return self.lease_refused("finish", run, token).await;
        }
        tracing::debug!(status = %outcome.status(), "run finished");
        Ok(())
    }
}
