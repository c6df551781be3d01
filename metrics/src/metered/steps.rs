//! [`StepStore`] for [`Metered`]: claims won, lost (by reason) and refused
//! (by error kind) with their latency, transitions by status with theirs,
//! retries started, and claims refused by their fence.

use std::collections::BTreeMap;

use flowstate_core::ports::StepStore;
use flowstate_core::{
    ClaimOutcome, GraphState, InlineStep, Inserted, NewStep, NotClaimable, Result, RetryStart,
    RunId, Step, StepAttempt, StepClaim, StepId, StepStatus, StepSummary, StepTransition,
    Timestamp,
};
use serde_json::Value;

use super::Metered;
use crate::names;
use crate::record::{claim_refused, count, count_as, fenced, timed, won};

/// The label of why a claim took nothing.
const fn lost_reason(why: NotClaimable) -> &'static str {
    match why {
        NotClaimable::Running => "running",
        NotClaimable::Succeeded => "succeeded",
        NotClaimable::RetriesExhausted => "retries_exhausted",
    }
}

/// Counts a transition to `to` that `answer` says was written.
fn transitioned(answer: &Result<()>, to: StepStatus) {
    if answer.is_ok() {
        count_as(names::TRANSITIONS, names::STATUS, to.as_str(), 1);
    }
}

/// Counts a retry started by hand, if it started running.
fn retried<T>(answer: &Result<T>, start: RetryStart) {
    if answer.is_ok() && start == RetryStart::Running {
        count(names::RETRIES, 1);
    }
}

impl<S: StepStore> StepStore for Metered<S> {
    async fn insert_step(&self, step: NewStep) -> Result<Inserted<Step>> {
        self.inner.insert_step(step).await
    }

    async fn record_step(&self, step: InlineStep) -> Result<Inserted<Step>> {
        self.inner.record_step(step).await
    }

    async fn get_step(&self, id: StepId) -> Result<Step> {
        self.inner.get_step(id).await
    }

    async fn find_step(&self, run: RunId, name: &str) -> Result<Step> {
        self.inner.find_step(run, name).await
    }

    async fn list_steps(&self, run: RunId) -> Result<Vec<Step>> {
        self.inner.list_steps(run).await
    }

    async fn transition_step(&self, id: StepId, transition: StepTransition) -> Result<()> {
        let to = transition.target();
        let answer = timed(
            names::TRANSITION_SECONDS,
            self.inner.transition_step(id, transition),
        )
        .await;
        transitioned(&answer, to);
        answer
    }

    async fn transition_claimed(&self, claim: StepClaim, transition: StepTransition) -> Result<()> {
        let to = transition.target();
        let answer = timed(
            names::TRANSITION_SECONDS,
            self.inner.transition_claimed(claim, transition),
        )
        .await;
        transitioned(&answer, to);
        fenced(&answer);
        answer
    }

    async fn renew_step_claim(&self, claim: StepClaim) -> Result<Timestamp> {
        let answer = self.inner.renew_step_claim(claim).await;
        fenced(&answer);
        answer
    }

    async fn create_retry_attempt(&self, id: StepId, start: RetryStart) -> Result<()> {
        let answer = self.inner.create_retry_attempt(id, start).await;
        retried(&answer, start);
        answer
    }

    async fn retry_step(&self, id: StepId, start: RetryStart) -> Result<Step> {
        let answer = self.inner.retry_step(id, start).await;
        retried(&answer, start);
        answer
    }

    async fn claim_step(&self, run: RunId, name: &str, function: &str) -> Result<Option<Step>> {
        let answer = timed(
            names::CLAIM_SECONDS,
            self.inner.claim_step(run, name, function),
        )
        .await;
        match &answer {
            Ok(Some(step)) => won(step, "step"),
            Ok(None) => count_as(names::CLAIMS_LOST, names::REASON, "unknown", 1),
            Err(err) => claim_refused(err),
        }
        answer
    }

    async fn claim_step_outcome(
        &self,
        run: RunId,
        name: &str,
        function: &str,
    ) -> Result<ClaimOutcome> {
        let answer = timed(
            names::CLAIM_SECONDS,
            self.inner.claim_step_outcome(run, name, function),
        )
        .await;
        match &answer {
            Ok(ClaimOutcome::Claimed(step)) => won(step, "step"),
            Ok(ClaimOutcome::NotClaimed(why)) => {
                count_as(names::CLAIMS_LOST, names::REASON, lost_reason(*why), 1);
            }
            Err(err) => claim_refused(err),
        }
        answer
    }

    async fn step_history(&self, run: RunId) -> Result<Vec<StepAttempt>> {
        self.inner.step_history(run).await
    }

    async fn set_branch_taken(&self, id: StepId, branch: &str) -> Result<()> {
        self.inner.set_branch_taken(id, branch).await
    }

    async fn graph_state(&self, run: RunId) -> Result<GraphState> {
        self.inner.graph_state(run).await
    }

    async fn step_results(&self, run: RunId, names: &[&str]) -> Result<BTreeMap<String, Value>> {
        self.inner.step_results(run, names).await
    }

    async fn run_summary(&self, run: RunId) -> Result<Vec<StepSummary>> {
        self.inner.run_summary(run).await
    }
}
