//! [`RunLeaseStore`] and [`FencedWrites`] for [`Metered`]: leases taken
//! and renewed, renewals that found the lease gone, runs settled by
//! status, and every other call a lease's fence refused.

use std::time::Duration;

use flowstate_core::ports::{FencedWrites, RunLeaseStore};
use flowstate_core::{
    Error, Inserted, LeaseState, NewStep, Release, Released, Result, Run, RunId, RunLease,
    RunOutcome, RunStatus, Step,
};
use serde_json::Value;

use super::Metered;
use super::runs::moved;
use crate::names;
use crate::record::{count, fenced};

impl<S: RunLeaseStore> RunLeaseStore for Metered<S> {
    async fn claim_run(&self, worker: &str, lease_for: Duration) -> Result<Option<RunLease>> {
        let answer = self.inner.claim_run(worker, lease_for).await;
        if let Ok(Some(_)) = &answer {
            count(names::LEASES_TAKEN, 1);
        }
        answer
    }

    async fn claim_runs(&self, worker: &str, n: u32, lease_for: Duration) -> Result<Vec<RunLease>> {
        let answer = self.inner.claim_runs(worker, n, lease_for).await;
        if let Ok(leases) = &answer {
            count(names::LEASES_TAKEN, leases.len() as u64);
        }
        answer
    }

    async fn renew(&self, run: RunId, token: u64, lease_for: Duration) -> Result<()> {
        let answer = self.inner.renew(run, token, lease_for).await;
        match &answer {
            Ok(()) => count(names::LEASES_RENEWED, 1),
            Err(Error::LeaseLost { .. }) => count(names::LEASES_LOST, 1),
            Err(_) => {}
        }
        answer
    }

    async fn finish(&self, run: RunId, token: u64, outcome: RunOutcome) -> Result<()> {
        let to = outcome.status();
        let answer = self.inner.finish(run, token, outcome).await;
        moved(&answer, to);
        fenced(&answer);
        answer
    }

    async fn finish_with_output(
        &self,
        run: RunId,
        token: u64,
        outcome: RunOutcome,
        output: &Value,
    ) -> Result<()> {
        let to = outcome.status();
        let answer = self
            .inner
            .finish_with_output(run, token, outcome, output)
            .await;
        moved(&answer, to);
        fenced(&answer);
        answer
    }

    async fn release(&self, run: RunId, token: u64, release: Release) -> Result<Released> {
        let answer = self.inner.release(run, token, release).await;
        fenced(&answer);
        answer
    }

    async fn request_cancel(&self, run: RunId) -> Result<()> {
        self.inner.request_cancel(run).await
    }

    async fn lease_state(&self, run: RunId) -> Result<LeaseState> {
        self.inner.lease_state(run).await
    }
}

impl<S: FencedWrites> FencedWrites for Metered<S> {
    async fn write_state_fenced(
        &self,
        run: RunId,
        token: u64,
        key: &str,
        value: &Value,
    ) -> Result<()> {
        let answer = self.inner.write_state_fenced(run, token, key, value).await;
        fenced(&answer);
        answer
    }

    async fn insert_step_fenced(&self, token: u64, step: NewStep) -> Result<Inserted<Step>> {
        let answer = self.inner.insert_step_fenced(token, step).await;
        fenced(&answer);
        answer
    }

    async fn set_run_status_fenced(&self, run: RunId, token: u64, to: RunStatus) -> Result<Run> {
        let answer = self.inner.set_run_status_fenced(run, token, to).await;
        moved(&answer, to);
        fenced(&answer);
        answer
    }
}
