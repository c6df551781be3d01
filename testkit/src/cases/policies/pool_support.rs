//! What the pool cases share: [`Watched`] (`pool_watched.rs`), a wrapper
//! around any [`BatchStepStore`] that makes the faults; a [`Ledger`] of
//! handler calls per `(step, attempt)`; step setup and read-back through
//! the ports; the pools' settings; and [`within`], the hang guard every
//! wait goes through.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use flowstate_core::ports::{BatchStepStore, RunStore, StepStore};
use flowstate_core::{
    BatchClaim, Completion, NewRun, NewStep, RetryPolicy, RunId, Step, StepAttempt, StepClaim,
    StepId, StepStatus,
};
use flowstate_pool::{FlushRetry, GroupCommit, IdleBackoff, Pending, PoolConfig};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

// The pool cases take it from here, with the rest of what they share.
use crate::Harness;
pub(crate) use crate::cases::policies::pool_watched::Watched;

/// The function the pool cases' steps are pinned to.
pub(crate) const FUNCTION: &str = "pool.test";

/// How long any wait of a pool case may take before the case fails as
/// hung: far above what the work needs on a loaded machine, so it is a
/// guard against a lost step or answer, never a timing check.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Awaits `work`, failing the case (naming `what`) if it has not finished
/// within [`HANG_GUARD`].
pub(crate) async fn within<T>(what: &str, work: impl Future<Output = T>) -> T {
    tokio::time::timeout(HANG_GUARD, work)
        .await
        .unwrap_or_else(|elapsed| panic!("waiting for {what}: {elapsed} ({HANG_GUARD:?})"))
}

/// Inserts `count` pending steps pinned to `function` (ten per run, the
/// runs filled concurrently), answering them in index order: step `i` is
/// named `s{i}` and has input `i`.
pub(crate) async fn insert_steps<H: Harness>(
    h: &H,
    count: usize,
    function: &str,
    retry: RetryPolicy,
) -> Vec<Step> {
    insert_steps_with(h, count, function, move |step| step.with_retry(retry)).await
}

/// [`insert_steps`] pinned to [`FUNCTION`], each step with `retry` and held
/// by a claim for [`CLAIM_TIMEOUT`].
pub(crate) async fn insert_expiring_steps<H: Harness>(
    h: &H,
    count: usize,
    retry: RetryPolicy,
) -> Vec<Step> {
    insert_steps_with(h, count, FUNCTION, move |step| {
        step.with_retry(retry).with_claim_timeout(CLAIM_TIMEOUT)
    })
    .await
}

/// [`insert_steps`], each `NewStep` passed through `with` first.
async fn insert_steps_with<H: Harness>(
    h: &H,
    count: usize,
    function: &str,
    with: impl Fn(NewStep) -> NewStep + Clone + Send + 'static,
) -> Vec<Step> {
    let mut runs = Vec::new();
    for first in (0..count).step_by(10) {
        let store = Arc::clone(h.store());
        let (function, with) = (function.to_owned(), with.clone());
        runs.push(tokio::spawn(async move {
            let run = store
                .create_run(NewRun::new("pool.test", json!({})))
                .await
                .expect("create_run")
                .record
                .id;
            let mut steps = Vec::new();
            for index in first..(first + 10).min(count) {
                let step = with(NewStep::new(
                    run,
                    format!("s{index}"),
                    &function,
                    json!(index),
                ));
                steps.push(store.insert_step(step).await.expect("insert_step").record);
            }
            steps
        }));
    }
    let mut steps = Vec::with_capacity(count);
    for run in runs {
        steps.extend(run.await.expect("a step insert panicked"));
    }
    steps
}

/// Inserts `count` steps and claims them all in one batch, so they are
/// running on attempt 1.
pub(crate) async fn running_steps<H: Harness>(h: &H, count: usize) -> Vec<Step>
where
    H::Store: BatchStepStore,
{
    insert_steps(h, count, FUNCTION, RetryPolicy::NONE).await;
    let claimed = h
        .store()
        .claim_batch(&BatchClaim::new(count as u32))
        .await
        .expect("claim_batch");
    assert_eq!(claimed.len(), count);
    claimed
}

/// `steps` as the store holds them now, in the same order (one
/// `list_steps` per run).
pub(crate) async fn read_back<S: StepStore>(store: &S, steps: &[Step]) -> Vec<Step> {
    let mut stored: HashMap<StepId, Step> = HashMap::new();
    for run in runs_of(steps) {
        let listed = store.list_steps(run).await.expect("list_steps");
        stored.extend(listed.into_iter().map(|s| (s.id, s)));
    }
    steps
        .iter()
        .map(|s| stored.remove(&s.id).expect("a step of ours is listed"))
        .collect()
}

/// The history rows of each of `steps`, in the same order, each in history
/// order (one `step_history` per run).
pub(crate) async fn histories<S: StepStore>(store: &S, steps: &[Step]) -> Vec<Vec<StepAttempt>> {
    let mut rows: HashMap<StepId, Vec<StepAttempt>> = HashMap::new();
    for run in runs_of(steps) {
        for row in store.step_history(run).await.expect("step_history") {
            rows.entry(row.step).or_default().push(row);
        }
    }
    steps
        .iter()
        .map(|s| rows.remove(&s.id).unwrap_or_default())
        .collect()
}

/// Each history row as `(attempt, status)`.
pub(crate) fn attempts(rows: &[StepAttempt]) -> Vec<(u32, StepStatus)> {
    rows.iter().map(|r| (r.attempt, r.status)).collect()
}

/// The runs of `steps`, each once, in first-seen order.
fn runs_of(steps: &[Step]) -> Vec<RunId> {
    let mut runs: Vec<RunId> = Vec::new();
    for step in steps {
        if !runs.contains(&step.run) {
            runs.push(step.run);
        }
    }
    runs
}

/// Calls of a pool's handler per `(step, attempt)`, and a signal once
/// `target` calls were made.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    calls: Mutex<HashMap<(StepId, u32), usize>>,
    total: AtomicUsize,
    target: usize,
    reached: Notify,
}

impl Ledger {
    /// A ledger signalling at its `target`th call.
    pub(crate) fn new(target: usize) -> Arc<Self> {
        Arc::new(Self {
            target,
            ..Self::default()
        })
    }

    /// Counts a call on `step`; answers which call it was, from 1.
    pub(crate) fn record(&self, step: &Step) -> usize {
        *self
            .calls
            .lock()
            .unwrap()
            .entry((step.id, step.attempt))
            .or_default() += 1;
        let call = self.total.fetch_add(1, Ordering::SeqCst) + 1;
        if call == self.target {
            self.reached.notify_one();
        }
        call
    }

    /// Waits (under the hang guard) until `target` calls were made.
    pub(crate) async fn reached(&self) {
        let what = format!("{} handler calls", self.target);
        within(&what, self.reached.notified()).await;
    }

    /// The calls so far, per `(step, attempt)`.
    pub(crate) fn calls(&self) -> HashMap<(StepId, u32), usize> {
        self.calls.lock().unwrap().clone()
    }
}

/// The pools' in-flight bound.
pub(crate) const IN_FLIGHT: usize = 128;

/// The claim timeout of [`insert_expiring_steps`]'s steps: moving the
/// harness's clock past it lets recovery take their claims back.
pub(crate) const CLAIM_TIMEOUT: Duration = Duration::from_secs(30);

/// A flush retry waiting 1 ms, doubling up to 8 ms, giving up once the
/// store has failed for `limit`.
pub(crate) fn retry_within(limit: Duration) -> FlushRetry {
    FlushRetry {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(8),
        give_up_after: limit,
    }
}

/// The pools' settings: 8 workers, claims of 64, [`IN_FLIGHT`] claimed
/// steps at most, a short idle backoff, failed flushes retried within
/// 5 s (far more than a few retries need, so a case that expects them to
/// succeed does not give up on a loaded machine).
pub(crate) fn pool_config() -> PoolConfig {
    PoolConfig::default()
        .workers(8)
        .claim_batch(64)
        .max_in_flight(IN_FLIGHT)
        .idle_backoff(IdleBackoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(4),
        })
        .flush_retry(retry_within(Duration::from_secs(5)))
}

/// A pool handler that records each call in `ledger` and succeeds with
/// `result`.
pub(crate) fn recording(
    ledger: &Arc<Ledger>,
    result: Value,
) -> impl Fn(Step) -> std::future::Ready<Completion> + Send + Sync + 'static {
    let ledger = Arc::clone(ledger);
    move |step: Step| {
        ledger.record(&step);
        std::future::ready(Completion::Succeeded(result.clone()))
    }
}

/// A group commit over a watched store.
pub(crate) type Commit<S> = GroupCommit<Watched<S>>;

/// Commits in a task of its own; once answered `Ok`, reads the step back
/// from `store`: an acknowledged completion is already written.
pub(crate) fn spawn_commit<S: BatchStepStore + 'static>(
    store: &Arc<S>,
    commit: &Commit<S>,
    claim: StepClaim,
    completion: Completion,
) -> JoinHandle<flowstate_pool::Result<()>> {
    let (store, commit) = (Arc::clone(store), commit.clone());
    tokio::spawn(async move {
        let (id, target) = (claim.step, completion.target());
        let answer = commit.commit(claim, completion).await;
        if answer.is_ok() {
            let stored = store.get_step(id).await.expect("get_step");
            assert_eq!(stored.status, target, "{id} was acknowledged unwritten");
        }
        answer
    })
}

/// Waits (yielding, no timer, under the hang guard) until `n` messages are
/// queued.
pub(crate) async fn wait_queued<S>(commit: &Commit<S>, n: usize) {
    within(&format!("{n} queued commits"), async {
        while commit.queued() < n {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// Queues one completion and waits until its flush is held in the store;
/// answers its still unanswered [`Pending`].
pub(crate) async fn hold_first<S: BatchStepStore + 'static>(
    store: &Watched<S>,
    commit: &Commit<S>,
    claim: StepClaim,
) -> Pending {
    let mut first = commit
        .submit(claim, Completion::Succeeded(json!("first")))
        .await
        .expect("submit");
    within("the first flush to start", store.entered.notified()).await;
    assert_unanswered(&mut first);
    first
}

/// `pending`'s answer if it is in, polled once: deterministic, it never
/// waits.
pub(crate) fn poll_now(pending: &mut Pending) -> Poll<flowstate_pool::Result<()>> {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(pending).poll(&mut cx)
}

/// Fails if `pending` already has its answer.
pub(crate) fn assert_unanswered(pending: &mut Pending) {
    if let Poll::Ready(answer) = poll_now(pending) {
        panic!("answered {answer:?} while its flush was held in the store");
    }
}

pub(crate) async fn join_all(
    handles: Vec<JoinHandle<flowstate_pool::Result<()>>>,
) -> Vec<flowstate_pool::Result<()>> {
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        let answer = within("a commit's answer", handle).await;
        out.push(answer.expect("a commit task panicked"));
    }
    out
}
