//! Unknown ids: every method that takes one answers a typed not-found error
//! naming it, never an empty success, and writes nothing.

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{
    Error, NewRun, NewStep, Result, RetryStart, RunId, RunStatus, StepId, StepTransition,
};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, new_run, snapshot};

/// A run id that was never created is `RunNotFound(id)` for every method
/// that looks a run up, and `StepNameNotFound` for those that look a step up
/// by name.
pub async fn unknown_run_id_is_run_not_found<H: Harness>(h: &H) {
    let known = new_run(h).await;
    let before = snapshot(h, &[known.id]).await;
    let store = h.store();
    let id = RunId::generate();
    let child = NewRun::new("wf", json!(1)).with_parent(id);
    let step = NewStep::new(id, "s1", FUNCTION, json!(1));
    let outcomes: Vec<(&str, Result<()>)> = vec![
        ("get_run", store.get_run(id).await.map(drop)),
        (
            "set_run_status",
            store
                .set_run_status(id, RunStatus::Completed)
                .await
                .map(drop),
        ),
        ("delete_run", store.delete_run(id).await),
        ("count_children", store.count_children(id).await.map(drop)),
        ("write_state", store.write_state(id, "k", &json!(1)).await),
        ("read_state", store.read_state(id).await.map(drop)),
        ("create_run parent", store.create_run(child).await.map(drop)),
        ("insert_step", store.insert_step(step).await.map(drop)),
        ("list_steps", store.list_steps(id).await.map(drop)),
        ("step_history", store.step_history(id).await.map(drop)),
        ("graph_state", store.graph_state(id).await.map(drop)),
        (
            "step_results",
            store.step_results(id, &["s1"]).await.map(drop),
        ),
        ("run_summary", store.run_summary(id).await.map(drop)),
    ];
    for (method, outcome) in outcomes {
        match outcome {
            Err(Error::RunNotFound(missing)) if missing == id => {}
            other => panic!("{method} of an unknown run answered {other:?}"),
        }
    }
    let by_name: Vec<(&str, Result<()>)> = vec![
        ("find_step", store.find_step(id, "s1").await.map(drop)),
        (
            "claim_step",
            store.claim_step(id, "s1", FUNCTION).await.map(drop),
        ),
    ];
    for (method, outcome) in by_name {
        match outcome {
            Err(Error::StepNameNotFound { run, name }) if run == id && name == "s1" => {}
            other => panic!("{method} of an unknown run answered {other:?}"),
        }
    }
    assert_eq!(snapshot(h, &[known.id]).await, before);
}

/// A step id that was never created is `StepNotFound(id)` for every method
/// that takes one.
pub async fn unknown_step_id_is_step_not_found<H: Harness>(h: &H) {
    let known = new_run(h).await;
    let before = snapshot(h, &[known.id]).await;
    let store = h.store();
    let id = StepId::generate();
    let mut outcomes: Vec<(&str, Result<()>)> = vec![
        ("get_step", store.get_step(id).await.map(drop)),
        ("set_branch_taken", store.set_branch_taken(id, "left").await),
    ];
    for start in RetryStart::ALL {
        outcomes.push((
            "create_retry_attempt",
            store.create_retry_attempt(id, start).await,
        ));
    }
    for transition in [
        StepTransition::Running,
        StepTransition::Scheduled,
        StepTransition::Succeeded(json!(1)),
        StepTransition::Failed(json!(1)),
    ] {
        outcomes.push((
            "transition_step",
            store.transition_step(id, transition).await,
        ));
    }
    for (method, outcome) in outcomes {
        match outcome {
            Err(Error::StepNotFound(missing)) if missing == id => {}
            other => panic!("{method} of an unknown step answered {other:?}"),
        }
    }
    assert_eq!(snapshot(h, &[known.id]).await, before);
}

/// The ids of a deleted run and its steps are unknown from then on.
pub async fn deleted_ids_are_not_found<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let step = store
        .insert_step(NewStep::new(run.id, "s1", FUNCTION, json!(1)))
        .await
        .unwrap()
        .record;
    store.delete_run(run.id).await.unwrap();
    match store.delete_run(run.id).await {
        Err(Error::RunNotFound(id)) if id == run.id => {}
        other => panic!("a second delete answered {other:?}"),
    }
    match store
        .transition_step(step.id, StepTransition::Running)
        .await
    {
        Err(Error::StepNotFound(id)) if id == step.id => {}
        other => panic!("a transition of a deleted step answered {other:?}"),
    }
    match store.write_state(run.id, "k", &json!(1)).await {
        Err(Error::RunNotFound(id)) if id == run.id => {}
        other => panic!("a state write to a deleted run answered {other:?}"),
    }
    match store.claim_step(run.id, "s1", FUNCTION).await {
        Err(Error::StepNameNotFound { run: r, .. }) if r == run.id => {}
        other => panic!("a claim in a deleted run answered {other:?}"),
    }
}
