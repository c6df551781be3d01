//! [`StepStore::run_summary`]: per step its latest status, attempt count and
//! duration, measured with the store's clock.

use std::time::Duration;

use flowstate_core::ports::StepStore;
use flowstate_core::{StepStatus, StepSummary, StepTransition};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, new_run, new_step};

fn entry(name: &str, status: StepStatus, attempts: u32, ms: Option<u64>) -> StepSummary {
    StepSummary {
        name: name.to_owned(),
        status,
        attempts,
        duration: ms.map(Duration::from_millis),
    }
}

/// A step's duration runs from running to succeeded or failed; steps still
/// going have none.
pub async fn run_summary_durations<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let fast = new_step(h, run.id, "fast", 0).await;
    h.clock().advance(Duration::from_millis(1));
    let slow = new_step(h, run.id, "slow", 0).await;
    h.clock().advance(Duration::from_millis(1));
    new_step(h, run.id, "waiting", 0).await;
    h.clock().advance(Duration::from_millis(1));
    new_step(h, run.id, "busy", 0).await;

    store.claim_step(run.id, "fast", FUNCTION).await.unwrap();
    store.claim_step(run.id, "slow", FUNCTION).await.unwrap();
    store.claim_step(run.id, "busy", FUNCTION).await.unwrap();
    h.clock().advance(Duration::from_millis(250));
    let done = StepTransition::Succeeded(json!(1));
    store.transition_step(fast.id, done).await.unwrap();
    h.clock().advance(Duration::from_millis(1_250));
    let failed = StepTransition::Failed(json!({"message": "slow"}));
    store.transition_step(slow.id, failed).await.unwrap();

    let summary = store.run_summary(run.id).await.unwrap();
    assert_eq!(
        summary,
        [
            entry("fast", StepStatus::Succeeded, 1, Some(250)),
            entry("slow", StepStatus::Failed, 1, Some(1_500)),
            entry("waiting", StepStatus::Pending, 1, None),
            entry("busy", StepStatus::Running, 1, None),
        ]
    );
}

/// A retried step is one entry: its latest attempt decides status and
/// duration, and every attempt counts.
pub async fn run_summary_collapses_retries<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let step = new_step(h, run.id, "s1", 2).await;
    h.clock().advance(Duration::from_millis(1));
    new_step(h, run.id, "s2", 0).await;
    store.claim_step(run.id, "s1", FUNCTION).await.unwrap();
    h.clock().advance(Duration::from_millis(200));
    let failed = StepTransition::Failed(json!({"message": "once"}));
    store.transition_step(step.id, failed).await.unwrap();
    h.clock().advance(Duration::from_secs(5));
    store.claim_step(run.id, "s1", FUNCTION).await.unwrap();
    h.clock().advance(Duration::from_millis(300));
    let done = StepTransition::Succeeded(json!({"ok": true}));
    store.transition_step(step.id, done).await.unwrap();

    let summary = store.run_summary(run.id).await.unwrap();
    assert_eq!(
        summary,
        [
            entry("s1", StepStatus::Succeeded, 2, Some(300)),
            entry("s2", StepStatus::Pending, 1, None),
        ]
    );
}

/// A run with no steps has an empty summary.
pub async fn run_summary_of_run_without_steps_is_empty<H: Harness>(h: &H) {
    let run = new_run(h).await;
    assert!(h.store().run_summary(run.id).await.unwrap().is_empty());
}
