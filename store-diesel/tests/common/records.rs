//! The records every dialect's tests start from, created through the ports:
//! a run of workflow `wf` and steps of function `f` in it, and a workflow
//! listening for `app.tick` events.

use flowstate_core::{
    DefinitionStore, NewActivation, NewPublishedVersion, NewRun, NewStep, NewWorkflow, Run, RunId,
    RunStore, Step, StepStore,
};
use serde_json::{Value, json};

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

/// Workflow `name` of app `app`, scope `s`, with a published version and
/// one activation for `app.tick`: an event of that type starts one run of
/// it.
pub async fn listening(store: &impl DefinitionStore, name: &str) {
    let workflow = store
        .create_workflow(NewWorkflow {
            app_id: "app".into(),
            scope_id: "s".into(),
            name: name.into(),
        })
        .await
        .unwrap()
        .record;
    let version = store
        .publish_version(NewPublishedVersion {
            workflow: workflow.id,
            hash: "h".into(),
            definition: json!({}),
        })
        .await
        .unwrap()
        .record;
    store
        .create_activation(NewActivation {
            workflow: workflow.id,
            version: version.id,
            event_type: "app.tick".into(),
            authorization: json!({}),
        })
        .await
        .unwrap();
}
