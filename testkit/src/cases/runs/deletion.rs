//! Deletion leaves nothing behind: no steps, no history, no state (counted
//! behind the ports by the harness), and a deleted run's idempotency key is
//! free again.

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, StepStatus, StepTransition};
use serde_json::json;

use crate::cases::support::{FUNCTION, new_run, new_step, step_in};
use crate::{Harness, Hooks, RowCounts};

/// A deleted run leaves no step, no history row and no state key, however
/// many attempts its steps had.
pub async fn delete_run_leaves_no_rows<H: Hooks>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    let retried = new_step(h, run.id, "retried", 1).await;
    store.claim_step(run.id, "retried", FUNCTION).await.unwrap();
    store
        .transition_step(retried.id, StepTransition::Failed(json!("boom")))
        .await
        .unwrap();
    store.claim_step(run.id, "retried", FUNCTION).await.unwrap();
    let done = step_in(h, run.id, "done", StepStatus::Succeeded).await;
    for key in ["a", "b", "c"] {
        store.write_state(run.id, key, &json!(key)).await.unwrap();
    }
    let steps = [retried.id, done.id];
    let before = h.count_rows(run.id, &steps).await;
    assert_eq!(
        before,
        RowCounts {
            steps: 2,
            history: 3,
            state: 3
        },
        "the harness counts what the run owns"
    );

    store.delete_run(run.id).await.unwrap();

    assert_eq!(h.count_rows(run.id, &steps).await, RowCounts::default());
}

/// Deleting a run frees its idempotency key: a create with the same key
/// makes a new run.
pub async fn delete_run_frees_its_idempotency_key<H: Harness>(h: &H) {
    let store = h.store();
    let keyed = || NewRun::new("wf", json!({"n": 1})).with_idempotency_key("order-42");
    let first = store.create_run(keyed()).await.unwrap();
    assert!(first.inserted);
    store.delete_run(first.record.id).await.unwrap();

    let second = store.create_run(keyed()).await.unwrap();
    assert!(second.inserted, "the key of a deleted run is free again");
    assert_ne!(second.record.id, first.record.id);
    let again = store.create_run(keyed()).await.unwrap();
    assert!(!again.inserted);
    assert_eq!(again.record.id, second.record.id);
}
