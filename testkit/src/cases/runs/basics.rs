//! [`RunStore`]: creating runs, their status machine, deleting them and
//! counting their children.

use std::collections::BTreeMap;
use std::time::Duration;

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Clock, Error, NewRun, RunQuery, RunStatus};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{assert_err, new_run, new_step, run_in, snapshot};

/// A new run is running, carries what it was created with, and is stamped
/// with the store's clock.
pub async fn create_run_starts_running<H: Harness>(h: &H) {
    let new = NewRun::new("wf", json!({"foo": [1, 2]})).with_graph_hash("hash1");
    let created = h.store().create_run(new).await.unwrap();
    assert!(created.inserted);
    let run = created.record;
    assert_eq!(run.workflow, "wf");
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.input, json!({"foo": [1, 2]}));
    assert_eq!(run.graph_hash.as_deref(), Some("hash1"));
    assert_eq!(run.parent, None);
    assert_eq!(run.idempotency_key, None);
    assert_eq!(run.created_at, h.clock().now());
    assert_eq!(run.updated_at, h.clock().now());
    assert_eq!(h.store().get_run(run.id).await.unwrap(), run);
}

/// A second create with the same idempotency key returns the first run,
/// whatever else it asks for.
pub async fn create_run_is_idempotent_by_key<H: Harness>(h: &H) {
    let first = NewRun::new("wf", json!(1)).with_idempotency_key("event:e1:a1");
    let first = h.store().create_run(first).await.unwrap();
    assert!(first.inserted);
    assert_eq!(first.record.idempotency_key.as_deref(), Some("event:e1:a1"));
    h.clock().advance(Duration::from_secs(1));
    let again = NewRun::new("other", json!(2)).with_idempotency_key("event:e1:a1");
    let again = h.store().create_run(again).await.unwrap();
    assert!(!again.inserted);
    assert_eq!(again.record, first.record);
    let listed = h.store().list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(listed.items, vec![first.record]);
}

/// Different keys, or no key, make different runs.
pub async fn create_run_without_a_shared_key_inserts<H: Harness>(h: &H) {
    let store = h.store();
    let new_runs = [
        NewRun::new("wf", json!(1)).with_idempotency_key("k1"),
        NewRun::new("wf", json!(1)).with_idempotency_key("k2"),
        NewRun::new("wf", json!(1)),
        NewRun::new("wf", json!(1)),
    ];
    let mut ids = Vec::new();
    for new in new_runs {
        let created = store.create_run(new).await.unwrap();
        assert!(created.inserted);
        ids.push(created.record.id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
}

/// A child run records its parent.
pub async fn create_run_with_parent<H: Harness>(h: &H) {
    let parent = new_run(h).await;
    let child = NewRun::new("child", json!(null)).with_parent(parent.id);
    let child = h.store().create_run(child).await.unwrap().record;
    assert_eq!(child.parent, Some(parent.id));
    assert_eq!(
        h.store().get_run(child.id).await.unwrap().parent,
        Some(parent.id)
    );
}

/// A parent that does not exist is `RunNotFound(parent)`, and no run is
/// created.
pub async fn create_run_with_unknown_parent_is_refused<H: Harness>(h: &H) {
    let ghost = new_run(h).await;
    h.store().delete_run(ghost.id).await.unwrap();
    let before = snapshot(h, &[]).await;
    let child = NewRun::new("child", json!(null)).with_parent(ghost.id);
    assert_err!(
        h.store().create_run(child).await,
        Error::RunNotFound(id) if id == ghost.id
    );
    assert_eq!(snapshot(h, &[]).await, before);
}

/// A status change stamps `updated_at` from the clock and leaves
/// `created_at` alone.
pub async fn set_run_status_stamps_updated_at<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let later = h.clock().advance(Duration::from_millis(1_500));
    let moved = h
        .store()
        .set_run_status(run.id, RunStatus::Suspended)
        .await
        .unwrap();
    assert_eq!(moved.status, RunStatus::Suspended);
    assert_eq!(moved.updated_at, later);
    assert_eq!(moved.created_at, run.created_at);
    assert_eq!(h.store().get_run(run.id).await.unwrap(), moved);
}

/// Every legal row of [`RunStatus::TRANSITIONS`] succeeds.
pub async fn run_transitions_legal_rows<H: Harness>(h: &H) {
    for &(from, to) in RunStatus::TRANSITIONS {
        let run = run_in(h, from).await;
        let at = h.clock().advance(Duration::from_millis(1));
        let moved = h.store().set_run_status(run.id, to).await;
        let moved = moved.unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
        assert_eq!(moved.status, to, "{from} -> {to}");
        assert_eq!(moved.updated_at, at, "{from} -> {to}");
        assert_eq!(h.store().get_run(run.id).await.unwrap(), moved);
    }
}

/// Every move not in [`RunStatus::TRANSITIONS`] is `IllegalRunTransition`
/// and writes nothing.
pub async fn run_transitions_illegal_rows<H: Harness>(h: &H) {
    for &from in RunStatus::ALL {
        for &to in RunStatus::ALL {
            if from.can_transition_to(to) {
                continue;
            }
            let run = run_in(h, from).await;
            h.clock().advance(Duration::from_millis(1));
            assert_err!(
                h.store().set_run_status(run.id, to).await,
                Error::IllegalRunTransition { run: r, from: f, to: t }
                    if r == run.id && f == from && t == to
            );
            assert_eq!(
                h.store().get_run(run.id).await.unwrap(),
                run,
                "{from} -> {to}"
            );
        }
    }
}

/// Deleting a run deletes its steps, their history and its state, and
/// nothing of any other run.
pub async fn delete_run_cascades<H: Harness>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    let other = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    new_step(h, other.id, "s1", 0).await;
    store.write_state(run.id, "k", &json!(1)).await.unwrap();
    store.write_state(other.id, "k", &json!(2)).await.unwrap();
    let other_before = snapshot(h, &[other.id]).await;

    store.delete_run(run.id).await.unwrap();

    assert_err!(store.get_run(run.id).await, Error::RunNotFound(id) if id == run.id);
    assert_err!(store.get_step(step.id).await, Error::StepNotFound(id) if id == step.id);
    assert_err!(store.list_steps(run.id).await, Error::RunNotFound(_));
    assert_err!(store.step_history(run.id).await, Error::RunNotFound(_));
    assert_err!(store.read_state(run.id).await, Error::RunNotFound(_));
    let other_after = snapshot(h, &[other.id]).await;
    assert_eq!(other_after.per_run, other_before.per_run);
    assert_eq!(other_after.runs, vec![other]);
}

/// Deleting a parent leaves its children, with no parent.
pub async fn delete_run_keeps_children_without_parent<H: Harness>(h: &H) {
    let store = h.store();
    let parent = new_run(h).await;
    let child = NewRun::new("child", json!(1)).with_parent(parent.id);
    let child = store.create_run(child).await.unwrap().record;
    store.delete_run(parent.id).await.unwrap();
    let after = store.get_run(child.id).await.unwrap();
    assert_eq!(after.parent, None);
    assert_eq!(after.status, child.status);
    assert_eq!(after.workflow, child.workflow);
    let orphaned = RunQuery {
        parent: Some(parent.id),
        ..RunQuery::default()
    };
    assert!(store.list_runs(&orphaned).await.unwrap().items.is_empty());
}

/// Children are counted per status; statuses with none are left out, and
/// grandchildren are not counted.
pub async fn count_children_by_status<H: Harness>(h: &H) {
    let store = h.store();
    let parent = new_run(h).await;
    let mut children = Vec::new();
    for _ in 0..3 {
        let child = NewRun::new("child", json!(1)).with_parent(parent.id);
        children.push(store.create_run(child).await.unwrap().record);
    }
    store
        .set_run_status(children[0].id, RunStatus::Completed)
        .await
        .unwrap();
    let grandchild = NewRun::new("gc", json!(1)).with_parent(children[1].id);
    store.create_run(grandchild).await.unwrap();
    let counts = store.count_children(parent.id).await.unwrap();
    let expected = BTreeMap::from([(RunStatus::Running, 2), (RunStatus::Completed, 1)]);
    assert_eq!(counts, expected);
    let none = store.count_children(children[2].id).await.unwrap();
    assert_eq!(none, BTreeMap::new());
}
