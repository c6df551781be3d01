//! The records every dialect's tests start from, created through the ports:
//! a run of workflow `wf` and steps of function `f` in it.

use flowstate_core::{NewRun, NewStep, Run, RunId, RunStore, Step, StepStore};
use serde_json::Value;

/// A new run of workflow `wf` with `input`.
pub async fn run(store: &impl RunStore, input: Value) -> Run {
    store
        .create_run(NewRun::new("wf", input))
        .await
        .unwrap()
        .record
}

/// A new step `name` of function `f` in `run`, with `input`.
pub async fn step(
    store: &impl StepStore,
    run: RunId,
    name: impl Into<String>,
    input: Value,
) -> Step {
    store
        .insert_step(NewStep::new(run, name, "f", input))
        .await
        .unwrap()
        .record
}
