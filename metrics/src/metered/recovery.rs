//! [`RecoveryStore`] and [`RunRecoveryStore`] for [`Metered`]: step claims
//! taken back, leases taken by name and leases reaped. What a sweep does
//! with what it finds is counted by `flowstate-recovery`
//! ([`SWEEP_FINDS`](names::SWEEP_FINDS)).

use std::time::Duration;

use flowstate_core::ports::{RecoveryStore, RunRecoveryStore};
use flowstate_core::{ExpiredClaim, Result, RunId, RunLease, StalledRun, UndispatchedStep};

use super::Metered;
use crate::names;
use crate::record::count;

impl<S: RecoveryStore> RecoveryStore for Metered<S> {
    async fn undispatched_steps(
        &self,
        idle_for: Duration,
        limit: u32,
    ) -> Result<Vec<UndispatchedStep>> {
        self.inner.undispatched_steps(idle_for, limit).await
    }

    async fn stalled_runs(&self, idle_for: Duration, limit: u32) -> Result<Vec<StalledRun>> {
        self.inner.stalled_runs(idle_for, limit).await
    }

    async fn expire_step_claims(&self, limit: u32) -> Result<Vec<ExpiredClaim>> {
        let answer = self.inner.expire_step_claims(limit).await;
        if let Ok(expired) = &answer {
            count(names::CLAIMS_EXPIRED, expired.len() as u64);
        }
        answer
    }
}

impl<S: RunRecoveryStore> RunRecoveryStore for Metered<S> {
    async fn lease_run(
        &self,
        run: RunId,
        worker: &str,
        lease_for: Duration,
    ) -> Result<Option<RunLease>> {
        let answer = self.inner.lease_run(run, worker, lease_for).await;
        if let Ok(Some(_)) = &answer {
            count(names::LEASES_TAKEN, 1);
        }
        answer
    }

    async fn reap_expired_leases(&self, limit: u32) -> Result<Vec<RunId>> {
        let answer = self.inner.reap_expired_leases(limit).await;
        if let Ok(reaped) = &answer {
            count(names::LEASES_REAPED, reaped.len() as u64);
        }
        answer
    }
}
