//! [`StepStore::record_step`]: a step the caller already ran, recorded
//! settled with its history row in one call, under the guards of
//! `insert_step`.

use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{
    Clock, Error, InlineOutcome, InlineStep, NewStep, RetryPolicy, RunId, RunStatus, StepStatus,
    Timestamp,
};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, assert_err, new_run, new_step, run_in};

/// A step of `run` named `name` that ran from `start` ms to `end` ms.
fn inline(run: RunId, name: &str, outcome: InlineOutcome, start: i64, end: i64) -> InlineStep {
    InlineStep::new(
        NewStep::new(run, name, FUNCTION, json!({"in": 1})),
        outcome,
        Timestamp::from_millis(start),
        Timestamp::from_millis(end),
    )
}

/// A succeeded step reads back as recorded (attempt 1, its result, no
/// claim deadline), its history row carries the caller's timings, and no
/// claim takes it.
pub async fn record_step_succeeded_round_trips<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let result = json!({"ok": [1, null, "x"]});
    let recorded = h
        .store()
        .record_step(inline(
            run.id,
            "fetch",
            InlineOutcome::Succeeded(result.clone()),
            1_000,
            1_250,
        ))
        .await
        .unwrap();
    assert!(recorded.inserted);
    let step = recorded.record;
    assert_eq!((step.status, step.attempt), (StepStatus::Succeeded, 1));
    assert_eq!(
        (step.result.as_ref(), step.error.as_ref()),
        (Some(&result), None)
    );
    assert_eq!(step.claimed_until, None);
    assert_eq!(
        (step.created_at, step.updated_at),
        (h.clock().now(), h.clock().now())
    );
    assert_eq!(h.store().get_step(step.id).await.unwrap(), step);
    assert_eq!(h.store().find_step(run.id, "fetch").await.unwrap(), step);
    let history = h.store().step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    let attempt = &history[0];
    assert_eq!((attempt.step, attempt.attempt), (step.id, 1));
    assert_eq!(attempt.status, StepStatus::Succeeded);
    assert_eq!(attempt.result.as_ref(), Some(&result));
    assert_eq!(attempt.running_at, Some(Timestamp::from_millis(1_000)));
    assert_eq!(attempt.succeeded_at, Some(Timestamp::from_millis(1_250)));
    assert_eq!(attempt.failed_at, None);
    assert_eq!(attempt.duration(), Some(Duration::from_millis(250)));
    assert_eq!(
        h.store()
            .claim_step(run.id, "fetch", FUNCTION)
            .await
            .unwrap(),
        None
    );
}

/// A failed step records its error and failure time; with no retry left
/// it is failed for good and no claim takes it.
pub async fn record_step_failed_round_trips<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let error = json!({"message": "boom"});
    let step = inline(run.id, "charge", InlineOutcome::Failed(error.clone()), 5, 5);
    let step = InlineStep {
        step: step.step.with_retry(RetryPolicy::with_retries(0)),
        ..step
    };
    let recorded = h.store().record_step(step).await.unwrap();
    assert!(recorded.inserted);
    let step = recorded.record;
    assert_eq!((step.status, step.attempt), (StepStatus::Failed, 1));
    assert_eq!(
        (step.result.as_ref(), step.error.as_ref()),
        (None, Some(&error))
    );
    assert_eq!(h.store().get_step(step.id).await.unwrap(), step);
    let history = h.store().step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Failed);
    assert_eq!(history[0].error.as_ref(), Some(&error));
    assert_eq!(history[0].failed_at, Some(Timestamp::from_millis(5)));
    assert_eq!(history[0].succeeded_at, None);
    assert_eq!(
        h.store()
            .claim_step(run.id, "charge", FUNCTION)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        h.store().graph_state(run.id).await.unwrap().failed,
        vec!["charge"]
    );
}

/// The guards: a name the run holds answers that step unchanged and
/// writes nothing; a settled run is `RunSettled`, an unknown one
/// `RunNotFound`; a finish before the start is `InvalidInput`.
pub async fn record_step_guards<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let held = new_step(h, run.id, "taken", 0).await;
    let again = h
        .store()
        .record_step(inline(
            run.id,
            "taken",
            InlineOutcome::Succeeded(json!(1)),
            1,
            2,
        ))
        .await
        .unwrap();
    assert!(!again.inserted);
    assert_eq!(again.record, held);
    let history = h.store().step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Pending);

    let settled = run_in(h, RunStatus::Completed).await;
    assert_err!(
        h.store()
            .record_step(inline(settled.id, "late", InlineOutcome::Succeeded(json!(1)), 1, 2))
            .await,
        Error::RunSettled { run, status: RunStatus::Completed } if run == settled.id
    );
    assert!(h.store().list_steps(settled.id).await.unwrap().is_empty());

    let missing = RunId::generate();
    assert_err!(
        h.store()
            .record_step(inline(missing, "s", InlineOutcome::Succeeded(json!(1)), 1, 2))
            .await,
        Error::RunNotFound(id) if id == missing
    );

    assert_err!(
        h.store()
            .record_step(inline(
                run.id,
                "backwards",
                InlineOutcome::Failed(json!(1)),
                9,
                8
            ))
            .await,
        Error::InvalidInput(InvalidInput::OutOfRange {
            field: "step timings",
            ..
        })
    );
    assert_err!(
        h.store().find_step(run.id, "backwards").await,
        Error::StepNameNotFound { .. }
    );
    assert_eq!(
        h.store().get_run(run.id).await.unwrap().status,
        RunStatus::Running
    );
}
