//! A batch claim whose transaction dies between its pick and its write
//! ([`Hooks::abort_after_pick`]), as a Galera node's claim does when
//! another node's commit aborts it: the claim answers a retryable error
//! and leaves every step it picked claimable, or (run again by the store)
//! takes each once; either way one more claim leaves each step taken
//! exactly once, on its next attempt.

use std::collections::BTreeSet;

use flowstate_core::ports::BatchStepStore;
use flowstate_core::{BatchClaim, StepId, StepStatus};

use crate::cases::support::dense::{Start, dense_steps, read_back};
use crate::cases::support::{after_abort, snapshot};
use crate::{Hooks, Pick};

/// Four claimable steps in one run (the third a failed step with a retry
/// due): a batch claim aborted after its pick answers a retryable error
/// and leaves them as they were, or takes all four; the claim after it
/// takes what is left, and a third takes nothing. Each step ends running
/// once, on attempt 1 (the retried one on 2), with one history row per
/// attempt.
pub async fn claim_batch_aborted_after_its_pick_takes_each_step_once<H: Hooks>(h: &H)
where
    H::Store: BatchStepStore,
{
    let starts = [
        Start::Pending,
        Start::Pending,
        Start::Retryable,
        Start::Pending,
    ];
    let dense = dense_steps(h, &starts, None).await;
    let store = h.store();
    let claim = BatchClaim::new(100);
    let before = snapshot(h, &dense.runs).await;
    h.abort_after_pick(Some(Pick::Steps)).await;
    let aborted = store.claim_batch(&claim).await;
    h.abort_after_pick(None).await;
    let mut taken: Vec<StepId> = if let Some(steps) = after_abort("claim_batch", aborted) {
        steps.iter().map(|s| s.id).collect()
    } else {
        assert_eq!(
            snapshot(h, &dense.runs).await,
            before,
            "an aborted batch claim changed what the ports read"
        );
        Vec::new()
    };
    let again = store.claim_batch(&claim).await.expect("claim_batch");
    taken.extend(again.iter().map(|s| s.id));
    let last = store.claim_batch(&claim).await.expect("claim_batch");
    assert!(last.is_empty(), "a step was taken twice: {last:?}");
    let expected: BTreeSet<StepId> = dense.steps.iter().map(|s| s.id).collect();
    assert_eq!(
        taken.len(),
        expected.len(),
        "each step taken once: {taken:?}"
    );
    assert_eq!(taken.into_iter().collect::<BTreeSet<_>>(), expected);
    for ((step, history), start) in read_back(h, &dense).await.iter().zip(&starts) {
        let attempt = if *start == Start::Retryable { 2 } else { 1 };
        assert_eq!((step.status, step.attempt), (StepStatus::Running, attempt));
        assert_eq!(history.len(), attempt as usize, "{history:?}");
    }
}
