//! `flowstate_pool::GroupCommit` over a store whose flushes fail with a
//! retryable error: the same items sent again as the same flush, nobody
//! answered until a try succeeds (and every `Ok` read back written), a
//! flush whose answer was lost after it was written answering `Ok` without
//! writing twice, a flush that gives up answering its callers with the
//! error and leaving its steps running, and close waiting for a flush
//! being retried.

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use flowstate_core::ports::{BatchStepStore, StepStore};
use flowstate_core::{Completion, StepStatus};
use flowstate_pool::{CommitReport, DEFAULT_MAX_BATCH, GroupCommit};
use serde_json::json;

use crate::Harness;
use crate::cases::policies::pool_support::{
    Watched, assert_unanswered, attempts, histories, join_all, poll_now, read_back, retry_within,
    running_steps, spawn_commit, wait_queued, within,
};

/// A retry that does not give up within any case.
const PATIENT: Duration = Duration::from_secs(5);

/// 20 commits, the first three tries failing with a retryable error and
/// the fourth held in the store: while it is held, nobody is answered and
/// nothing is written (three retries counted, the same one item sent each
/// time); released, the first flush answers `Ok` and the 19 queued behind
/// it go in one flush; every `Ok` was read back written, and every step
/// has one history row.
pub async fn a_failing_flush_is_sent_again_and_answered_once_written<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 20).await;
    let store = Arc::new(Watched::over(h.store()).failing_first(3).holding_call(3));
    let commit =
        GroupCommit::with_retry(Arc::clone(&store), DEFAULT_MAX_BATCH, retry_within(PATIENT));
    let mut first = commit
        .submit(steps[0].claim(), Completion::Succeeded(json!("first")))
        .await
        .expect("submit");
    within("the fourth try", store.entered.notified()).await;
    assert_unanswered(&mut first);
    assert_eq!(
        store.flush_sizes(),
        [1, 1, 1, 1],
        "the same flush, sent again"
    );
    assert_eq!(commit.report().flush_retries, 3);
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| {
            spawn_commit(
                h.store(),
                &commit,
                s.claim(),
                Completion::Succeeded(json!(7)),
            )
        })
        .collect();
    wait_queued(&commit, 19).await;
    assert_unanswered(&mut first);
    let back = read_back(&**h.store(), &steps).await;
    assert!(
        back.iter().all(|s| s.status == StepStatus::Running),
        "written by a failed try"
    );
    store.release.notify_one();

    assert!(within("the retried commit", first).await.is_ok());
    assert!(join_all(rest).await.iter().all(Result::is_ok));
    assert_eq!(store.flush_sizes(), [1, 1, 1, 1, 19]);
    assert_eq!(
        commit.report(),
        CommitReport {
            flushes: 2,
            items: 20,
            failed_flushes: 0,
            flush_retries: 3,
        }
    );
    let back = read_back(&**h.store(), &steps).await;
    let rows = histories(&**h.store(), &steps).await;
    for (i, (step, rows)) in back.iter().zip(&rows).enumerate() {
        let result = if i == 0 { json!("first") } else { json!(7) };
        assert_eq!(step.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(step.result.as_ref(), Some(&result), "{}", step.id);
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)], "{}", step.id);
    }
    commit.close().await;
}

/// A flush of 9 that the store wrote but whose answer was lost in flight
/// (a retryable error after the COMMIT): it is sent again, the store
/// answers `Ok` for each repeat, so every caller gets `Ok`; each step holds
/// its own result and one history row, and the retry is counted.
pub async fn a_flush_whose_answer_was_lost_is_sent_again_and_answers_ok<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 10).await;
    // The first flush (one item) is held while 9 queue; the second, the
    // 9, is written and its answer lost.
    let store = Arc::new(Watched::over(h.store()).holding_first().losing_answer_of(1));
    let commit =
        GroupCommit::with_retry(Arc::clone(&store), DEFAULT_MAX_BATCH, retry_within(PATIENT));
    let first =
        crate::cases::policies::pool_support::hold_first(&store, &commit, steps[0].claim()).await;
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| {
            let done = Completion::Succeeded(json!(s.id.to_string()));
            spawn_commit(h.store(), &commit, s.claim(), done)
        })
        .collect();
    wait_queued(&commit, 9).await;
    store.release.notify_one();

    assert!(within("the held commit", first).await.is_ok());
    let answers = join_all(rest).await;
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(store.flush_sizes(), [1, 9, 9]);
    let stats = commit.report();
    assert_eq!(
        (stats.flushes, stats.flush_retries, stats.failed_flushes),
        (2, 1, 0)
    );
    let back = read_back(&**h.store(), &steps).await;
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in back.iter().zip(&rows).skip(1) {
        let result = json!(step.id.to_string());
        assert_eq!(step.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(step.result.as_ref(), Some(&result), "{}", step.id);
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)], "{}", step.id);
        assert_eq!(rows[0].result.as_ref(), Some(&result), "{}", step.id);
    }
    commit.close().await;
}

/// Every flush failing with a retryable error and a give-up limit of
/// 200 ms: the held flush's caller and the 5 queued behind it are answered
/// with a retryable `FlushFailed` that says it gave up; the first flush was
/// sent more than once, the second (begun past the limit) once; no step
/// moved.
pub async fn a_flush_that_gives_up_answers_its_callers_with_the_error<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 6).await;
    let store = Arc::new(Watched::over(h.store()).holding_first().failing());
    let limit = Duration::from_millis(200);
    let commit =
        GroupCommit::with_retry(Arc::clone(&store), DEFAULT_MAX_BATCH, retry_within(limit));
    let first =
        crate::cases::policies::pool_support::hold_first(&store, &commit, steps[0].claim()).await;
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| {
            spawn_commit(
                h.store(),
                &commit,
                s.claim(),
                Completion::Succeeded(json!(1)),
            )
        })
        .collect();
    wait_queued(&commit, 5).await;
    store.release.notify_one();

    let mut answers = vec![(within("the held commit", first).await, 1)];
    answers.extend(join_all(rest).await.into_iter().map(|r| (r, 5)));
    let sizes = store.flush_sizes();
    let tries_of_first = sizes.iter().filter(|n| **n == 1).count();
    assert!(tries_of_first > 1, "not retried: {sizes:?}");
    assert_eq!(&sizes[tries_of_first..], [5], "{sizes:?}");
    for (answer, items) in answers {
        let err = answer.expect_err("a flush that gave up acknowledges nothing");
        assert!(err.is_retryable(), "{err}");
        let flowstate_pool::Error::FlushFailed(failed) = &err else {
            panic!("expected a failed flush, got {err}");
        };
        assert_eq!(
            (failed.items, failed.gave_up, failed.retryable),
            (items, true, true)
        );
        let tries = if items == 1 { tries_of_first } else { 1 };
        assert_eq!(failed.attempts as usize, tries, "{err}");
    }
    let stats = commit.report();
    assert_eq!((stats.flushes, stats.failed_flushes), (2, 2));
    assert_eq!(stats.flush_retries as usize, tries_of_first - 1);
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(step.status, StepStatus::Running, "nothing was written");
        assert_eq!(attempts(rows), [(1, StepStatus::Running)], "{}", step.id);
    }
    commit.close().await;
}

/// A close asked for while a flush is being retried (its second try held
/// in the store, after one failure) returns only once the retry succeeded:
/// the item is then answered `Ok` and written.
pub async fn close_waits_for_a_flush_being_retried<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = running_steps(h, 1).await;
    let store = Arc::new(Watched::over(h.store()).failing_first(1).holding_call(1));
    let commit =
        GroupCommit::with_retry(Arc::clone(&store), DEFAULT_MAX_BATCH, retry_within(PATIENT));
    let mut pending = commit
        .submit(steps[0].claim(), Completion::Succeeded(json!("kept")))
        .await
        .expect("submit");
    within("the retry", store.entered.notified()).await;
    let closing = {
        let commit = commit.clone();
        tokio::spawn(async move { commit.close().await })
    };
    // The close is queued behind the flush being retried.
    wait_queued(&commit, 1).await;
    assert!(!closing.is_finished(), "close returned during the retry");
    assert_unanswered(&mut pending);
    store.release.notify_one();
    within("close", closing).await.unwrap();

    match poll_now(&mut pending) {
        Poll::Ready(answer) => assert!(answer.is_ok(), "{answer:?}"),
        Poll::Pending => panic!("close returned before the retried commit was answered"),
    }
    let stored = h.store().get_step(steps[0].id).await.unwrap();
    assert_eq!(stored.status, StepStatus::Succeeded);
    assert_eq!(stored.result, Some(json!("kept")));
    assert_eq!(store.flush_sizes(), [1, 1]);
    assert_eq!(commit.report().flush_retries, 1);
}
