//! Step claims that expire (`flowstate_core::step_claim`): every move to
//! running sets a claim deadline on the lease clock and every other move
//! clears it; a claimer's writes carry its [`StepClaim`] and are refused
//! once the claim no longer holds the step; a heartbeat extends a held
//! claim.
//!
//! The expiry itself, which needs the recovery port, is in
//! `claim_expiry.rs`.

use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::StepStore;
use flowstate_core::step_claim::DEFAULT_CLAIM_TIMEOUT;
use flowstate_core::{
    Error, NewStep, RetryPolicy, RetryStart, Step, StepClaim, StepId, StepStatus, StepTransition,
    Timestamp,
};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, assert_err, history_of, new_run, new_step, step_in};
use flowstate_core::Clock as _;

/// How far a store's lease clock may run ahead of the harness clock in a
/// case: the real time a case takes, on a backend whose lease clock is a
/// database's moved to follow the harness clock.
const DRIFT: Duration = Duration::from_secs(120);

/// Asserts `deadline` is `timeout` after the harness's now, give or take
/// [`DRIFT`] forward.
fn assert_deadline<H: Harness>(h: &H, deadline: Option<Timestamp>, timeout: Duration) {
    let now = h.clock().now();
    let Some(deadline) = deadline else {
        panic!("a running step has no claim deadline");
    };
    let earliest = now.plus(timeout);
    assert!(
        deadline >= earliest && deadline <= earliest.plus(DRIFT),
        "deadline {deadline} is not {timeout:?} after {now} (+ up to {DRIFT:?})"
    );
}

/// A claim sets the deadline (the store's default timeout, or the step's
/// own); a move away from running clears it, and a transition or a retry
/// to running sets it again.
pub async fn a_claim_sets_a_deadline_and_every_other_move_clears_it<H: Harness>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    let pending = new_step(h, run.id, "a", 1).await;
    assert_eq!(pending.claimed_until, None);
    let claimed = store
        .claim_step(run.id, "a", FUNCTION)
        .await
        .unwrap()
        .expect("claimed");
    assert_deadline(h, claimed.claimed_until, DEFAULT_CLAIM_TIMEOUT);
    assert_eq!(store.get_step(claimed.id).await.unwrap(), claimed);

    let short = Duration::from_millis(2_500);
    let own = NewStep::new(run.id, "own", FUNCTION, json!({})).with_claim_timeout(short);
    let own = store.insert_step(own).await.unwrap().record;
    assert_eq!(own.claim_timeout, Some(short));
    let own = store.claim_step(run.id, "own", FUNCTION).await.unwrap();
    assert_deadline(h, own.expect("claimed").claimed_until, short);

    for (transition, running) in [
        (StepTransition::Scheduled, false),
        (StepTransition::Running, true),
        (StepTransition::Failed(json!("x")), false),
    ] {
        store.transition_step(claimed.id, transition).await.unwrap();
        let now = store.get_step(claimed.id).await.unwrap();
        if running {
            assert_deadline(h, now.claimed_until, DEFAULT_CLAIM_TIMEOUT);
        } else {
            assert_eq!(now.claimed_until, None, "{}", now.status);
        }
    }
    let retried = store
        .retry_step(claimed.id, RetryStart::Running)
        .await
        .unwrap();
    assert_deadline(h, retried.claimed_until, DEFAULT_CLAIM_TIMEOUT);
    let claim = retried.claim();
    store
        .transition_claimed(claim, StepTransition::Succeeded(json!(1)))
        .await
        .unwrap();
    assert_eq!(
        store.get_step(claimed.id).await.unwrap().claimed_until,
        None
    );
}

/// A claim timeout outside 1 ms ..= one day is refused before anything is
/// written; one with a fraction of a millisecond is kept in whole ones.
pub async fn claim_timeouts_are_checked_and_kept_in_millis<H: Harness>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    for bad in [Duration::ZERO, Duration::from_secs(24 * 60 * 60 + 1)] {
        let step = NewStep::new(run.id, "bad", FUNCTION, json!({})).with_claim_timeout(bad);
        assert_err!(
            store.insert_step(step).await,
            Error::InvalidInput(InvalidInput::OutOfRange { .. })
        );
    }
    assert!(store.list_steps(run.id).await.unwrap().is_empty());
    let step = NewStep::new(run.id, "fine", FUNCTION, json!({}))
        .with_claim_timeout(Duration::from_micros(1_500));
    let step = store.insert_step(step).await.unwrap().record;
    assert_eq!(step.claim_timeout, Some(Duration::from_millis(1)));
    assert_eq!(store.get_step(step.id).await.unwrap(), step);
}

/// The holder's write is fenced by its attempt: it moves the step; the
/// same completion again is a repeat (answered `Ok`, nothing written);
/// another outcome, a stale attempt and a step that is not running are
/// [`Error::ClaimLost`]; a move no claimer makes is illegal; an unknown
/// step is not found.
pub async fn a_claimer_writes_under_its_claim<H: Harness>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    let step = held(h, run.id, "a").await;
    let claim = step.claim();
    let done = StepTransition::Succeeded(json!({"n": 1}));
    assert_err!(
        store
            .transition_claimed(claim, StepTransition::Running)
            .await,
        Error::IllegalStepTransition {
            from: StepStatus::Running,
            to: StepStatus::Running,
            ..
        }
    );
    let stale = StepClaim {
        attempt: claim.attempt + 1,
        ..claim
    };
    assert_err!(
        store.transition_claimed(stale, done.clone()).await,
        Error::ClaimLost { step: s, attempt: 2 } if s == step.id
    );
    h.clock().advance(Duration::from_millis(3));
    store.transition_claimed(claim, done.clone()).await.unwrap();
    let written = store.get_step(step.id).await.unwrap();
    assert_eq!(
        (written.status, &written.result),
        (StepStatus::Succeeded, &Some(json!({"n": 1})))
    );
    h.clock().advance(Duration::from_millis(3));
    store.transition_claimed(claim, done).await.unwrap();
    assert_eq!(store.get_step(step.id).await.unwrap(), written, "a repeat");
    assert_err!(
        store
            .transition_claimed(claim, StepTransition::Succeeded(json!({"n": 2})))
            .await,
        Error::ClaimLost { .. }
    );
    assert_err!(
        store
            .transition_claimed(claim, StepTransition::Failed(json!("late")))
            .await,
        Error::ClaimLost { .. }
    );
    assert_eq!(store.get_step(step.id).await.unwrap(), written);
    assert_eq!(history_of(h, &written).await.len(), 1);

    let pending = new_step(h, run.id, "pending", 0).await;
    assert_err!(
        store
            .transition_claimed(pending.claim(), StepTransition::Failed(json!("x")))
            .await,
        Error::ClaimLost { .. }
    );
    assert_eq!(store.get_step(pending.id).await.unwrap(), pending);
    let unknown = StepClaim {
        step: StepId::generate(),
        attempt: 1,
    };
    assert_err!(
        store
            .transition_claimed(unknown, StepTransition::Scheduled)
            .await,
        Error::StepNotFound(id) if id == unknown.step
    );
}

/// A held claim moves to scheduled (a sleep), which ends it and clears the
/// deadline; the next claim of the step takes the same attempt (a sleep is
/// not a failure), with a deadline of its own.
pub async fn a_claimer_may_put_its_step_to_sleep<H: Harness>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    let step = held(h, run.id, "a").await;
    store
        .transition_claimed(step.claim(), StepTransition::Scheduled)
        .await
        .unwrap();
    let asleep = store.get_step(step.id).await.unwrap();
    assert_eq!(
        (asleep.status, asleep.claimed_until),
        (StepStatus::Scheduled, None)
    );
    let again = store
        .claim_step(run.id, "a", FUNCTION)
        .await
        .unwrap()
        .expect("claimed again");
    assert_eq!(again.attempt, step.attempt);
    assert_deadline(h, again.claimed_until, DEFAULT_CLAIM_TIMEOUT);
}

/// A heartbeat extends the deadline of a held claim from the lease clock's
/// now; a claim that does not hold the step is lost; an unknown step is
/// not found.
pub async fn renew_extends_a_held_claim<H: Harness>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    let step = held(h, run.id, "a").await;
    let first = step.claimed_until.expect("a deadline");
    h.clock().advance(Duration::from_secs(60));
    let renewed = store.renew_step_claim(step.claim()).await.unwrap();
    assert!(renewed > first, "{renewed} is not after {first}");
    assert_deadline(h, Some(renewed), DEFAULT_CLAIM_TIMEOUT);
    assert_eq!(
        store.get_step(step.id).await.unwrap().claimed_until,
        Some(renewed)
    );
    let stale = StepClaim {
        attempt: 2,
        ..step.claim()
    };
    assert_err!(store.renew_step_claim(stale).await, Error::ClaimLost { .. });
    let done = step_in(h, run.id, "done", StepStatus::Succeeded).await;
    assert_err!(
        store.renew_step_claim(done.claim()).await,
        Error::ClaimLost { .. }
    );
    let unknown = StepClaim {
        step: StepId::generate(),
        attempt: 1,
    };
    assert_err!(
        store.renew_step_claim(unknown).await,
        Error::StepNotFound(_)
    );
    assert_eq!(store.get_step(done.id).await.unwrap(), done);
}

/// A running step `name` of `run`, taken by a claim, with one retry.
pub(crate) async fn held<H: Harness>(h: &H, run: flowstate_core::RunId, name: &str) -> Step {
    let step =
        NewStep::new(run, name, FUNCTION, json!({})).with_retry(RetryPolicy::with_retries(1));
    h.store().insert_step(step).await.expect("insert_step");
    h.store()
        .claim_step(run, name, FUNCTION)
        .await
        .expect("claim_step")
        .expect("claimed")
}
