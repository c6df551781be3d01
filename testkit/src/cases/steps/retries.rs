//! [`StepStore::create_retry_attempt`]: the next attempt of a failed step,
//! by hand, and [`StepStore::retry_step`], the same answering the step
//! after it; and the retry policy a step is inserted with.

use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::StepStore;
use flowstate_core::{Error, NewStep, RetryPolicy, RetryStart, StepStatus, StepTransition};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, assert_err, history_of, new_run, snapshot, step_in};

/// A retry starting running raises the attempt, clears the error and adds a
/// running history row; the failed row keeps its failure.
pub async fn retry_attempt_running<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Failed).await;
    let at = h.clock().advance(Duration::from_millis(7));
    h.store()
        .create_retry_attempt(step.id, RetryStart::Running)
        .await
        .unwrap();
    let after = h.store().get_step(step.id).await.unwrap();
    assert_eq!(after.status, StepStatus::Running);
    assert_eq!(after.attempt, 2);
    assert_eq!(after.error, None);
    assert_eq!(after.result, None);
    assert_eq!(after.updated_at, at);
    let history = history_of(h, &step).await;
    assert_eq!(history.len(), 2);
    assert_eq!(
        (history[0].attempt, history[0].status),
        (1, StepStatus::Failed)
    );
    assert_eq!(history[0].error, Some(json!({"message": "boom"})));
    assert_eq!(
        (history[1].attempt, history[1].status),
        (2, StepStatus::Running)
    );
    assert_eq!(history[1].created_at, at);
    assert_eq!(history[1].running_at, Some(at));
    assert_eq!(history[1].error, None);
    assert_ne!(history[0].id, history[1].id);
}

/// A retry starting pending leaves the new attempt pending and unstamped.
pub async fn retry_attempt_pending<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Failed).await;
    h.store()
        .create_retry_attempt(step.id, RetryStart::Pending)
        .await
        .unwrap();
    let after = h.store().get_step(step.id).await.unwrap();
    assert_eq!((after.status, after.attempt), (StepStatus::Pending, 2));
    let history = history_of(h, &step).await;
    assert_eq!(history.len(), 2);
    assert_eq!(
        (history[1].attempt, history[1].status),
        (2, StepStatus::Pending)
    );
    assert_eq!(history[1].running_at, None);
    let claimed = h.store().claim_step(run.id, "s1", "rpc.fn").await.unwrap();
    let claimed = claimed.expect("a pending retry attempt is claimable");
    assert_eq!((claimed.status, claimed.attempt), (StepStatus::Running, 2));
}

/// A retry by hand ignores the retry policy: a step with no retries left can
/// still be retried.
pub async fn retry_attempt_ignores_policy<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Failed).await;
    assert_eq!(step.retry.retries, 0);
    let store = h.store();
    assert_eq!(
        store.claim_step(run.id, "s1", "rpc.fn").await.unwrap(),
        None
    );
    store
        .create_retry_attempt(step.id, RetryStart::Running)
        .await
        .unwrap();
    assert_eq!(store.get_step(step.id).await.unwrap().attempt, 2);
}

/// A step that is not failed cannot be retried: `IllegalStepTransition`,
/// nothing written.
pub async fn retry_attempt_of_unfailed_step_is_illegal<H: Harness>(h: &H) {
    let run = new_run(h).await;
    for &status in StepStatus::ALL {
        if status == StepStatus::Failed {
            continue;
        }
        let step = step_in(h, run.id, &format!("s-{status}"), status).await;
        let before = snapshot(h, &[run.id]).await;
        for start in RetryStart::ALL {
            assert_err!(
                h.store().create_retry_attempt(step.id, start).await,
                Error::IllegalStepTransition { step: s, from, to }
                    if s == step.id && from == status && to == start.status()
            );
        }
        assert_eq!(snapshot(h, &[run.id]).await, before, "{status}");
    }
}

/// With the clock held still, a retry and the attempt it replaces share a
/// creation time; history still puts attempt 1 first, and a transition after
/// the retry lands on attempt 2.
pub async fn same_microsecond_retry_resolves_the_retry<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Running).await;
    let store = h.store();
    let failed = StepTransition::Failed(json!({"message": "first"}));
    store.transition_step(step.id, failed).await.unwrap();
    store
        .create_retry_attempt(step.id, RetryStart::Running)
        .await
        .unwrap();
    let done = StepTransition::Succeeded(json!({"ok": true}));
    store.transition_step(step.id, done).await.unwrap();
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 2, "one attempt row plus one retry row");
    assert_eq!(history[0].created_at, history[1].created_at);
    let rows: Vec<_> = history.iter().map(|r| (r.attempt, r.status)).collect();
    assert_eq!(
        rows,
        [(1, StepStatus::Failed), (2, StepStatus::Succeeded)],
        "the retry resolved the wrong history row"
    );
    assert_eq!(history[0].error, Some(json!({"message": "first"})));
    assert_eq!(history[1].result, Some(json!({"ok": true})));
}

/// A step's retry delay reads back in whole milliseconds, up to
/// [`RetryPolicy::MAX_RETRY_DELAY`] exactly.
pub async fn retry_delay_is_kept_to_the_millisecond<H: Harness>(h: &H) {
    let run = new_run(h).await;
    for (name, delay, kept) in [
        (
            "fraction",
            Duration::from_micros(2_500),
            Duration::from_millis(2),
        ),
        (
            "max",
            RetryPolicy::MAX_RETRY_DELAY,
            RetryPolicy::MAX_RETRY_DELAY,
        ),
    ] {
        let policy = RetryPolicy {
            retries: 2,
            retry_delay: Some(delay),
        };
        let step = NewStep::new(run.id, name, FUNCTION, json!({})).with_retry(policy);
        let inserted = h.store().insert_step(step).await.unwrap().record;
        let read = h.store().get_step(inserted.id).await.unwrap();
        assert_eq!(
            inserted.retry.retry_delay,
            Some(kept),
            "{name}: as inserted"
        );
        assert_eq!(read.retry.retry_delay, Some(kept), "{name}: as read back");
        assert_eq!(read.retry.retries, 2);
    }
}

/// A retry delay over [`RetryPolicy::MAX_RETRY_DELAY`] is `InvalidInput`,
/// nothing written.
pub async fn retry_delay_over_the_limit_is_refused<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let before = snapshot(h, &[run.id]).await;
    let policy = RetryPolicy {
        retries: 1,
        retry_delay: Some(RetryPolicy::MAX_RETRY_DELAY + Duration::from_millis(1)),
    };
    let step = NewStep::new(run.id, "s1", FUNCTION, json!({})).with_retry(policy);
    assert_err!(
        h.store().insert_step(step).await,
        Error::InvalidInput(InvalidInput::OutOfRange {
            field: "retry delay",
            ..
        })
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// [`StepStore::retry_step`] answers the step as it is after the retry, as
/// `get_step` reads it: in the start's status, the attempt raised by one,
/// result and error cleared.
pub async fn retry_step_answers_the_step_after<H: Harness>(h: &H) {
    let run = new_run(h).await;
    for start in RetryStart::ALL {
        let step = step_in(
            h,
            run.id,
            &format!("s-{}", start.status()),
            StepStatus::Failed,
        )
        .await;
        let at = h.clock().advance(Duration::from_millis(5));
        let after = h.store().retry_step(step.id, start).await.unwrap();
        assert_eq!((after.status, after.attempt), (start.status(), 2));
        assert_eq!((&after.result, &after.error), (&None, &None));
        assert_eq!(after.updated_at, at);
        assert_eq!(after, h.store().get_step(step.id).await.unwrap());
        let rows: Vec<_> = history_of(h, &step)
            .await
            .iter()
            .map(|r| (r.attempt, r.status))
            .collect();
        assert_eq!(rows, [(1, StepStatus::Failed), (2, start.status())]);
    }
}

/// `retry_step` refuses what `create_retry_attempt` refuses: a step that is
/// not failed is `IllegalStepTransition`, an unknown one `StepNotFound`, and
/// nothing is written.
pub async fn retry_step_refusals_are_the_retrys<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Succeeded).await;
    let before = snapshot(h, &[run.id]).await;
    assert_err!(
        h.store().retry_step(step.id, RetryStart::Running).await,
        Error::IllegalStepTransition { step: s, from: StepStatus::Succeeded, to: StepStatus::Running }
            if s == step.id
    );
    let unknown = flowstate_core::StepId::generate();
    assert_err!(
        h.store().retry_step(unknown, RetryStart::Pending).await,
        Error::StepNotFound(s) if s == unknown
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// A step inserted without a policy has [`RetryPolicy::DEFAULT`], as
/// inserted and as read back, and the store honours it: it is claimed for
/// every attempt the default allows, and no further.
pub async fn a_step_without_a_policy_gets_the_default<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let new = NewStep::new(run.id, "s1", FUNCTION, json!({}));
    assert_eq!(new.retry, RetryPolicy::DEFAULT);
    let inserted = store.insert_step(new).await.unwrap().record;
    assert_eq!(inserted.retry, RetryPolicy::DEFAULT);
    assert_eq!(
        store.get_step(inserted.id).await.unwrap().retry,
        RetryPolicy::DEFAULT
    );
    assert_eq!(
        store.find_step(run.id, "s1").await.unwrap().retry,
        RetryPolicy::DEFAULT
    );
    assert_eq!(
        store.list_steps(run.id).await.unwrap()[0].retry,
        RetryPolicy::DEFAULT
    );
    for attempt in 1..=RetryPolicy::DEFAULT.max_attempts() {
        let claimed = store.claim_step(run.id, "s1", FUNCTION).await.unwrap();
        assert_eq!(
            claimed.map(|s| s.attempt),
            Some(attempt),
            "attempt {attempt}"
        );
        let failed = StepTransition::Failed(json!({"attempt": attempt}));
        store.transition_step(inserted.id, failed).await.unwrap();
    }
    assert_eq!(
        store.claim_step(run.id, "s1", FUNCTION).await.unwrap(),
        None
    );
}
