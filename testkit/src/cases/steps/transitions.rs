//! [`StepStore::transition_step`]: every row of the step status machine, and
//! the step row and its history row changing together.

use std::time::Duration;

use flowstate_core::ports::StepStore;
use flowstate_core::{Error, StepStatus, StepTransition};
use serde_json::{Value, json};

use crate::cases::support::{assert_err, history_of, new_run, new_step, step_in};
use crate::{Harness, Hooks};

/// The transition that moves a step to `to`, if the port can express it.
fn transition_to(to: StepStatus) -> Option<StepTransition> {
    match to {
        StepStatus::Running => Some(StepTransition::Running),
        StepStatus::Scheduled => Some(StepTransition::Scheduled),
        StepStatus::Succeeded => Some(StepTransition::Succeeded(json!({"ok": "row"}))),
        StepStatus::Failed => Some(StepTransition::Failed(json!({"message": "row"}))),
        StepStatus::Pending => None,
    }
}

/// Every legal row of [`StepStatus::TRANSITIONS`] that `transition_step` can
/// express moves the step and its current history row, stamped.
pub async fn step_transitions_legal_rows<H: Harness>(h: &H) {
    let run = new_run(h).await;
    for (i, &(from, to)) in StepStatus::TRANSITIONS.iter().enumerate() {
        let Some(transition) = transition_to(to) else {
            continue;
        };
        let step = step_in(h, run.id, &format!("legal{i}"), from).await;
        let at = h.clock().advance(Duration::from_millis(1));
        h.store()
            .transition_step(step.id, transition)
            .await
            .unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
        let after = h.store().get_step(step.id).await.unwrap();
        assert_eq!(after.status, to, "{from} -> {to}");
        assert_eq!(after.updated_at, at, "{from} -> {to}");
        assert_eq!(after.attempt, step.attempt, "{from} -> {to}");
        let history = history_of(h, &step).await;
        assert_eq!(history.len(), 1, "{from} -> {to}");
        let row = &history[0];
        assert_eq!(row.status, to, "{from} -> {to}");
        let stamp = match to {
            StepStatus::Running => row.running_at,
            StepStatus::Scheduled => row.scheduled_at,
            StepStatus::Succeeded => row.succeeded_at,
            StepStatus::Failed => row.failed_at,
            StepStatus::Pending => unreachable!(),
        };
        assert_eq!(stamp, Some(at), "{from} -> {to}");
    }
}

/// Every move not in [`StepStatus::TRANSITIONS`] is `IllegalStepTransition`
/// and changes neither the step nor its history.
pub async fn step_transitions_illegal_rows<H: Harness>(h: &H) {
    let run = new_run(h).await;
    for &from in StepStatus::ALL {
        for &to in StepStatus::ALL {
            let Some(transition) = transition_to(to) else {
                continue;
            };
            if from.can_transition_to(to) {
                continue;
            }
            let step = step_in(h, run.id, &format!("{from}-{to}"), from).await;
            let history = history_of(h, &step).await;
            h.clock().advance(Duration::from_millis(1));
            assert_err!(
                h.store().transition_step(step.id, transition).await,
                Error::IllegalStepTransition { step: s, from: f, to: t }
                    if s == step.id && f == from && t == to
            );
            assert_eq!(
                h.store().get_step(step.id).await.unwrap(),
                step,
                "{from} -> {to}"
            );
            assert_eq!(history_of(h, &step).await, history, "{from} -> {to}");
        }
    }
}

/// Succeeding writes the result on the step and on its history row, with
/// `succeeded_at` stamped.
pub async fn succeeded_writes_step_and_history<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Running).await;
    let at = h.clock().advance(Duration::from_millis(40));
    let result = json!({"ok": true});
    let done = StepTransition::Succeeded(result.clone());
    h.store().transition_step(step.id, done).await.unwrap();
    let state = h.store().find_step(run.id, "s1").await.unwrap();
    assert_eq!(state.status, StepStatus::Succeeded);
    assert_eq!(state.result, Some(result.clone()));
    assert_eq!(state.error, None);
    let history = history_of(h, &step).await;
    let latest = history.last().unwrap();
    assert_eq!(latest.status, StepStatus::Succeeded);
    assert_eq!(latest.result, Some(result));
    assert_eq!(latest.succeeded_at, Some(at));
    assert_eq!(latest.running_at, Some(step.updated_at));
    assert_eq!(latest.duration(), Some(Duration::from_millis(40)));
}

/// Failing writes the error on the step and on its history row, with
/// `failed_at` stamped.
pub async fn failed_writes_step_and_history<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Running).await;
    let at = h.clock().advance(Duration::from_millis(5));
    let error = json!({"message": "boom", "stack": ["a", "b"]});
    let failed = StepTransition::Failed(error.clone());
    h.store().transition_step(step.id, failed).await.unwrap();
    let state = h.store().find_step(run.id, "s1").await.unwrap();
    assert_eq!(state.status, StepStatus::Failed);
    assert_eq!(state.error, Some(error.clone()));
    assert_eq!(state.result, None);
    let history = history_of(h, &step).await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Failed);
    assert_eq!(history[0].error, Some(error));
    assert_eq!(history[0].failed_at, Some(at));
    assert_eq!(history[0].succeeded_at, None);
}

/// Each transition stamps its own time on the history row and keeps the
/// stamps of the ones before.
pub async fn transitions_keep_earlier_stamps<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    let store = h.store();
    let scheduled = h.clock().advance(Duration::from_millis(10));
    store
        .transition_step(step.id, StepTransition::Scheduled)
        .await
        .unwrap();
    let running = h.clock().advance(Duration::from_millis(10));
    store
        .transition_step(step.id, StepTransition::Running)
        .await
        .unwrap();
    let succeeded = h.clock().advance(Duration::from_millis(10));
    let done = StepTransition::Succeeded(json!(null));
    store.transition_step(step.id, done).await.unwrap();
    let history = history_of(h, &step).await;
    assert_eq!(history.len(), 1);
    let row = &history[0];
    assert_eq!(row.created_at, step.created_at);
    assert_eq!(row.scheduled_at, Some(scheduled));
    assert_eq!(row.running_at, Some(running));
    assert_eq!(row.succeeded_at, Some(succeeded));
    assert_eq!(row.failed_at, None);
    assert_eq!(row.result, Some(Value::Null), "a null result is a result");
    let step = store.get_step(step.id).await.unwrap();
    assert_eq!(step.result, Some(Value::Null), "a null result is a result");
}

/// A transition changes its own step only.
pub async fn transition_touches_only_its_step<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    let bystander = new_step(h, run.id, "s2", 0).await;
    let bystander_history = history_of(h, &bystander).await;
    h.clock().advance(Duration::from_millis(1));
    let store = h.store();
    store
        .transition_step(step.id, StepTransition::Running)
        .await
        .unwrap();
    assert_eq!(store.get_step(bystander.id).await.unwrap(), bystander);
    assert_eq!(history_of(h, &bystander).await, bystander_history);
}

/// A transition whose history row is gone writes the outcome to a recreated
/// row instead of losing it.
pub async fn transition_recreates_missing_history_row<H: Hooks>(h: &H) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Running).await;
    h.delete_history_row(step.id, 1).await;
    assert!(history_of(h, &step).await.is_empty());
    let at = h.clock().advance(Duration::from_millis(1));
    let done = StepTransition::Succeeded(json!({"ok": true}));
    h.store().transition_step(step.id, done).await.unwrap();
    let history = history_of(h, &step).await;
    assert_eq!(
        history.len(),
        1,
        "the step row says succeeded but no history row does"
    );
    let row = &history[0];
    assert_eq!((row.attempt, row.status), (1, StepStatus::Succeeded));
    assert_eq!(row.result, Some(json!({"ok": true})));
    assert_eq!(row.succeeded_at, Some(at));
}

/// Once a missing history row is recreated, later transitions update it in
/// place rather than appending rows.
pub async fn recreated_history_row_is_updated_in_place<H: Hooks>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    h.delete_history_row(step.id, 1).await;
    let store = h.store();
    store
        .transition_step(step.id, StepTransition::Running)
        .await
        .unwrap();
    let done = StepTransition::Succeeded(json!({"ok": true}));
    store.transition_step(step.id, done).await.unwrap();
    let history = history_of(h, &step).await;
    assert_eq!(history.len(), 1, "each transition appended a row");
    assert_eq!(
        (history[0].attempt, history[0].status),
        (1, StepStatus::Succeeded)
    );
    assert!(history[0].running_at.is_some());
    assert_eq!(history[0].result, Some(json!({"ok": true})));
}
