//! [`StepStore`]: inserting, reading and listing steps.

use std::time::Duration;

use flowstate_core::ports::StepStore;
use flowstate_core::{Clock, Error, NewStep, RetryPolicy, RetryStart, StepStatus, StepTransition};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, assert_err, history_of, new_run, new_step, race};

/// A new step is pending in attempt 1 with its first history row, pending.
pub async fn insert_step_starts_pending_attempt_1<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let policy = RetryPolicy {
        retries: 3,
        retry_delay: Some(Duration::from_millis(250)),
    };
    let new = NewStep::new(run.id, "s1", FUNCTION, json!({"x": 1})).with_retry(policy);
    let inserted = h.store().insert_step(new).await.unwrap();
    assert!(inserted.inserted);
    let step = inserted.record;
    assert_eq!(step.run, run.id);
    assert_eq!(step.name, "s1");
    assert_eq!(step.function.as_deref(), Some(FUNCTION));
    assert_eq!(step.status, StepStatus::Pending);
    assert_eq!(step.input, json!({"x": 1}));
    assert_eq!(step.result, None);
    assert_eq!(step.error, None);
    assert_eq!(step.attempt, 1);
    assert_eq!(step.retry, policy);
    assert_eq!(step.branch, None);
    assert_eq!(step.created_at, h.clock().now());
    assert_eq!(step.updated_at, h.clock().now());
    assert_eq!(h.store().get_step(step.id).await.unwrap(), step);

    let history = h.store().step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    let row = &history[0];
    assert_eq!((row.step, row.step_name.as_str()), (step.id, "s1"));
    assert_eq!((row.attempt, row.status), (1, StepStatus::Pending));
    assert_eq!((row.result.as_ref(), row.error.as_ref()), (None, None));
    assert_eq!(row.created_at, h.clock().now());
    assert_eq!(row.scheduled_at, None);
    assert_eq!(row.running_at, None);
    assert_eq!(row.succeeded_at, None);
    assert_eq!(row.failed_at, None);
}

/// A second insert of the same name returns the existing step unchanged and
/// adds no history row.
pub async fn insert_step_is_idempotent_by_name<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let first = new_step(h, run.id, "s1", 0).await;
    h.store()
        .transition_step(first.id, StepTransition::Running)
        .await
        .unwrap();
    let current = h.store().get_step(first.id).await.unwrap();
    h.clock().advance(Duration::from_secs(1));
    let again = NewStep::new(run.id, "s1", "rpc.other", json!({"x": 2}));
    let again = h.store().insert_step(again).await.unwrap();
    assert!(!again.inserted);
    assert_eq!(again.record, current);
    assert_eq!(h.store().list_steps(run.id).await.unwrap(), vec![current]);
    assert_eq!(history_of(h, &first).await.len(), 1);
}

/// The same name in another run is another step.
pub async fn insert_step_same_name_in_other_run<H: Harness>(h: &H) {
    let a = new_run(h).await;
    let b = new_run(h).await;
    let sa = new_step(h, a.id, "s1", 0).await;
    let sb = new_step(h, b.id, "s1", 0).await;
    assert_ne!(sa.id, sb.id);
    assert_eq!(sb.run, b.id);
    assert_eq!(h.store().find_step(a.id, "s1").await.unwrap(), sa);
    assert_eq!(h.store().find_step(b.id, "s1").await.unwrap(), sb);
}

/// A step pinned to no function stores `None` and is claimable by any.
pub async fn insert_step_without_function<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let new = NewStep {
        function: None,
        ..NewStep::new(run.id, "free", FUNCTION, json!(null))
    };
    let step = h.store().insert_step(new).await.unwrap().record;
    assert_eq!(step.function, None);
    assert_eq!(step.input, json!(null));
    let claimed = h
        .store()
        .claim_step(run.id, "free", "anything")
        .await
        .unwrap();
    assert_eq!(claimed.map(|s| s.status), Some(StepStatus::Running));
}

/// `find_step` answers the step by name; an unknown name, or a run without
/// it, is `StepNameNotFound`.
pub async fn find_step_by_name<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let other = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    assert_eq!(h.store().find_step(run.id, "s1").await.unwrap(), step);
    assert_err!(
        h.store().find_step(run.id, "s2").await,
        Error::StepNameNotFound { run: r, name } if r == run.id && name == "s2"
    );
    assert_err!(
        h.store().find_step(other.id, "s1").await,
        Error::StepNameNotFound { run: r, name } if r == other.id && name == "s1"
    );
}

/// `list_steps` reads every step of the run (and no other run's), by
/// creation time then name.
pub async fn list_steps_orders_by_creation_then_name<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let other = new_run(h).await;
    new_step(h, other.id, "elsewhere", 0).await;
    for name in ["s5", "s4", "s3"] {
        h.clock().advance(Duration::from_millis(1));
        new_step(h, run.id, name, 0).await;
    }
    h.clock().advance(Duration::from_millis(1));
    for name in ["s2", "s0", "s1"] {
        new_step(h, run.id, name, 0).await;
    }
    let steps = h.store().list_steps(run.id).await.unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s5", "s4", "s3", "s0", "s1", "s2"]);
    for step in &steps {
        assert_eq!(&h.store().get_step(step.id).await.unwrap(), step);
    }
}

/// A run with no steps lists none.
pub async fn list_steps_of_run_without_steps_is_empty<H: Harness>(h: &H) {
    let run = new_run(h).await;
    assert!(h.store().list_steps(run.id).await.unwrap().is_empty());
}

/// The attempt counts 1, then 2 and 3 through retries, on the step row and
/// in what the retry leaves behind.
pub async fn attempt_tracks_retries<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 0).await;
    let store = h.store();
    assert_eq!(store.find_step(run.id, "s1").await.unwrap().attempt, 1);
    for (n, message) in [(2, "one"), (3, "two")] {
        let error = StepTransition::Failed(json!({"message": message}));
        store.transition_step(step.id, error).await.unwrap();
        store
            .create_retry_attempt(step.id, RetryStart::Running)
            .await
            .unwrap();
        assert_eq!(store.find_step(run.id, "s1").await.unwrap().attempt, n);
    }
    let attempts: Vec<u32> = history_of(h, &step)
        .await
        .iter()
        .map(|r| r.attempt)
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
}

/// 32 concurrent inserts of one name make one step: one `inserted: true`,
/// all the same id, one history row.
pub async fn insert_step_race_32<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let outcomes = race(h.store(), 32, |store, i| async move {
        let new = NewStep::new(run.id, "s1", FUNCTION, json!({"i": i}));
        store.insert_step(new).await
    })
    .await;
    let outcomes: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes.iter().filter(|o| o.inserted).count(), 1);
    let id = outcomes[0].record.id;
    assert!(outcomes.iter().all(|o| o.record.id == id));
    let steps = h.store().list_steps(run.id).await.unwrap();
    assert_eq!(steps.len(), 1);
    let winner = outcomes.iter().find(|o| o.inserted).unwrap();
    assert_eq!(steps[0], winner.record);
    assert!(
        outcomes
            .iter()
            .all(|o| o.record.input == winner.record.input)
    );
    assert_eq!(history_of(h, &steps[0]).await.len(), 1);
}
