//! Batch claims and batches of completions under real concurrency: every
//! step claimed exactly once across batch claimers and per-name claimers
//! racing together, and every step completed by exactly one of the batches
//! that race to complete it.

use std::collections::BTreeMap;
use std::sync::Arc;

use flowstate_core::ports::{BatchStepStore, StepStore};
use flowstate_core::{BatchClaim, Completion, StepId, StepStatus};
use serde_json::json;

use crate::Harness;
use crate::cases::batch::basics::pending_steps;
use crate::cases::support::{FUNCTION, new_run, race, step_in};

/// 300 pending steps, 12 batch claimers taking 7 at a time until nothing
/// is left and 4 per-name claimers going through every step, all released
/// together: each step is won exactly once, and every step ends running on
/// attempt 1.
pub async fn claim_batch_race_16<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = Arc::new(pending_steps(h, 30, 10).await);
    let won = race(h.store(), 16, |store, i| {
        let steps = Arc::clone(&steps);
        async move {
            let mut won: Vec<StepId> = Vec::new();
            if i < 12 {
                loop {
                    let taken = store.claim_batch(&BatchClaim::new(7)).await.unwrap();
                    if taken.is_empty() {
                        return won;
                    }
                    won.extend(taken.iter().map(|s| s.id));
                }
            }
            for (run, name, _) in steps.iter().cycle().skip(i * 75).take(steps.len()) {
                if let Some(step) = store.claim_step(*run, name, FUNCTION).await.unwrap() {
                    won.push(step.id);
                }
            }
            won
        }
    })
    .await;
    let mut wins: BTreeMap<StepId, usize> = steps.iter().map(|(_, _, id)| (*id, 0)).collect();
    for id in won.into_iter().flatten() {
        *wins.get_mut(&id).expect("a claimed step is one of ours") += 1;
    }
    let off: Vec<_> = wins.iter().filter(|(_, n)| **n != 1).collect();
    assert!(off.is_empty(), "steps not won exactly once: {off:?}");
    for (_, _, id) in steps.iter() {
        let step = h.store().get_step(*id).await.unwrap();
        assert_eq!((step.status, step.attempt), (StepStatus::Running, 1));
    }
}

/// 64 running steps, 8 batches racing to complete all of them (each with
/// its own result): each step is completed by exactly one batch, and keeps
/// that batch's result.
pub async fn complete_batch_race_8<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    let mut ids = Vec::new();
    for i in 0..64 {
        ids.push(
            step_in(h, run.id, &format!("s{i}"), StepStatus::Running)
                .await
                .claim(),
        );
    }
    let ids = Arc::new(ids);
    let outcomes = race(h.store(), 8, |store, i| {
        let ids = Arc::clone(&ids);
        async move {
            let items = ids
                .iter()
                .map(|id| (*id, Completion::Succeeded(json!(i))))
                .collect();
            store.complete_batch(items).await.unwrap()
        }
    })
    .await;
    for (index, id) in ids.iter().enumerate() {
        let winners: Vec<usize> = outcomes
            .iter()
            .enumerate()
            .filter(|(_, batch)| batch[index].is_ok())
            .map(|(batch, _)| batch)
            .collect();
        assert_eq!(winners.len(), 1, "step {index}: completed by {winners:?}");
        let step = h.store().get_step(id.step).await.unwrap();
        assert_eq!(step.result, Some(json!(winners[0])));
    }
}
