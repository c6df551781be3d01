//! [`StepStore::claim_step_outcome`]: the claim answering why it took
//! nothing, one case per [`ClaimOutcome`], and the errors it shares with
//! [`StepStore::claim_step`]. A backend may keep the provided default (the
//! memory store does) or answer from its own claim (`DieselStore` does):
//! both must say the same.

use std::time::Duration;

use flowstate_core::ports::StepStore;
use flowstate_core::{ClaimOutcome, Error, NotClaimable, StepStatus, StepTransition};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, assert_err, new_run, new_step, race, snapshot, step_in};

/// A claimable step is `Claimed`, with the step as it is after the claim,
/// exactly as `claim_step` would answer it.
pub async fn outcome_of_a_pending_step_is_claimed<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    let at = h.clock().advance(Duration::from_millis(3));
    let outcome = h.store().claim_step_outcome(run.id, "s1", FUNCTION).await;
    let ClaimOutcome::Claimed(claimed) = outcome.unwrap() else {
        panic!("a pending step is claimable");
    };
    assert_eq!((claimed.status, claimed.attempt), (StepStatus::Running, 1));
    assert_eq!(claimed.updated_at, at);
    assert_eq!(claimed, h.store().get_step(step.id).await.unwrap());
}

/// A failed step with an attempt left is `Claimed` as its next attempt.
pub async fn outcome_of_a_retryable_step_is_claimed<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 1).await;
    let store = h.store();
    store.claim_step(run.id, "s1", FUNCTION).await.unwrap();
    let failed = StepTransition::Failed(json!({"message": "boom"}));
    store.transition_step(step.id, failed).await.unwrap();
    let outcome = store.claim_step_outcome(run.id, "s1", FUNCTION).await;
    let retry = outcome.unwrap().claimed().expect("an attempt is left");
    assert_eq!((retry.status, retry.attempt), (StepStatus::Running, 2));
    assert_eq!((&retry.result, &retry.error), (&None, &None));
    assert_eq!(retry, store.get_step(step.id).await.unwrap());
}

/// A running step is `NotClaimed(Running)`: held by another worker, and the
/// claim moved nothing.
pub async fn outcome_of_a_running_step_is_held<H: Harness>(h: &H) {
    let run = new_run(h).await;
    new_step(h, run.id, "s1", 3).await;
    let store = h.store();
    assert!(
        store
            .claim_step(run.id, "s1", FUNCTION)
            .await
            .unwrap()
            .is_some()
    );
    let before = snapshot(h, &[run.id]).await;
    h.clock().advance(Duration::from_millis(1));
    assert_eq!(
        store
            .claim_step_outcome(run.id, "s1", FUNCTION)
            .await
            .unwrap(),
        ClaimOutcome::NotClaimed(NotClaimable::Running)
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// A succeeded step is `NotClaimed(Succeeded)`, whatever attempts it has
/// left.
pub async fn outcome_of_a_succeeded_step_is_settled<H: Harness>(h: &H) {
    let run = new_run(h).await;
    step_in(h, run.id, "s1", StepStatus::Succeeded).await;
    let before = snapshot(h, &[run.id]).await;
    assert_eq!(
        h.store()
            .claim_step_outcome(run.id, "s1", FUNCTION)
            .await
            .unwrap(),
        ClaimOutcome::NotClaimed(NotClaimable::Succeeded)
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// A failed step with no attempt left is `NotClaimed(RetriesExhausted)`:
/// with no retries at all, and after its last retry.
pub async fn outcome_of_an_exhausted_step_is_no_attempts_left<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let exhausted = ClaimOutcome::NotClaimed(NotClaimable::RetriesExhausted);
    step_in(h, run.id, "none", StepStatus::Failed).await;
    let before = snapshot(h, &[run.id]).await;
    let outcome = store.claim_step_outcome(run.id, "none", FUNCTION).await;
    assert_eq!(outcome.unwrap(), exhausted);
    assert_eq!(snapshot(h, &[run.id]).await, before);

    let step = new_step(h, run.id, "one", 1).await;
    for attempt in 1..=2 {
        let outcome = store.claim_step_outcome(run.id, "one", FUNCTION).await;
        assert_eq!(outcome.unwrap().claimed().map(|s| s.attempt), Some(attempt));
        let failed = StepTransition::Failed(json!({"attempt": attempt}));
        store.transition_step(step.id, failed).await.unwrap();
    }
    let outcome = store.claim_step_outcome(run.id, "one", FUNCTION).await;
    assert_eq!(outcome.unwrap(), exhausted);
}

/// The errors are `claim_step`'s: an unknown name is `StepNameNotFound`, a
/// claim naming another function is `FunctionMismatch` in every status, and
/// neither moves anything.
pub async fn outcome_errors_are_the_claims<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    assert_err!(
        store.claim_step_outcome(run.id, "nope", FUNCTION).await,
        Error::StepNameNotFound { run: r, name } if r == run.id && name == "nope"
    );
    for &status in StepStatus::ALL {
        let name = format!("s-{status}");
        step_in(h, run.id, &name, status).await;
        let before = snapshot(h, &[run.id]).await;
        assert_err!(
            store.claim_step_outcome(run.id, &name, "rpc.other").await,
            Error::FunctionMismatch { run: r, name: n, expected, claimed }
                if r == run.id && n == name && expected == FUNCTION && claimed == "rpc.other"
        );
        assert_eq!(snapshot(h, &[run.id]).await, before, "{status} moved");
    }
}

/// Of 16 outcome claims of one pending step released together, exactly one
/// is `Claimed`; every other is `NotClaimed(Running)`, held by the winner.
pub async fn outcome_race_16<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 3).await;
    let outcomes = race(h.store(), 16, move |store, _| async move {
        store.claim_step_outcome(run.id, "s1", FUNCTION).await
    })
    .await;
    let mut claimed = Vec::new();
    for outcome in outcomes {
        match outcome.expect("claim_step_outcome") {
            ClaimOutcome::Claimed(step) => claimed.push(step),
            ClaimOutcome::NotClaimed(reason) => assert_eq!(reason, NotClaimable::Running),
        }
    }
    assert_eq!(claimed.len(), 1, "{} claims took one step", claimed.len());
    assert_eq!(claimed[0], h.store().get_step(step.id).await.unwrap());
}
