//! [`RecoveryStore`] and [`RunRecoveryStore`] for [`MemoryStore`]: the
//! recovery rules of [`flowstate_core::recovery`] applied to every row.
//!
//! A database answers these queries from an index; the reference backend
//! reads everything, because what it is for is saying what the answer is.

use std::collections::HashMap;
use std::time::Duration;

use flowstate_core::ports::checks;
use flowstate_core::ports::{RecoveryStore, RunRecoveryStore};
use flowstate_core::recovery::{
    effective_limit, idle_cutoff, is_stalled, is_undispatched, stalled_run,
};
use flowstate_core::step_claim::{claim_expired_error, is_expired};
use flowstate_core::{
    ExpiredClaim, Result, RunId, RunLease, StalledRun, Step, StepId, StepStatus, Timestamp,
    UndispatchedStep,
};

use super::MemoryStore;

impl RecoveryStore for MemoryStore {
    async fn undispatched_steps(
        &self,
        idle_for: Duration,
        limit: u32,
    ) -> Result<Vec<UndispatchedStep>> {
        // One clock: idleness and the retry delay on the lease clock, not
        // on the clock of the handle that asks.
        let now = self.lease_clock.now();
        let cutoff = idle_cutoff(now, idle_for);
        let tables = self.lock();
        let mut found: Vec<&Step> = tables
            .steps
            .values()
            .filter(|step| {
                tables
                    .runs
                    .get(&step.run)
                    .is_some_and(|run| is_undispatched(step, run.status, cutoff, now))
            })
            .collect();
        found.sort_by_key(|step| (step.created_at, step.id));
        Ok(found
            .into_iter()
            .take(effective_limit(limit) as usize)
            .map(UndispatchedStep::of)
            .collect())
    }

    async fn stalled_runs(&self, idle_for: Duration, limit: u32) -> Result<Vec<StalledRun>> {
        let lease_now = self.lease_clock.now();
        let cutoff = idle_cutoff(lease_now, idle_for);
        let tables = self.lock();
        let mut steps_of: HashMap<RunId, Vec<Step>> = HashMap::new();
        for step in tables.steps.values() {
            steps_of.entry(step.run).or_default().push(step.clone());
        }
        let mut found: Vec<_> = tables
            .runs
            .values()
            .filter_map(|run| {
                let steps = steps_of.get(&run.id).map_or(&[][..], Vec::as_slice);
                let lease = tables.leases.get(&run.id).map(|row| &row.state);
                is_stalled(run, steps, lease, cutoff, lease_now)
                    .then(|| (run.updated_at, run.id, stalled_run(run, steps)))
            })
            .collect();
        found.sort_by_key(|(updated_at, id, _)| (*updated_at, *id));
        Ok(found
            .into_iter()
            .take(effective_limit(limit) as usize)
            .map(|(_, _, stalled)| stalled)
            .collect())
    }

    async fn expire_step_claims(&self, limit: u32) -> Result<Vec<ExpiredClaim>> {
        let lease_now = self.lease_clock.now();
        let now = self.now();
        let mut tables = self.lock();
        let mut expired: Vec<(Timestamp, StepId)> = tables
            .steps
            .values()
            .filter(|step| is_expired(step, lease_now))
            .map(|step| (step.claimed_until.unwrap_or(lease_now), step.id))
            .collect();
        expired.sort();
        expired.truncate(effective_limit(limit) as usize);
        if !expired.is_empty() {
            tables.check_history_writes()?;
        }
        let mut taken = Vec::with_capacity(expired.len());
        for (claimed_until, id) in expired {
            let mut step = tables.step(id)?.clone();
            step.status = StepStatus::Failed;
            step.error = Some(claim_expired_error());
            step.updated_at = now;
            taken.push(ExpiredClaim {
                run: step.run,
                step: step.id,
                name: step.name.clone(),
                attempt: step.attempt,
                claimed_until,
                retrying: step.retry.has_attempts_left(step.attempt),
            });
            tables.save_step(step, now);
        }
        Ok(taken)
    }
}

impl RunRecoveryStore for MemoryStore {
    async fn lease_run(
        &self,
        run: RunId,
        worker: &str,
        lease_for: Duration,
    ) -> Result<Option<RunLease>> {
        checks::lease_run(&self.limits, worker, lease_for)?;
        self.lease_one(run, worker, lease_for)
    }

    async fn reap_expired_leases(&self, limit: u32) -> Result<Vec<RunId>> {
        let now = self.lease_clock.now();
        let mut tables = self.lock();
        let mut expired: Vec<_> = tables
            .leases
            .iter()
            .filter(|(_, row)| {
                row.state.worker.is_some() && row.state.expires_at.is_some_and(|at| at <= now)
            })
            .map(|(id, row)| (row.state.expires_at, *id))
            .collect();
        expired.sort();
        expired.truncate(effective_limit(limit) as usize);
        for (_, id) in &expired {
            let row = tables.leases.get_mut(id).expect("listed above");
            row.state.worker = None;
            row.state.expires_at = None;
        }
        Ok(expired.into_iter().map(|(_, id)| id).collect())
    }
}
