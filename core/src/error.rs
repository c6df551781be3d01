//! The error every store port returns.
//!
//! Variants carry the ids involved, and [`Error::is_retryable`] says whether
//! trying the same call again can help: a lost race, an illegal transition or
//! bad input will fail the same way again; a dropped connection may not.

use crate::ids::{
    ActivationId, EventId, PublishedVersionId, RunId, StepId, VersionId, VirtualUserRunId,
    WorkflowId,
};
use crate::status::{
    RunStatus, StatusKind, StepStatus, UnknownStatus, VersionStatus, VirtualUserRunStatus,
};

/// `Result` with flowstate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The run does not exist.
    #[error("run {0} not found")]
    RunNotFound(RunId),
    /// The step does not exist.
    #[error("step {0} not found")]
    StepNotFound(StepId),
    /// No step of that name exists in the run.
    #[error("run {run} has no step named {name:?}")]
    StepNameNotFound {
        /// The run searched.
        run: RunId,
        /// The step name asked for.
        name: String,
    },
    /// The run's status machine does not allow the move; nothing was written.
    #[error("run {run} cannot move from {from} to {to}")]
    IllegalRunTransition {
        /// The run.
        run: RunId,
        /// Its status when the move was attempted.
        from: RunStatus,
        /// The status asked for.
        to: RunStatus,
    },
    /// The step's status machine does not allow the move; nothing was written.
    #[error("step {step} cannot move from {from} to {to}")]
    IllegalStepTransition {
        /// The step.
        step: StepId,
        /// Its status when the move was attempted.
        from: StepStatus,
        /// The status asked for.
        to: StepStatus,
    },
    /// A claim named another function than the step was dispatched with; the
    /// step was not touched.
    #[error("step {name:?} of run {run} was dispatched with {expected:?}, not {claimed:?}")]
    FunctionMismatch {
        /// The run.
        run: RunId,
        /// The step name.
        name: String,
        /// The function the step is pinned to.
        expected: String,
        /// The function the claim named.
        claimed: String,
    },
    /// The virtual-user run does not exist.
    #[error("virtual-user run {0} not found")]
    VirtualUserRunNotFound(VirtualUserRunId),
    /// The virtual-user run has already finished (completed, failed or
    /// reaped); nothing was written.
    #[error("virtual-user run {run} is already {status}")]
    VirtualUserRunSettled {
        /// The run.
        run: VirtualUserRunId,
        /// The status it settled in.
        status: VirtualUserRunStatus,
    },
    /// The persona has no schedule.
    #[error("persona {0:?} has no schedule")]
    ScheduleNotFound(String),
    /// The workflow version does not exist.
    #[error("workflow version {0} not found")]
    VersionNotFound(VersionId),
    /// The version's status machine ([`VersionStatus::TRANSITIONS`]) does
    /// not allow the move: only a draft is accepted or declined, once;
    /// nothing was written.
    #[error("workflow version {version} cannot move from {from} to {to}")]
    IllegalVersionTransition {
        /// The version.
        version: VersionId,
        /// Its status when the move was attempted.
        from: VersionStatus,
        /// The status asked for.
        to: VersionStatus,
    },
    /// The workflow definition does not exist.
    #[error("workflow {0} not found")]
    WorkflowNotFound(WorkflowId),
    /// The published version does not exist, or belongs to another
    /// workflow than the one named with it.
    #[error("version {version} of workflow {workflow} not found")]
    PublishedVersionNotFound {
        /// The workflow named.
        workflow: WorkflowId,
        /// The version asked for.
        version: PublishedVersionId,
    },
    /// The activation does not exist.
    #[error("activation {0} not found")]
    ActivationNotFound(ActivationId),
    /// The event was never recorded.
    #[error("event {0} not found")]
    EventNotFound(EventId),
    /// A lease write carried a fencing token that no longer holds the run's
    /// lease (it was taken over, released or ran out); nothing was written.
    #[error("run {run}: lease of token {token} is lost")]
    LeaseLost {
        /// The run.
        run: RunId,
        /// The stale token.
        token: u64,
    },
    /// A write carried the claim of an attempt that no longer holds the
    /// step: its claim ran out and recovery took the attempt back, or the
    /// step moved on to another attempt; nothing was written
    /// ([`crate::step_claim`]).
    #[error("step {step}: the claim of attempt {attempt} is lost")]
    ClaimLost {
        /// The step.
        step: StepId,
        /// The attempt the stale claim was given.
        attempt: u32,
    },
    /// The run is settled (completed, failed or cancelled): it takes no
    /// new step, claim, state write or signal; nothing was written.
    #[error("run {run} is {status}: settled runs take no more work")]
    RunSettled {
        /// The run.
        run: RunId,
        /// The status it settled in.
        status: RunStatus,
    },
    /// No effect of that key was begun in the run; nothing was written.
    #[error("run {run} has no effect {key:?}")]
    EffectNotFound {
        /// The run.
        run: RunId,
        /// The effect key asked for.
        key: String,
    },
    /// The input was refused before anything was written.
    #[error(transparent)]
    InvalidInput(#[from] InvalidInput),
    /// A stored row holds something no valid write produces (an unknown
    /// status string, malformed JSON): it was written by hand or by a bug.
    #[error("corrupt {what} in stored row {row}: {detail}")]
    Corrupt {
        /// Which column or field.
        what: &'static str,
        /// The id of the row.
        row: String,
        /// What was found.
        detail: String,
    },
    /// The backend could not hand out a connection in time.
    #[error("no connection available within {waited_ms} ms")]
    PoolTimeout {
        /// How long the call waited.
        waited_ms: u64,
    },
    /// The backend failed: a dropped connection, a deadlock victim, a
    /// constraint the store did not expect.
    #[error("backend error during {operation}: {source}")]
    Backend {
        /// The port method that failed.
        operation: &'static str,
        /// Whether the same call may succeed if tried again.
        retryable: bool,
        /// The backend's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// Input refused before any write.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidInput {
    /// A JSON value or key is larger than the configured limit.
    #[error("{field} is {bytes} bytes, over the limit of {limit}")]
    TooLarge {
        /// What was too large.
        field: &'static str,
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A value or key holds a NUL character, which not every backend stores.
    #[error("{field} contains a NUL character")]
    NulCharacter {
        /// Where it was found.
        field: &'static str,
    },
    /// A name or key is empty.
    #[error("{field} is empty")]
    Empty {
        /// What was empty.
        field: &'static str,
    },
    /// A value is out of its allowed range.
    #[error("{field} is out of range: {detail}")]
    OutOfRange {
        /// What was out of range.
        field: &'static str,
        /// Why.
        detail: String,
    },
    /// A JSON value nests arrays and objects deeper than the configured
    /// limit ([`InputLimits::max_json_depth`](crate::InputLimits::max_json_depth)).
    #[error("{field} nests deeper than the limit of {limit} levels")]
    TooDeep {
        /// What was too deep.
        field: &'static str,
        /// The limit.
        limit: usize,
    },
}

impl Error {
    /// Whether trying the same call again may succeed.
    ///
    /// Only backend failures marked retryable and pool timeouts are; a lost
    /// race, an illegal transition, a missing row or bad input fail the same
    /// way every time.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::PoolTimeout { .. } => true,
            Self::Backend { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// A corrupt status string found in `row`: `what` is `"run status"` or
    /// `"step status"`, after the machine it was read for.
    pub fn corrupt_status(row: &impl ToString, err: &UnknownStatus) -> Self {
        Self::Corrupt {
            what: match err.kind {
                StatusKind::Run => "run status",
                StatusKind::Step => "step status",
            },
            row: row.to_string(),
            detail: err.to_string(),
        }
    }

    /// A backend failure during `operation`.
    pub fn backend(
        operation: &'static str,
        retryable: bool,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Self::Backend {
            operation,
            retryable,
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retryable() {
        let run = RunId::generate();
        assert!(!Error::RunNotFound(run).is_retryable());
        assert!(
            !Error::IllegalRunTransition {
                run,
                from: RunStatus::Completed,
                to: RunStatus::Running
            }
            .is_retryable()
        );
        assert!(!Error::LeaseLost { run, token: 3 }.is_retryable());
        let step = StepId::generate();
        assert!(!Error::ClaimLost { step, attempt: 2 }.is_retryable());
        assert!(
            !Error::RunSettled {
                run,
                status: RunStatus::Completed
            }
            .is_retryable()
        );
        assert!(Error::PoolTimeout { waited_ms: 5 }.is_retryable());
        assert!(Error::backend("claim_step", true, "connection reset").is_retryable());
        assert!(!Error::backend("insert_step", false, "unique violation").is_retryable());
    }

    #[test]
    fn a_corrupt_status_names_its_machine_and_row() {
        let run = RunId::generate();
        let rows = [
            ("paused".parse::<RunStatus>().unwrap_err(), "run status"),
            ("paused".parse::<StepStatus>().unwrap_err(), "step status"),
        ];
        for (unknown, expected) in rows {
            match Error::corrupt_status(&run, &unknown) {
                Error::Corrupt { what, row, detail } => {
                    assert_eq!(what, expected);
                    assert_eq!(row, run.to_string());
                    assert_eq!(detail, unknown.to_string());
                }
                other => panic!("expected Corrupt, got {other:?}"),
            }
        }
    }

    #[test]
    fn messages_name_the_ids() {
        let run = RunId::generate();
        assert!(
            Error::RunNotFound(run)
                .to_string()
                .contains(&run.to_string())
        );
    }
}
