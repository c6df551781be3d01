//! [`BatchStepStore`] for [`MemoryStore`]: batch claims and completions
//! under the one lock, so each is atomic by construction; what is left to
//! read is which steps a batch takes and what each item answers.

use flowstate_core::batch::repeated_items;
use flowstate_core::limits::{Dismantle, checked};
use flowstate_core::ports::BatchStepStore;
use flowstate_core::ports::checks;
use flowstate_core::{
    BatchClaim, ClaimDecision, ClaimInput, Completion, Result, Step, StepClaim, StepStatus,
    StepTransition,
};

use super::MemoryStore;
use super::steps::start_attempt;
use crate::harness::Pick;

impl BatchStepStore for MemoryStore {
    async fn claim_batch(&self, claim: &BatchClaim) -> Result<Vec<Step>> {
        checks::claim_batch(&self.limits, claim)?;
        let now = self.now();
        let mut tables = self.lock();
        let mut taken: Vec<Step> = tables
            .steps
            .values()
            .filter(|step| claim.takes(step, now))
            .filter(|step| Self::unsettled(&tables, step.run).is_ok())
            .cloned()
            .collect();
        taken.sort_by_key(|step| (step.created_at, step.id));
        taken.truncate(claim.effective_limit() as usize);
        if taken.is_empty() {
            return Ok(taken);
        }
        tables.strike_after_pick(Pick::Steps, "claim_batch")?;
        tables.check_history_writes()?;
        for step in &mut taken {
            let input = ClaimInput {
                status: step.status,
                function: step.function.as_deref(),
                attempt: step.attempt,
                retry: step.retry,
            };
            let decision = ClaimDecision::decide(input, step.function.as_deref().unwrap_or(""));
            let attempt = decision.attempt_after(step.attempt);
            start_attempt(step, attempt, StepStatus::Running);
            step.updated_at = now;
            step.claimed_until = Some(self.claim_deadline(step));
            tables.save_step(step.clone(), now);
        }
        Ok(taken)
    }

    async fn complete_batch(
        &self,
        completions: Vec<(StepClaim, Completion)>,
    ) -> Result<Vec<Result<()>>> {
        let now = self.now();
        let mut repeated = repeated_items(&completions);
        let mut tables = self.lock();
        if !completions.is_empty() {
            tables.check_history_writes()?;
        }
        let mut outcomes = Vec::with_capacity(completions.len());
        for (index, (claim, completion)) in completions.into_iter().enumerate() {
            let transition = completion.into_transition();
            if let Some(error) = repeated.remove(&index) {
                transition.dismantle();
                outcomes.push(Err(error));
                continue;
            }
            let outcome = checked(transition, |t| checks::complete_batch(&self.limits, t))
                .and_then(|(transition, _)| {
                    let mut step = tables.step(claim.step)?.clone();
                    if step.status != StepStatus::Running || step.attempt != claim.attempt {
                        return claim.explain_refusal(&step, &transition);
                    }
                    step.status = transition.target();
                    step.updated_at = now;
                    match transition {
                        StepTransition::Succeeded(result) => step.result = Some(result),
                        StepTransition::Failed(error) => step.error = Some(error),
                        StepTransition::Running | StepTransition::Scheduled => {}
                    }
                    tables.save_step(step, now);
                    Ok(())
                });
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }
}
