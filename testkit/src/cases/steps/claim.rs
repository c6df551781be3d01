//! [`StepStore::claim_step`]: what a claim does for each step status, and
//! the claims it refuses.

use std::time::Duration;

use flowstate_core::ports::StepStore;
use flowstate_core::{Error, StepStatus, StepTransition};
use serde_json::json;

use crate::cases::support::{
    FUNCTION, assert_err, history_of, new_run, new_step, snapshot, step_in,
};
use crate::{Harness, Hooks};

/// Claiming a pending step moves it and its history row to running and
/// answers the step as it is after the claim.
pub async fn claim_pending_step<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    let at = h.clock().advance(Duration::from_millis(3));
    let claimed = h.store().claim_step(run.id, "s1", FUNCTION).await.unwrap();
    let claimed = claimed.expect("a pending step is claimable");
    assert_eq!(claimed.status, StepStatus::Running);
    assert_eq!(claimed.attempt, 1);
    assert_eq!(claimed.updated_at, at);
    assert_eq!(claimed, h.store().get_step(step.id).await.unwrap());
    let history = history_of(h, &step).await;
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].attempt, history[0].status),
        (1, StepStatus::Running)
    );
    assert_eq!(history[0].running_at, Some(at));
    assert_eq!(history[0].created_at, step.created_at);
}

/// A scheduled step is claimable, into running in the same attempt.
pub async fn claim_scheduled_step<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Scheduled).await;
    let claimed = h.store().claim_step(run.id, "s1", FUNCTION).await.unwrap();
    let claimed = claimed.expect("a scheduled step is claimable");
    assert_eq!((claimed.status, claimed.attempt), (StepStatus::Running, 1));
    let history = history_of(h, &step).await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Running);
    assert!(history[0].scheduled_at.is_some());
}

/// A step already claimed is not claimable again, and the second claim
/// changes nothing.
pub async fn claim_running_step_gives_none<H: Harness>(h: &H) {
    let run = new_run(h).await;
    new_step(h, run.id, "s1", 3).await;
    assert!(
        h.store()
            .claim_step(run.id, "s1", FUNCTION)
            .await
            .unwrap()
            .is_some()
    );
    let before = snapshot(h, &[run.id]).await;
    h.clock().advance(Duration::from_millis(1));
    let again = h.store().claim_step(run.id, "s1", FUNCTION).await.unwrap();
    assert_eq!(again, None, "a redelivered job re-claimed a running step");
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// A succeeded step is not claimable.
pub async fn claim_succeeded_step_gives_none<H: Harness>(h: &H) {
    let run = new_run(h).await;
    step_in(h, run.id, "s1", StepStatus::Succeeded).await;
    let before = snapshot(h, &[run.id]).await;
    assert_eq!(
        h.store().claim_step(run.id, "s1", FUNCTION).await.unwrap(),
        None
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// A claimed step that fails is claimable again, as its next attempt:
/// running, attempt 2, result and error cleared, a new history row.
pub async fn claim_failed_step_starts_retry<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 1).await;
    let store = h.store();
    assert!(
        store
            .claim_step(run.id, "s1", FUNCTION)
            .await
            .unwrap()
            .is_some()
    );
    let failed = StepTransition::Failed(json!({"message": "boom"}));
    store.transition_step(step.id, failed).await.unwrap();
    let at = h.clock().advance(Duration::from_millis(2));
    let retry = store.claim_step(run.id, "s1", FUNCTION).await.unwrap();
    let retry = retry.expect("the failed step stayed claimed and can never be retried");
    assert_eq!((retry.status, retry.attempt), (StepStatus::Running, 2));
    assert_eq!((retry.error, retry.result), (None, None));
    let history = history_of(h, &step).await;
    let rows: Vec<_> = history.iter().map(|r| (r.attempt, r.status)).collect();
    assert_eq!(rows, [(1, StepStatus::Failed), (2, StepStatus::Running)]);
    assert_eq!(history[1].running_at, Some(at));
    assert_eq!(history[1].created_at, at);
    assert_eq!(history[0].error, Some(json!({"message": "boom"})));
}

/// A failed step whose policy allows no further attempt is not claimable:
/// with no retries at all, and after its last retry.
pub async fn claim_with_retries_exhausted_gives_none<H: Harness>(h: &H) {
    let run = new_run(h).await;
    step_in(h, run.id, "none", StepStatus::Failed).await;
    let store = h.store();
    let before = snapshot(h, &[run.id]).await;
    assert_eq!(
        store.claim_step(run.id, "none", FUNCTION).await.unwrap(),
        None
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);

    let step = new_step(h, run.id, "one", 1).await;
    for attempt in 1..=2 {
        let claimed = store.claim_step(run.id, "one", FUNCTION).await.unwrap();
        assert_eq!(claimed.map(|s| s.attempt), Some(attempt));
        let failed = StepTransition::Failed(json!({"attempt": attempt}));
        store.transition_step(step.id, failed).await.unwrap();
    }
    let before = snapshot(h, &[run.id]).await;
    assert_eq!(
        store.claim_step(run.id, "one", FUNCTION).await.unwrap(),
        None
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// A claim naming another function is `FunctionMismatch`, whatever the
/// step's status, and leaves the step untouched.
pub async fn claim_for_other_function_is_refused<H: Harness>(h: &H) {
    let run = new_run(h).await;
    for &status in StepStatus::ALL {
        let name = format!("s-{status}");
        step_in(h, run.id, &name, status).await;
        let before = snapshot(h, &[run.id]).await;
        assert_err!(
            h.store().claim_step(run.id, &name, "rpc.other").await,
            Error::FunctionMismatch { run: r, name: n, expected, claimed }
                if r == run.id && n == name && expected == FUNCTION && claimed == "rpc.other"
        );
        assert_eq!(
            snapshot(h, &[run.id]).await,
            before,
            "the mismatched claim moved {status}"
        );
    }
}

/// Claiming a name the run does not have is `StepNameNotFound`.
pub async fn claim_unknown_step_name<H: Harness>(h: &H) {
    let run = new_run(h).await;
    new_step(h, run.id, "s1", 0).await;
    assert_err!(
        h.store().claim_step(run.id, "s2", FUNCTION).await,
        Error::StepNameNotFound { run: r, name } if r == run.id && name == "s2"
    );
}

/// A claim whose history row is gone recreates it, running.
pub async fn claim_recreates_missing_history_row<H: Hooks>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    h.delete_history_row(step.id, 1).await;
    let at = h.clock().advance(Duration::from_millis(1));
    let claimed = h.store().claim_step(run.id, "s1", FUNCTION).await.unwrap();
    assert_eq!(claimed.map(|s| s.status), Some(StepStatus::Running));
    let history = history_of(h, &step).await;
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].attempt, history[0].status),
        (1, StepStatus::Running)
    );
    assert_eq!(history[0].running_at, Some(at));
}
