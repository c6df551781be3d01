//! [`WorkerPool`]: claimers (one by default), N workers, one
//! [`GroupCommit`].
//!
//! A claimer asks the store for batches of claimable steps
//! ([`BatchStepStore::claim_batch`]) and hands them to the workers over a
//! bounded channel; a semaphore of [`PoolConfig::max_in_flight`] permits
//! (one per claimed step, returned once its completion is committed) keeps
//! it from claiming more than the pool can hold, and it only asks for a
//! batch when a whole batch fits. Each worker runs the host's handler on a
//! step (catching a panic, so it fails that step instead of the worker),
//! queues the handler's [`Completion`] on the [`GroupCommit`] and goes on
//! to the next step while the flusher answers it through a callback: the
//! workers bound how many handlers run, the in-flight bound how many
//! completions a flush can gather. A step's room
//! is freed only once its completion's answer is in.
//!
//! Which step goes to which pool is the store's decision (each is claimed
//! exactly once across every claimer): the channel, the semaphore and the
//! lock the workers take turns receiving under only move steps the store
//! already gave this pool.
//!
//! Shutdown ([`WorkerPool::shutdown`], or [`PoolHandle::stop`] from
//! elsewhere) stops claiming, lets the workers finish every step already
//! claimed, flushes the commit queue and answers [`PoolStats`]. A claim in
//! progress is never cancelled: its steps are handed over and run.
//!
//! A completion is never dropped. A flush that fails with a retryable error
//! is sent again as [`PoolConfig::flush_retry`] says, and a step's room
//! stays taken until it succeeds or gives up (so the claimer slows down
//! while the store is failing). What is not committed is counted in
//! [`PoolStats::commit_errors`] and logged with its step: among them, the
//! completions of a flush that gave up ([`PoolStats::given_up`]: left
//! running in the store, for the claim deadline to recover) and those the
//! store refused because their claim had run out and recovery had taken the
//! attempt back ([`PoolStats::claims_lost`]: another worker may run the
//! step again).

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flowstate_core::ports::BatchStepStore;
use flowstate_core::{BatchClaim, Completion, Step};
use futures_util::FutureExt as _;
use serde_json::json;
use tokio::sync::{Mutex, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use flowstate_core::Error;

use crate::commit::{self, DEFAULT_MAX_BATCH, FlushFailed, GroupCommit};
use crate::retry::FlushRetry;

/// How long a claimer waits after a claim that came back empty (or
/// failed): `initial`, doubled after each further empty claim up to `max`,
/// back to `initial` once a claim takes something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleBackoff {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for IdleBackoff {
    /// 5 ms, doubling up to 200 ms.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(200),
        }
    }
}

impl IdleBackoff {
    /// The wait after `previous`: doubled, capped at `max`.
    pub fn next(&self, previous: Duration) -> Duration {
        previous.saturating_mul(2).min(self.max).max(self.initial)
    }
}

/// How a [`WorkerPool`] runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Worker tasks running the handler (at least 1): how many handlers
    /// run at once. Their commits do not hold them up.
    pub workers: usize,
    /// Claim loops (at least 1), each with at most one `claim_batch` in
    /// progress: more than one keeps claiming while a claim is on the wire.
    /// They share the in-flight bound, and the store keeps them from
    /// taking the same step.
    pub claimers: usize,
    /// Steps asked for per claim (capped at [`BatchClaim::MAX_LIMIT`] and
    /// at `max_in_flight`).
    pub claim_batch: u32,
    /// Steps claimed and not yet committed, at most.
    pub max_in_flight: usize,
    /// Only steps pinned to this function.
    pub function: Option<String>,
    /// The wait after an empty claim.
    pub idle_backoff: IdleBackoff,
    /// The most completions one flush of the pool's [`GroupCommit`] writes.
    pub max_flush: usize,
    /// How a flush that failed with a retryable error is sent again.
    pub flush_retry: FlushRetry,
}

impl Default for PoolConfig {
    /// 8 workers, one claimer, claims of 64, 128 steps in flight, any
    /// function, the default [`IdleBackoff`], flushes of up to
    /// [`DEFAULT_MAX_BATCH`] retried as the default [`FlushRetry`] says.
    fn default() -> Self {
        Self {
            workers: 8,
            claimers: 1,
            claim_batch: 64,
            max_in_flight: 128,
            function: None,
            idle_backoff: IdleBackoff::default(),
            max_flush: DEFAULT_MAX_BATCH,
            flush_retry: FlushRetry::default(),
        }
    }
}

impl PoolConfig {
    /// With `workers` worker tasks.
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// With `claimers` claim loops.
    #[must_use]
    pub fn claimers(mut self, claimers: usize) -> Self {
        self.claimers = claimers;
        self
    }

    /// Claiming `claim_batch` steps at a time.
    #[must_use]
    pub fn claim_batch(mut self, claim_batch: u32) -> Self {
        self.claim_batch = claim_batch;
        self
    }

    /// Holding at most `max_in_flight` claimed, uncommitted steps.
    #[must_use]
    pub fn max_in_flight(mut self, max_in_flight: usize) -> Self {
        self.max_in_flight = max_in_flight;
        self
    }

    /// Claiming only steps pinned to `function`.
    #[must_use]
    pub fn function(mut self, function: impl Into<String>) -> Self {
        self.function = Some(function.into());
        self
    }

    /// Waiting as `backoff` says after an empty claim.
    #[must_use]
    pub fn idle_backoff(mut self, backoff: IdleBackoff) -> Self {
        self.idle_backoff = backoff;
        self
    }

    /// Flushing at most `max_flush` completions at a time.
    #[must_use]
    pub fn max_flush(mut self, max_flush: usize) -> Self {
        self.max_flush = max_flush;
        self
    }

    /// Retrying a failed flush as `retry` says.
    #[must_use]
    pub fn flush_retry(mut self, retry: FlushRetry) -> Self {
        self.flush_retry = retry;
        self
    }

    /// The in-flight bound applied (at least 1, at most 2^20).
    fn in_flight(&self) -> usize {
        self.max_in_flight.clamp(1, 1 << 20)
    }

    /// The claim each claimer makes: the batch size capped by the in-flight
    /// bound, so a whole batch always fits.
    fn claim(&self) -> BatchClaim {
        let cap = u32::try_from(self.in_flight()).unwrap_or(u32::MAX);
        let limit = self
            .claim_batch
            .clamp(1, BatchClaim::MAX_LIMIT)
            .min(cap.max(1));
        let claim = BatchClaim::new(limit);
        match &self.function {
            Some(function) => claim.for_function(function.clone()),
            None => claim,
        }
    }
}

/// The pool's counters, shared by its tasks.
#[derive(Debug, Default)]
struct Counters {
    claims: AtomicU64,
    empty_claims: AtomicU64,
    claim_errors: AtomicU64,
    claimed: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    commit_errors: AtomicU64,
    given_up: AtomicU64,
    claims_lost: AtomicU64,
    panicked: AtomicU64,
    abandoned: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// What a pool did. After [`WorkerPool::shutdown`] every claimed step is
/// accounted for, each in exactly one of four counters: `claimed ==
/// succeeded + failed + commit_errors + abandoned`
/// ([`PoolStats::accounted`]). `panicked` is a part of `failed`, and
/// `given_up` and `claims_lost` are parts of `commit_errors`, not added
/// again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// `claim_batch` calls that answered `Ok`.
    pub claims: u64,
    /// Of those, the ones that took no step.
    pub empty_claims: u64,
    /// `claim_batch` calls that answered `Err`.
    pub claim_errors: u64,
    /// Steps claimed.
    pub claimed: u64,
    /// Steps whose handler answered [`Completion::Succeeded`], committed.
    pub succeeded: u64,
    /// Steps whose handler answered [`Completion::Failed`] (or panicked),
    /// committed.
    pub failed: u64,
    /// Steps whose completion was not committed: the item refused, or its
    /// flush failed (given up, or an error that is not retryable). Unless
    /// the item was refused because the step had moved on, left running in
    /// the store, for the claim deadline to recover. Includes `given_up`
    /// and `claims_lost`.
    pub commit_errors: u64,
    /// Of `commit_errors`, the completions of flushes that gave up: the
    /// store kept failing with a retryable error past
    /// [`FlushRetry::give_up_after`]. Left running in the store (unless a
    /// lost answer hid the write), for the claim deadline to recover:
    /// recovery fails the attempt and the step's retry policy runs it again.
    pub given_up: u64,
    /// Of `commit_errors`, the completions the store refused as
    /// [`Error::ClaimLost`]: the claim ran out before its completion was
    /// written, and recovery took the attempt back. Nothing of it was
    /// written; the step may be run again by another worker.
    pub claims_lost: u64,
    /// Of `failed`, the steps whose handler panicked.
    pub panicked: u64,
    /// Claimed steps no worker could take (every worker had ended): left
    /// running in the store. Zero unless a worker task itself died.
    pub abandoned: u64,
    /// Flushes of the pool's [`GroupCommit`].
    pub flushes: u64,
    /// Completions those flushes carried.
    pub flushed_items: u64,
    /// Flushes sent again after a retryable error.
    pub flush_retries: u64,
}

impl PoolStats {
    /// Steps claimed that reached an end here: committed, not committed
    /// (refused, given up, claim lost: `commit_errors`), or abandoned.
    /// Equal to `claimed` once the pool has shut down; lower while steps
    /// are in flight (a flush being retried holds its steps in flight).
    pub fn accounted(&self) -> u64 {
        self.succeeded + self.failed + self.commit_errors + self.abandoned
    }
}

/// A cheap, cloneable handle on a running [`WorkerPool`]: it can ask it to
/// stop and read its counters, from any task.
#[derive(Clone, Debug)]
pub struct PoolHandle {
    stop: Arc<watch::Sender<bool>>,
    counters: Arc<Counters>,
    commit: Arc<commit::Counters>,
}

impl PoolHandle {
    /// Asks the pool to stop claiming; it finishes what it claimed. Does
    /// not wait: [`WorkerPool::shutdown`] does.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// The counters so far.
    pub fn stats(&self) -> PoolStats {
        let c = &self.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let commit = self.commit.snapshot();
        PoolStats {
            claims: load(&c.claims),
            empty_claims: load(&c.empty_claims),
            claim_errors: load(&c.claim_errors),
            claimed: load(&c.claimed),
            succeeded: load(&c.succeeded),
            failed: load(&c.failed),
            commit_errors: load(&c.commit_errors),
            given_up: load(&c.given_up),
            claims_lost: load(&c.claims_lost),
            panicked: load(&c.panicked),
            abandoned: load(&c.abandoned),
            flushes: commit.flushes,
            flushed_items: commit.items,
            flush_retries: commit.flush_retries,
        }
    }
}

/// A running pool: its claimers, its workers and its commit queue (see the
/// module doc). Dropping it and every [`PoolHandle`] without
/// [`WorkerPool::shutdown`] stops it too, draining in the background with
/// nobody to wait for it.
#[derive(Debug)]
pub struct WorkerPool<S> {
    handle: PoolHandle,
    claimers: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    commit: GroupCommit<S>,
    room: Arc<Semaphore>,
    in_flight: usize,
}

impl<S: BatchStepStore + 'static> WorkerPool<S> {
    /// Starts a pool over `store` on the current tokio runtime (panics
    /// outside one): `handler` runs each claimed step and answers the
    /// completion to commit.
    pub fn start<H, F>(store: Arc<S>, config: &PoolConfig, handler: H) -> Self
    where
        H: Fn(Step) -> F + Send + Sync + 'static,
        F: Future<Output = Completion> + Send + 'static,
    {
        let commit =
            GroupCommit::with_retry(Arc::clone(&store), config.max_flush, config.flush_retry);
        let counters = Arc::new(Counters::default());
        let (stop, stopped) = watch::channel(false);
        let in_flight = config.in_flight();
        let room = Arc::new(Semaphore::new(in_flight));
        let (steps, inbox) = mpsc::channel::<Step>(in_flight);
        let inbox = Arc::new(Mutex::new(inbox));
        let handler = Arc::new(handler);
        let claimers = (0..config.claimers.max(1))
            .map(|_| {
                tokio::spawn(claimer(Claimer {
                    store: Arc::clone(&store),
                    claim: config.claim(),
                    room: Arc::clone(&room),
                    steps: steps.clone(),
                    stopped: stopped.clone(),
                    backoff: config.idle_backoff,
                    counters: Arc::clone(&counters),
                }))
            })
            .collect();
        // The workers end once every claimer has dropped its sender.
        drop(steps);
        drop(store);
        let workers = (0..config.workers.max(1))
            .map(|_| {
                tokio::spawn(worker(
                    Arc::clone(&inbox),
                    Arc::clone(&handler),
                    commit.clone(),
                    Arc::clone(&room),
                    Arc::clone(&counters),
                ))
            })
            .collect();
        let handle = PoolHandle {
            stop: Arc::new(stop),
            counters,
            commit: commit.counters(),
        };
        Self {
            handle,
            claimers,
            workers,
            commit,
            room,
            in_flight,
        }
    }

    /// A handle that can stop the pool and read its counters.
    pub fn handle(&self) -> PoolHandle {
        self.handle.clone()
    }

    /// The counters so far.
    pub fn stats(&self) -> PoolStats {
        self.handle.stats()
    }

    /// Stops claiming, waits for every claimed step to be run and its
    /// completion's answer to be in (however long a handler takes: a step
    /// claimed is a step run), closes the commit queue, and answers the
    /// counters, in which every claimed step is accounted for.
    ///
    /// A flush being retried is waited for: until it succeeds or gives up,
    /// which [`PoolConfig::flush_retry`]'s `give_up_after` bounds from the
    /// store's first failure (then each flush left is tried once; see
    /// [`GroupCommit::close`]).
    pub async fn shutdown(self) -> PoolStats {
        self.handle.stop();
        for claimer in self.claimers {
            if let Err(err) = claimer.await {
                tracing::error!(%err, "a pool claimer ended abnormally");
            }
        }
        // The claimers dropped their senders: the workers drain what they
        // handed over and end.
        for worker in self.workers {
            if let Err(err) = worker.await {
                tracing::error!(%err, "a pool worker ended abnormally");
            }
        }
        // Every room back means every claimed step's answer is in (an
        // abandoned step's room is given back when it is counted).
        let all = u32::try_from(self.in_flight).unwrap_or(u32::MAX);
        drop(self.room.acquire_many(all).await);
        self.commit.close().await;
        self.handle.stats()
    }
}

/// What a claimer task owns.
struct Claimer<S> {
    store: Arc<S>,
    claim: BatchClaim,
    room: Arc<Semaphore>,
    steps: mpsc::Sender<Step>,
    stopped: watch::Receiver<bool>,
    backoff: IdleBackoff,
    counters: Arc<Counters>,
}

/// Resolves once a stop was asked for (or every handle is gone).
async fn stop_asked(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// A claimer: waits for room for a whole batch, claims it, hands the
/// steps over; backs off after an empty or failed claim; ends when asked
/// to stop, never in the middle of a claim.
async fn claimer<S: BatchStepStore>(mut c: Claimer<S>) {
    let limit = c.claim.limit;
    let mut idle = c.backoff.initial;
    loop {
        let permits = tokio::select! {
            biased;
            () = stop_asked(&mut c.stopped) => break,
            permits = Arc::clone(&c.room).acquire_many_owned(limit) => {
                permits.expect("the pool never closes its semaphore")
            }
        };
        if *c.stopped.borrow() {
            break;
        }
        let span = tracing::debug_span!(
            "flowstate.pool.claim",
            limit,
            claimed = tracing::field::Empty
        );
        // Never raced against the stop signal: a claim the store committed
        // must reach the workers.
        let claimed = c.store.claim_batch(&c.claim).instrument(span.clone()).await;
        match claimed {
            Ok(steps) => {
                span.record("claimed", steps.len());
                bump(&c.counters.claims, 1);
                bump(&c.counters.claimed, steps.len() as u64);
                // One permit stays with each claimed step until its commit
                // (a store keeping the port's contract answers at most
                // `limit` steps).
                permits.forget();
                c.room
                    .add_permits((limit as usize).saturating_sub(steps.len()));
                if steps.is_empty() {
                    bump(&c.counters.empty_claims, 1);
                    if wait_or_stop(&mut c.stopped, idle).await {
                        break;
                    }
                    idle = c.backoff.next(idle);
                    continue;
                }
                idle = c.backoff.initial;
                let mut steps = steps.into_iter();
                while let Some(step) = steps.next() {
                    // Room is reserved, so this waits only for a worker to
                    // lock the inbox; it fails only if every worker ended.
                    if c.steps.send(step).await.is_err() {
                        let lost = 1 + steps.len();
                        bump(&c.counters.abandoned, lost as u64);
                        c.room.add_permits(lost);
                        tracing::error!(lost, "every pool worker ended; claimed steps abandoned");
                        return;
                    }
                }
            }
            Err(err) => {
                drop(permits);
                bump(&c.counters.claim_errors, 1);
                span.in_scope(|| {
                    tracing::warn!(error = %err, "batch claim failed; backing off");
                });
                if wait_or_stop(&mut c.stopped, idle).await {
                    break;
                }
                idle = c.backoff.next(idle);
            }
        }
    }
}

/// Sleeps `wait`, or less if a stop is asked for; answers whether it was.
async fn wait_or_stop(stopped: &mut watch::Receiver<bool>, wait: Duration) -> bool {
    tokio::select! {
        biased;
        () = stop_asked(stopped) => true,
        () = tokio::time::sleep(wait) => false,
    }
}

/// A worker: takes the next claimed step, runs the handler on it (a panic
/// caught), queues what it answered, and the flusher frees its room once
/// it is committed; ends when the claimers have ended and the inbox is
/// empty.
async fn worker<S, H, F>(
    inbox: Arc<Mutex<mpsc::Receiver<Step>>>,
    handler: Arc<H>,
    commit: GroupCommit<S>,
    room: Arc<Semaphore>,
    counters: Arc<Counters>,
) where
    S: BatchStepStore + 'static,
    H: Fn(Step) -> F + Send + Sync + 'static,
    F: Future<Output = Completion> + Send + 'static,
{
    loop {
        let next = inbox.lock().await.recv().await;
        let Some(step) = next else {
            return;
        };
        let (id, claim) = (step.id, step.claim());
        // Run in this task, a panic caught: no task to spawn and join per
        // step.
        let run = AssertUnwindSafe(async { handler(step).await });
        let completion = match run.catch_unwind().await {
            Ok(completion) => completion,
            Err(payload) => {
                bump(&counters.panicked, 1);
                let message = panic_message(payload.as_ref());
                tracing::error!(step = %id, panic = %message, "the handler panicked; the attempt fails");
                Completion::Failed(json!({ "panic": message }))
            }
        };
        let succeeded = matches!(completion, Completion::Succeeded(_));
        // Queued, the worker goes on to the next step: the flusher answers
        // beside it (a callback, no task per step), so a flush carries up
        // to `max_in_flight` completions rather than one per worker. The
        // step's room is freed once the answer is in.
        let (room, counters) = (Arc::clone(&room), Arc::clone(&counters));
        let on_answer = Box::new(move |answer| {
            answered(id, succeeded, answer, &counters);
            room.add_permits(1);
        });
        // A closed queue is answered through `on_answer` too.
        let _ = commit.submit_then(claim, completion, on_answer).await;
    }
}

/// What a handler's panic said, as text.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Counts the answer to one step's completion.
fn answered(
    id: flowstate_core::StepId,
    succeeded: bool,
    answer: flowstate_core::Result<()>,
    counters: &Counters,
) {
    let err = match answer {
        Ok(()) if succeeded => return bump(&counters.succeeded, 1),
        Ok(()) => return bump(&counters.failed, 1),
        Err(err) => err,
    };
    bump(&counters.commit_errors, 1);
    if let Error::ClaimLost { attempt, .. } = err {
        bump(&counters.claims_lost, 1);
        tracing::warn!(
            step = %id, attempt,
            "a completion came after its claim ran out and recovery took the attempt back; \
             nothing written, the step may run again"
        );
    } else if FlushFailed::of(&err).is_some_and(|failed| failed.gave_up) {
        bump(&counters.given_up, 1);
        tracing::warn!(
            step = %id, error = %err,
            "a completion was given up; the step stays running for its claim deadline"
        );
    } else {
        tracing::warn!(step = %id, error = %err, "a completion was not committed");
    }
}
