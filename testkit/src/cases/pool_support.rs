//! What the pool cases share: [`Watched`], a wrapper around any
//! [`BatchStepStore`] that counts its batch calls, can hold the first flush
//! or claim until released and can fail flushes or claims (so the faults run over
//! the backend's real store); a [`Ledger`] of handler calls per
//! `(step, attempt)`; step setup and read-back through the ports; and
//! [`within`], the hang guard every wait goes through.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowstate_core::{
    BatchClaim, BatchStepStore, ClaimOutcome, Completion, Error, GraphState, Inserted, NewRun,
    NewStep, Result, RetryPolicy, RetryStart, RunId, RunStore, Step, StepAttempt, StepClaim,
    StepId, StepStatus, StepStore, StepSummary, StepTransition, Timestamp,
};
use flowstate_pool::{IdleBackoff, PoolConfig};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::Harness;

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

/// A store whose batch calls are watched and can be made to misbehave; the
/// other calls go straight to the store behind.
#[derive(Debug)]
pub(crate) struct Watched<S> {
    /// The store behind: the harness's.
    pub(crate) inner: Arc<S>,
    /// The size of each `complete_batch` call, in order.
    flushes: Mutex<Vec<usize>>,
    /// `complete_batch` calls that have returned.
    returned: AtomicUsize,
    /// When set, the first `complete_batch` signals `entered` and waits
    /// for `release` before it writes.
    hold_first: AtomicBool,
    /// Signalled when the held flush has started.
    pub(crate) entered: Notify,
    /// Lets the held flush go on.
    pub(crate) release: Notify,
    /// When set, every `complete_batch` answers `Err` and writes nothing.
    fail: AtomicBool,
    /// When set, every `complete_batch` panics and writes nothing.
    panic: AtomicBool,
    /// When set, the first `claim_batch` claims, then signals
    /// `claim_entered` and waits for `claim_release` before it answers.
    hold_first_claim: AtomicBool,
    /// Signalled when the held claim has claimed.
    pub(crate) claim_entered: Notify,
    /// Lets the held claim answer.
    pub(crate) claim_release: Notify,
    /// `claim_batch` calls.
    claims: AtomicUsize,
    /// This many of the first `claim_batch` calls answer `Err`.
    failing_claims: AtomicUsize,
}

impl<S> Watched<S> {
    /// The harness's store, watched, misbehaving in no way yet.
    pub(crate) fn over(store: &Arc<S>) -> Self {
        Self {
            inner: Arc::clone(store),
            flushes: Mutex::new(Vec::new()),
            returned: AtomicUsize::new(0),
            hold_first: AtomicBool::new(false),
            entered: Notify::new(),
            release: Notify::new(),
            fail: AtomicBool::new(false),
            panic: AtomicBool::new(false),
            hold_first_claim: AtomicBool::new(false),
            claim_entered: Notify::new(),
            claim_release: Notify::new(),
            claims: AtomicUsize::new(0),
            failing_claims: AtomicUsize::new(0),
        }
    }

    /// Its first flush is held until [`Watched::release`] is notified.
    pub(crate) fn holding_first(self) -> Self {
        self.hold_first.store(true, Ordering::SeqCst);
        self
    }

    /// Its first claim is held, once the store has claimed, until
    /// [`Watched::claim_release`] is notified.
    pub(crate) fn holding_first_claim(self) -> Self {
        self.hold_first_claim.store(true, Ordering::SeqCst);
        self
    }

    /// Every flush fails, writing nothing.
    pub(crate) fn failing(self) -> Self {
        self.fail.store(true, Ordering::SeqCst);
        self
    }

    /// Every flush panics inside the store, writing nothing: the flusher
    /// task dies mid-flush.
    pub(crate) fn panicking(self) -> Self {
        self.panic.store(true, Ordering::SeqCst);
        self
    }

    /// The first `n` claims fail.
    pub(crate) fn failing_claims(self, n: usize) -> Self {
        self.failing_claims.store(n, Ordering::SeqCst);
        self
    }

    /// The flush sizes so far.
    pub(crate) fn flush_sizes(&self) -> Vec<usize> {
        self.flushes.lock().unwrap().clone()
    }

    /// How many flushes have returned.
    pub(crate) fn returned(&self) -> usize {
        self.returned.load(Ordering::SeqCst)
    }

    /// How many claims were asked for.
    pub(crate) fn claims(&self) -> usize {
        self.claims.load(Ordering::SeqCst)
    }
}

impl<S: BatchStepStore> BatchStepStore for Watched<S> {
    async fn claim_batch(&self, claim: &BatchClaim) -> Result<Vec<Step>> {
        let call = self.claims.fetch_add(1, Ordering::SeqCst);
        if call < self.failing_claims.load(Ordering::SeqCst) {
            return Err(Error::backend(
                "claim_batch",
                true,
                "server closed the connection",
            ));
        }
        let claimed = self.inner.claim_batch(claim).await;
        if call == 0 && self.hold_first_claim.load(Ordering::SeqCst) {
            self.claim_entered.notify_one();
            self.claim_release.notified().await;
        }
        claimed
    }

    async fn complete_batch(
        &self,
        completions: Vec<(StepClaim, Completion)>,
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
        assert!(
            !self.panic.load(Ordering::SeqCst),
            "the store panicked in complete_batch (a pool fault case)"
        );
        let answer = if self.fail.load(Ordering::SeqCst) {
            Err(Error::backend(
                "complete_batch",
                true,
                "connection reset by peer",
            ))
        } else {
            self.inner.complete_batch(completions).await
        };
        self.returned.fetch_add(1, Ordering::SeqCst);
        answer
    }
}

impl<S: StepStore> StepStore for Watched<S> {
    async fn insert_step(&self, step: NewStep) -> Result<Inserted<Step>> {
        self.inner.insert_step(step).await
    }
    async fn get_step(&self, id: StepId) -> Result<Step> {
        self.inner.get_step(id).await
    }
    async fn find_step(&self, run: RunId, name: &str) -> Result<Step> {
        self.inner.find_step(run, name).await
    }
    async fn list_steps(&self, run: RunId) -> Result<Vec<Step>> {
        self.inner.list_steps(run).await
    }
    async fn transition_step(&self, id: StepId, transition: StepTransition) -> Result<()> {
        self.inner.transition_step(id, transition).await
    }
    async fn transition_claimed(&self, claim: StepClaim, transition: StepTransition) -> Result<()> {
        self.inner.transition_claimed(claim, transition).await
    }
    async fn renew_step_claim(&self, claim: StepClaim) -> Result<Timestamp> {
        self.inner.renew_step_claim(claim).await
    }
    async fn create_retry_attempt(&self, id: StepId, start: RetryStart) -> Result<()> {
        self.inner.create_retry_attempt(id, start).await
    }
    async fn retry_step(&self, id: StepId, start: RetryStart) -> Result<Step> {
        self.inner.retry_step(id, start).await
    }
    async fn claim_step(&self, run: RunId, name: &str, function: &str) -> Result<Option<Step>> {
        self.inner.claim_step(run, name, function).await
    }
    async fn claim_step_outcome(
        &self,
        run: RunId,
        name: &str,
        function: &str,
    ) -> Result<ClaimOutcome> {
        self.inner.claim_step_outcome(run, name, function).await
    }
    async fn step_history(&self, run: RunId) -> Result<Vec<StepAttempt>> {
        self.inner.step_history(run).await
    }
    async fn set_branch_taken(&self, id: StepId, branch: &str) -> Result<()> {
        self.inner.set_branch_taken(id, branch).await
    }
    async fn graph_state(&self, run: RunId) -> Result<GraphState> {
        self.inner.graph_state(run).await
    }
    async fn step_results(&self, run: RunId, names: &[&str]) -> Result<BTreeMap<String, Value>> {
        self.inner.step_results(run, names).await
    }
    async fn run_summary(&self, run: RunId) -> Result<Vec<StepSummary>> {
        self.inner.run_summary(run).await
    }
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
    let mut runs = Vec::new();
    for first in (0..count).step_by(10) {
        let store = Arc::clone(h.store());
        let function = function.to_owned();
        runs.push(tokio::spawn(async move {
            let run = store
                .create_run(NewRun::new("pool.test", json!({})))
                .await
                .expect("create_run")
                .record
                .id;
            let mut steps = Vec::new();
            for index in first..(first + 10).min(count) {
                let step = NewStep::new(run, format!("s{index}"), &function, json!(index))
                    .with_retry(retry);
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

/// The pools' settings: 8 workers, claims of 64, [`IN_FLIGHT`] claimed
/// steps at most, a short idle backoff.
pub(crate) fn pool_config() -> PoolConfig {
    PoolConfig::default()
        .workers(8)
        .claim_batch(64)
        .max_in_flight(IN_FLIGHT)
        .idle_backoff(IdleBackoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(4),
        })
}
