//! GroupCommit on MemoryStore: coalescing (exact flush counts, with the
//! first flush held so the rest queue up behind it), per-item results, a
//! failed flush failing all its callers, close.

mod common;

use std::sync::Arc;

use flowstate_core::{Completion, Error, Result, StepId, StepStatus, StepStore};
use flowstate_pool::{CommitStats, FlushFailed, GroupCommit, is_closed};
use serde_json::json;
use tokio::task::JoinHandle;

use common::{Watched, read_back, running_steps};

type Commit = GroupCommit<Watched>;

fn spawn_commit(commit: &Commit, id: StepId, completion: Completion) -> JoinHandle<Result<()>> {
    let commit = commit.clone();
    tokio::spawn(async move { commit.commit(id, completion).await })
}

/// Waits (yielding, no timer) until `n` messages are queued.
async fn wait_queued(commit: &Commit, n: usize) {
    while commit.queued() < n {
        tokio::task::yield_now().await;
    }
}

/// Starts one commit and waits until its flush is held in the store.
async fn hold_first(store: &Watched, commit: &Commit, id: StepId) -> JoinHandle<Result<()>> {
    let first = spawn_commit(commit, id, Completion::Succeeded(json!("first")));
    store.entered.notified().await;
    first
}

async fn join_all(handles: Vec<JoinHandle<Result<()>>>) -> Vec<Result<()>> {
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("a commit task panicked"));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn commits_queued_behind_a_flush_go_in_one_flush() {
    let store = Watched::holding_first();
    let steps = running_steps(&store.inner, 50).await;
    let commit = GroupCommit::new(Arc::clone(&store));
    let first = hold_first(&store, &commit, steps[0].id).await;
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| {
            spawn_commit(
                &commit,
                s.id,
                Completion::Succeeded(json!(s.id.to_string())),
            )
        })
        .collect();
    wait_queued(&commit, 49).await;
    // Held: nothing is answered before the store returned.
    assert!(!first.is_finished());
    assert_eq!(
        store.inner.get_step(steps[0].id).await.unwrap().status,
        StepStatus::Running
    );
    store.release.notify_one();
    assert!(first.await.unwrap().is_ok());
    assert!(join_all(rest).await.iter().all(Result::is_ok));
    assert_eq!(store.flush_sizes(), [1, 49]);
    assert_eq!(
        commit.stats(),
        CommitStats {
            flushes: 2,
            items: 50,
            failed_flushes: 0
        }
    );
    for step in read_back(&store.inner, &steps).await {
        assert_eq!(step.status, StepStatus::Succeeded, "{}", step.id);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flush_takes_at_most_max_batch() {
    let store = Watched::holding_first();
    let steps = running_steps(&store.inner, 26).await;
    let commit = GroupCommit::with_max_batch(Arc::clone(&store), 10);
    let first = hold_first(&store, &commit, steps[0].id).await;
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| spawn_commit(&commit, s.id, Completion::Failed(json!("no"))))
        .collect();
    wait_queued(&commit, 25).await;
    store.release.notify_one();
    assert!(first.await.unwrap().is_ok());
    assert!(join_all(rest).await.iter().all(Result::is_ok));
    assert_eq!(store.flush_sizes(), [1, 10, 10, 5]);
    let back = read_back(&store.inner, &steps).await;
    assert_eq!(back[0].status, StepStatus::Succeeded);
    assert!(back[1..].iter().all(|s| s.status == StepStatus::Failed));
}

#[tokio::test(flavor = "multi_thread")]
async fn each_caller_gets_its_own_items_result() {
    let store = Watched::holding_first();
    let steps = running_steps(&store.inner, 10).await;
    let commit = GroupCommit::new(Arc::clone(&store));
    let first = hold_first(&store, &commit, steps[0].id).await;
    let done = || Completion::Succeeded(json!(1));
    let fine: Vec<_> = steps[2..]
        .iter()
        .map(|s| spawn_commit(&commit, s.id, done()))
        .collect();
    let unknown = StepId::generate();
    let missing = spawn_commit(&commit, unknown, done());
    // steps[0] is succeeded by the held flush: a second completion is illegal.
    let again = spawn_commit(&commit, steps[0].id, done());
    // steps[1] twice in the same flush: one item moves it, the other fails.
    let twice = [
        spawn_commit(&commit, steps[1].id, done()),
        spawn_commit(&commit, steps[1].id, Completion::Failed(json!("x"))),
    ];
    wait_queued(&commit, 8 + 1 + 1 + 2).await;
    store.release.notify_one();

    assert!(first.await.unwrap().is_ok());
    assert!(join_all(fine).await.iter().all(Result::is_ok));
    match missing.await.unwrap() {
        Err(Error::StepNotFound(id)) => assert_eq!(id, unknown),
        other => panic!("expected StepNotFound, got {other:?}"),
    }
    match again.await.unwrap() {
        Err(Error::IllegalStepTransition { step, from, to }) => {
            assert_eq!(step, steps[0].id);
            assert_eq!((from, to), (StepStatus::Succeeded, StepStatus::Succeeded));
        }
        other => panic!("expected IllegalStepTransition, got {other:?}"),
    }
    let twice = join_all(twice.into()).await;
    assert_eq!(twice.iter().filter(|r| r.is_ok()).count(), 1, "{twice:?}");
    assert!(
        twice.iter().any(
            |r| matches!(r, Err(Error::IllegalStepTransition { step, .. }) if *step == steps[1].id)
        ),
        "{twice:?}"
    );
    assert_eq!(store.flush_sizes(), [1, 12]);
    for step in read_back(&store.inner, &steps).await {
        assert_ne!(step.status, StepStatus::Running, "{}", step.id);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_flush_fails_every_caller_in_it() {
    let store = Watched::failing();
    store
        .hold_first
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let steps = running_steps(&store.inner, 21).await;
    let commit = GroupCommit::new(Arc::clone(&store));
    let first = hold_first(&store, &commit, steps[0].id).await;
    let rest: Vec<_> = steps[1..]
        .iter()
        .map(|s| spawn_commit(&commit, s.id, Completion::Succeeded(json!(2))))
        .collect();
    wait_queued(&commit, 20).await;
    store.release.notify_one();

    let mut all = vec![(first.await.unwrap(), 1)];
    all.extend(join_all(rest).await.into_iter().map(|r| (r, 20)));
    for (result, items) in all {
        let err = result.expect_err("a failed flush acknowledges nothing");
        assert!(err.is_retryable(), "{err}");
        assert!(
            err.to_string().contains("connection reset by peer"),
            "{err}"
        );
        let Error::Backend { source, .. } = &err else {
            panic!("expected a Backend error, got {err:?}");
        };
        let failed = source.downcast_ref::<FlushFailed>().expect("a FlushFailed");
        assert_eq!(failed.items, items);
        assert!(failed.retryable);
    }
    assert_eq!(store.flush_sizes(), [1, 20]);
    assert_eq!(commit.stats().failed_flushes, 2);
    for step in read_back(&store.inner, &steps).await {
        assert_eq!(step.status, StepStatus::Running, "nothing was written");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn close_flushes_the_queue_then_refuses_commits() {
    let store = Watched::holding_first();
    let steps = running_steps(&store.inner, 22).await;
    let commit = GroupCommit::new(Arc::clone(&store));
    let first = hold_first(&store, &commit, steps[0].id).await;
    let rest: Vec<_> = steps[1..21]
        .iter()
        .map(|s| spawn_commit(&commit, s.id, Completion::Succeeded(json!(3))))
        .collect();
    wait_queued(&commit, 20).await;
    let closing = {
        let commit = commit.clone();
        tokio::spawn(async move { commit.close().await })
    };
    // The close is queued behind the 20 items.
    wait_queued(&commit, 21).await;
    store.release.notify_one();
    closing.await.unwrap();

    // close returned: everything queued before it was written.
    assert!(first.is_finished());
    assert!(first.await.unwrap().is_ok());
    assert!(join_all(rest).await.iter().all(Result::is_ok));
    assert_eq!(store.flush_sizes(), [1, 20]);
    let back = read_back(&store.inner, &steps).await;
    assert!(back[..21].iter().all(|s| s.status == StepStatus::Succeeded));

    let late = commit
        .commit(steps[21].id, Completion::Succeeded(json!(4)))
        .await
        .expect_err("a commit after close fails");
    assert!(is_closed(&late), "{late}");
    assert!(!late.is_retryable());
    assert!(!is_closed(&Error::StepNotFound(steps[21].id)));
    commit.close().await;
    assert_eq!(
        store.inner.get_step(steps[21].id).await.unwrap().status,
        StepStatus::Running
    );
    assert_eq!(store.flush_sizes(), [1, 20], "nothing flushed after close");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_queue_flushes_each_commit_at_once() {
    let store = Arc::new(Watched::default());
    let steps = running_steps(&store.inner, 3).await;
    let commit = GroupCommit::new(Arc::clone(&store));
    for step in &steps {
        commit
            .commit(step.id, Completion::Succeeded(json!(5)))
            .await
            .unwrap();
    }
    // One caller at a time: no flush waits for company.
    assert_eq!(store.flush_sizes(), [1, 1, 1]);
    commit.close().await;
}
