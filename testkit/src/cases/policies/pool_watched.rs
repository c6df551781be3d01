//! [`Watched`]: a wrapper around any [`BatchStepStore`] that counts its
//! batch calls, can hold one flush or the first claim until released, and
//! can make flushes fail (retryable or not, every one or the first few),
//! lose a flush's answer after it was written, panic, or fail claims, so
//! the pool cases' faults run over the backend's real store. Every other
//! call goes straight to the store behind.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use flowstate_core::ports::{BatchStepStore, StepStore};
use flowstate_core::{
    BatchClaim, ClaimOutcome, Completion, Error, GraphState, InlineStep, Inserted, NewStep, Result,
    RetryStart, RunId, Step, StepAttempt, StepClaim, StepId, StepSummary, StepTransition,
    Timestamp,
};
use serde_json::Value;
use tokio::sync::Notify;

/// No call: what a `usize` setting holds when it is off.
const NONE: usize = usize::MAX;

/// A store whose batch calls are watched and can be made to misbehave; the
/// other calls go straight to the store behind.
#[derive(Debug)]
pub(crate) struct Watched<S> {
    /// The store behind: the harness's.
    pub(crate) inner: Arc<S>,
    /// The size of each `complete_batch` call, in order (a flush sent
    /// again is a call of its own).
    flushes: Mutex<Vec<usize>>,
    /// `complete_batch` calls that have returned.
    returned: AtomicUsize,
    /// The `complete_batch` call (from 0) that signals `entered` and waits
    /// for `release` before it does anything else; [`NONE`] for none.
    hold_call: AtomicUsize,
    /// Signalled when the held flush has started.
    pub(crate) entered: Notify,
    /// Lets the held flush go on.
    pub(crate) release: Notify,
    /// This many of the first `complete_batch` calls answer `Err` and
    /// write nothing ([`NONE`]: every call).
    failing_flushes: AtomicUsize,
    /// Whether those failures are retryable.
    retryable: AtomicBool,
    /// The `complete_batch` call (from 0) that writes, then answers a
    /// retryable `Err`: a COMMIT whose answer was lost in flight; [`NONE`]
    /// for none.
    lose_call: AtomicUsize,
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
            hold_call: AtomicUsize::new(NONE),
            entered: Notify::new(),
            release: Notify::new(),
            failing_flushes: AtomicUsize::new(0),
            retryable: AtomicBool::new(true),
            lose_call: AtomicUsize::new(NONE),
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
        self.holding_call(0)
    }

    /// Its `call`th `complete_batch` (from 0, a flush sent again counted
    /// as a call) is held, before it fails or writes, until
    /// [`Watched::release`] is notified.
    pub(crate) fn holding_call(self, call: usize) -> Self {
        self.hold_call.store(call, Ordering::SeqCst);
        self
    }

    /// Its first claim is held, once the store has claimed, until
    /// [`Watched::claim_release`] is notified.
    pub(crate) fn holding_first_claim(self) -> Self {
        self.hold_first_claim.store(true, Ordering::SeqCst);
        self
    }

    /// Every flush fails with a retryable error, writing nothing: a store
    /// that stays down.
    pub(crate) fn failing(self) -> Self {
        self.failing_first(NONE)
    }

    /// The first `n` flushes fail with a retryable error, writing nothing;
    /// the later ones write.
    pub(crate) fn failing_first(self, n: usize) -> Self {
        self.failing_flushes.store(n, Ordering::SeqCst);
        self
    }

    /// Every flush fails with an error that is not retryable, writing
    /// nothing.
    pub(crate) fn failing_not_retryable(self) -> Self {
        self.retryable.store(false, Ordering::SeqCst);
        self.failing()
    }

    /// Its `call`th `complete_batch` (from 0) writes, then answers a
    /// retryable error: its answer was lost in flight.
    pub(crate) fn losing_answer_of(self, call: usize) -> Self {
        self.lose_call.store(call, Ordering::SeqCst);
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

    /// The size of each `complete_batch` call so far.
    pub(crate) fn flush_sizes(&self) -> Vec<usize> {
        self.flushes.lock().unwrap().clone()
    }

    /// How many `complete_batch` calls have returned.
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
        let call = {
            let mut flushes = self.flushes.lock().unwrap();
            flushes.push(completions.len());
            flushes.len() - 1
        };
        if call == self.hold_call.load(Ordering::SeqCst) {
            self.entered.notify_one();
            self.release.notified().await;
        }
        assert!(
            !self.panic.load(Ordering::SeqCst),
            "the store panicked in complete_batch (a pool fault case)"
        );
        let answer = if call < self.failing_flushes.load(Ordering::SeqCst) {
            let retryable = self.retryable.load(Ordering::SeqCst);
            let message = if retryable {
                "connection reset by peer"
            } else {
                "permission denied for table steps"
            };
            Err(Error::backend("complete_batch", retryable, message))
        } else if call == self.lose_call.load(Ordering::SeqCst) {
            // Written; the answer is lost on the way back.
            self.inner.complete_batch(completions).await?;
            Err(Error::backend(
                "complete_batch",
                true,
                "connection lost while waiting for the COMMIT's answer",
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
    async fn record_step(&self, step: InlineStep) -> Result<Inserted<Step>> {
        self.inner.record_step(step).await
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
