//! [`WorkerPool`]: claimers (one by default), N workers, one
//! [`GroupCommit`], started by [`WorkerPool::spawn`].
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
//! Shutdown ([`PoolHandle::shutdown`], or [`PoolControl::stop`] from
//! elsewhere) stops claiming, lets the workers finish every step already
//! claimed, flushes the commit queue and answers [`PoolReport`]. A claim in
//! progress is never cancelled: its steps are handed over and run.
//!
//! A completion is never dropped. A flush that fails with a retryable error
//! is sent again as [`PoolConfig::flush_retry`] says, and a step's room
//! stays taken until it succeeds or gives up (so the claimer slows down
//! while the store is failing). What is not committed is counted in
//! [`PoolReport::commit_errors`] and logged with its step: among them, the
//! completions of a flush that gave up ([`PoolReport::given_up`]: left
//! running in the store, for the claim deadline to recover) and those the
//! store refused because their claim had run out and recovery had taken the
//! attempt back ([`PoolReport::claims_lost`]: another worker may run the
//! step again).

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::BatchStepStore;
use flowstate_core::{BatchClaim, Completion, Step};
use futures_util::FutureExt as _;
use serde_json::json;
use tokio::sync::{Mutex, Semaphore, mpsc, watch};
use tracing::Instrument as _;

use crate::commit::GroupCommit;
use crate::config::{IdleBackoff, PoolConfig};
use crate::error::Error;
use crate::handle::{Counters, PoolControl, PoolHandle, bump};

/// A worker pool, not yet started: its store, the host's handler and its
/// [`PoolConfig`]. [`WorkerPool::spawn`] starts it and answers its
/// [`PoolHandle`].
pub struct WorkerPool<S, H> {
    store: Arc<S>,
    handler: H,
    config: PoolConfig,
}

impl<S, H> std::fmt::Debug for WorkerPool<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S, H, F> WorkerPool<S, H>
where
    S: BatchStepStore + 'static,
    H: Fn(Step) -> F + Send + Sync + 'static,
    F: Future<Output = Completion> + Send + 'static,
{
    /// A pool over `store` whose `handler` runs each claimed step and
    /// answers the completion to commit, with the default [`PoolConfig`].
    pub fn new(store: Arc<S>, handler: H) -> Self {
        Self {
            store,
            handler,
            config: PoolConfig::default(),
        }
    }

    /// The same pool, run as `config` says.
    #[must_use]
    pub fn with_config(mut self, config: PoolConfig) -> Self {
        self.config = config;
        self
    }

    /// Starts the pool on the current tokio runtime (panics outside one):
    /// its claimers, its workers and its commit queue.
    pub fn spawn(self) -> PoolHandle<S> {
        let commit = GroupCommit::with_retry(
            Arc::clone(&self.store),
            self.config.max_flush,
            self.config.flush_retry,
        );
        let counters = Arc::new(Counters::default());
        let (stop, stopped) = watch::channel(false);
        let in_flight = self.config.in_flight();
        let room = Arc::new(Semaphore::new(in_flight));
        let (steps, inbox) = mpsc::channel::<Step>(in_flight);
        let inbox = Arc::new(Mutex::new(inbox));
        let handler = Arc::new(self.handler);
        let claimers = (0..self.config.claimers.max(1))
            .map(|_| {
                tokio::spawn(claimer(Claimer {
                    store: Arc::clone(&self.store),
                    claim: self.config.claim(),
                    room: Arc::clone(&room),
                    steps: steps.clone(),
                    stopped: stopped.clone(),
                    backoff: self.config.idle_backoff,
                    counters: Arc::clone(&counters),
                }))
            })
            .collect();
        // The workers end once every claimer has dropped its sender.
        drop(steps);
        drop(self.store);
        let workers = (0..self.config.workers.max(1))
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
        let control = PoolControl {
            stop: Arc::new(stop),
            counters,
            commit: commit.counters(),
        };
        PoolHandle {
            control,
            claimers,
            workers,
            commit,
            room,
            in_flight,
        }
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
    answer: crate::Result<()>,
    counters: &Counters,
) {
    let err = match answer {
        Ok(()) if succeeded => return bump(&counters.succeeded, 1),
        Ok(()) => return bump(&counters.failed, 1),
        Err(err) => err,
    };
    bump(&counters.commit_errors, 1);
    if let Error::Refused(flowstate_core::Error::ClaimLost { attempt, .. }) = err {
        bump(&counters.claims_lost, 1);
        tracing::warn!(
            step = %id, attempt,
            "a completion came after its claim ran out and recovery took the attempt back; \
             nothing written, the step may run again"
        );
    } else if matches!(&err, Error::FlushFailed(failed) if failed.gave_up) {
        bump(&counters.given_up, 1);
        tracing::warn!(
            step = %id, error = %err,
            "a completion was given up; the step stays running for its claim deadline"
        );
    } else {
        tracing::warn!(step = %id, error = %err, "a completion was not committed");
    }
}
