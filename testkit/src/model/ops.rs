//! The operations of the model test ([`Op`]) and the strategy that draws
//! sequences of them ([`ops`]).
//!
//! An op names runs and steps by *slot* (the n-th run created, a step name
//! in that run), never by id, so the same op means the same thing to every
//! store and a sequence with ops removed (proptest shrinking it) still
//! makes sense. The universe is small on purpose (three run slots, six step
//! names, two functions, three state keys), so ops collide: claims race
//! for the same step, names are reused, refusals are frequent.

use std::fmt;

use flowstate_core::{Completion, RetryStart, RunStatus, StepTransition};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

/// The step names a sequence draws from; most ops pick the first two.
pub static NAMES: [&str; 6] = ["s0", "s1", "s2", "s3", "s4", "s5"];

/// The functions steps are pinned to; claims also name `"h"`, pinned by
/// no step, and `""`, which is invalid input.
pub static FUNCTIONS: [&str; 2] = ["f", "g"];

/// The state keys a sequence writes.
pub static STATE_KEYS: [&str; 3] = ["a", "b", "c"];

/// How many run slots ops name: a slot not created yet is a run that does
/// not exist.
pub const RUN_SLOTS: usize = 3;

/// A step by slot: step `name` of the run created `run`-th (from 0).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepRef {
    /// The run slot.
    pub run: usize,
    /// The step's name, one of [`NAMES`].
    pub name: &'static str,
}

impl fmt::Debug for StepRef {
    /// `r0.s1`: short, for the sequences a failure prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}.{}", self.run, self.name)
    }
}

/// Which attempt a fenced write claims to hold, relative to the step's
/// current attempt on the reference store when the op runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The current attempt: the claim a claimer of the step holds.
    Current,
    /// The attempt before it (0 for a first attempt): a stale claim.
    Previous,
    /// The attempt after it: a claim no store has handed out.
    Next,
}

impl Attempt {
    /// The attempt number this pick names when the step is in `current`.
    pub fn of(self, current: u32) -> u32 {
        match self {
            Self::Current => current,
            Self::Previous => current.saturating_sub(1),
            Self::Next => current.saturating_add(1),
        }
    }
}

/// A JSON payload: a result, an error, a state value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// `null`: a value, not an absence.
    Null,
    /// `0`.
    Zero,
    /// `"x"`.
    Text,
    /// `{"k": [1, true]}`.
    Nested,
}

impl Payload {
    /// The JSON value.
    pub fn json(self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Zero => json!(0),
            Self::Text => json!("x"),
            Self::Nested => json!({"k": [1, true]}),
        }
    }
}

/// Where a transition moves a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// To running.
    Running,
    /// To scheduled.
    Scheduled,
    /// To succeeded, with a result.
    Succeeded(Payload),
    /// To failed, with an error.
    Failed(Payload),
}

impl Target {
    /// The transition.
    pub fn transition(self) -> StepTransition {
        match self {
            Self::Running => StepTransition::Running,
            Self::Scheduled => StepTransition::Scheduled,
            Self::Succeeded(p) => StepTransition::Succeeded(p.json()),
            Self::Failed(p) => StepTransition::Failed(p.json()),
        }
    }
}

/// What a claimer writes in a batch completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded with a result.
    Succeeded(Payload),
    /// It failed with an error.
    Failed(Payload),
}

impl Outcome {
    /// The completion.
    pub fn completion(self) -> Completion {
        match self {
            Self::Succeeded(p) => Completion::Succeeded(p.json()),
            Self::Failed(p) => Completion::Failed(p.json()),
        }
    }
}

/// One operation on a store, named by slots.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `create_run`, with an idempotency key or none.
    CreateRun {
        /// The idempotency key.
        key: Option<&'static str>,
    },
    /// `get_run`.
    GetRun {
        /// The run slot.
        run: usize,
    },
    /// `set_run_status`.
    SetRunStatus {
        /// The run slot.
        run: usize,
        /// The status asked for.
        to: RunStatus,
    },
    /// `write_state`.
    WriteState {
        /// The run slot.
        run: usize,
        /// The key, one of [`STATE_KEYS`].
        key: &'static str,
        /// The value.
        value: Payload,
    },
    /// `read_state`.
    ReadState {
        /// The run slot.
        run: usize,
    },
    /// `insert_step`.
    InsertStep {
        /// The step.
        step: StepRef,
        /// The function it is pinned to, if any.
        function: Option<&'static str>,
        /// Its retry policy's retries.
        retries: u32,
        /// Whether its retry policy waits two minutes between attempts.
        retry_delay: bool,
        /// Its own claim timeout in minutes, if any (else the store's).
        claim_timeout_minutes: Option<u64>,
    },
    /// `get_step`.
    GetStep(StepRef),
    /// `find_step`.
    FindStep(StepRef),
    /// `list_steps`.
    ListSteps {
        /// The run slot.
        run: usize,
    },
    /// `claim_step`.
    ClaimStep {
        /// The step.
        step: StepRef,
        /// The function the claimer runs.
        function: &'static str,
    },
    /// `claim_step_outcome`.
    ClaimStepOutcome {
        /// The step.
        step: StepRef,
        /// The function the claimer runs.
        function: &'static str,
    },
    /// `transition_step`, unfenced.
    TransitionStep {
        /// The step.
        step: StepRef,
        /// Where to.
        to: Target,
    },
    /// `transition_claimed`, with a claim of the picked attempt.
    TransitionClaimed {
        /// The step.
        step: StepRef,
        /// The attempt the claim holds.
        attempt: Attempt,
        /// Where to.
        to: Target,
    },
    /// `renew_step_claim`, with a claim of the picked attempt.
    RenewStepClaim {
        /// The step.
        step: StepRef,
        /// The attempt the claim holds.
        attempt: Attempt,
    },
    /// `create_retry_attempt`.
    CreateRetryAttempt {
        /// The step.
        step: StepRef,
        /// The new attempt's status.
        start: RetryStart,
    },
    /// `retry_step`.
    RetryStep {
        /// The step.
        step: StepRef,
        /// The new attempt's status.
        start: RetryStart,
    },
    /// `claim_batch`.
    ClaimBatch {
        /// The most steps it takes.
        limit: u32,
        /// Only steps pinned to this function.
        function: Option<&'static str>,
    },
    /// `complete_batch`, each item with a claim of the picked attempt.
    CompleteBatch {
        /// The items, in order (a step may repeat).
        items: Vec<(StepRef, Attempt, Outcome)>,
    },
    /// `step_history`.
    StepHistory {
        /// The run slot.
        run: usize,
    },
    /// Moves both stores' clocks (and so their lease clocks) this many
    /// minutes on.
    AdvanceClock {
        /// Whole minutes.
        minutes: u64,
    },
    /// `expire_step_claims`.
    ExpireStepClaims {
        /// The most claims it takes back.
        limit: u32,
    },
}

fn key() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![2 => Just(None), 1 => Just(Some("k0")), 1 => Just(Some("k1"))]
}

fn run() -> impl Strategy<Value = usize> {
    prop_oneof![6 => Just(0usize), 2 => Just(1), 1 => Just(2)]
}

fn name() -> impl Strategy<Value = &'static str> {
    prop_oneof![7 => select(&NAMES[..2]), 2 => Just(NAMES[2]), 1 => select(&NAMES[..])]
}

fn step() -> impl Strategy<Value = StepRef> {
    (run(), name()).prop_map(|(run, name)| StepRef { run, name })
}

fn claimer() -> impl Strategy<Value = &'static str> {
    prop_oneof![8 => Just(FUNCTIONS[0]), 3 => Just(FUNCTIONS[1]), 1 => Just("h"), 1 => Just("")]
}

fn attempt() -> impl Strategy<Value = Attempt> {
    prop_oneof![
        4 => Just(Attempt::Current),
        1 => Just(Attempt::Previous),
        1 => Just(Attempt::Next),
    ]
}

fn payload() -> impl Strategy<Value = Payload> {
    select(&[Payload::Zero, Payload::Null, Payload::Text, Payload::Nested][..])
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        3 => payload().prop_map(Target::Succeeded),
        3 => payload().prop_map(Target::Failed),
        1 => Just(Target::Running),
        1 => Just(Target::Scheduled),
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        2 => payload().prop_map(Outcome::Succeeded),
        1 => payload().prop_map(Outcome::Failed),
    ]
}

fn insert() -> impl Strategy<Value = Op> {
    let function = prop_oneof![
        3 => Just(Some(FUNCTIONS[0])),
        1 => Just(Some(FUNCTIONS[1])),
        1 => Just(None),
    ];
    let timeout = prop_oneof![2 => Just(None), 1 => Just(Some(1u64)), 1 => Just(Some(2))];
    let delay = prop_oneof![3 => Just(false), 1 => Just(true)];
    (step(), function, 0u32..=2, delay, timeout).prop_map(
        |(step, function, retries, retry_delay, claim_timeout_minutes)| Op::InsertStep {
            step,
            function,
            retries,
            retry_delay,
            claim_timeout_minutes,
        },
    )
}

/// One op, weighted towards the ones that build state (runs, steps,
/// claims, completions).
pub fn op() -> impl Strategy<Value = Op> {
    let start = select(&RetryStart::ALL[..]);
    let batch_function = prop_oneof![3 => Just(None), 1 => Just(Some("f")), 1 => Just(Some("h"))];
    prop_oneof![
        1 => key().prop_map(|key| Op::CreateRun { key }),
        1 => run().prop_map(|run| Op::GetRun { run }),
        1 => (run(), select(RunStatus::ALL)).prop_map(|(run, to)| Op::SetRunStatus { run, to }),
        2 => (run(), select(&STATE_KEYS[..]), payload())
            .prop_map(|(run, key, value)| Op::WriteState { run, key, value }),
        1 => run().prop_map(|run| Op::ReadState { run }),
        3 => insert(),
        1 => step().prop_map(Op::GetStep),
        1 => step().prop_map(Op::FindStep),
        1 => run().prop_map(|run| Op::ListSteps { run }),
        6 => (step(), claimer()).prop_map(|(step, function)| Op::ClaimStep { step, function }),
        3 => (step(), claimer())
            .prop_map(|(step, function)| Op::ClaimStepOutcome { step, function }),
        2 => (step(), target()).prop_map(|(step, to)| Op::TransitionStep { step, to }),
        8 => (step(), attempt(), target())
            .prop_map(|(step, attempt, to)| Op::TransitionClaimed { step, attempt, to }),
        3 => (step(), attempt()).prop_map(|(step, attempt)| Op::RenewStepClaim { step, attempt }),
        2 => (step(), start.clone())
            .prop_map(|(step, start)| Op::CreateRetryAttempt { step, start }),
        1 => (step(), start).prop_map(|(step, start)| Op::RetryStep { step, start }),
        4 => (select(&[0u32, 1, 2, 3, 10][..]), batch_function)
            .prop_map(|(limit, function)| Op::ClaimBatch { limit, function }),
        4 => proptest::collection::vec((step(), attempt(), outcome()), 0..=3)
            .prop_map(|items| Op::CompleteBatch { items }),
        1 => run().prop_map(|run| Op::StepHistory { run }),
        3 => select(&[1u64, 2, 10][..]).prop_map(|minutes| Op::AdvanceClock { minutes }),
        2 => select(&[1u32, 2, 100][..]).prop_map(|limit| Op::ExpireStepClaims { limit }),
    ]
}

/// Sequences of at most `max_ops` ops (at least four): one to three runs
/// created, up to a quarter of the ops inserting steps, then any ops, so
/// most ops find something to act on. Shrinking drops and simplifies ops
/// in each part.
pub fn ops(max_ops: usize) -> impl Strategy<Value = Vec<Op>> {
    let max_ops = max_ops.max(4);
    let create = prop_oneof![3 => Just(None), 1 => key()].prop_map(|key| Op::CreateRun { key });
    let runs = proptest::collection::vec(create, 1..=3);
    let steps = proptest::collection::vec(insert(), 0..=max_ops / 4);
    let rest = proptest::collection::vec(op(), 0..=max_ops - 3 - max_ops / 4);
    (runs, steps, rest).prop_map(|(mut runs, steps, rest)| {
        runs.extend(steps);
        runs.extend(rest);
        runs
    })
}
