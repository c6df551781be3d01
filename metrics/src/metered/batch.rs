//! [`BatchStepStore`] for [`Metered`]: each step a batch claim took is a
//! claim won (`via = batch`, its retry counted), each completion written a
//! transition by status, each lost claim a fencing refusal; the batch
//! claim's and the flush's latency are timed.

use flowstate_core::ports::BatchStepStore;
use flowstate_core::{BatchClaim, Completion, Result, Step, StepClaim};

use super::Metered;
use crate::names;
use crate::record::{claim_refused, count_as, refused, timed, won};

impl<S: BatchStepStore> BatchStepStore for Metered<S> {
    async fn claim_batch(&self, claim: &BatchClaim) -> Result<Vec<Step>> {
        let answer = timed(names::BATCH_CLAIM_SECONDS, self.inner.claim_batch(claim)).await;
        match &answer {
            Ok(steps) => steps.iter().for_each(|step| won(step, "batch")),
            Err(err) => claim_refused(err),
        }
        answer
    }

    async fn complete_batch(
        &self,
        completions: Vec<(StepClaim, Completion)>,
    ) -> Result<Vec<Result<()>>> {
        let targets: Vec<_> = completions.iter().map(|(_, c)| c.target()).collect();
        let answer = timed(names::FLUSH_SECONDS, self.inner.complete_batch(completions)).await;
        if let Ok(items) = &answer {
            for (item, to) in items.iter().zip(targets) {
                match item {
                    Ok(()) => count_as(names::TRANSITIONS, names::STATUS, to.as_str(), 1),
                    Err(err) => refused(err),
                }
            }
        }
        answer
    }
}
