//! Taking back expired claims is atomic with the history it writes and
//! across the steps it takes: with every history write failing, or only
//! those of one step in the middle of the expiry's order,
//! `expire_step_claims` answers an error and leaves every step running in
//! its attempt with its history as it was; once history writes work again
//! one expiry takes back every claim.

use std::time::Duration;

use flowstate_core::StepStatus;
use flowstate_core::ports::RecoveryStore;
use flowstate_core::step_claim::claim_expired_error;

use crate::cases::steps::atomicity::{Fault, refused_under};
use crate::cases::support::dense::{Start, dense_steps, read_back};
use crate::{Hooks, LeaseHarness};

/// Steps whose claims run out.
const STEPS: usize = 16;
/// How long each step's claim holds it.
const TIMEOUT: Duration = Duration::from_secs(1);

/// 16 claimed steps in two runs whose claims ran out: an expiry failing on
/// every history row, or on the row of the step it takes ninth (first
/// deadline first), takes back none; then one expiry takes back all 16,
/// each attempt failed with the claim-expired error in its step and its
/// history row.
pub async fn expiry_is_atomic_across_its_steps<H: LeaseHarness + Hooks>(h: &H)
where
    H::Store: RecoveryStore,
{
    let dense = dense_steps(h, &[Start::Running; STEPS], Some(TIMEOUT)).await;
    let mut order: Vec<_> = dense
        .steps
        .iter()
        .map(|s| (s.claimed_until, s.id))
        .collect();
    order.sort();
    h.advance_lease_clock(TIMEOUT * 2).await;
    let store = h.store();
    for fault in [Fault::Every, Fault::Of(order[STEPS / 2].1)] {
        refused_under(h, &dense.runs, fault, "expire_step_claims", || {
            store.expire_step_claims(100)
        })
        .await;
    }
    let taken = store.expire_step_claims(100).await.expect("expire");
    assert_eq!(taken.len(), STEPS, "the expiry after the faults");
    for (step, history) in read_back(h, &dense).await {
        assert_eq!(
            (step.status, step.attempt, &step.error),
            (StepStatus::Failed, 1, &Some(claim_expired_error()))
        );
        let rows: Vec<_> = history.iter().map(|r| (r.status, &r.error)).collect();
        assert_eq!(rows, [(StepStatus::Failed, &Some(claim_expired_error()))]);
    }
}
