//! [`StepStore::graph_state`], [`StepStore::set_branch_taken`] and
//! [`StepStore::step_results`]: what a graph run has done so far.

use std::collections::BTreeMap;

use flowstate_core::ports::StepStore;
use flowstate_core::{GraphState, StepStatus, StepTransition};
use serde_json::{Value, json};

use crate::Harness;
use crate::cases::support::{FUNCTION, new_run, new_step, step_in};

/// A run with no steps has an empty graph state.
pub async fn graph_state_of_new_run_is_empty<H: Harness>(h: &H) {
    let run = new_run(h).await;
    assert_eq!(
        h.store().graph_state(run.id).await.unwrap(),
        GraphState::default()
    );
}

/// Completed and failed step names come sorted; every recorded branch is
/// kept, whatever the step's status.
pub async fn graph_state_names_and_branches<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let b = step_in(h, run.id, "b", StepStatus::Succeeded).await;
    step_in(h, run.id, "a", StepStatus::Succeeded).await;
    step_in(h, run.id, "d", StepStatus::Failed).await;
    step_in(h, run.id, "c", StepStatus::Failed).await;
    let e = step_in(h, run.id, "e", StepStatus::Running).await;
    step_in(h, run.id, "f", StepStatus::Pending).await;
    store.set_branch_taken(b.id, "left").await.unwrap();
    store.set_branch_taken(e.id, "right").await.unwrap();
    let other = new_run(h).await;
    step_in(h, other.id, "z", StepStatus::Succeeded).await;

    let state = store.graph_state(run.id).await.unwrap();
    assert_eq!(state.completed, ["a", "b"]);
    assert_eq!(state.failed, ["c", "d"]);
    let branches = BTreeMap::from([
        ("b".to_owned(), "left".to_owned()),
        ("e".to_owned(), "right".to_owned()),
    ]);
    assert_eq!(state.branches, branches);
}

/// A failed step with a retry left is retrying, not failed; once its retry
/// runs it is neither, and once that succeeds it is completed.
pub async fn graph_state_follows_retries<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 1).await;
    let store = h.store();
    store.claim_step(run.id, "s1", FUNCTION).await.unwrap();
    let failed = StepTransition::Failed(json!({"message": "boom"}));
    store
        .transition_step(step.id, failed.clone())
        .await
        .unwrap();
    let state = store.graph_state(run.id).await.unwrap();
    assert!(
        state.failed.is_empty(),
        "a step with a retry left is not failed yet"
    );
    assert_eq!(state.retrying, ["s1"]);
    store.claim_step(run.id, "s1", FUNCTION).await.unwrap();
    let state = store.graph_state(run.id).await.unwrap();
    assert!(state.failed.is_empty() && state.completed.is_empty() && state.retrying.is_empty());
    let done = StepTransition::Succeeded(json!(1));
    store.transition_step(step.id, done).await.unwrap();
    let state = store.graph_state(run.id).await.unwrap();
    assert_eq!(
        (state.completed.as_slice(), state.failed.len()),
        (&["s1".to_owned()][..], 0)
    );
}

/// A branch is stored on the step; a second one replaces the first.
pub async fn set_branch_taken_replaces<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    let store = h.store();
    store.set_branch_taken(step.id, "left").await.unwrap();
    assert_eq!(
        store.get_step(step.id).await.unwrap().branch.as_deref(),
        Some("left")
    );
    store
        .set_branch_taken(step.id, "it's \"right\"")
        .await
        .unwrap();
    let after = store.get_step(step.id).await.unwrap();
    assert_eq!(after.branch.as_deref(), Some("it's \"right\""));
    assert_eq!(after.status, StepStatus::Pending);
    let branches = store.graph_state(run.id).await.unwrap().branches;
    assert_eq!(
        branches,
        BTreeMap::from([("s1".to_owned(), "it's \"right\"".to_owned())])
    );
}

/// `step_results` answers the named steps that have a result, a `null`
/// result included, and leaves out the rest.
pub async fn step_results_of_named_steps<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    for (name, result) in [
        ("a", json!({"n": 1})),
        ("b", json!(false)),
        ("n", Value::Null),
    ] {
        let step = step_in(h, run.id, name, StepStatus::Running).await;
        let done = StepTransition::Succeeded(result);
        store.transition_step(step.id, done).await.unwrap();
    }
    step_in(h, run.id, "c", StepStatus::Running).await;
    step_in(h, run.id, "d", StepStatus::Failed).await;
    let results = store
        .step_results(run.id, &["a", "n", "c", "d", "zz"])
        .await
        .unwrap();
    let expected = BTreeMap::from([
        ("a".to_owned(), json!({"n": 1})),
        ("n".to_owned(), Value::Null),
    ]);
    assert_eq!(results, expected);
    assert!(store.step_results(run.id, &[]).await.unwrap().is_empty());
}
