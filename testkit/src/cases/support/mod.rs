//! What the cases share: fixtures that put runs and steps in a given status,
//! a race runner, a snapshot for "nothing was written", and `assert_err!`.

pub(crate) mod dense;
pub(crate) mod events;

use std::future::Future;
use std::sync::Arc;

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{
    NewRun, NewStep, RetryPolicy, Run, RunId, RunQuery, RunStatus, Step, StepAttempt, StepStatus,
    StepTransition,
};
use serde_json::{Map, Value, json};
use tokio::sync::Barrier;

use crate::Harness;

/// The function every fixture step is pinned to.
pub(crate) const FUNCTION: &str = "rpc.fn";

/// Asserts that `$result` is an `Err` matching `$pattern`, printing what it
/// was otherwise.
macro_rules! assert_err {
    ($result:expr, $pattern:pat $(if $guard:expr)? $(,)?) => {
        match $result {
            Err($pattern) $(if $guard)? => {}
            other => panic!(
                "expected Err({}), got {:?}",
                stringify!($pattern $(if $guard)?),
                other
            ),
        }
    };
}
pub(crate) use assert_err;

/// What a call answered whose transaction the harness aborted after its
/// pick ([`Hooks::abort_after_pick`](crate::Hooks::abort_after_pick)):
/// `None` for an error, which must be retryable (a conflict, never
/// `Corrupt` and never a refusal), `Some` for what a store that ran its
/// rolled-back transaction again answered.
pub(crate) fn after_abort<T: std::fmt::Debug>(
    what: &str,
    outcome: flowstate_core::Result<T>,
) -> Option<T> {
    match outcome {
        Ok(value) => Some(value),
        Err(err) => {
            assert!(
                err.is_retryable(),
                "{what}, aborted after its pick, answered an error that is not retryable: {err:?}"
            );
            None
        }
    }
}

/// A fresh run of workflow `wf`.
pub(crate) async fn new_run<H: Harness>(h: &H) -> Run {
    h.store()
        .create_run(NewRun::new("wf", json!({"foo": 1})))
        .await
        .expect("create_run")
        .record
}

/// A fresh run moved to `status` through legal transitions.
pub(crate) async fn run_in<H: Harness>(h: &H, status: RunStatus) -> Run {
    let run = new_run(h).await;
    match status {
        RunStatus::Running => run,
        to => h
            .store()
            .set_run_status(run.id, to)
            .await
            .expect("set_run_status"),
    }
}

/// A fresh pending step `name` of `run`, pinned to [`FUNCTION`], with
/// `retries` retries.
pub(crate) async fn new_step<H: Harness>(h: &H, run: RunId, name: &str, retries: u32) -> Step {
    let step = NewStep::new(run, name, FUNCTION, json!({"x": 1}))
        .with_retry(RetryPolicy::with_retries(retries));
    let inserted = h.store().insert_step(step).await.expect("insert_step");
    assert!(inserted.inserted, "step {name} already existed");
    inserted.record
}

/// A fresh step `name` of `run` in `status` (attempt 1, no retries), reached
/// through legal transitions: succeeded with `{"ok": true}`, failed with
/// `{"message": "boom"}`.
pub(crate) async fn step_in<H: Harness>(h: &H, run: RunId, name: &str, status: StepStatus) -> Step {
    let step = new_step(h, run, name, 0).await;
    let moves: &[StepTransition] = match status {
        StepStatus::Pending => &[],
        StepStatus::Scheduled => &[StepTransition::Scheduled],
        StepStatus::Running => &[StepTransition::Running],
        StepStatus::Succeeded => &[
            StepTransition::Running,
            StepTransition::Succeeded(json!({"ok": true})),
        ],
        StepStatus::Failed => &[
            StepTransition::Running,
            StepTransition::Failed(json!({"message": "boom"})),
        ],
    };
    for transition in moves {
        h.store()
            .transition_step(step.id, transition.clone())
            .await
            .expect("transition_step");
    }
    let step = h.store().get_step(step.id).await.expect("get_step");
    assert_eq!(step.status, status);
    step
}

/// The history rows of one step, in history order.
pub(crate) async fn history_of<H: Harness>(h: &H, step: &Step) -> Vec<StepAttempt> {
    let history = h
        .store()
        .step_history(step.run)
        .await
        .expect("step_history");
    history
        .into_iter()
        .filter(|row| row.step == step.id)
        .collect()
}

/// Runs `task(store, i)` for `i in 0..n`, each in its own tokio task, all
/// released at once by a barrier, and answers their outputs in `i` order.
pub(crate) async fn race<S, T, F, Fut>(store: &Arc<S>, n: usize, task: F) -> Vec<T>
where
    S: Send + Sync + 'static,
    T: Send + 'static,
    F: Fn(Arc<S>, usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let barrier = Arc::clone(&barrier);
            let work = task(Arc::clone(store), i);
            tokio::spawn(async move {
                barrier.wait().await;
                work.await
            })
        })
        .collect();
    let mut outputs = Vec::with_capacity(n);
    for handle in handles {
        outputs.push(handle.await.expect("a racing task panicked"));
    }
    outputs
}

/// Everything the ports can read about some runs: to show a refused call
/// wrote nothing.
#[derive(Debug, PartialEq)]
pub(crate) struct Snapshot {
    pub(crate) runs: Vec<Run>,
    pub(crate) per_run: Vec<RunSnapshot>,
}

/// What the ports can read about one run.
#[derive(Debug, PartialEq)]
pub(crate) struct RunSnapshot {
    state: Map<String, Value>,
    steps: Vec<Step>,
    history: Vec<StepAttempt>,
}

/// A [`Snapshot`] of the whole runs listing and of `runs` in detail.
pub(crate) async fn snapshot<H: Harness>(h: &H, runs: &[RunId]) -> Snapshot {
    let store = h.store();
    let query = RunQuery {
        limit: RunQuery::MAX_LIMIT,
        ..RunQuery::default()
    };
    let listed = store.list_runs(&query).await.expect("list_runs").items;
    let mut per_run = Vec::new();
    for &run in runs {
        per_run.push(RunSnapshot {
            state: store.read_state(run).await.expect("read_state"),
            steps: store.list_steps(run).await.expect("list_steps"),
            history: store.step_history(run).await.expect("step_history"),
        });
    }
    Snapshot {
        runs: listed,
        per_run,
    }
}
