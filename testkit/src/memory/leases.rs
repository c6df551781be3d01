//! [`RunLeaseStore`] for [`MemoryStore`]: leases with fencing tokens, on the
//! store's lease clock.
//!
//! The memory store's "database clock" is its `lease_clock`, shared by every
//! handle on the same tables ([`MemoryStore::sharing_with_clock`]); each
//! handle's own `clock` only stamps rows, as a worker's clock would.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::lease::{fails_run, leasable_statuses};
use flowstate_core::ports::checks;
use flowstate_core::ports::{ChildRunStore, RunLeaseStore, RunWaitStore};
use flowstate_core::wait::CHILDREN;
use flowstate_core::{
    Clock, Error, Inserted, LeaseState, NewChild, Release, Released, Result, Run, RunId, RunLease,
    RunOutcome, RunStatus, Timestamp, Wait,
};
use serde_json::Value;

use super::{MemoryStore, Tables};
use crate::harness::Pick;

/// A run's lease bookkeeping, as the columns a database keeps.
#[derive(Clone, Debug, Default)]
pub(super) struct LeaseRow {
    pub(super) state: LeaseState,
}

impl LeaseRow {
    /// Whether no lease holds the run at `now`.
    pub(super) fn is_free(&self, now: Timestamp) -> bool {
        self.state.expires_at.is_none_or(|expires| expires <= now)
    }
}

impl Tables {
    /// Whether `run` may be leased at lease-clock `now`: not settled, its
    /// lease free or expired, and awake.
    pub(super) fn is_runnable(&self, run: &Run, now: Timestamp) -> bool {
        leasable_statuses().contains(&run.status)
            && self
                .leases
                .get(&run.id)
                .is_none_or(|row| row.is_free(now) && self.is_awake(run.id, &row.state, now))
    }

    /// Takes the lease of runnable run `id` for `worker`: raises the token
    /// and clears the wait, or settles the run as cancelled if a cancel was
    /// requested (then `None`).
    fn take_lease(
        &mut self,
        id: RunId,
        worker: &str,
        lease_for: Duration,
        now: Timestamp,
        stamp: Timestamp,
    ) -> Option<RunLease> {
        let Tables { runs, leases, .. } = self;
        let run = runs.get_mut(&id).expect("the caller found it");
        let row = leases.entry(id).or_default();
        row.state.token += 1;
        row.state.wake_at = None;
        row.state.waiting_on = None;
        if row.state.cancel_requested {
            row.state.cancel_requested = false;
            row.state.worker = None;
            row.state.expires_at = None;
            run.status = RunStatus::Cancelled;
            run.updated_at = stamp;
            return None;
        }
        let expires_at = now.plus(lease_for);
        row.state.worker = Some(worker.to_owned());
        row.state.expires_at = Some(expires_at);
        Some(RunLease {
            run: run.clone(),
            token: row.state.token,
            worker: worker.to_owned(),
            expires_at,
            failures: row.state.failures,
        })
    }

    /// Whether a run in `state` is not asleep or waiting at `now`: its
    /// time has come, or the signal it waits on is there.
    fn is_awake(&self, run: RunId, state: &LeaseState, now: Timestamp) -> bool {
        let time_come = state.wake_at.is_some_and(|at| at <= now);
        match &state.waiting_on {
            Some(name) if name == CHILDREN => {
                time_come
                    || self
                        .runs
                        .values()
                        .all(|child| child.parent != Some(run) || child.status.is_settled())
            }
            Some(name) => time_come || self.signals.contains_key(&(run, name.clone())),
            None => state.wake_at.is_none() || time_come,
        }
    }
}

impl MemoryStore {
    /// Another handle on the same tables and lease clock, stamping rows
    /// from `clock`: a worker on another machine, whose clock may be off.
    #[must_use]
    pub fn sharing_with_clock(&self, clock: Arc<dyn Clock>) -> Self {
        Self {
            tables: Arc::clone(&self.tables),
            clock,
            lease_clock: Arc::clone(&self.lease_clock),
            limits: self.limits,
            claim_timeout: self.claim_timeout,
        }
    }

    /// The same store, measuring leases on `clock` instead of the clock
    /// it stamps rows with.
    #[must_use]
    pub fn with_lease_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.lease_clock = clock;
        self
    }

    fn claim_many(&self, worker: &str, n: u32, lease_for: Duration) -> Result<Vec<RunLease>> {
        let now = self.lease_clock.now();
        let stamp = self.now();
        let mut tables = self.lock();
        let mut runnable: Vec<_> = tables
            .runs
            .values()
            .filter(|run| tables.is_runnable(run, now))
            .map(|run| (run.created_at, run.id))
            .collect();
        runnable.sort();
        if !runnable.is_empty() && n > 0 {
            tables.strike_after_pick(Pick::Runs, "claim_run")?;
        }
        let mut claimed = Vec::new();
        for (_, id) in runnable {
            if claimed.len() == n as usize {
                break;
            }
            claimed.extend(tables.take_lease(id, worker, lease_for, now, stamp));
        }
        Ok(claimed)
    }

    /// Leases run `id` if it is runnable at lease-clock `now` ([`Tables::is_runnable`]),
    /// as one claim does (`None` when it is not, or was cancelled instead).
    pub(super) fn lease_one(
        &self,
        id: RunId,
        worker: &str,
        lease_for: Duration,
    ) -> Result<Option<RunLease>> {
        let now = self.lease_clock.now();
        let stamp = self.now();
        let mut tables = self.lock();
        let runnable = tables.is_runnable(tables.run(id)?, now);
        Ok(if runnable {
            tables.take_lease(id, worker, lease_for, now, stamp)
        } else {
            None
        })
    }

    /// The lease row of `run` if `token` holds its lease at `now`.
    /// [`RunLeaseStore::finish`], recording `output` when given.
    fn finish_under(
        &self,
        run: RunId,
        token: u64,
        outcome: &RunOutcome,
        output: Option<&Value>,
    ) -> Result<()> {
        checks::finish(&self.limits, outcome)?;
        if let Some(output) = output {
            checks::run_output(&self.limits, output)?;
        }
        let now = self.lease_clock.now();
        let stamp = self.now();
        let mut tables = self.lock();
        let row = Self::held(&mut tables, run, token, now)?;
        row.state.worker = None;
        row.state.expires_at = None;
        row.state.failure_reason = outcome.reason().map(ToOwned::to_owned);
        let record = tables.runs.get_mut(&run).expect("held checked it");
        record.status = outcome.status();
        record.updated_at = stamp;
        if let Some(output) = output {
            record.output = Some(output.clone());
        }
        Ok(())
    }

    fn held(tables: &mut Tables, run: RunId, token: u64, now: Timestamp) -> Result<&mut LeaseRow> {
        tables.run(run)?;
        let row = tables.leases.get_mut(&run);
        match row {
            Some(row)
                if row.state.token == token
                    && row.state.worker.is_some()
                    && row.state.expires_at.is_some_and(|at| at > now) =>
            {
                Ok(row)
            }
            _ => Err(Error::LeaseLost { run, token }),
        }
    }
}

impl RunLeaseStore for MemoryStore {
    async fn claim_run(&self, worker: &str, lease_for: Duration) -> Result<Option<RunLease>> {
        checks::claim_run(&self.limits, worker, lease_for)?;
        Ok(self.claim_many(worker, 1, lease_for)?.pop())
    }

    async fn claim_runs(&self, worker: &str, n: u32, lease_for: Duration) -> Result<Vec<RunLease>> {
        checks::claim_runs(&self.limits, worker, n, lease_for)?;
        self.claim_many(worker, n, lease_for)
    }

    async fn renew(&self, run: RunId, token: u64, lease_for: Duration) -> Result<()> {
        checks::renew(&self.limits, lease_for)?;
        let now = self.lease_clock.now();
        let mut tables = self.lock();
        let row = Self::held(&mut tables, run, token, now)?;
        row.state.expires_at = Some(now.plus(lease_for));
        Ok(())
    }

    async fn finish(&self, run: RunId, token: u64, outcome: RunOutcome) -> Result<()> {
        self.finish_under(run, token, &outcome, None)
    }

    async fn finish_with_output(
        &self,
        run: RunId,
        token: u64,
        outcome: RunOutcome,
        output: &Value,
    ) -> Result<()> {
        self.finish_under(run, token, &outcome, Some(output))
    }

    async fn release(&self, run: RunId, token: u64, release: Release) -> Result<Released> {
        checks::release(&self.limits, &release)?;
        let now = self.lease_clock.now();
        let stamp = self.now();
        let mut tables = self.lock();
        let row = Self::held(&mut tables, run, token, now)?;
        row.state.worker = None;
        row.state.expires_at = None;
        let failed = if let Release::Failure { reason, limit } = release {
            row.state.failures += 1;
            row.state.failure_reason = Some(reason);
            fails_run(row.state.failures, limit)
        } else {
            row.state.failures = 0;
            false
        };
        let failures = row.state.failures;
        let record = tables.runs.get_mut(&run).expect("held checked it");
        if failed {
            record.status = RunStatus::Failed;
            record.updated_at = stamp;
        }
        Ok(Released {
            status: record.status,
            failures,
        })
    }

    async fn request_cancel(&self, run: RunId) -> Result<()> {
        let mut tables = self.lock();
        if !tables.run(run)?.status.is_settled() {
            tables.leases.entry(run).or_default().state.cancel_requested = true;
        }
        Ok(())
    }

    async fn lease_state(&self, run: RunId) -> Result<LeaseState> {
        let tables = self.lock();
        tables.run(run)?;
        Ok(tables
            .leases
            .get(&run)
            .map(|row| row.state.clone())
            .unwrap_or_default())
    }
}

impl RunWaitStore for MemoryStore {
    async fn wait(&self, run: RunId, token: u64, wait: Wait) -> Result<()> {
        checks::wait(&self.limits, &wait)?;
        let now = self.lease_clock.now();
        let mut tables = self.lock();
        let row = Self::held(&mut tables, run, token, now)?;
        row.state.worker = None;
        row.state.expires_at = None;
        row.state.wake_at = wait.wake_after().map(|after| now.plus(after));
        row.state.waiting_on = wait.waiting_on().map(ToOwned::to_owned);
        Ok(())
    }

    async fn signal(&self, run: RunId, name: &str, payload: &Value) -> Result<()> {
        checks::signal(&self.limits, name, payload)?;
        let mut tables = self.lock();
        Self::unsettled(&tables, run)?;
        tables
            .signals
            .insert((run, name.to_owned()), payload.clone());
        Ok(())
    }

    async fn take_signal(&self, run: RunId, token: u64, name: &str) -> Result<Option<Value>> {
        checks::take_signal(&self.limits, name)?;
        let now = self.lease_clock.now();
        let mut tables = self.lock();
        Self::held(&mut tables, run, token, now)?;
        Ok(tables.signals.remove(&(run, name.to_owned())))
    }

    async fn wake_expired(&self) -> Result<u64> {
        let now = self.lease_clock.now();
        let mut tables = self.lock();
        let Tables { runs, leases, .. } = &mut *tables;
        let mut woken = 0;
        for (id, row) in leases.iter_mut() {
            if runs.contains_key(id) && row.state.wake_at.is_some_and(|at| at <= now) {
                row.state.wake_at = None;
                row.state.waiting_on = None;
                woken += 1;
            }
        }
        Ok(woken)
    }
}

impl ChildRunStore for MemoryStore {
    async fn create_children(
        &self,
        parent: RunId,
        children: Vec<NewChild>,
    ) -> Result<Vec<Inserted<Run>>> {
        let runs = checks::create_children(&self.limits, parent, children)?;
        let now = self.now();
        let mut tables = self.lock();
        tables.run(parent)?;
        let mut created = Vec::with_capacity(runs.len());
        for (run, _) in runs {
            let key = run.idempotency_key.clone().expect("children are keyed");
            if let Some(existing) = tables.run_by_key.get(&key) {
                created.push(Inserted {
                    record: tables.runs[existing].clone(),
                    inserted: false,
                });
                continue;
            }
            let record = run.into_run(RunId::generate(), now);
            tables.run_by_key.insert(key, record.id);
            tables.runs.insert(record.id, record.clone());
            tables.run_state.insert(record.id, serde_json::Map::new());
            created.push(Inserted {
                record,
                inserted: true,
            });
        }
        Ok(created)
    }
}
