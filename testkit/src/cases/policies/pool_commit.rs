//! `flowstate_pool::GroupCommit` over the backend's store: coalescing
//! (exact flush counts, with the first flush held so the rest queue up
//! behind it), nothing answered before the store returned, every `Ok`
//! durable when it is answered, per-item results, a flush failing with an
//! error that is not retryable failing all its callers at once and writing
//! nothing, close.

use std::sync::Arc;
use std::task::Poll;

use flowstate_core::ports::{BatchStepStore, StepStore};
use flowstate_core::{Completion, Error, Result, StepClaim, StepId, StepStatus};
use flowstate_pool::{CommitReport, GroupCommit};
use serde_json::json;

use crate::Harness;
use crate::cases::policies::pool_support::{
    Watched, assert_unanswered, attempts, histories, hold_first, join_all, poll_now, read_back,
    running_steps, spawn_commit, wait_queued, within,
};

/// 50 commits, the first flush held in the store while the other 49 queue
/// up: the held one is not answered while held (and its step is still
/// running), the 49 go in one flush, and every step reads back succeeded
/// with its own result and one history row.
pub async fn commits_queued_behind_a_flush_go_in_one_flush<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 50).await;
    let store = Arc::new(Watched::over(h.store()).holding_first());
    let commit = GroupCommit::new(Arc::clone(&store));
    let mut first = hold_first(&store, &commit, steps[0].claim()).await;
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| {
            let done = Completion::Succeeded(json!(s.id.to_string()));
            spawn_commit(h.store(), &commit, s.claim(), done)
        })
        .collect();
    wait_queued(&commit, 49).await;
    // Held: nothing is answered before the store returned.
    assert_unanswered(&mut first);
    assert!(rest.iter().all(|r| !r.is_finished()), "answered while held");
    assert_eq!(
        h.store().get_step(steps[0].id).await.unwrap().status,
        StepStatus::Running
    );
    store.release.notify_one();
    assert!(within("the held commit", first).await.is_ok());
    assert!(join_all(rest).await.iter().all(Result::is_ok));
    assert_eq!(store.flush_sizes(), [1, 49]);
    assert_eq!(
        commit.report(),
        CommitReport {
            flushes: 2,
            items: 50,
            failed_flushes: 0,
            flush_retries: 0,
        }
    );
    let back = read_back(&**h.store(), &steps).await;
    let rows = histories(&**h.store(), &steps).await;
    for (i, (step, rows)) in back.iter().zip(&rows).enumerate() {
        let result = if i == 0 {
            json!("first")
        } else {
            json!(step.id.to_string())
        };
        assert_eq!(step.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(step.result.as_ref(), Some(&result), "{}", step.id);
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)], "{}", step.id);
        assert_eq!(rows[0].result.as_ref(), Some(&result), "{}", step.id);
    }
    commit.close().await;
}

/// 26 commits behind a held flush with `max_batch` 10: flushes of 1, 10,
/// 10 and 5, each step written as its own completion said.
pub async fn a_flush_takes_at_most_max_batch<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 26).await;
    let store = Arc::new(Watched::over(h.store()).holding_first());
    let commit = GroupCommit::with_max_batch(Arc::clone(&store), 10);
    let first = hold_first(&store, &commit, steps[0].claim()).await;
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| {
            spawn_commit(
                h.store(),
                &commit,
                s.claim(),
                Completion::Failed(json!("no")),
            )
        })
        .collect();
    wait_queued(&commit, 25).await;
    store.release.notify_one();
    assert!(within("the held commit", first).await.is_ok());
    assert!(join_all(rest).await.iter().all(Result::is_ok));
    assert_eq!(store.flush_sizes(), [1, 10, 10, 5]);
    let back = read_back(&**h.store(), &steps).await;
    assert_eq!(back[0].status, StepStatus::Succeeded);
    assert!(back[1..].iter().all(|s| s.status == StepStatus::Failed));
    let rows = histories(&**h.store(), &steps).await;
    assert_eq!(attempts(&rows[0]), [(1, StepStatus::Succeeded)]);
    for rows in &rows[1..] {
        assert_eq!(attempts(rows), [(1, StepStatus::Failed)]);
        assert_eq!(rows[0].error, Some(json!("no")));
    }
    commit.close().await;
}

/// One flush holding good items, an unknown step, a completion of a step
/// the held flush already succeeded, and one step named twice: each caller
/// gets its own item's answer, and only the legal items are written.
pub async fn each_caller_gets_its_own_items_result<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 10).await;
    let store = Arc::new(Watched::over(h.store()).holding_first());
    let commit = GroupCommit::new(Arc::clone(&store));
    let first = hold_first(&store, &commit, steps[0].claim()).await;
    let done = || Completion::Succeeded(json!(1));
    let spawn = |claim: StepClaim, completion| spawn_commit(h.store(), &commit, claim, completion);
    let fine: Vec<_> = steps[2..]
        .iter()
        .map(|s| spawn(s.claim(), done()))
        .collect();
    let unknown = StepId::generate();
    let missing = spawn(
        StepClaim {
            step: unknown,
            attempt: 1,
        },
        done(),
    );
    // steps[0] is succeeded by the held flush with another result: the
    // claim was spent by that completion, so this one is lost.
    let again = spawn(steps[0].claim(), done());
    // steps[1] twice in the same flush: one item moves it, the other fails.
    let twice = [
        spawn(steps[1].claim(), done()),
        spawn(steps[1].claim(), Completion::Failed(json!("x"))),
    ];
    wait_queued(&commit, 8 + 1 + 1 + 2).await;
    store.release.notify_one();

    assert!(within("the held commit", first).await.is_ok());
    assert!(join_all(fine).await.iter().all(Result::is_ok));
    match within("a commit's answer", missing).await.unwrap() {
        Err(flowstate_pool::Error::Refused(Error::StepNotFound(id))) => assert_eq!(id, unknown),
        other => panic!("expected StepNotFound, got {other:?}"),
    }
    match within("a commit's answer", again).await.unwrap() {
        Err(flowstate_pool::Error::Refused(Error::ClaimLost { step, attempt })) => {
            assert_eq!((step, attempt), (steps[0].id, 1));
        }
        other => panic!("expected ClaimLost, got {other:?}"),
    }
    let twice = join_all(twice.into()).await;
    assert_eq!(twice.iter().filter(|r| r.is_ok()).count(), 1, "{twice:?}");
    assert!(
        twice.iter().any(
            |r| matches!(r, Err(flowstate_pool::Error::Refused(Error::IllegalStepTransition { step, .. })) if *step == steps[1].id)
        ),
        "{twice:?}"
    );
    assert_eq!(store.flush_sizes(), [1, 12]);
    let back = read_back(&**h.store(), &steps).await;
    for step in &back {
        assert_ne!(step.status, StepStatus::Running, "{}", step.id);
    }
    assert_eq!(
        back[0].result,
        Some(json!("first")),
        "the refused item wrote"
    );
    let rows = histories(&**h.store(), &steps).await;
    assert_eq!(attempts(&rows[1]), [(1, back[1].status)]);
    for rows in rows.iter().take(1).chain(&rows[2..]) {
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)]);
    }
    commit.close().await;
}

/// Every flush fails with an error that is not retryable: it is not sent
/// again, the held one's caller and the 20 queued behind it each get a
/// `FlushFailed` naming their flush's size, and no step moved.
pub async fn a_failed_flush_fails_every_caller_in_it<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 21).await;
    let store = Arc::new(
        Watched::over(h.store())
            .holding_first()
            .failing_not_retryable(),
    );
    let commit = GroupCommit::new(Arc::clone(&store));
    let first = hold_first(&store, &commit, steps[0].claim()).await;
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| {
            spawn_commit(
                h.store(),
                &commit,
                s.claim(),
                Completion::Succeeded(json!(2)),
            )
        })
        .collect();
    wait_queued(&commit, 20).await;
    store.release.notify_one();

    let mut all = vec![(within("the held commit", first).await, 1)];
    all.extend(join_all(rest).await.into_iter().map(|r| (r, 20)));
    for (result, items) in all {
        let err = result.expect_err("a failed flush acknowledges nothing");
        assert!(!err.is_retryable(), "{err}");
        assert!(err.to_string().contains("permission denied"), "{err}");
        let flowstate_pool::Error::FlushFailed(failed) = &err else {
            panic!("expected a failed flush, got {err}");
        };
        assert_eq!(failed.items, items);
        assert_eq!((failed.retryable, failed.gave_up), (false, false));
        assert_eq!(failed.attempts, 1, "sent again");
    }
    assert_eq!(store.flush_sizes(), [1, 20], "a flush was sent again");
    let stats = commit.report();
    assert_eq!((stats.failed_flushes, stats.flush_retries), (2, 0));
    let back = read_back(&**h.store(), &steps).await;
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in back.iter().zip(&rows) {
        assert_eq!(step.status, StepStatus::Running, "nothing was written");
        assert_eq!(attempts(rows), [(1, StepStatus::Running)], "{}", step.id);
    }
    commit.close().await;
}

/// A close queued behind 20 commits and a held flush returns only once
/// all of them were written and answered; a commit after it fails as
/// closed, writes nothing, and nothing is flushed after it.
pub async fn close_flushes_the_queue_then_refuses_commits<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 22).await;
    let store = Arc::new(Watched::over(h.store()).holding_first());
    let commit = GroupCommit::new(Arc::clone(&store));
    let mut first = hold_first(&store, &commit, steps[0].claim()).await;
    let rest: Vec<_> = steps[1..21]
        .iter()
        .map(|s| {
            spawn_commit(
                h.store(),
                &commit,
                s.claim(),
                Completion::Succeeded(json!(3)),
            )
        })
        .collect();
    wait_queued(&commit, 20).await;
    let closing = {
        let commit = commit.clone();
        tokio::spawn(async move { commit.close().await })
    };
    // The close is queued behind the 20 items.
    wait_queued(&commit, 21).await;
    store.release.notify_one();
    within("close", closing).await.unwrap();

    // close returned: everything queued before it was written and answered.
    match poll_now(&mut first) {
        Poll::Ready(answer) => assert!(answer.is_ok(), "{answer:?}"),
        Poll::Pending => panic!("close returned before the held commit was answered"),
    }
    assert!(join_all(rest).await.iter().all(Result::is_ok));
    assert_eq!(store.flush_sizes(), [1, 20]);
    let back = read_back(&**h.store(), &steps).await;
    assert!(back[..21].iter().all(|s| s.status == StepStatus::Succeeded));

    let late = commit
        .commit(steps[21].claim(), Completion::Succeeded(json!(4)))
        .await
        .expect_err("a commit after close fails");
    assert!(matches!(late, flowstate_pool::Error::Closed), "{late}");
    assert!(!late.is_retryable());
    within("a second close", commit.close()).await;
    assert_eq!(
        h.store().get_step(steps[21].id).await.unwrap().status,
        StepStatus::Running
    );
    assert_eq!(store.flush_sizes(), [1, 20], "nothing flushed after close");
}

/// One caller at a time on an idle queue: each commit is its own flush,
/// answered only after that flush returned, its step already written.
pub async fn an_idle_queue_flushes_each_commit_at_once<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 3).await;
    let store = Arc::new(Watched::over(h.store()));
    let commit = GroupCommit::new(Arc::clone(&store));
    for (i, step) in steps.iter().enumerate() {
        let done = Completion::Succeeded(json!(5));
        within("a commit", commit.commit(step.claim(), done))
            .await
            .unwrap();
        assert_eq!(
            store.returned(),
            i + 1,
            "answered before its flush returned"
        );
        let stored = h.store().get_step(step.id).await.unwrap();
        assert_eq!(stored.status, StepStatus::Succeeded);
    }
    // One caller at a time: no flush waits for company.
    assert_eq!(store.flush_sizes(), [1, 1, 1]);
    commit.close().await;
}
