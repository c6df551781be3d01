//! WorkerPool on MemoryStore: every step exactly once, retries through the
//! pool, the function filter, panics, and a shutdown mid-run that loses
//! nothing.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowstate_core::{Completion, RetryPolicy, Step, StepId, StepStatus};
use flowstate_pool::{IdleBackoff, PoolConfig, PoolStats, WorkerPool};
use flowstate_testkit::MemoryStore;
use serde_json::json;
use tokio::sync::Notify;

use common::{FUNCTION, insert_steps, read_back};

/// Calls of the handler per `(step, attempt)`, and a signal once `target`
/// calls were made.
#[derive(Default)]
struct Ledger {
    calls: Mutex<HashMap<(StepId, u32), usize>>,
    total: AtomicUsize,
    target: AtomicUsize,
    reached: Notify,
}

impl Ledger {
    fn new(target: usize) -> Arc<Self> {
        let ledger = Self::default();
        ledger.target.store(target, Ordering::SeqCst);
        Arc::new(ledger)
    }

    fn record(&self, step: &Step) {
        *self
            .calls
            .lock()
            .unwrap()
            .entry((step.id, step.attempt))
            .or_default() += 1;
        if self.total.fetch_add(1, Ordering::SeqCst) + 1 == self.target.load(Ordering::SeqCst) {
            self.reached.notify_one();
        }
    }

    fn calls(&self) -> HashMap<(StepId, u32), usize> {
        self.calls.lock().unwrap().clone()
    }
}

fn config() -> PoolConfig {
    PoolConfig::default()
        .workers(8)
        .claim_batch(64)
        .max_in_flight(128)
        .idle_backoff(IdleBackoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(4),
        })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pool_runs_1000_steps_exactly_once() {
    let store = Arc::new(MemoryStore::new());
    let steps = insert_steps(&store, 1_000, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(1_000);
    // Three claimers racing each other: the store hands each step to one.
    let pool = WorkerPool::start(Arc::clone(&store), &config().claimers(3), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                tokio::task::yield_now().await;
                Completion::Succeeded(json!({ "input": step.input }))
            }
        }
    });
    ledger.reached.notified().await;
    let stats = pool.shutdown().await;

    assert_eq!(stats.claimed, 1_000, "{stats:?}");
    assert_eq!(stats.succeeded, 1_000, "{stats:?}");
    assert_eq!(
        (
            stats.failed,
            stats.commit_errors,
            stats.abandoned,
            stats.panicked
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(stats.accounted(), stats.claimed);
    assert_eq!(stats.flushed_items, 1_000);
    assert!(stats.flushes >= 1 && stats.flushes <= 1_000, "{stats:?}");
    // At least 1000 / 64 claims took something.
    assert!(stats.claims - stats.empty_claims >= 16, "{stats:?}");
    let calls = ledger.calls();
    assert_eq!(calls.len(), 1_000);
    assert!(calls.values().all(|n| *n == 1), "a step ran twice");
    for (step, back) in steps.iter().zip(read_back(&store, &steps).await) {
        assert_eq!(back.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(back.attempt, 1);
        assert_eq!(back.result, Some(json!({ "input": step.input })));
        assert_eq!(calls.get(&(step.id, 1)), Some(&1));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_attempt_comes_back_through_the_pool_as_the_next() {
    let store = Arc::new(MemoryStore::new());
    let steps = insert_steps(&store, 200, FUNCTION, RetryPolicy::with_retries(1)).await;
    let ledger = Ledger::new(400);
    let pool = WorkerPool::start(Arc::clone(&store), &config(), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                if step.attempt == 1 {
                    Completion::Failed(json!("first attempt fails"))
                } else {
                    Completion::Succeeded(json!(step.attempt))
                }
            }
        }
    });
    ledger.reached.notified().await;
    let stats = pool.shutdown().await;

    assert_eq!(
        (stats.claimed, stats.failed, stats.succeeded),
        (400, 200, 200),
        "{stats:?}"
    );
    assert_eq!(stats.accounted(), stats.claimed);
    let calls = ledger.calls();
    for step in read_back(&store, &steps).await {
        assert_eq!((step.status, step.attempt), (StepStatus::Succeeded, 2));
        assert_eq!(calls.get(&(step.id, 1)), Some(&1));
        assert_eq!(calls.get(&(step.id, 2)), Some(&1));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_for_one_function_leaves_the_others() {
    let store = Arc::new(MemoryStore::new());
    let mine = insert_steps(&store, 100, "mine", RetryPolicy::NONE).await;
    let theirs = insert_steps(&store, 100, "theirs", RetryPolicy::NONE).await;
    let ledger = Ledger::new(100);
    let pool = WorkerPool::start(Arc::clone(&store), &config().function("mine"), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                assert_eq!(step.function.as_deref(), Some("mine"));
                ledger.record(&step);
                Completion::Succeeded(json!(null))
            }
        }
    });
    ledger.reached.notified().await;
    let stats = pool.shutdown().await;
    assert_eq!((stats.claimed, stats.succeeded), (100, 100), "{stats:?}");
    assert!(
        read_back(&store, &mine)
            .await
            .iter()
            .all(|s| s.status == StepStatus::Succeeded)
    );
    assert!(
        read_back(&store, &theirs)
            .await
            .iter()
            .all(|s| s.status == StepStatus::Pending)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_handler_fails_its_step_and_the_worker_goes_on() {
    let store = Arc::new(MemoryStore::new());
    let steps = insert_steps(&store, 50, FUNCTION, RetryPolicy::NONE).await;
    let panicky = steps[7].id;
    let ledger = Ledger::new(50);
    let pool = WorkerPool::start(Arc::clone(&store), &config().workers(1), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                assert!(step.id != panicky, "the handler panics on this step");
                Completion::Succeeded(json!(1))
            }
        }
    });
    ledger.reached.notified().await;
    let stats = pool.shutdown().await;
    assert_eq!(
        (stats.claimed, stats.succeeded, stats.failed, stats.panicked),
        (50, 49, 1, 1),
        "{stats:?}"
    );
    let back = store_step(&store, panicky).await;
    assert_eq!(back.status, StepStatus::Failed);
    assert!(back.error.unwrap()["panic"].is_string());
}

async fn store_step(store: &MemoryStore, id: StepId) -> Step {
    use flowstate_core::StepStore as _;
    store.get_step(id).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_mid_run_finishes_what_it_claimed_and_loses_nothing() {
    let store = Arc::new(MemoryStore::new());
    let steps = insert_steps(&store, 1_000, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(200);
    let pool = WorkerPool::start(Arc::clone(&store), &config().workers(4).claimers(2), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                tokio::task::yield_now().await;
                Completion::Succeeded(json!(2))
            }
        }
    });
    let handle = pool.handle();
    ledger.reached.notified().await;
    // Stopped from elsewhere, mid-run; shutdown drains.
    handle.stop();
    let stats: PoolStats = pool.shutdown().await;

    assert!(stats.claimed >= 200, "{stats:?}");
    assert_eq!(stats.accounted(), stats.claimed, "{stats:?}");
    assert_eq!(stats.succeeded, stats.claimed, "{stats:?}");
    assert_eq!(stats.flushed_items, stats.claimed);
    assert_eq!(stats, handle.stats(), "nothing moves after shutdown");
    let calls = ledger.calls();
    assert_eq!(calls.len() as u64, stats.claimed);
    assert!(calls.values().all(|n| *n == 1));
    let back = read_back(&store, &steps).await;
    let count = |status| back.iter().filter(|s| s.status == status).count() as u64;
    assert_eq!(
        count(StepStatus::Running),
        0,
        "a claimed step was left running"
    );
    assert_eq!(count(StepStatus::Succeeded), stats.claimed);
    assert_eq!(count(StepStatus::Pending), 1_000 - stats.claimed);
    for step in back.iter().filter(|s| s.status == StepStatus::Succeeded) {
        assert_eq!(calls.get(&(step.id, 1)), Some(&1));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_commits_are_counted_and_leave_their_steps_running() {
    let store = common::Watched::failing();
    let steps = insert_steps(&store.inner, 100, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(100);
    let pool = WorkerPool::start(Arc::clone(&store), &config(), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                Completion::Succeeded(json!(3))
            }
        }
    });
    ledger.reached.notified().await;
    let stats = pool.shutdown().await;
    assert_eq!(
        (stats.claimed, stats.commit_errors, stats.succeeded),
        (100, 100, 0),
        "{stats:?}"
    );
    assert_eq!(stats.accounted(), stats.claimed);
    assert_eq!(stats.flushes, store.flush_sizes().len() as u64);
    assert_eq!(store.flush_sizes().iter().sum::<usize>(), 100);
    for step in read_back(&store.inner, &steps).await {
        assert_eq!(step.status, StepStatus::Running, "nothing was acknowledged");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_claim_backs_off_and_the_pool_goes_on() {
    let store = Arc::new(common::Watched::default());
    store.failing_claims.store(3, Ordering::SeqCst);
    let steps = insert_steps(&store.inner, 100, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(100);
    let pool = WorkerPool::start(Arc::clone(&store), &config(), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                Completion::Succeeded(json!(4))
            }
        }
    });
    ledger.reached.notified().await;
    let stats = pool.shutdown().await;
    assert_eq!(stats.claim_errors, 3, "{stats:?}");
    assert_eq!((stats.claimed, stats.succeeded), (100, 100), "{stats:?}");
    assert_eq!(
        stats.claims + stats.claim_errors,
        store.claims.load(Ordering::SeqCst) as u64
    );
    assert!(
        read_back(&store.inner, &steps)
            .await
            .iter()
            .all(|s| s.status == StepStatus::Succeeded)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_does_not_wait_for_its_commit_so_flushes_fill_up() {
    let store = common::Watched::holding_first();
    let steps = insert_steps(&store.inner, 50, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(50);
    // One worker: it calls the handler on a step only after the previous
    // step's completion was queued.
    let pool = WorkerPool::start(Arc::clone(&store), &config().workers(1), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                Completion::Succeeded(json!(5))
            }
        }
    });
    // The first flush is held while the worker runs the other steps.
    store.entered.notified().await;
    ledger.reached.notified().await;
    store.release.notify_one();
    let stats = pool.shutdown().await;

    assert_eq!((stats.claimed, stats.succeeded), (50, 50), "{stats:?}");
    let sizes = store.flush_sizes();
    assert_eq!(sizes.iter().sum::<usize>(), 50);
    // The held flush took the first item (or the first few, had the worker
    // queued more before the flusher woke); every item up to the 49th was
    // queued behind it and went in the next flush; the 50th may have
    // joined them or come just after. A worker that waited for each commit
    // would have made 50 flushes of one.
    assert!(sizes.len() <= 3, "{sizes:?}");
    assert!(sizes[0] + sizes[1] >= 49, "{sizes:?}");
    assert_eq!(stats.flushes, sizes.len() as u64);
    assert!(
        read_back(&store.inner, &steps)
            .await
            .iter()
            .all(|s| s.status == StepStatus::Succeeded)
    );
}
