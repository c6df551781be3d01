//! [`StepStore::step_history`]: every attempt of every step of a run, by
//! creation then attempt.

use std::time::Duration;

use flowstate_core::{StepStatus, StepStore, StepTransition};
use serde_json::json;

use super::support::{FUNCTION, new_run, new_step};
use crate::Harness;

/// A run with no steps has no history.
pub async fn history_of_run_without_steps_is_empty<H: Harness>(h: &H) {
    let run = new_run(h).await;
    assert!(h.store().step_history(run.id).await.unwrap().is_empty());
}

/// History is ordered by creation, not by name, and a later retry of an
/// earlier step sorts after the rows created before it.
pub async fn history_orders_by_creation<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let b = new_step(h, run.id, "b", 1).await;
    h.clock().advance(Duration::from_millis(1));
    new_step(h, run.id, "a", 0).await;
    h.clock().advance(Duration::from_millis(1));
    store.claim_step(run.id, "b", FUNCTION).await.unwrap();
    let failed = StepTransition::Failed(json!({"message": "boom"}));
    store.transition_step(b.id, failed).await.unwrap();
    h.clock().advance(Duration::from_millis(1));
    store.claim_step(run.id, "b", FUNCTION).await.unwrap();
    let rows: Vec<_> = store
        .step_history(run.id)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.step_name.clone(), r.attempt, r.status))
        .collect();
    assert_eq!(
        rows,
        [
            ("b".to_owned(), 1, StepStatus::Failed),
            ("a".to_owned(), 1, StepStatus::Pending),
            ("b".to_owned(), 2, StepStatus::Running),
        ]
    );
}

/// Every attempt keeps its own row, error and stamps.
pub async fn history_keeps_every_attempt<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 5).await;
    let store = h.store();
    let mut failed_at = Vec::new();
    for attempt in 1..=3 {
        h.clock().advance(Duration::from_millis(10));
        store.claim_step(run.id, "s1", FUNCTION).await.unwrap();
        failed_at.push(h.clock().advance(Duration::from_millis(10)));
        let failed = StepTransition::Failed(json!({"attempt": attempt}));
        store.transition_step(step.id, failed).await.unwrap();
    }
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 3);
    for (i, row) in history.iter().enumerate() {
        let attempt = i as u32 + 1;
        assert_eq!(row.step, step.id);
        assert_eq!((row.attempt, row.status), (attempt, StepStatus::Failed));
        assert_eq!(row.error, Some(json!({"attempt": attempt})));
        assert_eq!(row.failed_at, Some(failed_at[i]));
        assert_eq!(row.duration(), Some(Duration::from_millis(10)));
    }
    let mut ids: Vec<_> = history.iter().map(|r| r.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3);
}

/// A run's history holds its own steps only.
pub async fn history_is_per_run<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let other = new_run(h).await;
    let mine = new_step(h, run.id, "s1", 0).await;
    new_step(h, other.id, "s1", 0).await;
    new_step(h, other.id, "s2", 0).await;
    let history = h.store().step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].step, mine.id);
    assert_eq!(h.store().step_history(other.id).await.unwrap().len(), 2);
}
