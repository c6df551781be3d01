//! What a store answered to an op ([`Reply`]), with what may legitimately
//! differ between two stores taken out, so the two answers compare with
//! `==`:
//!
//! - **Ids** a store generates are replaced by canonical ones: the n-th run
//!   created reads `00000000-0000-0000-0000-00000000000n` on both stores,
//!   a step `00000000-0000-0000-<run>-<name>`, and a history row's id (which
//!   nothing else names) the nil id.
//! - **Errors** compare by variant and the ids and statuses they carry,
//!   never by message ([`Refusal`]); a backend failure is never expected
//!   ([`Refusal::Unexpected`] fails the comparison even on both sides).
//! - **Claim deadlines** are on each store's lease clock; the subject's may
//!   run ahead of the reference's by the real time passed
//!   ([`LeaseClock`](super::LeaseClock)). One within that window is taken as the reference's.
//! - **Ties** a port leaves unordered are put in one order on both sides:
//!   history rows of one creation time and attempt number (the port orders
//!   by those two only) and expired claims of one deadline.

use std::collections::HashMap;

use flowstate_core::error::InvalidInput;
use flowstate_core::{
    ClaimOutcome, Error, ExpiredClaim, HistoryId, Inserted, Run, RunId, RunStatus, Step,
    StepAttempt, StepId, StepStatus, Timestamp,
};
use serde_json::{Map, Value};

use super::ops::{NAMES, StepRef};

/// An op's answer, ids canonical ([`Answer`]), or its refusal.
pub type Reply = Result<Answer, Refusal>;

/// What a store answered, by the shape of the port method's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// `Ok(())`.
    Done,
    /// A run.
    Run(Run),
    /// A run from `create_run`.
    NewRun(Inserted<Run>),
    /// A step.
    Step(Step),
    /// A step from `insert_step`.
    NewStep(Inserted<Step>),
    /// `claim_step`'s answer.
    Claimed(Option<Step>),
    /// `claim_step_outcome`'s answer.
    Outcome(ClaimOutcome),
    /// Steps, in the store's order.
    Steps(Vec<Step>),
    /// History rows, in the store's order (ties ordered by step).
    History(Vec<StepAttempt>),
    /// A run's state.
    State(Map<String, Value>),
    /// A claim deadline.
    Deadline(Timestamp),
    /// Expired claims, in the store's order (ties ordered by step).
    Expired(Vec<ExpiredClaim>),
    /// One result per item of a batch completion.
    Completed(Vec<Result<(), Refusal>>),
}

/// An [`Error`], compared by variant and the ids and statuses it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// [`Error::RunNotFound`].
    RunNotFound(RunId),
    /// [`Error::StepNotFound`].
    StepNotFound(StepId),
    /// [`Error::StepNameNotFound`].
    StepNameNotFound {
        /// The run.
        run: RunId,
        /// The name.
        name: String,
    },
    /// [`Error::IllegalRunTransition`].
    IllegalRunTransition {
        /// The run.
        run: RunId,
        /// Its status.
        from: RunStatus,
        /// The status asked for.
        to: RunStatus,
    },
    /// [`Error::IllegalStepTransition`].
    IllegalStepTransition {
        /// The step.
        step: StepId,
        /// Its status.
        from: StepStatus,
        /// The status asked for.
        to: StepStatus,
    },
    /// [`Error::FunctionMismatch`].
    FunctionMismatch {
        /// The run.
        run: RunId,
        /// The step's name.
        name: String,
        /// The step's function.
        expected: String,
        /// The claim's.
        claimed: String,
    },
    /// [`Error::ClaimLost`].
    ClaimLost {
        /// The step.
        step: StepId,
        /// The stale claim's attempt.
        attempt: u32,
    },
    /// [`Error::RunSettled`].
    RunSettled {
        /// The run.
        run: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// [`Error::InvalidInput`], by the kind of refusal only (the field's
    /// label is the backend's wording).
    InvalidInput(&'static str),
    /// Anything a model op never provokes (a backend failure, a pool
    /// timeout, a corrupt row): its message. Never expected.
    Unexpected(String),
}

/// Whether `reply` holds a [`Refusal::Unexpected`], itself or in an item.
pub(crate) fn unexpected(reply: &Reply) -> bool {
    match reply {
        Err(Refusal::Unexpected(_)) => true,
        Ok(Answer::Completed(items)) => items
            .iter()
            .any(|item| matches!(item, Err(Refusal::Unexpected(_)))),
        _ => false,
    }
}

/// An id that parses: `00000000-0000-0000-<mid>-<low>`.
fn id<T: std::str::FromStr>(mid: usize, low: usize) -> T
where
    T::Err: std::fmt::Debug,
{
    format!("00000000-0000-0000-{mid:04}-{low:012}")
        .parse()
        .expect("a canonical id parses")
}

/// The run every op naming a slot not created yet uses: no store has it.
pub(crate) fn unknown_run() -> RunId {
    id(9999, 999_999_999_999)
}

/// The step every op naming a step not inserted yet uses.
pub(crate) fn unknown_step() -> StepId {
    id(9998, 999_999_999_999)
}

/// One store's ids, by slot, and their canonical forms.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    /// The runs this store created, in order.
    runs: Vec<RunId>,
    /// The steps it inserted, by slot.
    steps: HashMap<StepRef, StepId>,
}

impl Ids {
    /// The run in `slot`, or [`unknown_run`].
    pub(crate) fn run(&self, slot: usize) -> RunId {
        self.runs.get(slot).copied().unwrap_or_else(unknown_run)
    }

    /// The step in `step`'s slot, or [`unknown_step`].
    pub(crate) fn step(&self, step: StepRef) -> StepId {
        self.steps.get(&step).copied().unwrap_or_else(unknown_step)
    }

    /// Every step inserted.
    pub(crate) fn steps(&self) -> impl Iterator<Item = StepId> + '_ {
        self.steps.values().copied()
    }

    /// Notes a run this store created.
    pub(crate) fn created_run(&mut self, id: RunId) {
        if !self.runs.contains(&id) {
            self.runs.push(id);
        }
    }

    /// Notes the step holding `step`'s slot.
    pub(crate) fn inserted_step(&mut self, step: StepRef, id: StepId) {
        if self.runs.get(step.run).is_some() {
            self.steps.entry(step).or_insert(id);
        }
    }

    fn canonical_run(&self, run: RunId) -> RunId {
        self.runs
            .iter()
            .position(|r| *r == run)
            .map_or(run, |slot| id(0, slot))
    }

    fn canonical_step(&self, step: StepId) -> StepId {
        self.steps
            .iter()
            .find(|(_, id)| **id == step)
            .map_or(step, |(slot, _)| {
                let name = NAMES.iter().position(|n| *n == slot.name).unwrap_or(99);
                id(slot.run + 1, name)
            })
    }

    fn canonical_step_record(&self, mut step: Step) -> Step {
        step.id = self.canonical_step(step.id);
        step.run = self.canonical_run(step.run);
        step
    }

    fn canonical_run_record(&self, mut run: Run) -> Run {
        run.id = self.canonical_run(run.id);
        run.parent = run.parent.map(|p| self.canonical_run(p));
        run
    }

    /// `answer` with every id canonical.
    pub(crate) fn answer(&self, answer: Answer) -> Answer {
        let steps = |steps: Vec<Step>| -> Vec<Step> {
            let canonical = |s| self.canonical_step_record(s);
            steps.into_iter().map(canonical).collect()
        };
        match answer {
            Answer::Run(run) => Answer::Run(self.canonical_run_record(run)),
            Answer::NewRun(new) => Answer::NewRun(Inserted {
                record: self.canonical_run_record(new.record),
                inserted: new.inserted,
            }),
            Answer::Step(step) => Answer::Step(self.canonical_step_record(step)),
            Answer::NewStep(new) => Answer::NewStep(Inserted {
                record: self.canonical_step_record(new.record),
                inserted: new.inserted,
            }),
            Answer::Claimed(step) => Answer::Claimed(step.map(|s| self.canonical_step_record(s))),
            Answer::Outcome(ClaimOutcome::Claimed(step)) => {
                Answer::Outcome(ClaimOutcome::Claimed(self.canonical_step_record(step)))
            }
            Answer::Steps(list) => Answer::Steps(steps(list)),
            Answer::History(rows) => Answer::History(
                rows.into_iter()
                    .map(|mut row| {
                        row.id = id::<HistoryId>(0, 0);
                        row.step = self.canonical_step(row.step);
                        row
                    })
                    .collect(),
            ),
            Answer::Expired(claims) => Answer::Expired(
                claims
                    .into_iter()
                    .map(|mut claim| {
                        claim.run = self.canonical_run(claim.run);
                        claim.step = self.canonical_step(claim.step);
                        claim
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    /// `error` as a [`Refusal`], its ids canonical.
    pub(crate) fn refusal(&self, error: Error) -> Refusal {
        match error {
            Error::RunNotFound(run) => Refusal::RunNotFound(self.canonical_run(run)),
            Error::StepNotFound(step) => Refusal::StepNotFound(self.canonical_step(step)),
            Error::StepNameNotFound { run, name } => Refusal::StepNameNotFound {
                run: self.canonical_run(run),
                name,
            },
            Error::IllegalRunTransition { run, from, to } => Refusal::IllegalRunTransition {
                run: self.canonical_run(run),
                from,
                to,
            },
            Error::IllegalStepTransition { step, from, to } => Refusal::IllegalStepTransition {
                step: self.canonical_step(step),
                from,
                to,
            },
            Error::FunctionMismatch {
                run,
                name,
                expected,
                claimed,
            } => Refusal::FunctionMismatch {
                run: self.canonical_run(run),
                name,
                expected,
                claimed,
            },
            Error::ClaimLost { step, attempt } => Refusal::ClaimLost {
                step: self.canonical_step(step),
                attempt,
            },
            Error::RunSettled { run, status } => Refusal::RunSettled {
                run: self.canonical_run(run),
                status,
            },
            Error::InvalidInput(input) => Refusal::InvalidInput(match input {
                InvalidInput::TooLarge { .. } => "too large",
                InvalidInput::NulCharacter { .. } => "NUL character",
                InvalidInput::Empty { .. } => "empty",
                InvalidInput::OutOfRange { .. } => "out of range",
                InvalidInput::TooDeep { .. } => "too deep",
                _ => "other",
            }),
            other => Refusal::Unexpected(format!("{other:?}: {other}")),
        }
    }
}
