//! `flowstate_pool::WorkerPool` over the backend's store wrapped in
//! `Watched`: flushes failing with an error that is not retryable, counted,
//! not retried and acknowledging nothing, a flusher
//! that panics in the store still answering every completion, failed
//! claims backed off from, a claim still in the store when the pool is
//! stopped reaching the workers, and a worker that queues its next
//! completion while the previous flush is still in the store.

use std::sync::Arc;

use flowstate_core::ports::BatchStepStore;
use flowstate_core::{RetryPolicy, StepStatus};
use flowstate_pool::{PoolReport, WorkerPool};
use serde_json::json;

use crate::Harness;
use crate::cases::policies::pool_support::{
    FUNCTION, Ledger, Watched, attempts, histories, insert_steps, pool_config, read_back,
    recording, within,
};

/// Runs `n` fresh steps through a pool over `store`, whose flushes write
/// nothing, and checks what every such fault shares: shutdown returns,
/// every claimed step is counted as a commit error, and every step is left
/// running on attempt 1, its history too (nothing was acknowledged).
/// Answers the pool's counters and its handler's ledger.
async fn nothing_acknowledged<H: Harness>(
    h: &H,
    store: &Arc<Watched<H::Store>>,
    n: usize,
    result: serde_json::Value,
) -> (PoolReport, Arc<Ledger>)
where
    H::Store: BatchStepStore,
{
    let steps = insert_steps(h, n, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(n);
    let pool = WorkerPool::new(Arc::clone(store), recording(&ledger, result))
        .with_config(pool_config())
        .spawn();
    ledger.reached().await;
    let stats = within("shutdown", pool.shutdown()).await;
    assert_eq!(
        (stats.claimed, stats.commit_errors, stats.succeeded),
        (n as u64, n as u64, 0),
        "{stats:?}"
    );
    assert_eq!(stats.accounted(), stats.claimed);
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(step.status, StepStatus::Running, "nothing was acknowledged");
        assert_eq!(attempts(rows), [(1, StepStatus::Running)], "{}", step.id);
    }
    (stats, ledger)
}

/// 100 steps, every flush failing with an error that is not retryable:
/// no flush is sent again, each step's handler ran once, each commit is
/// counted as an error (neither given up nor a lost claim), and every step
/// is left running on attempt 1 (its history too): nothing was
/// acknowledged.
pub async fn a_flush_error_that_is_not_retryable_is_not_retried<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let store = Arc::new(Watched::over(h.store()).failing_not_retryable());
    let (stats, ledger) = nothing_acknowledged(h, &store, 100, json!(3)).await;
    assert_eq!(stats.flushes, store.flush_sizes().len() as u64);
    assert_eq!(store.flush_sizes().iter().sum::<usize>(), 100);
    assert_eq!(
        (stats.flush_retries, stats.given_up, stats.claims_lost),
        (0, 0, 0),
        "{stats:?}"
    );
    assert!(ledger.calls().values().all(|n| *n == 1), "a step ran twice");
}

/// 40 steps, every flush panicking inside the store (its flusher task dies
/// mid-flush): each completion is answered as an error all the same, so
/// the pool's room comes back and shutdown returns, every claimed step is
/// counted as a commit error, and every step is left running on attempt 1:
/// nothing was acknowledged.
pub async fn a_flusher_that_panics_in_the_store_answers_every_completion<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let store = Arc::new(Watched::over(h.store()).panicking());
    nothing_acknowledged(h, &store, 40, json!(8)).await;
    assert_eq!(store.returned(), 0, "a panicking flush never returns");
}

/// The first three claims fail: the pool backs off, claims again, and
/// runs all 100 steps once each.
pub async fn a_failed_claim_backs_off_and_the_pool_goes_on<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let store = Arc::new(Watched::over(h.store()).failing_claims(3));
    let steps = insert_steps(h, 100, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(100);
    let pool = WorkerPool::new(Arc::clone(&store), recording(&ledger, json!(4)))
        .with_config(pool_config())
        .spawn();
    ledger.reached().await;
    let stats = within("shutdown", pool.shutdown()).await;
    assert_eq!(stats.claim_errors, 3, "{stats:?}");
    assert_eq!((stats.claimed, stats.succeeded), (100, 100), "{stats:?}");
    assert_eq!(stats.claims + stats.claim_errors, store.claims() as u64);
    let calls = ledger.calls();
    assert_eq!(calls.len(), 100);
    assert!(steps.iter().all(|s| calls.get(&(s.id, 1)) == Some(&1)));
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(step.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)], "{}", step.id);
    }
}

/// A stop asked for while the pool's first claim is in the store (which
/// has claimed all 50 steps): the claim is not cancelled, its steps reach
/// the workers, and each runs once and is written; none is left running.
pub async fn a_claim_in_progress_at_stop_is_still_run<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let store = Arc::new(Watched::over(h.store()).holding_first_claim());
    let steps = insert_steps(h, 50, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(50);
    let config = pool_config().claimers(1);
    let pool = WorkerPool::new(Arc::clone(&store), recording(&ledger, json!(6)))
        .with_config(config.clone())
        .spawn();
    within("the first claim", store.claim_entered.notified()).await;
    let back = read_back(&**h.store(), &steps).await;
    assert!(back.iter().all(|s| s.status == StepStatus::Running));
    assert!(ledger.calls().is_empty(), "ran before the claim answered");
    pool.control().stop();
    store.claim_release.notify_one();
    let stats = within("shutdown", pool.shutdown()).await;

    assert_eq!(
        (stats.claims, stats.claimed, stats.succeeded),
        (1, 50, 50),
        "{stats:?}"
    );
    assert_eq!(stats.accounted(), stats.claimed);
    assert_eq!(store.claims(), 1, "claimed again after the stop");
    let calls = ledger.calls();
    assert_eq!(calls.len(), 50);
    assert!(steps.iter().all(|s| calls.get(&(s.id, 1)) == Some(&1)));
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(step.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)], "{}", step.id);
    }
}

/// One worker, 50 steps, the first flush held in the store: the worker
/// runs the other 49 steps meanwhile (it does not wait for its commit),
/// so they fill the next flush instead of making 49 flushes of one.
pub async fn a_worker_does_not_wait_for_its_commit_so_flushes_fill_up<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let store = Arc::new(Watched::over(h.store()).holding_first());
    let steps = insert_steps(h, 50, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(50);
    // One worker: it calls the handler on a step only after the previous
    // step's completion was queued.
    let config = pool_config().workers(1);
    let pool = WorkerPool::new(Arc::clone(&store), recording(&ledger, json!(5)))
        .with_config(config.clone())
        .spawn();
    // The first flush is held while the worker runs the other steps.
    within("the first flush to start", store.entered.notified()).await;
    ledger.reached().await;
    assert_eq!(store.returned(), 0, "the held flush returned");
    store.release.notify_one();
    let stats = within("shutdown", pool.shutdown()).await;

    assert_eq!((stats.claimed, stats.succeeded), (50, 50), "{stats:?}");
    let sizes = store.flush_sizes();
    assert_eq!(sizes.iter().sum::<usize>(), 50);
    // The held flush took the first item (or the first few, had the worker
    // queued more before the flusher woke); every item up to the 49th was
    // queued behind it and went in the next flush; the 50th may have
    // joined them or come just after. A worker that waited for each commit
    // would have made 50 flushes of one.
    // On a loaded machine the flusher may even wake after all 50 were
    // queued and take them in one.
    assert!(sizes.len() <= 3, "{sizes:?}");
    assert!(sizes.iter().take(2).sum::<usize>() >= 49, "{sizes:?}");
    assert_eq!(stats.flushes, sizes.len() as u64);
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(step.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)], "{}", step.id);
    }
}
