//! [`BatchStepStore`]: which steps a batch claim takes, in which order and
//! in which state it leaves them, and what each item of a batch of
//! completions answers. The races are in `races`.

use std::time::Duration;

use flowstate_core::ports::{BatchStepStore, StepStore};
use flowstate_core::{
    BatchClaim, Completion, Error, InputLimits, NewStep, RetryPolicy, RunId, StepClaim, StepId,
    StepStatus, StepTransition,
};
use serde_json::json;

use crate::cases::support::{
    FUNCTION, assert_err, history_of, new_run, new_step, snapshot, step_in,
};
use crate::{Harness, Hooks};

/// The ids of what a batch claim took.
async fn claim_ids<H: Harness>(h: &H, claim: BatchClaim) -> Vec<StepId>
where
    H::Store: BatchStepStore,
{
    let taken = h.store().claim_batch(&claim).await.expect("claim_batch");
    taken.iter().map(|s| s.id).collect()
}

/// Pending steps across runs go oldest first, `limit` at a time, running on
/// attempt 1 with their history row stamped; then none are left.
pub async fn claim_batch_takes_pending_oldest_first<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let (a, b) = (new_run(h).await, new_run(h).await);
    let mut made = Vec::new();
    for (i, run) in [a.id, b.id, a.id, b.id, a.id].into_iter().enumerate() {
        h.clock().advance(Duration::from_millis(1));
        made.push(new_step(h, run, &format!("s{i}"), 0).await);
    }
    h.clock().advance(Duration::from_millis(1));
    let taken = h.store().claim_batch(&BatchClaim::new(3)).await.unwrap();
    let ids: Vec<StepId> = taken.iter().map(|s| s.id).collect();
    assert_eq!(ids, [made[0].id, made[1].id, made[2].id]);
    for step in &taken {
        assert_eq!((step.status, step.attempt), (StepStatus::Running, 1));
        let stored = h.store().get_step(step.id).await.unwrap();
        assert_eq!(&stored, step, "the answer is the step as stored");
        let history = history_of(h, step).await;
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].status, StepStatus::Running);
        assert_eq!(history[0].running_at, Some(step.updated_at));
    }
    assert_eq!(
        claim_ids(h, BatchClaim::new(10)).await,
        [made[3].id, made[4].id]
    );
    assert!(claim_ids(h, BatchClaim::new(10)).await.is_empty());
}

/// A limit of 0 takes nothing and writes nothing.
pub async fn claim_batch_of_zero_takes_nothing<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    new_step(h, run.id, "s", 0).await;
    let before = snapshot(h, &[run.id]).await;
    assert!(claim_ids(h, BatchClaim::new(0)).await.is_empty());
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// A failed step with a retry left is taken as its next attempt once its
/// retry delay has passed since it failed, not before; one with no attempt
/// left never is.
pub async fn claim_batch_takes_due_retries<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    let store = h.store();
    let delayed = NewStep::new(run.id, "delayed", FUNCTION, json!({})).with_retry(RetryPolicy {
        retries: 1,
        retry_delay: Some(Duration::from_secs(2)),
    });
    let delayed = store.insert_step(delayed).await.unwrap().record;
    step_in(h, run.id, "exhausted", StepStatus::Failed).await;
    store.claim_step(run.id, "delayed", FUNCTION).await.unwrap();
    store
        .transition_step(delayed.id, StepTransition::Failed(json!("boom")))
        .await
        .unwrap();

    h.clock().advance(Duration::from_millis(1_999));
    assert!(claim_ids(h, BatchClaim::new(10)).await.is_empty());
    h.clock().advance(Duration::from_millis(1));
    let taken = store.claim_batch(&BatchClaim::new(10)).await.unwrap();
    assert_eq!(taken.len(), 1);
    let retried = &taken[0];
    assert_eq!(retried.id, delayed.id);
    assert_eq!((retried.status, retried.attempt), (StepStatus::Running, 2));
    assert_eq!((&retried.result, &retried.error), (&None, &None));
    assert_eq!(
        retried,
        &store.get_step(retried.id).await.unwrap(),
        "the answer is the retried step as stored"
    );
    let history = history_of(h, retried).await;
    assert_eq!(history.len(), 2);
    assert_eq!(
        history[0].status,
        StepStatus::Failed,
        "attempt 1 keeps its failure"
    );
    assert_eq!(
        (history[1].attempt, history[1].status),
        (2, StepStatus::Running)
    );
    assert!(claim_ids(h, BatchClaim::new(10)).await.is_empty());
}

/// Scheduled, running and succeeded steps are never taken.
pub async fn claim_batch_leaves_other_statuses<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    for status in [
        StepStatus::Scheduled,
        StepStatus::Running,
        StepStatus::Succeeded,
    ] {
        step_in(h, run.id, status.as_str(), status).await;
    }
    let before = snapshot(h, &[run.id]).await;
    assert!(claim_ids(h, BatchClaim::new(10)).await.is_empty());
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// With a function, only steps pinned to exactly that function are taken;
/// without one, every step is, unpinned ones included. A function over the
/// key limit is refused.
pub async fn claim_batch_filters_by_function<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    let store = h.store();
    let mut ids = Vec::new();
    for (name, function) in [
        ("a", Some("a.fn")),
        ("b", Some("b.fn")),
        ("c", None),
        ("d", Some("A.fn")),
    ] {
        h.clock().advance(Duration::from_millis(1));
        let step = match function {
            Some(f) => NewStep::new(run.id, name, f, json!({})),
            None => NewStep {
                function: None,
                ..NewStep::new(run.id, name, "x", json!({}))
            },
        };
        ids.push(store.insert_step(step).await.unwrap().record.id);
    }
    assert_eq!(
        claim_ids(h, BatchClaim::new(10).for_function("a.fn")).await,
        [ids[0]]
    );
    assert_eq!(
        claim_ids(h, BatchClaim::new(10)).await,
        [ids[1], ids[2], ids[3]]
    );
    let long = "f".repeat(InputLimits::default().max_key_bytes + 1);
    assert_err!(
        store
            .claim_batch(&BatchClaim::new(1).for_function(long))
            .await,
        Error::InvalidInput(_)
    );
}

/// Three running steps completed in one batch: two succeed, one fails; each
/// step and its history row carry the outcome.
pub async fn complete_batch_writes_every_item<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    let mut steps = Vec::new();
    for name in ["a", "b", "c"] {
        steps.push(step_in(h, run.id, name, StepStatus::Running).await);
    }
    h.clock().advance(Duration::from_millis(5));
    let items = vec![
        (steps[0].claim(), Completion::Succeeded(json!({"n": 1}))),
        (
            steps[1].claim(),
            Completion::Failed(json!({"message": "boom"})),
        ),
        (steps[2].claim(), Completion::Succeeded(json!(null))),
    ];
    let outcomes = h.store().complete_batch(items).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let expect = [
        (StepStatus::Succeeded, Some(json!({"n": 1})), None),
        (StepStatus::Failed, None, Some(json!({"message": "boom"}))),
        (StepStatus::Succeeded, Some(json!(null)), None),
    ];
    for (step, (status, result, error)) in steps.iter().zip(expect) {
        let now = h.store().get_step(step.id).await.unwrap();
        assert_eq!(
            (now.status, &now.result, &now.error),
            (status, &result, &error)
        );
        let history = history_of(h, step).await;
        assert_eq!(history.len(), 1);
        let row = &history[0];
        assert_eq!(
            (row.status, &row.result, &row.error),
            (status, &result, &error)
        );
        assert_eq!(row.duration(), Some(Duration::from_millis(5)));
    }
}

/// Each item answers for itself: a legal one is written; a claim that does
/// not hold its step (the step is pending), an unknown step, an oversized
/// payload and a repeated step each fail alone and write nothing.
pub async fn complete_batch_answers_per_item<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    let running = step_in(h, run.id, "running", StepStatus::Running).await;
    let pending = step_in(h, run.id, "pending", StepStatus::Pending).await;
    let other = step_in(h, run.id, "other", StepStatus::Running).await;
    let unknown = StepId::generate();
    let big = json!("x".repeat(InputLimits::default().max_value_bytes));
    let items = vec![
        (running.claim(), Completion::Succeeded(json!(1))),
        (pending.claim(), Completion::Succeeded(json!(2))),
        (
            StepClaim {
                step: unknown,
                attempt: 1,
            },
            Completion::Failed(json!(3)),
        ),
        (other.claim(), Completion::Succeeded(big)),
        (running.claim(), Completion::Failed(json!(4))),
    ];
    let outcomes = h.store().complete_batch(items).await.unwrap();
    assert_eq!(outcomes.len(), 5);
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
    assert_err!(
        &outcomes[1],
        Error::ClaimLost { step, attempt: 1 } if *step == pending.id
    );
    assert_err!(&outcomes[2], Error::StepNotFound(id) if *id == unknown);
    assert_err!(&outcomes[3], Error::InvalidInput(_));
    assert_err!(
        &outcomes[4],
        Error::IllegalStepTransition {
            from: StepStatus::Succeeded,
            to: StepStatus::Failed,
            ..
        }
    );
    let store = h.store();
    let done = store.get_step(running.id).await.unwrap();
    assert_eq!(
        (done.status, done.result),
        (StepStatus::Succeeded, Some(json!(1)))
    );
    assert_eq!(store.get_step(pending.id).await.unwrap(), pending);
    assert_eq!(
        store.get_step(other.id).await.unwrap().status,
        StepStatus::Running
    );
    assert_eq!(history_of(h, &pending).await.len(), 1);
}

/// An empty batch answers an empty list.
pub async fn complete_batch_of_nothing<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    assert!(
        h.store()
            .complete_batch(Vec::new())
            .await
            .unwrap()
            .is_empty()
    );
}

/// A batch of completions in which one step has lost its history row
/// still moves every step, and writes the lost row with the outcome
/// instead of dropping it: a fast path that updates the row the claim
/// wrote, and would find none, must give way to one that writes it.
pub async fn complete_batch_recreates_missing_history_row<H: Hooks>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    let kept = step_in(h, run.id, "kept", StepStatus::Running).await;
    let lost = step_in(h, run.id, "lost", StepStatus::Running).await;
    h.delete_history_row(lost.id, 1).await;
    let at = h.clock().advance(Duration::from_millis(2));
    let items = vec![
        (kept.claim(), Completion::Succeeded(json!({"kept": true}))),
        (lost.claim(), Completion::Succeeded(json!({"lost": true}))),
    ];
    let outcomes = h.store().complete_batch(items).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    for (step, result) in [
        (&kept, json!({"kept": true})),
        (&lost, json!({"lost": true})),
    ] {
        let now = h.store().get_step(step.id).await.unwrap();
        assert_eq!(
            (now.status, &now.result),
            (StepStatus::Succeeded, &Some(result.clone()))
        );
        let history = history_of(h, step).await;
        assert_eq!(history.len(), 1, "{}: {history:?}", step.name);
        let row = &history[0];
        assert_eq!(
            (row.attempt, row.status, &row.result, row.succeeded_at),
            (1, StepStatus::Succeeded, &Some(result), Some(at))
        );
    }
    assert_eq!(
        history_of(h, &kept).await[0].duration(),
        Some(Duration::from_millis(2)),
        "the kept row keeps its running_at"
    );
}

/// With history writes failing, a batch claim and a batch of completions
/// answer an error and move nothing.
pub async fn batches_are_atomic_with_their_history<H: Hooks>(h: &H)
where
    H::Store: BatchStepStore,
{
    let run = new_run(h).await;
    new_step(h, run.id, "pending", 0).await;
    let running = step_in(h, run.id, "running", StepStatus::Running).await;
    let before = snapshot(h, &[run.id]).await;
    h.fail_history_writes(true).await;
    let claimed = h.store().claim_batch(&BatchClaim::new(10)).await;
    let items = vec![(running.claim(), Completion::Succeeded(json!(1)))];
    let completed = h.store().complete_batch(items).await;
    h.fail_history_writes(false).await;
    assert!(claimed.is_err(), "claim_batch: {claimed:?}");
    assert!(
        completed
            .as_ref()
            .map_or(true, |all| all.iter().all(Result::is_err)),
        "complete_batch: {completed:?}"
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// Runs of `per_run` pending steps, `runs` of them, oldest first.
pub(crate) async fn pending_steps<H: Harness>(
    h: &H,
    runs: usize,
    per_run: usize,
) -> Vec<(RunId, String, StepId)> {
    let mut made = Vec::new();
    for _ in 0..runs {
        let run = new_run(h).await;
        for i in 0..per_run {
            let step = new_step(h, run.id, &format!("s{i}"), 0).await;
            made.push((run.id, step.name, step.id));
        }
    }
    made
}
