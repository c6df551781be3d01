//! Batch claims and completions are atomic across their steps: with every
//! history write failing, or only those of one step in the middle of the
//! batch, `claim_batch` and `complete_batch` answer an error and leave
//! every step and history row as they were, then succeed in full once
//! history writes work again. The second fault is the one that tells a
//! batch written in one statement or transaction from a batch committed
//! step by step: with every write failing the first step fails already and
//! nothing is kept either way.

use flowstate_core::ports::BatchStepStore;
use flowstate_core::{BatchClaim, Completion, Error, StepStatus};
use serde_json::json;

use crate::Hooks;
use crate::cases::steps::atomicity::{Fault, refused_under};
use crate::cases::support::dense::{Start, dense_steps, read_back};

/// Steps per batch.
const STEPS: usize = 16;

/// 16 claimable steps in two runs (every fourth a failed step with a retry
/// due): a batch claim of all of them, failing on every history row or on
/// the row of the step it takes ninth, claims none; then one claim takes
/// all 16, each running on its next attempt.
pub async fn claim_batch_is_atomic_across_its_steps<H: Hooks>(h: &H)
where
    H::Store: BatchStepStore,
{
    let starts: Vec<Start> = (0..STEPS)
        .map(|i| {
            if i % 4 == 3 {
                Start::Retryable
            } else {
                Start::Pending
            }
        })
        .collect();
    let dense = dense_steps(h, &starts, None).await;
    let mut order: Vec<_> = dense.steps.iter().map(|s| (s.created_at, s.id)).collect();
    order.sort();
    let store = h.store();
    let claim = BatchClaim::new(100);
    for fault in [Fault::Every, Fault::Of(order[STEPS / 2].1)] {
        refused_under(h, &dense.runs, fault, "claim_batch", || {
            store.claim_batch(&claim)
        })
        .await;
    }
    let taken = store.claim_batch(&claim).await.expect("claim_batch");
    assert_eq!(taken.len(), STEPS, "the batch claim after the faults");
    for ((step, history), start) in read_back(h, &dense).await.iter().zip(&starts) {
        let attempt = if *start == Start::Retryable { 2 } else { 1 };
        assert_eq!((step.status, step.attempt), (StepStatus::Running, attempt));
        assert_eq!(history.len(), attempt as usize);
    }
}

/// 16 claimed steps in two runs, completed by one batch (successes and
/// failures alternating): failing on every history row or on the row of
/// the ninth item, it writes none (an error, or every item refused); then
/// the same batch completes every step.
pub async fn complete_batch_is_atomic_across_its_items<H: Hooks>(h: &H)
where
    H::Store: BatchStepStore,
{
    let dense = dense_steps(h, &[Start::Running; STEPS], None).await;
    let store = h.store();
    let items = || {
        dense
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let completion = if i % 2 == 0 {
                    Completion::Succeeded(json!({"item": i}))
                } else {
                    Completion::Failed(json!({"item": i}))
                };
                (s.claim(), completion)
            })
            .collect::<Vec<_>>()
    };
    for fault in [Fault::Every, Fault::Of(dense.steps[STEPS / 2].id)] {
        refused_under(h, &dense.runs, fault, "complete_batch", || async {
            // Every item refused is as good as an error: nothing was written.
            let outcomes = store.complete_batch(items()).await?;
            if outcomes.iter().all(Result::is_err) {
                return Err(Error::backend(
                    "complete_batch",
                    false,
                    "every item refused",
                ));
            }
            Ok(outcomes)
        })
        .await;
    }
    let outcomes = store.complete_batch(items()).await.expect("complete_batch");
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    for (i, (step, history)) in read_back(h, &dense).await.iter().enumerate() {
        let to = if i % 2 == 0 {
            StepStatus::Succeeded
        } else {
            StepStatus::Failed
        };
        assert_eq!(step.status, to, "step {i}");
        assert_eq!(history.iter().map(|r| r.status).collect::<Vec<_>>(), [to]);
    }
}
