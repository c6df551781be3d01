//! The records every dialect's tests start from, created through the ports:
//! a run of workflow `wf` and steps of function `f` in it, a workflow
//! listening for `app.tick` events, and the pick of `dispatch_next` for the
//! plan tests.

use flowstate_core::ports::{DefinitionStore, RunStore, StepStore};
use flowstate_core::{
    NewActivation, NewPublishedVersion, NewRun, NewStep, NewWorkflow, PublishedVersionId, Run,
    RunId, Step, WorkflowId,
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
/// it. Answers the workflow and the version, for more activations.
pub async fn listening(
    store: &impl DefinitionStore,
    name: &str,
) -> (WorkflowId, PublishedVersionId) {
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
    activate(store, workflow.id, version.id).await;
    (workflow.id, version.id)
}

/// One more activation of `version` of `workflow` for `app.tick`.
pub async fn activate(
    store: &impl DefinitionStore,
    workflow: WorkflowId,
    version: PublishedVersionId,
) {
    store
        .create_activation(NewActivation {
            workflow,
            version,
            event_type: "app.tick".into(),
            authorization: json!({}),
        })
        .await
        .unwrap();
}

/// Dispatches the first of the 100k pending events a plan test's fixture
/// loads (event `...001000`: due at 0, the earliest to occur), checks it
/// started no run (none was pinned), and answers the SQL of the pick that
/// locked it.
pub async fn pick_of_dispatch_next(
    store: &impl flowstate_core::ports::EventQueueStore,
    log: &flowstate_store_diesel::StatementLog,
) -> String {
    let (next, sent) = log.capture(store.dispatch_next()).await;
    match next.unwrap() {
        flowstate_core::NextDispatch::Dispatched { event, runs } => {
            assert_eq!(event.to_string(), "00000000-0000-7000-8000-000000001000");
            assert!(runs.is_empty(), "no deliveries were pinned");
        }
        other => panic!("expected a dispatch, got {other:?}"),
    }
    sent.into_iter()
        .find(|s| s.contains("FOR UPDATE SKIP LOCKED"))
        .expect("the pick")
}
