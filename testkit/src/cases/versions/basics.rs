//! [`VersionStore`]: a workflow graph stored once per (workflow, hash).

use std::time::Duration;

use flowstate_core::ports::VersionStore;
use flowstate_core::{Clock, NewWorkflowVersion};
use serde_json::{Value, json};

use crate::Harness;
use crate::cases::support::race;

fn version(workflow: &str, hash: &str, graph: Value) -> NewWorkflowVersion {
    NewWorkflowVersion {
        workflow: workflow.to_owned(),
        graph_hash: hash.to_owned(),
        graph,
    }
}

/// An upsert stores the version, stamped, and `get_version` reads it back.
pub async fn upsert_version_stores_it<H: Harness>(h: &H) {
    let graph = json!({"nodes": ["a", "b"], "edges": [["a", "b"]]});
    let stored = h
        .store()
        .upsert_version(version("wf", "hash1", graph.clone()))
        .await
        .unwrap();
    assert!(stored.inserted);
    let record = stored.record;
    assert_eq!(record.workflow, "wf");
    assert_eq!(record.graph_hash, "hash1");
    assert_eq!(record.graph, graph);
    assert_eq!(record.created_at, h.clock().now());
    let read = h.store().get_version("wf", "hash1").await.unwrap();
    assert_eq!(read, Some(record));
}

/// A second upsert of the same pair changes nothing and returns the first.
pub async fn upsert_version_twice_changes_nothing<H: Harness>(h: &H) {
    let store = h.store();
    let first = store
        .upsert_version(version("wf", "hash1", json!({"v": 1})))
        .await
        .unwrap();
    h.clock().advance(Duration::from_secs(1));
    let again = store
        .upsert_version(version("wf", "hash1", json!({"v": 2})))
        .await
        .unwrap();
    assert!(!again.inserted);
    assert_eq!(again.record, first.record);
    let read = store.get_version("wf", "hash1").await.unwrap();
    assert_eq!(read, Some(first.record));
}

/// A pair never stored reads as `None`, even when the workflow or the hash
/// is known on its own.
pub async fn get_version_missing_is_none<H: Harness>(h: &H) {
    let store = h.store();
    assert_eq!(store.get_version("wf", "hash1").await.unwrap(), None);
    store
        .upsert_version(version("wf", "hash1", json!(1)))
        .await
        .unwrap();
    assert_eq!(store.get_version("wf", "hash2").await.unwrap(), None);
    assert_eq!(store.get_version("other", "hash1").await.unwrap(), None);
}

/// The same hash under two workflows is two versions.
pub async fn versions_are_keyed_by_workflow_and_hash<H: Harness>(h: &H) {
    let store = h.store();
    let a = store
        .upsert_version(version("a", "hash1", json!("a")))
        .await
        .unwrap();
    let b = store
        .upsert_version(version("b", "hash1", json!("b")))
        .await
        .unwrap();
    assert!(a.inserted && b.inserted);
    assert_ne!(a.record.id, b.record.id);
    let read = store.get_version("b", "hash1").await.unwrap().unwrap();
    assert_eq!(read.graph, json!("b"));
}

/// 32 concurrent upserts of one pair store one version: exactly one
/// `inserted: true`, all answering it.
pub async fn upsert_version_race_32<H: Harness>(h: &H) {
    let outcomes = race(h.store(), 32, |store, i| async move {
        store
            .upsert_version(version("wf", "hash1", json!({"i": i})))
            .await
    })
    .await;
    let outcomes: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes.iter().filter(|o| o.inserted).count(), 1);
    let winner = outcomes.iter().find(|o| o.inserted).unwrap().record.clone();
    assert!(outcomes.iter().all(|o| o.record == winner));
    let read = h.store().get_version("wf", "hash1").await.unwrap();
    assert_eq!(read, Some(winner));
}
