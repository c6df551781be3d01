//! [`StepStore`]: steps, their attempts and their history; the claim and
//! the transitions every worker calls.

use std::collections::BTreeMap;
use std::future::Future;

use serde_json::Value;

use crate::claim::ClaimOutcome;
use crate::error::Result;
use crate::ids::{RunId, StepId};
use crate::records::{
    GraphState, InlineStep, Inserted, NewStep, Step, StepAttempt, StepSummary, StepTransition,
};
use crate::status::RetryStart;
use crate::step_claim::StepClaim;
use crate::summary;
use crate::time::Timestamp;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::{error::Error, status::StepStatus};

/// Steps, their attempts and their history.
pub trait StepStore: Send + Sync {
    /// Inserts a step in status `pending`, attempt 1, with its first history
    /// row. A second insert of the same name in the same run (however many
    /// race) returns the existing step unchanged, `inserted: false`. A run
    /// that does not exist is [`Error::RunNotFound`]; a settled one
    /// [`Error::RunSettled`], and nothing is inserted.
    fn insert_step(&self, step: NewStep) -> impl Future<Output = Result<Inserted<Step>>> + Send;

    /// Records a step the caller already ran in its own process, in one
    /// atomic write: the step is inserted as attempt 1 in status
    /// `succeeded` or `failed` with its result or error, and its history
    /// row is written as for any attempt (`running_at` the start,
    /// `succeeded_at` or `failed_at` the finish). No claim is taken and no
    /// claim deadline set. Guarded as [`insert_step`](Self::insert_step):
    /// a run that does not exist is [`Error::RunNotFound`], a settled one
    /// [`Error::RunSettled`], and a name the run already holds returns
    /// that step unchanged, `inserted: false`, writing nothing. A failed
    /// step keeps its retry policy: with retries left it is claimable as
    /// its next attempt like any failed attempt (record it with
    /// [`RetryPolicy::with_retries(0)`](crate::RetryPolicy::with_retries)
    /// to fail it for good). A finish before the start is
    /// [`Error::InvalidInput`] (field `step timings`).
    fn record_step(&self, step: InlineStep) -> impl Future<Output = Result<Inserted<Step>>> + Send;

    /// Reads one step, without touching its history.
    fn get_step(&self, id: StepId) -> impl Future<Output = Result<Step>> + Send;

    /// Reads one step by run and name, without touching its history. No such
    /// step (in a run that may not exist either) is
    /// [`Error::StepNameNotFound`].
    fn find_step(&self, run: RunId, name: &str) -> impl Future<Output = Result<Step>> + Send;

    /// Reads every step of a run, ordered by creation then name, in one round
    /// trip. An unknown run is [`Error::RunNotFound`]; a run with no steps
    /// answers an empty list.
    fn list_steps(&self, run: RunId) -> impl Future<Output = Result<Vec<Step>>> + Send;

    /// Moves the step's current attempt as `transition` says, if
    /// [`StepStatus::TRANSITIONS`] allows it: the step row and that attempt's
    /// history row change together or not at all, and a missing history row
    /// is recreated, never skipped. An illegal move is
    /// [`Error::IllegalStepTransition`] and writes nothing.
    ///
    /// A move to running sets the step's claim deadline
    /// ([`Step::claimed_until`]) as a claim does; every other move clears
    /// it. This write carries no fence: a worker that claimed the step
    /// writes its outcome with [`transition_claimed`](Self::transition_claimed),
    /// so that a claim that ran out cannot overwrite the attempt that
    /// replaced it.
    fn transition_step(
        &self,
        id: StepId,
        transition: StepTransition,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Moves the step as [`transition_step`](Self::transition_step) does, if
    /// `claim` still holds it: the step is running in `claim.attempt`
    /// ([`crate::step_claim`]). The guard is part of the write, so a claim
    /// that ran out and was taken back by recovery, or whose step moved on
    /// to another attempt, is [`Error::ClaimLost`] and writes nothing. A
    /// repeat of a move already written (the step is in `claim.attempt`,
    /// already in the transition's status with its result or error: a
    /// retried flush after an unknown outcome) answers `Ok` and writes
    /// nothing. A claimer moves
    /// its step only where running may go (scheduled, succeeded, failed);
    /// any other target is [`Error::IllegalStepTransition`]. An unknown
    /// step is [`Error::StepNotFound`].
    fn transition_claimed(
        &self,
        claim: StepClaim,
        transition: StepTransition,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Extends the claim deadline of a running step held by `claim` to the
    /// step's claim timeout (its own, or the store's default) from now on
    /// the store's lease clock, and answers the new deadline: a heartbeat
    /// for a step that runs long. A claim that no longer holds the step is
    /// [`Error::ClaimLost`] and writes nothing; an unknown step
    /// [`Error::StepNotFound`].
    fn renew_step_claim(&self, claim: StepClaim) -> impl Future<Output = Result<Timestamp>> + Send;

    /// Starts the next attempt of a failed step in `start`'s status (pending
    /// or running, the only two a [`RetryStart`] can name): the attempt rises
    /// by one, result and error clear, and a new history row is written,
    /// together. A step that is not failed is
    /// [`Error::IllegalStepTransition`] (to `start.status()`) and nothing is
    /// written. It does not consult the retry policy (that is the claim's
    /// job), so an engine can retry by hand.
    ///
    /// [`retry_step`](Self::retry_step) is the same retry answering the step
    /// as it is after it.
    fn create_retry_attempt(
        &self,
        id: StepId,
        start: RetryStart,
    ) -> impl Future<Output = Result<()>> + Send;

    /// [`create_retry_attempt`](Self::create_retry_attempt), answering the
    /// step as it is after the retry, as a claim answers the claimed step:
    /// in `start`'s status, its attempt raised by one, result and error
    /// cleared. The errors are `create_retry_attempt`'s.
    ///
    /// By default it retries, then reads the step
    /// ([`get_step`](Self::get_step)): a second call, so a step that moves
    /// in between (a pending retry another worker claims at once) reads as
    /// it moved, and one deleted in between is [`Error::StepNotFound`]. A
    /// backend whose retry statement returns the row overrides this to
    /// answer that row.
    fn retry_step(
        &self,
        id: StepId,
        start: RetryStart,
    ) -> impl Future<Output = Result<Step>> + Send {
        async move {
            self.create_retry_attempt(id, start).await?;
            self.get_step(id).await
        }
    }

    /// Claims step `name` of `run` for a worker running `function`, carrying
    /// out [`ClaimDecision`](crate::ClaimDecision) atomically: a pending or
    /// scheduled step moves to running; a failed step with attempts left
    /// starts its next attempt, running; anything else answers `None`. Of any
    /// number of concurrent claims of one step, exactly one gets `Some` (the
    /// step as it is after the claim), and a retry raises the attempt by
    /// exactly one. A claim naming another function than the step is pinned
    /// to is [`Error::FunctionMismatch`] and leaves the step untouched; a
    /// step that does not exist is [`Error::StepNameNotFound`]. A step of a
    /// settled run that would be claimed (pending, scheduled, or failed with
    /// an attempt left) is [`Error::RunSettled`] and is not claimed; one with
    /// nothing to claim (running, succeeded, out of attempts) answers `None`
    /// as in any run, so a duplicate delivery of a finished step stays a
    /// no-op whether or not its run has settled since.
    ///
    /// A won claim holds the step until its claim deadline
    /// ([`Step::claimed_until`], [`crate::step_claim`]); past it, recovery
    /// may take the attempt back. The claimer writes the outcome with
    /// [`transition_claimed`](Self::transition_claimed) and the step's
    /// [`claim`](Step::claim).
    ///
    /// [`claim_step_outcome`](Self::claim_step_outcome) is the same claim
    /// answering why nothing was claimed.
    fn claim_step(
        &self,
        run: RunId,
        name: &str,
        function: &str,
    ) -> impl Future<Output = Result<Option<Step>>> + Send;

    /// [`claim_step`](Self::claim_step), answering why nothing was claimed
    /// ([`ClaimOutcome`]): the step was held by another worker, had
    /// succeeded, or had no attempt left. The errors are `claim_step`'s.
    ///
    /// By default it calls `claim_step` and, when that took nothing, reads
    /// the step ([`find_step`](Self::find_step)) and explains it with
    /// [`ClaimOutcome::not_claimed`]. That read is a second call, so the
    /// reason is diagnostic: the step may move between the claim and the
    /// read (a step that succeeded in between reads as
    /// [`NotClaimable::Succeeded`](crate::NotClaimable::Succeeded), one
    /// deleted in between is [`Error::StepNameNotFound`]); whether the claim
    /// took the step is exact. A backend whose claim already sees the step
    /// when it takes nothing (the same statement or transaction) overrides
    /// this to answer from that, with no second call, and `claim_step` is
    /// then this with the reason dropped.
    fn claim_step_outcome(
        &self,
        run: RunId,
        name: &str,
        function: &str,
    ) -> impl Future<Output = Result<ClaimOutcome>> + Send {
        async move {
            if let Some(step) = self.claim_step(run, name, function).await? {
                return Ok(ClaimOutcome::Claimed(step));
            }
            let step = self.find_step(run, name).await?;
            ClaimOutcome::not_claimed(&step, function)
        }
    }

    /// Every attempt of every step of a run, ordered by creation then
    /// attempt, so a retry created in the same microsecond sorts after the
    /// attempt it replaces. An unknown run is [`Error::RunNotFound`].
    fn step_history(&self, run: RunId) -> impl Future<Output = Result<Vec<StepAttempt>>> + Send;

    /// Records the branch a graph run took at this step.
    fn set_branch_taken(&self, id: StepId, branch: &str)
    -> impl Future<Output = Result<()>> + Send;

    /// The run's completed step names, those failed for good, those failed
    /// with an attempt left (retrying), and the branches taken
    /// ([`summary::graph_state`]).
    fn graph_state(&self, run: RunId) -> impl Future<Output = Result<GraphState>> + Send {
        async move { Ok(summary::graph_state(&self.list_steps(run).await?)) }
    }

    /// The results of the named steps that have one, in one call.
    fn step_results(
        &self,
        run: RunId,
        names: &[&str],
    ) -> impl Future<Output = Result<BTreeMap<String, Value>>> + Send {
        async move { Ok(summary::step_results(&self.list_steps(run).await?, names)) }
    }

    /// Per step, its latest status, attempt count and duration; a retried
    /// step is one entry whose latest attempt wins.
    fn run_summary(&self, run: RunId) -> impl Future<Output = Result<Vec<StepSummary>>> + Send {
        async move { Ok(summary::summarize(&self.step_history(run).await?)) }
    }
}
