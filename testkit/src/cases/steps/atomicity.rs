//! Atomicity, seen from outside: with every history write failing (the
//! harness's fault), a claim, each transition (fenced by a claim or not), a
//! retry and an insert must answer an error and leave the step and its
//! history exactly as they were. A backend that writes the step row first
//! and the history row in a second, uncommitted-together statement fails
//! these. `refused_under` is shared with the cases of calls that write
//! many steps (`batch_atomicity`, `expiry_atomicity`), which also fail the
//! history of one step alone (`Fault::Of`).

use flowstate_core::ports::StepStore;
use flowstate_core::{NewStep, RetryStart, RunId, StepId, StepStatus, StepTransition};
use serde_json::json;

use crate::Hooks;
use crate::cases::support::{FUNCTION, new_run, new_step, snapshot, step_in};

/// Which history writes fail while a refused call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Every one ([`Hooks::fail_history_writes`]).
    Every,
    /// Those of one step ([`Hooks::fail_history_writes_of`]).
    Of(StepId),
}

impl Fault {
    /// Turns the fault on or off.
    async fn set<H: Hooks>(self, h: &H, on: bool) {
        match self {
            Self::Every => h.fail_history_writes(on).await,
            Self::Of(step) => h.fail_history_writes_of(on.then_some(step)).await,
        }
    }
}

/// Runs `write` under `fault` and checks that it failed and that the ports
/// read the same of `runs` (and of the runs listing) before and after.
pub(crate) async fn refused_under<H, F, Fut, T>(
    h: &H,
    runs: &[RunId],
    fault: Fault,
    what: &str,
    write: F,
) where
    H: Hooks,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = flowstate_core::Result<T>>,
    T: std::fmt::Debug,
{
    let before = snapshot(h, runs).await;
    fault.set(h, true).await;
    let outcome = write().await;
    fault.set(h, false).await;
    assert!(
        outcome.is_err(),
        "{what} ({fault:?}) succeeded although a history row could not be written: {outcome:?}"
    );
    assert_eq!(
        snapshot(h, runs).await,
        before,
        "{what} ({fault:?}) failed on a history row but changed what the ports read"
    );
}

/// Runs `write` with history writes failing and checks that it failed and
/// that the ports read the same before and after.
async fn refused_whole<H, F, Fut, T>(h: &H, run: RunId, what: &str, write: F)
where
    H: Hooks,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = flowstate_core::Result<T>>,
    T: std::fmt::Debug,
{
    refused_under(h, &[run], Fault::Every, what, write).await;
}

/// A claim of a pending step whose history write fails moves nothing.
pub async fn claim_is_atomic_with_its_history<H: Hooks>(h: &H) {
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
pub async fn retry_claim_is_atomic_with_its_history<H: Hooks>(h: &H) {
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
pub async fn transitions_are_atomic_with_their_history<H: Hooks>(h: &H) {
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
pub async fn retry_attempt_is_atomic_with_its_history<H: Hooks>(h: &H) {
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
pub async fn insert_step_is_atomic_with_its_history<H: Hooks>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let step = || NewStep::new(run.id, "s", FUNCTION, json!({}));
    refused_whole(h, run.id, "insert_step", || store.insert_step(step())).await;
    assert!(store.insert_step(step()).await.unwrap().inserted);
    assert_eq!(store.step_history(run.id).await.unwrap().len(), 1);
}

/// A claimer's fenced completion (`transition_claimed`) to each status a
/// claimer may move to, on attempt 1 and on a retry's attempt 2, failing on
/// its history row, leaves the step running in its attempt; the same call
/// succeeds once history writes work again.
pub async fn transition_claimed_is_atomic_with_its_history<H: Hooks>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let moves = [
        StepTransition::Succeeded(json!({"ok": true})),
        StepTransition::Failed(json!({"message": "boom"})),
        StepTransition::Scheduled,
    ];
    for (i, transition) in moves.into_iter().enumerate() {
        new_step(h, run.id, &format!("s{i}"), 1).await;
        let name = format!("s{i}");
        let mut claimed = store.claim_step(run.id, &name, FUNCTION).await.unwrap();
        if i == 1 {
            let first = claimed.expect("claimable").claim();
            let failed = StepTransition::Failed(json!("first"));
            store.transition_claimed(first, failed).await.unwrap();
            claimed = store.claim_step(run.id, &name, FUNCTION).await.unwrap();
        }
        let claim = claimed.expect("claimable").claim();
        let what = format!(
            "transition_claimed to {} on attempt {}",
            transition.target(),
            claim.attempt
        );
        refused_whole(h, run.id, &what, || {
            store.transition_claimed(claim, transition.clone())
        })
        .await;
        store.transition_claimed(claim, transition).await.unwrap();
    }
}
