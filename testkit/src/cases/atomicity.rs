//! Atomicity, seen from outside: with every history write failing (the
//! harness's fault), a claim, each transition, a retry and an insert must
//! answer an error and leave the step and its history exactly as they were.
//! A backend that writes the step row first and the history row in a second,
//! uncommitted-together statement fails these.

use flowstate_core::{NewStep, RetryStart, RunId, StepStatus, StepStore, StepTransition};
use serde_json::json;

use super::support::{FUNCTION, can_fail_history_writes, new_run, new_step, snapshot, step_in};
use crate::Harness;

/// Runs `write` with history writes failing and checks that it failed and
/// that the ports read the same before and after.
async fn refused_whole<H, F, Fut, T>(h: &H, run: RunId, what: &str, write: F)
where
    H: Harness,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = flowstate_core::Result<T>>,
    T: std::fmt::Debug,
{
    if !can_fail_history_writes(h) {
        return;
    }
    let before = snapshot(h, &[run]).await;
    h.fail_history_writes(true).await;
    let outcome = write().await;
    h.fail_history_writes(false).await;
    assert!(
        outcome.is_err(),
        "{what} succeeded although its history row could not be written: {outcome:?}"
    );
    assert_eq!(
        snapshot(h, &[run]).await,
        before,
        "{what} failed on its history row but changed what the ports read"
    );
}

/// A claim of a pending step whose history write fails moves nothing.
pub async fn claim_is_atomic_with_its_history<H: Harness>(h: &H) {
    let run = new_run(h).await;
    step_in(h, run.id, "s", StepStatus::Pending).await;
    let store = h.store();
    refused_whole(h, run.id, "claim", || {
        store.claim_step(run.id, "s", FUNCTION)
    })
    .await;
    let claimed = store.claim_step(run.id, "s", FUNCTION).await.unwrap();
    assert!(claimed.is_some(), "the step is still claimable afterwards");
}

/// A claim that would start a retry, failing on its new history row, leaves
/// the step failed on its old attempt.
pub async fn retry_claim_is_atomic_with_its_history<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s", 1).await;
    let store = h.store();
    store.claim_step(run.id, "s", FUNCTION).await.unwrap();
    store
        .transition_step(step.id, StepTransition::Failed(json!("boom")))
        .await
        .unwrap();
    refused_whole(h, run.id, "retry claim", || {
        store.claim_step(run.id, "s", FUNCTION)
    })
    .await;
    let retried = store.claim_step(run.id, "s", FUNCTION).await.unwrap();
    assert_eq!(retried.map(|s| s.attempt), Some(2));
}

/// Every transition out of running, failing on its history row, leaves the
/// step running.
pub async fn transitions_are_atomic_with_their_history<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let moves = [
        StepTransition::Succeeded(json!({"ok": true})),
        StepTransition::Failed(json!({"message": "boom"})),
        StepTransition::Scheduled,
    ];
    for (i, transition) in moves.into_iter().enumerate() {
        let step = step_in(h, run.id, &format!("s{i}"), StepStatus::Running).await;
        let what = format!("transition to {}", transition.target());
        refused_whole(h, run.id, &what, || {
            store.transition_step(step.id, transition.clone())
        })
        .await;
        store.transition_step(step.id, transition).await.unwrap();
    }
    let pending = step_in(h, run.id, "p", StepStatus::Pending).await;
    refused_whole(h, run.id, "transition to running", || {
        store.transition_step(pending.id, StepTransition::Running)
    })
    .await;
}

/// `create_retry_attempt`, failing on its new history row, leaves the step
/// failed on its old attempt, for both starts.
pub async fn retry_attempt_is_atomic_with_its_history<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    for (name, start) in [("a", RetryStart::Pending), ("b", RetryStart::Running)] {
        let step = step_in(h, run.id, name, StepStatus::Failed).await;
        refused_whole(h, run.id, "create_retry_attempt", || {
            store.create_retry_attempt(step.id, start)
        })
        .await;
        store.create_retry_attempt(step.id, start).await.unwrap();
        assert_eq!(store.get_step(step.id).await.unwrap().attempt, 2);
    }
}

/// An insert whose first history row cannot be written leaves no step: the
/// name is free for the next insert.
pub async fn insert_step_is_atomic_with_its_history<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let step = || NewStep::new(run.id, "s", FUNCTION, json!({}));
    refused_whole(h, run.id, "insert_step", || store.insert_step(step())).await;
    assert!(store.insert_step(step()).await.unwrap().inserted);
    assert_eq!(store.step_history(run.id).await.unwrap().len(), 1);
}
