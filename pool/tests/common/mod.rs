//! What the pool tests share: a [`MemoryStore`] wrapper that counts
//! `complete_batch` calls, can hold the first one until released (so the
//! rest queue up behind it), and can fail every flush; and step setup.

#![allow(dead_code, reason = "each test binary uses a part")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use flowstate_core::{
    BatchClaim, BatchStepStore, Completion, Error, GraphState, Inserted, NewRun, NewStep, Result,
    RetryStart, RunStore, Step, StepAttempt, StepId, StepStore, StepSummary, StepTransition,
};
use flowstate_testkit::MemoryStore;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A [`MemoryStore`] whose batch completions are watched.
#[derive(Default)]
pub struct Watched {
    /// The store behind.
    pub inner: MemoryStore,
    /// The size of each `complete_batch` call, in order.
    pub flushes: Mutex<Vec<usize>>,
    /// When set, the first `complete_batch` signals `entered` and waits
    /// for `release` before it writes.
    pub hold_first: AtomicBool,
    /// Signalled when the held flush has started.
    pub entered: Notify,
    /// Lets the held flush go on.
    pub release: Notify,
    /// When set, every `complete_batch` answers `Err` and writes nothing.
    pub fail: AtomicBool,
    /// `claim_batch` calls.
    pub claims: AtomicUsize,
    /// This many of the first `claim_batch` calls answer `Err`.
    pub failing_claims: AtomicUsize,
}

impl Watched {
    /// A store whose first flush is held.
    pub fn holding_first() -> Arc<Self> {
        let store = Self::default();
        store.hold_first.store(true, Ordering::SeqCst);
        Arc::new(store)
    }

    /// A store every flush of which fails.
    pub fn failing() -> Arc<Self> {
        let store = Self::default();
        store.fail.store(true, Ordering::SeqCst);
        Arc::new(store)
    }

    /// The flush sizes so far.
    pub fn flush_sizes(&self) -> Vec<usize> {
        self.flushes.lock().unwrap().clone()
    }
}

impl BatchStepStore for Watched {
    async fn claim_batch(&self, claim: &BatchClaim) -> Result<Vec<Step>> {
        let call = self.claims.fetch_add(1, Ordering::SeqCst);
        if call < self.failing_claims.load(Ordering::SeqCst) {
            return Err(Error::backend(
                "claim_batch",
                true,
                "server closed the connection",
            ));
        }
        self.inner.claim_batch(claim).await
    }

    async fn complete_batch(
        &self,
        completions: Vec<(StepId, Completion)>,
    ) -> Result<Vec<Result<()>>> {
        let first = {
            let mut flushes = self.flushes.lock().unwrap();
            flushes.push(completions.len());
            flushes.len() == 1
        };
        if first && self.hold_first.load(Ordering::SeqCst) {
            self.entered.notify_one();
            self.release.notified().await;
        }
        if self.fail.load(Ordering::SeqCst) {
            return Err(Error::backend(
                "complete_batch",
                true,
                "connection reset by peer",
            ));
        }
        self.inner.complete_batch(completions).await
    }
}

impl StepStore for Watched {
    async fn insert_step(&self, step: NewStep) -> Result<Inserted<Step>> {
        self.inner.insert_step(step).await
    }
    async fn get_step(&self, id: StepId) -> Result<Step> {
        self.inner.get_step(id).await
    }
    async fn find_step(&self, run: flowstate_core::RunId, name: &str) -> Result<Step> {
        self.inner.find_step(run, name).await
    }
    async fn list_steps(&self, run: flowstate_core::RunId) -> Result<Vec<Step>> {
        self.inner.list_steps(run).await
    }
    async fn transition_step(&self, id: StepId, transition: StepTransition) -> Result<()> {
        self.inner.transition_step(id, transition).await
    }
    async fn create_retry_attempt(&self, id: StepId, start: RetryStart) -> Result<()> {
        self.inner.create_retry_attempt(id, start).await
    }
    async fn claim_step(
        &self,
        run: flowstate_core::RunId,
        name: &str,
        function: &str,
    ) -> Result<Option<Step>> {
        self.inner.claim_step(run, name, function).await
    }
    async fn step_history(&self, run: flowstate_core::RunId) -> Result<Vec<StepAttempt>> {
        self.inner.step_history(run).await
    }
    async fn set_branch_taken(&self, id: StepId, branch: &str) -> Result<()> {
        self.inner.set_branch_taken(id, branch).await
    }
    async fn graph_state(&self, run: flowstate_core::RunId) -> Result<GraphState> {
        self.inner.graph_state(run).await
    }
    async fn step_results(
        &self,
        run: flowstate_core::RunId,
        names: &[&str],
    ) -> Result<BTreeMap<String, Value>> {
        self.inner.step_results(run, names).await
    }
    async fn run_summary(&self, run: flowstate_core::RunId) -> Result<Vec<StepSummary>> {
        self.inner.run_summary(run).await
    }
}

/// The function the test steps are pinned to.
pub const FUNCTION: &str = "pool.test";

/// Inserts `count` pending steps pinned to `function` (ten per run),
/// answering them in insertion order.
pub async fn insert_steps(
    store: &MemoryStore,
    count: usize,
    function: &str,
    retry: flowstate_core::RetryPolicy,
) -> Vec<Step> {
    let mut steps = Vec::with_capacity(count);
    let mut run = None;
    for index in 0..count {
        if index % 10 == 0 {
            let created = store
                .create_run(NewRun::new("pool.test", json!({})))
                .await
                .unwrap();
            run = Some(created.record.id);
        }
        let step = NewStep::new(run.unwrap(), format!("s{index}"), function, json!(index))
            .with_retry(retry);
        steps.push(store.insert_step(step).await.unwrap().record);
    }
    steps
}

/// Inserts `count` steps and claims them all, so they are running.
pub async fn running_steps(store: &MemoryStore, count: usize) -> Vec<Step> {
    insert_steps(store, count, FUNCTION, flowstate_core::RetryPolicy::NONE).await;
    let claimed = store
        .claim_batch(&BatchClaim::new(count as u32))
        .await
        .unwrap();
    assert_eq!(claimed.len(), count);
    claimed
}

/// Every step of every run of `steps`, read back.
pub async fn read_back(store: &MemoryStore, steps: &[Step]) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        out.push(store.get_step(step.id).await.unwrap());
    }
    out
}
