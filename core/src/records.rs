//! The records the ports read and write: runs, steps, attempts, versions, and
//! the queries over them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{HistoryId, RunId, StepId, VersionId};
use crate::retry::RetryPolicy;
use crate::status::{RunStatus, StepStatus, VersionStatus};
use crate::time::Timestamp;

/// A value and whether this call wrote it, for idempotent inserts: a second
/// insert of the same thing returns the first, with `inserted: false`.
#[derive(Clone, Debug, PartialEq)]
pub struct Inserted<T> {
    /// The stored record (the existing one if nothing was inserted).
    pub record: T,
    /// Whether this call created it.
    pub inserted: bool,
}

/// A run to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// The workflow's name.
    pub workflow: String,
    /// The run's input.
    pub input: Value,
    /// The hash of the workflow graph the run follows, if any.
    pub graph_hash: Option<String>,
    /// The run that started this one, for child runs.
    pub parent: Option<RunId>,
    /// A key that makes the create idempotent: a second create with the same
    /// key returns the first run.
    pub idempotency_key: Option<String>,
}

impl NewRun {
    /// A run of `workflow` with `input` and nothing else set.
    pub fn new(workflow: impl Into<String>, input: Value) -> Self {
        Self {
            workflow: workflow.into(),
            input,
            graph_hash: None,
            parent: None,
            idempotency_key: None,
        }
    }

    /// The same run, with an idempotency key.
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// The same run, as a child of `parent`.
    #[must_use]
    pub fn with_parent(mut self, parent: RunId) -> Self {
        self.parent = Some(parent);
        self
    }

    /// The same run, following the graph with `hash`.
    #[must_use]
    pub fn with_graph_hash(mut self, hash: impl Into<String>) -> Self {
        self.graph_hash = Some(hash.into());
        self
    }
}

impl NewRun {
    /// The run as a store creates it: status `running`, created and updated
    /// at `now`, with id `id`.
    pub fn into_run(self, id: RunId, now: Timestamp) -> Run {
        Run {
            id,
            workflow: self.workflow,
            status: RunStatus::Running,
            input: self.input,
            graph_hash: self.graph_hash,
            parent: self.parent,
            idempotency_key: self.idempotency_key,
            output: None,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A stored run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Its id.
    pub id: RunId,
    /// The workflow's name.
    pub workflow: String,
    /// Where it stands.
    pub status: RunStatus,
    /// Its input.
    pub input: Value,
    /// The graph hash, if any.
    pub graph_hash: Option<String>,
    /// The parent run, for child runs.
    pub parent: Option<RunId>,
    /// The idempotency key it was created with, if any.
    pub idempotency_key: Option<String>,
    /// What the run answered its caller, once written
    /// ([`RunStore::set_run_status_with_output`](crate::ports::RunStore::set_run_status_with_output),
    /// [`RunLeaseStore::finish_with_output`](crate::ports::RunLeaseStore::finish_with_output));
    /// `None` until then, and kept by every later move that carries none.
    /// JSON `null` is a value: `Some(Value::Null)`.
    #[serde(default)]
    pub output: Option<Value>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed status.
    pub updated_at: Timestamp,
}

/// Where a runs listing left off: the last run of the previous page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCursor {
    /// The last run's creation time.
    pub created_at: Timestamp,
    /// The last run's id, breaking ties in creation time.
    pub id: RunId,
}

impl RunCursor {
    /// The cursor just past `run`.
    pub fn after(run: &Run) -> Self {
        Self {
            created_at: run.created_at,
            id: run.id,
        }
    }
}

/// A runs listing: newest first, by `(created_at, id)` descending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunQuery {
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// Only children of this run.
    pub parent: Option<RunId>,
    /// At most this many (`0` reads as [`RunQuery::DEFAULT_LIMIT`]; more than
    /// [`RunQuery::MAX_LIMIT`] reads as that).
    pub limit: u32,
    /// Start after this run (from the previous page's `next`).
    pub cursor: Option<RunCursor>,
}

impl RunQuery {
    /// The page size when none is given.
    pub const DEFAULT_LIMIT: u32 = 50;
    /// The largest page a listing returns.
    pub const MAX_LIMIT: u32 = 1_000;

    /// The page size this query will use.
    pub fn effective_limit(&self) -> u32 {
        match self.limit {
            0 => Self::DEFAULT_LIMIT,
            n => n.min(Self::MAX_LIMIT),
        }
    }
}

/// One page of a listing.
#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    /// The items, in listing order.
    pub items: Vec<T>,
    /// Where the next page starts, if there may be one.
    pub next: Option<RunCursor>,
}

/// A step to insert into a run.
#[derive(Clone, Debug, PartialEq)]
pub struct NewStep {
    /// The run.
    pub run: RunId,
    /// The step's name, unique within the run.
    pub name: String,
    /// The function the step is dispatched with; a claim naming another is
    /// refused.
    pub function: Option<String>,
    /// The step's input.
    pub input: Value,
    /// Its retry policy: [`RetryPolicy::DEFAULT`] unless set.
    pub retry: RetryPolicy,
    /// How long a claim holds it before recovery may take it back
    /// ([`crate::step_claim`]); `None` is the store's default
    /// ([`DEFAULT_CLAIM_TIMEOUT`](crate::step_claim::DEFAULT_CLAIM_TIMEOUT)
    /// unless the store was given another).
    pub claim_timeout: Option<Duration>,
}

impl NewStep {
    /// A step `name` of `run`, pinned to `function`, with the default retry
    /// policy ([`RetryPolicy::DEFAULT`]: three retries, no delay; see there
    /// why). [`with_retry`](Self::with_retry) sets another.
    pub fn new(
        run: RunId,
        name: impl Into<String>,
        function: impl Into<String>,
        input: Value,
    ) -> Self {
        Self {
            run,
            name: name.into(),
            function: Some(function.into()),
            input,
            retry: RetryPolicy::default(),
            claim_timeout: None,
        }
    }

    /// The same step with `retry` as its policy.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same step, held by a claim for `timeout` (renewable) rather
    /// than the store's default; between 1 ms and
    /// [`LONGEST_CLAIM_TIMEOUT`](crate::step_claim::LONGEST_CLAIM_TIMEOUT),
    /// kept in whole milliseconds.
    #[must_use]
    pub fn with_claim_timeout(mut self, timeout: Duration) -> Self {
        self.claim_timeout = Some(timeout);
        self
    }
}

/// A stored step: the state of its current attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Its id.
    pub id: StepId,
    /// The run it belongs to.
    pub run: RunId,
    /// Its name, unique within the run.
    pub name: String,
    /// The function it is pinned to, if any.
    pub function: Option<String>,
    /// The current attempt's status.
    pub status: StepStatus,
    /// Its input.
    pub input: Value,
    /// The current attempt's result, once succeeded.
    pub result: Option<Value>,
    /// The current attempt's error, once failed.
    pub error: Option<Value>,
    /// The current attempt, 1-based.
    pub attempt: u32,
    /// Its retry policy.
    pub retry: RetryPolicy,
    /// Its own claim timeout, if it has one (whole milliseconds); `None`
    /// takes the store's default ([`crate::step_claim`]).
    pub claim_timeout: Option<Duration>,
    /// While it is running: when its claim runs out unless renewed, on the
    /// store's lease clock ([`crate::step_claim`]). `None` in every other
    /// status.
    pub claimed_until: Option<Timestamp>,
    /// The branch a graph run took at this step, if any.
    pub branch: Option<String>,
    /// When it was inserted.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// A change of a step's current attempt, written together with that
/// attempt's history row.
#[derive(Clone, Debug, PartialEq)]
pub enum StepTransition {
    /// Executing now.
    Running,
    /// Finished with `result`.
    Succeeded(Value),
    /// Failed with `error`.
    Failed(Value),
    /// Waiting for a time or a signal.
    Scheduled,
}

impl StepTransition {
    /// The status this transition moves the step to.
    pub const fn target(&self) -> StepStatus {
        match self {
            Self::Running => StepStatus::Running,
            Self::Succeeded(_) => StepStatus::Succeeded,
            Self::Failed(_) => StepStatus::Failed,
            Self::Scheduled => StepStatus::Scheduled,
        }
    }
}

/// How a step the caller ran itself ended ([`InlineStep`]).
#[derive(Clone, Debug, PartialEq)]
pub enum InlineOutcome {
    /// It finished with this result.
    Succeeded(Value),
    /// It failed with this error.
    Failed(Value),
}

impl InlineOutcome {
    /// The status the step is recorded in.
    pub const fn status(&self) -> StepStatus {
        match self {
            Self::Succeeded(_) => StepStatus::Succeeded,
            Self::Failed(_) => StepStatus::Failed,
        }
    }

    /// The same outcome as the transition that would have written it.
    pub fn into_transition(self) -> StepTransition {
        match self {
            Self::Succeeded(result) => StepTransition::Succeeded(result),
            Self::Failed(error) => StepTransition::Failed(error),
        }
    }
}

/// A step the caller already ran in its own process, without queueing it,
/// recorded in one call by
/// [`StepStore::record_step`](crate::ports::StepStore::record_step): the
/// step as [`NewStep`] describes it, how its attempt (attempt 1) ended,
/// and when it started and finished (the history row's `running_at` and
/// `succeeded_at` or `failed_at`; the caller's clock, as it measured them).
#[derive(Clone, Debug, PartialEq)]
pub struct InlineStep {
    /// The step: run, name, function, input, retry policy.
    pub step: NewStep,
    /// How its attempt ended.
    pub outcome: InlineOutcome,
    /// When it started running.
    pub started_at: Timestamp,
    /// When it finished; not before `started_at`.
    pub finished_at: Timestamp,
}

impl InlineStep {
    /// `step`, run from `started_at` to `finished_at`, ending as `outcome`.
    pub fn new(
        step: NewStep,
        outcome: InlineOutcome,
        started_at: Timestamp,
        finished_at: Timestamp,
    ) -> Self {
        Self {
            step,
            outcome,
            started_at,
            finished_at,
        }
    }
}

/// One attempt of a step: a row of its history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepAttempt {
    /// The row's id.
    pub id: HistoryId,
    /// The step.
    pub step: StepId,
    /// The step's name.
    pub step_name: String,
    /// Which attempt, 1-based.
    pub attempt: u32,
    /// Where this attempt stands.
    pub status: StepStatus,
    /// Its result, if it succeeded.
    pub result: Option<Value>,
    /// Its error, if it failed.
    pub error: Option<Value>,
    /// When the attempt began.
    pub created_at: Timestamp,
    /// When it was last scheduled.
    pub scheduled_at: Option<Timestamp>,
    /// When it started running.
    pub running_at: Option<Timestamp>,
    /// When it succeeded.
    pub succeeded_at: Option<Timestamp>,
    /// When it failed.
    pub failed_at: Option<Timestamp>,
}

impl StepAttempt {
    /// How long the attempt ran: from running to succeeded or failed.
    pub fn duration(&self) -> Option<Duration> {
        let start = self.running_at?;
        let end = self.succeeded_at.or(self.failed_at)?;
        Some(end.since(start))
    }
}

/// What a graph run has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphState {
    /// Names of the steps that succeeded, sorted.
    pub completed: Vec<String>,
    /// Names of the steps that failed for good (their current attempt
    /// failed and their retry policy has no attempt left), sorted: what a
    /// graph engine routes around or fails the run on.
    pub failed: Vec<String>,
    /// Names of the steps whose current attempt failed but which have an
    /// attempt left (a claim will retry them), sorted: not failed yet.
    pub retrying: Vec<String>,
    /// The branch taken at each step that recorded one.
    pub branches: BTreeMap<String, String>,
}

/// One step in a run's status summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepSummary {
    /// The step's name.
    pub name: String,
    /// Its latest attempt's status.
    pub status: StepStatus,
    /// How many attempts it has had.
    pub attempts: u32,
    /// How long its latest attempt ran, once finished.
    pub duration: Option<Duration>,
}

/// A workflow version to store.
#[derive(Clone, Debug, PartialEq)]
pub struct NewWorkflowVersion {
    /// The workflow's name.
    pub workflow: String,
    /// The hash of its graph.
    pub graph_hash: String,
    /// The graph itself.
    pub graph: Value,
}

/// A stored workflow version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowVersion {
    /// Its id.
    pub id: VersionId,
    /// The workflow's name.
    pub workflow: String,
    /// The hash of its graph.
    pub graph_hash: String,
    /// The graph.
    pub graph: Value,
    /// What it was built from (the code or document), when its writer gave
    /// it ([`propose_version`](crate::ports::VersionStore::propose_version));
    /// `None` otherwise.
    pub source: Option<String>,
    /// Where it stands: [`VersionStatus::Active`] unless it was proposed as
    /// a draft.
    pub status: VersionStatus,
    /// When it was first stored.
    pub created_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_sensibly() {
        let q = |limit| {
            RunQuery {
                limit,
                ..RunQuery::default()
            }
            .effective_limit()
        };
        assert_eq!(q(0), RunQuery::DEFAULT_LIMIT);
        assert_eq!(q(7), 7);
        assert_eq!(q(1_000_000), RunQuery::MAX_LIMIT);
    }

    #[test]
    fn new_records_start_where_the_status_machines_start() {
        let now = Timestamp::from_millis(7);
        let run = NewRun::new("wf", serde_json::json!(1)).into_run(RunId::generate(), now);
        assert_eq!(
            (run.status, run.created_at, run.updated_at),
            (RunStatus::Running, now, now)
        );
        let step = NewStep::new(run.id, "s", "f", serde_json::json!({}))
            .with_retry(RetryPolicy {
                retries: 2,
                retry_delay: Some(Duration::from_micros(1_500)),
            })
            .into_step(StepId::generate(), now)
            .unwrap();
        assert_eq!((step.status, step.attempt), (StepStatus::Pending, 1));
        assert_eq!(step.retry.retry_delay, Some(Duration::from_millis(1)));
        assert_eq!((step.result, step.error, step.branch), (None, None, None));
    }

    #[test]
    fn duration_needs_a_start_and_an_end() {
        let mut attempt = StepAttempt {
            id: HistoryId::generate(),
            step: StepId::generate(),
            step_name: "s".into(),
            attempt: 1,
            status: StepStatus::Running,
            result: None,
            error: None,
            created_at: Timestamp::from_millis(0),
            scheduled_at: None,
            running_at: Some(Timestamp::from_millis(10)),
            succeeded_at: None,
            failed_at: None,
        };
        assert_eq!(attempt.duration(), None);
        attempt.failed_at = Some(Timestamp::from_millis(25));
        assert_eq!(attempt.duration(), Some(Duration::from_millis(15)));
        attempt.running_at = None;
        assert_eq!(attempt.duration(), None);
    }
}
