//! The store ports: the async traits a backend implements.
//!
//! Each method is one atomic unit of work with the guarantee its doc states;
//! `flowstate-testkit` has a case for every one of them. Futures are `Send`,
//! so logic generic over a port runs on a multi-threaded runtime.
//!
//! Every method that takes JSON or a key checks it with the backend's
//! [`InputLimits`](crate::InputLimits) first and writes nothing if it is
//! refused ([`Error::InvalidInput`]). Unknown ids are typed errors
//! ([`Error::RunNotFound`], [`Error::StepNotFound`],
//! [`Error::StepNameNotFound`]), never an empty success, except where a
//! method says it answers `None` or is a filter (`list_runs` with a parent
//! that does not exist is an empty page).
//!
//! Names used to *look up* are checked like names written: an empty name,
//! one holding a NUL or one over the key limit is [`Error::InvalidInput`]
//! for `find_step`, `claim_step` (name and function), `get_version` and the
//! workflow filter of `list_runs`, so a lookup never sends what no write
//! could have stored.
//!
//! JSON `null` is a value: a step that succeeded with `null` reads back
//! `Some(Value::Null)`, distinct from a step with no result (`None`).

use std::collections::BTreeMap;
use std::future::Future;

use serde_json::{Map, Value};

use crate::batch::{BatchClaim, Completion};
use crate::claim::ClaimOutcome;
use crate::error::Result;
use crate::ids::{RunId, StepId};
use crate::records::{
    GraphState, Inserted, NewRun, NewStep, NewWorkflowVersion, Page, Run, RunQuery, Step,
    StepAttempt, StepSummary, StepTransition, WorkflowVersion,
};
use crate::status::{RetryStart, RunStatus};
use crate::step_claim::StepClaim;
use crate::summary;
use crate::time::Timestamp;
pub use crate::virtual_user_ports::{ScheduleStore, VirtualUserRunStore};

pub use crate::events_ports::{DefinitionStore, EventQueueStore, EventStore};

pub use crate::lease_ports::{
    ChildRunStore, EffectJournal, FencedWrites, RunLeaseStore, RunWaitStore,
};

pub use crate::recovery_ports::{RecoveryStore, RunRecoveryStore};
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::{error::Error, status::StepStatus};

/// Runs, their status, their children and their state.
pub trait RunStore: Send + Sync {
    /// Creates a run in status `running`.
    ///
    /// With an idempotency key, a second create with the same key (however
    /// many race) returns the first run with `inserted: false`, whatever its
    /// other fields. A parent that does not exist is
    /// [`Error::RunNotFound`].
    fn create_run(&self, run: NewRun) -> impl Future<Output = Result<Inserted<Run>>> + Send;

    /// Reads one run.
    fn get_run(&self, id: RunId) -> impl Future<Output = Result<Run>> + Send;

    /// Lists runs matching `query`, newest first by `(created_at, id)`, one
    /// page at a time; `next` is set when the page is full.
    fn list_runs(&self, query: &RunQuery) -> impl Future<Output = Result<Page<Run>>> + Send;

    /// Moves a run to `to` if [`RunStatus::TRANSITIONS`] allows it from its
    /// current status, as one status-guarded write: of two racing moves out
    /// of the same status, at most one succeeds. An illegal move is
    /// [`Error::IllegalRunTransition`] and writes nothing.
    fn set_run_status(&self, id: RunId, to: RunStatus) -> impl Future<Output = Result<Run>> + Send;

    /// Deletes a run with its steps, their history and its state. Its child
    /// runs stay, with no parent.
    fn delete_run(&self, id: RunId) -> impl Future<Output = Result<()>> + Send;

    /// How many children `parent` has in each status (statuses with none are
    /// left out).
    fn count_children(
        &self,
        parent: RunId,
    ) -> impl Future<Output = Result<BTreeMap<RunStatus, u64>>> + Send;

    /// Writes one key of a run's state, in one statement with no
    /// read-modify-write: concurrent writes of different keys never clobber
    /// each other, and a second write of a key replaces the first. The key is
    /// one key whatever it holds (dots, quotes, SQL); the value's JSON type
    /// survives exactly (`[]`, `0`, `false`, `null`, nested). A settled run
    /// is [`Error::RunSettled`] and nothing is written, decided in the same
    /// statement as the write.
    fn write_state(
        &self,
        run: RunId,
        key: &str,
        value: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Reads every key of a run's state.
    fn read_state(&self, run: RunId) -> impl Future<Output = Result<Map<String, Value>>> + Send;
}

/// Steps, their attempts and their history.
pub trait StepStore: Send + Sync {
    /// Inserts a step in status `pending`, attempt 1, with its first history
    /// row. A second insert of the same name in the same run (however many
    /// race) returns the existing step unchanged, `inserted: false`. A run
    /// that does not exist is [`Error::RunNotFound`]; a settled one
    /// [`Error::RunSettled`], and nothing is inserted.
    fn insert_step(&self, step: NewStep) -> impl Future<Output = Result<Inserted<Step>>> + Send;

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

/// Workflow versions: a graph stored once per (workflow, hash).
pub trait VersionStore: Send + Sync {
    /// Stores a version; a second upsert of the same (workflow, graph hash)
    /// changes nothing and returns the first, `inserted: false`.
    fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> impl Future<Output = Result<Inserted<WorkflowVersion>>> + Send;

    /// Reads a version; `None` if the pair was never stored.
    fn get_version(
        &self,
        workflow: &str,
        graph_hash: &str,
    ) -> impl Future<Output = Result<Option<WorkflowVersion>>> + Send;
}

/// Steps many at a time, for worker pools: a claim of the next claimable
/// steps across runs and a write of many completions, each one round trip
/// (or one transaction) however many steps it carries. A separate trait, so
/// a backend without batches still implements [`Store`].
pub trait BatchStepStore: StepStore {
    /// Claims up to [`BatchClaim::effective_limit`] steps across all runs,
    /// the ones [`BatchClaim::takes`] admits (pending, or failed with
    /// attempts left once their retry delay has passed), oldest first by
    /// `(created_at, id)`, and answers them as the claim left them: running,
    /// a retry on its next attempt with result and error cleared, each with
    /// its history row written. Of any number of concurrent batch claims and
    /// [`StepStore::claim_step`] calls, each step goes to exactly one; a
    /// step another claimer holds locked is skipped, not waited for, so a
    /// batch may come back short while claimable steps remain. A function
    /// name over the key limit is [`Error::InvalidInput`].
    fn claim_batch(&self, claim: &BatchClaim) -> impl Future<Output = Result<Vec<Step>>> + Send;

    /// Writes each completion as [`StepStore::transition_claimed`] would
    /// (the step row and its current attempt's history row together, if
    /// the item's claim still holds the step) and answers one result per
    /// item, in order: an item whose claim is lost ([`Error::ClaimLost`]),
    /// that names an unknown step or carries a payload over the limits
    /// fails alone; an item repeating a completion already written answers
    /// `Ok`, so a flush whose outcome was unknown may be sent again. A step named twice is moved by
    /// its first item; the later ones are
    /// [`repeated_items`](crate::batch::repeated_items). Every
    /// item's write commits together, in one statement or one transaction:
    /// when this answers `Ok`, each `Ok` item is durable; an `Err` means
    /// none was written.
    fn complete_batch(
        &self,
        completions: Vec<(StepClaim, Completion)>,
    ) -> impl Future<Output = Result<Vec<Result<()>>>> + Send;
}

/// Every port at once: what a full backend implements.
pub trait Store: RunStore + StepStore + VersionStore {}

impl<T: RunStore + StepStore + VersionStore> Store for T {}
