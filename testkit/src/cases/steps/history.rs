//! [`StepStore::step_history`]: every attempt of every step of a run, by
//! creation then attempt.

use std::time::Duration;

use flowstate_core::ports::StepStore;
use flowstate_core::{Clock, StepStatus, StepTransition};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, new_run, new_step};

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

/// A step claimed and scheduled three times over, then claimed and
/// succeeded, keeps one history row whose `scheduled_at` and `running_at`
/// are the latest, so its duration runs from the last claim, not the first.
pub async fn rerun_stamps_are_the_latest<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let step = new_step(h, run.id, "s", 0).await;
    let mut scheduled_at = None;
    for _ in 0..3 {
        h.clock().advance(Duration::from_millis(10));
        let claimed = store.claim_step(run.id, "s", FUNCTION).await.unwrap();
        assert!(claimed.is_some(), "a scheduled step is claimed again");
        h.clock().advance(Duration::from_millis(10));
        store
            .transition_step(step.id, StepTransition::Scheduled)
            .await
            .unwrap();
        scheduled_at = Some(h.clock().now());
    }
    h.clock().advance(Duration::from_millis(10));
    store.claim_step(run.id, "s", FUNCTION).await.unwrap();
    let claimed_at = h.clock().now();
    h.clock().advance(Duration::from_millis(7));
    store
        .transition_step(step.id, StepTransition::Succeeded(json!(1)))
        .await
        .unwrap();
    let rows = store.step_history(run.id).await.unwrap();
    assert_eq!(rows.len(), 1, "re-running in place keeps one attempt");
    let row = &rows[0];
    assert_eq!(row.status, StepStatus::Succeeded);
    assert_eq!(row.scheduled_at, scheduled_at, "the latest schedule");
    assert_eq!(row.running_at, Some(claimed_at), "the latest claim");
    assert_eq!(row.duration(), Some(Duration::from_millis(7)));
}
