//! What the dense races share: 64 steps (eight runs of eight) or 64 runs
//! put in given statuses concurrently, eight racers per target released by
//! one barrier, and a read-back of every step with its history rows.
//!
//! One target raced by N callers lets a read-then-write bug through on most
//! runs (the racers rarely overlap in the one window that matters); 64
//! targets raced at once open 64 such windows in one race, so a decision
//! made by a read followed by an unguarded write fails every run.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{
    NewRun, NewStep, RetryPolicy, RunId, RunStatus, Step, StepAttempt, StepId, StepStatus,
    StepTransition,
};
use serde_json::{Value, json};

use crate::Harness;
use crate::cases::support::{FUNCTION, race};

/// Targets (steps or runs) per race.
pub(crate) const TARGETS: usize = 64;
/// Callers per target.
pub(crate) const RACERS: usize = 8;

/// Where a step stands when its race starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// Pending, attempt 1.
    Pending,
    /// Scheduled, attempt 1.
    Scheduled,
    /// Claimed: running attempt 1.
    Running,
    /// Succeeded on attempt 1 with `{"ok": true}`.
    Succeeded,
    /// Failed on attempt 1 with [`boom`], one retry left.
    Retryable,
    /// Failed on attempt 1 with [`boom`], no retry left.
    Exhausted,
    /// Claimed again after attempt 1 failed with [`boom`]: running attempt 2.
    Retried,
}

/// The error every failed fixture attempt carries.
pub(crate) fn boom() -> Value {
    json!({"message": "boom"})
}

/// The steps of a dense race as they stood before it, and their runs.
pub(crate) struct Dense {
    /// The runs, eight steps each (the last may hold fewer).
    pub(crate) runs: Vec<RunId>,
    /// Step `i` (named `s{i % 8}` in run `i / 8`), started as asked.
    pub(crate) steps: Vec<Step>,
}

/// A step and its history rows, in history order.
pub(crate) type WithHistory = (Step, Vec<StepAttempt>);

/// Makes one step per entry of `starts`, in runs of eight, every step with
/// its own claim timeout `claim_timeout` if given: the runs are created,
/// then the steps inserted and moved, each batch concurrently.
pub(crate) async fn dense_steps<H: Harness>(
    h: &H,
    starts: &[Start],
    claim_timeout: Option<Duration>,
) -> Dense {
    let runs: Vec<RunId> = race(h.store(), starts.len().div_ceil(8), |store, _| async move {
        store
            .create_run(NewRun::new("wf", json!({})))
            .await
            .expect("create_run")
            .record
            .id
    })
    .await;
    let starts = Arc::new(starts.to_vec());
    let runs_of = Arc::new(runs.clone());
    let steps = race(h.store(), starts.len(), |store, i| {
        let (start, run) = (starts[i], runs_of[i / 8]);
        async move {
            let retries = u32::from(start != Start::Exhausted);
            let mut step = NewStep::new(run, format!("s{}", i % 8), FUNCTION, json!({"i": i}))
                .with_retry(RetryPolicy::with_retries(retries));
            if let Some(timeout) = claim_timeout {
                step = step.with_claim_timeout(timeout);
            }
            let step = store.insert_step(step).await.expect("insert_step").record;
            let claim = || store.claim_step(run, &step.name, FUNCTION);
            let moves: &[StepTransition] = match start {
                Start::Pending | Start::Running => &[],
                Start::Scheduled => &[StepTransition::Scheduled],
                Start::Succeeded => &[
                    StepTransition::Running,
                    StepTransition::Succeeded(json!({"ok": true})),
                ],
                Start::Retryable | Start::Exhausted | Start::Retried => {
                    &[StepTransition::Running, StepTransition::Failed(boom())]
                }
            };
            for transition in moves {
                store
                    .transition_step(step.id, transition.clone())
                    .await
                    .expect("transition_step");
            }
            if matches!(start, Start::Running | Start::Retried) {
                return claim().await.expect("claim_step").expect("claimable");
            }
            store.get_step(step.id).await.expect("get_step")
        }
    })
    .await;
    Dense { runs, steps }
}

/// `n` fresh runs, run `i` moved to `status(i)` (running or suspended),
/// created concurrently.
pub(crate) async fn dense_runs<H: Harness>(
    h: &H,
    n: usize,
    status: fn(usize) -> RunStatus,
) -> Vec<RunId> {
    race(h.store(), n, |store, i| async move {
        let run = store
            .create_run(NewRun::new("wf", json!({"i": i})))
            .await
            .expect("create_run")
            .record;
        match status(i) {
            RunStatus::Running => run.id,
            to => store.set_run_status(run.id, to).await.expect("set").id,
        }
    })
    .await
}

/// Every step of `dense` as the store reads it now, with its history rows,
/// in the order of `dense.steps`: one `list_steps` and one `step_history`
/// per run.
pub(crate) async fn read_back<H: Harness>(h: &H, dense: &Dense) -> Vec<WithHistory> {
    let mut steps: BTreeMap<StepId, WithHistory> = BTreeMap::new();
    for &run in &dense.runs {
        for step in h.store().list_steps(run).await.expect("list_steps") {
            steps.insert(step.id, (step, Vec::new()));
        }
        for row in h.store().step_history(run).await.expect("step_history") {
            let (_, rows) = steps.get_mut(&row.step).expect("a row of a listed step");
            rows.push(row);
        }
    }
    dense
        .steps
        .iter()
        .map(|s| steps.remove(&s.id).expect("a raced step is still there"))
        .collect()
}

/// The rows of a history as `(attempt, status, result, error)`: what the
/// dense races assert (times are the clock's and it does not move).
pub(crate) fn rows(
    history: &[StepAttempt],
) -> Vec<(u32, StepStatus, Option<Value>, Option<Value>)> {
    history
        .iter()
        .map(|r| (r.attempt, r.status, r.result.clone(), r.error.clone()))
        .collect()
}

/// Races `task(store, target, racer)` for every target in `0..targets` and
/// racer in `0..RACERS`, all released by one barrier, and answers the
/// outcomes per target, in racer order.
pub(crate) async fn race_dense<S, T, F, Fut>(store: &Arc<S>, targets: usize, task: F) -> Vec<Vec<T>>
where
    S: Send + Sync + 'static,
    T: Send + 'static,
    F: Fn(Arc<S>, usize, usize) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let flat = race(store, targets * RACERS, |s, i| {
        task(s, i / RACERS, i % RACERS)
    })
    .await;
    let mut per_target: Vec<Vec<T>> = Vec::with_capacity(targets);
    let mut flat = flat.into_iter();
    for _ in 0..targets {
        per_target.push(flat.by_ref().take(RACERS).collect());
    }
    per_target
}

/// The racer whose outcome is `Ok`, asserting there is exactly one.
pub(crate) fn one_winner<T: Debug, E: Debug>(what: &str, outcomes: &[Result<T, E>]) -> usize {
    let won: Vec<usize> = (0..outcomes.len())
        .filter(|&r| outcomes[r].is_ok())
        .collect();
    assert_eq!(
        won.len(),
        1,
        "{what}: racers {won:?} of {} won: {outcomes:?}",
        outcomes.len()
    );
    won[0]
}

/// The payloads a transition writes, as `(result, error)`.
pub(crate) fn payloads(transition: &StepTransition) -> (Option<Value>, Option<Value>) {
    match transition {
        StepTransition::Succeeded(result) => (Some(result.clone()), None),
        StepTransition::Failed(error) => (None, Some(error.clone())),
        StepTransition::Running | StepTransition::Scheduled => (None, None),
    }
}

/// Asserts that `now` (with its history) is `before` moved in place by
/// `won`: the status and payload of `won`, the same attempt, a claim
/// deadline only if it is running, earlier attempts' rows untouched and
/// the current attempt's row moved with it.
pub(crate) fn assert_moved(
    what: &str,
    before: &WithHistory,
    now: &WithHistory,
    won: &StepTransition,
) {
    let ((was, was_rows), (step, history)) = (before, now);
    let (result, error) = payloads(won);
    let to = won.target();
    assert_eq!(
        (step.status, step.attempt, &step.result, &step.error),
        (to, was.attempt, &result, &error),
        "{what}: the step is not as the winning move left it"
    );
    assert_eq!(
        step.claimed_until.is_some(),
        to == StepStatus::Running,
        "{what}: claim deadline {:?} in {to}",
        step.claimed_until
    );
    let mut expected = rows(was_rows);
    let last = expected.last_mut().expect("every step has a history row");
    *last = (was.attempt, to, result, error);
    assert_eq!(rows(history), expected, "{what}: history");
}
