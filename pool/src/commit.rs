//! [`GroupCommit`]: completions from many tasks written by one
//! [`BatchStepStore::complete_batch`] per flush.
//!
//! Callers put `(step, completion, reply)` on a bounded tokio `mpsc` queue.
//! One flusher task takes whatever is queued (at least one item, at most
//! `max_batch`), writes it as one batch and answers each item through its
//! own callback ([`crate::reply`]: a caller's `oneshot`, or a pool worker's
//! bookkeeping), then takes the next: a flush starts when the queue is no
//! longer empty and the previous flush has returned. There is no timer, so an idle
//! queue adds no latency, and a busy one fills its batches by itself while
//! the previous write is on the wire.
//!
//! Nothing is acknowledged before the store answered: a caller's future
//! resolves with its own item's result once the batch holding it returned.
//!
//! No completion is dropped. A flush that fails with a retryable error (a
//! dropped connection, a server restarting) is sent again, the same items
//! as the same flush, as [`FlushRetry`] says: backing off, and answering
//! nobody until a try succeeds or the store has been failing for longer
//! than its limit. That is safe because each item is fenced by its claim's
//! attempt, and the store answers `Ok` for a repeat of a completion it
//! already wrote (a flush whose COMMIT was written but whose answer was
//! lost). A flush that gives up, or fails with an error that is not
//! retryable, fails every caller in it with [`Error::FlushFailed`], a copy
//! of its error; those steps are left as the store holds them (running in their
//! attempt, unless the lost answer hid a write), for the claim deadline to
//! recover ([`RecoveryStore::expire_step_claims`]).
//!
//! The flusher takes the next flush only once this one is answered, so
//! while a flush is retrying, new completions wait on the queue (and a
//! full queue holds up its callers), and [`GroupCommit::close`] waits for
//! the retrying flush to succeed or give up.
//!
//! [`RecoveryStore::expire_step_claims`]: flowstate_core::ports::RecoveryStore::expire_step_claims

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use flowstate_core::ports::BatchStepStore;
use flowstate_core::{Completion, StepClaim};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::error::{Error, FlushFailed, Result};
use crate::reply::{Answered, Callback, flusher_stopped};
use crate::retry::FlushRetry;

/// The most items one flush writes unless told otherwise.
pub const DEFAULT_MAX_BATCH: usize = 256;

/// The most completions a queue holds, however large `max_batch` is.
const MAX_QUEUE: usize = 1 << 20;

/// What sits on the queue.
enum Message {
    /// A completion to write, and where to answer.
    Item {
        claim: StepClaim,
        completion: Completion,
        reply: Answered,
    },
    /// Stop taking items: flush what is queued, then end.
    Close,
}

/// The answer to a queued completion ([`GroupCommit::submit`]): resolves
/// once the flush holding it returned, as [`GroupCommit::commit`] does.
/// Dropping it does not withdraw the item.
#[derive(Debug)]
#[must_use = "the item is written either way; its answer is only here"]
pub struct Pending(oneshot::Receiver<Result<()>>);

impl Future for Pending {
    type Output = Result<()>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<()>> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|answer| {
            // The reply answers even when dropped, so this is a reply
            // that could not run at all; whether the item was written is
            // unknown either way.
            answer.unwrap_or_else(|_| Err(flusher_stopped()))
        })
    }
}

/// Counters a [`GroupCommit`] keeps, shared with its flusher.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    flushes: AtomicU64,
    items: AtomicU64,
    failed_flushes: AtomicU64,
    flush_retries: AtomicU64,
    /// Messages sent and not yet received by the flusher: raised once a
    /// send has returned (the message is in the channel, receivable),
    /// lowered by what each receive took. Signed, since the flusher may
    /// take a message before its sender has counted it.
    queued: AtomicI64,
}

impl Counters {
    /// The counters as they are now.
    pub(crate) fn snapshot(&self) -> CommitReport {
        CommitReport {
            flushes: self.flushes.load(Ordering::Relaxed),
            items: self.items.load(Ordering::Relaxed),
            failed_flushes: self.failed_flushes.load(Ordering::Relaxed),
            flush_retries: self.flush_retries.load(Ordering::Relaxed),
        }
    }
}

/// What a [`GroupCommit`] has written so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitReport {
    /// Flushes started, failed ones included; a flush sent again counts
    /// once (`complete_batch` calls are `flushes + flush_retries`).
    pub flushes: u64,
    /// Items in those flushes, each counted once however often its flush
    /// was sent.
    pub items: u64,
    /// Flushes that failed in the end (gave up, or failed with an error
    /// that is not retryable): every caller in them failed.
    pub failed_flushes: u64,
    /// Flushes sent again after a retryable error ([`FlushRetry`]).
    pub flush_retries: u64,
}

/// A write-combining queue of completions for one store (see the module
/// doc). Cloning it is cheap: every clone feeds the same flusher, and
/// [`GroupCommit::close`] on any clone closes them all.
pub struct GroupCommit<S> {
    queue: mpsc::Sender<Message>,
    done: watch::Receiver<bool>,
    counters: Arc<Counters>,
    max_batch: usize,
    retry: FlushRetry,
    store: std::marker::PhantomData<fn() -> S>,
}

impl<S> Clone for GroupCommit<S> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            done: self.done.clone(),
            counters: Arc::clone(&self.counters),
            max_batch: self.max_batch,
            retry: self.retry,
            store: std::marker::PhantomData,
        }
    }
}

impl<S> fmt::Debug for GroupCommit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupCommit")
            .field("max_batch", &self.max_batch)
            .field("retry", &self.retry)
            .field("report", &self.report())
            .finish_non_exhaustive()
    }
}

impl<S: BatchStepStore + 'static> GroupCommit<S> {
    /// A queue over `store` flushing at most [`DEFAULT_MAX_BATCH`] items at
    /// a time, retrying failed flushes as the default [`FlushRetry`] says.
    /// Spawns the flusher on the current tokio runtime (panics outside
    /// one).
    pub fn new(store: Arc<S>) -> Self {
        Self::with_max_batch(store, DEFAULT_MAX_BATCH)
    }

    /// A queue over `store` flushing at most `max_batch` items at a time
    /// (`0` reads as `1`), retrying as the default [`FlushRetry`] says. The
    /// queue holds up to four batches (at most 2^20 items); a commit beyond
    /// that waits for room.
    pub fn with_max_batch(store: Arc<S>, max_batch: usize) -> Self {
        Self::with_retry(store, max_batch, FlushRetry::default())
    }

    /// [`GroupCommit::with_max_batch`], retrying a flush that failed with a
    /// retryable error as `retry` says ([`FlushRetry::NEVER`]: not at all).
    pub fn with_retry(store: Arc<S>, max_batch: usize, retry: FlushRetry) -> Self {
        let max_batch = max_batch.max(1);
        let (queue, receiver) = mpsc::channel(max_batch.saturating_mul(4).min(MAX_QUEUE));
        let (finished, done) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let flusher = Flusher {
            store,
            counters: Arc::clone(&counters),
            retry,
            failing_since: None,
        };
        tokio::spawn(flusher.run(receiver, max_batch, finished));
        Self {
            queue,
            done,
            counters,
            max_batch,
            retry,
            store: std::marker::PhantomData,
        }
    }
}

impl<S> GroupCommit<S> {
    /// Writes `completion` for the attempt `claim` holds in the next flush
    /// (fenced: a claim that was taken back is refused with
    /// [`flowstate_core::Error::ClaimLost`]), and answers once that flush
    /// returned: `Ok` only when the item is durable; [`Error::Refused`]
    /// with the item's own error when the store refused it alone (a lost
    /// claim, an illegal move, an unknown step, a payload over the limits);
    /// [`Error::FlushFailed`] when the whole flush failed: at once if the
    /// error was not retryable (nothing in it was written), once the flush
    /// gave up if it was (see [`FlushRetry`]: nothing is known written, the
    /// step is left for its claim deadline); [`Error::Closed`] once closed.
    /// A flush being retried answers nothing until it succeeds or gives up.
    ///
    /// Dropping the future after the item was queued does not withdraw it:
    /// it is written with its flush, unanswered.
    pub async fn commit(&self, claim: StepClaim, completion: Completion) -> Result<()> {
        self.submit(claim, completion).await?.await
    }

    /// Queues `completion` for `claim` and answers as soon as it is queued
    /// (waiting only for room), with the [`Pending`] answer that
    /// [`GroupCommit::commit`] would wait for: a caller can queue its next
    /// item while this one's flush is on the wire. Fails with
    /// [`Error::Closed`] once closed.
    pub async fn submit(&self, claim: StepClaim, completion: Completion) -> Result<Pending> {
        let (reply, answer) = oneshot::channel();
        let on_answer: Callback = Box::new(move |result| {
            // A caller that stopped waiting is not an error.
            let _ = reply.send(result);
        });
        self.submit_then(claim, completion, on_answer).await?;
        Ok(Pending(answer))
    }

    /// [`GroupCommit::submit`] with the answer given to `on_answer`, run in
    /// the flusher, instead of a [`Pending`]: what a pool's worker uses, so
    /// that no task per step sits waiting on its answer (and what `submit`
    /// is built on). `on_answer` runs exactly once: with the item's result,
    /// with [`Error::Closed`] if the queue is closed (also answered
    /// here), or with the stopped-flusher error if the flusher ends without
    /// answering. It should be quick: the next flush waits for it.
    pub(crate) async fn submit_then(
        &self,
        claim: StepClaim,
        completion: Completion,
        on_answer: Callback,
    ) -> Result<()> {
        let item = Message::Item {
            claim,
            completion,
            reply: Answered::new(on_answer),
        };
        self.queue
            .send(item)
            .await
            .map_err(|mpsc::error::SendError(unsent)| {
                if let Message::Item { mut reply, .. } = unsent {
                    reply.answer(Err(Error::Closed));
                }
                Error::Closed
            })?;
        self.counters.queued.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Stops taking commits, flushes everything already queued, and returns
    /// once the flusher has ended. Commits after it fail with
    /// [`Error::Closed`]; a second close just waits for the first.
    ///
    /// A flush being retried is not cut short: close waits for it to
    /// succeed or give up, and for every flush queued behind it. That is
    /// bounded by [`FlushRetry::give_up_after`] from the store's first
    /// failure, plus one try of each flush left (once the limit has passed,
    /// a failing flush is tried once).
    pub async fn close(&self) {
        // Fails only when the flusher already stopped taking items.
        if self.queue.send(Message::Close).await.is_ok() {
            self.counters.queued.fetch_add(1, Ordering::SeqCst);
        }
        let mut done = self.done.clone();
        // An error means the flusher is gone (it dropped its end): also done.
        let _ = done.wait_for(|finished| *finished).await;
    }

    /// How many messages (completions, and a close once asked for) are
    /// queued and not yet taken by the flusher. Each is counted once its
    /// send has returned, so every one counted is there for the flusher's
    /// next receive (the channel's spare capacity is not: it drops when a
    /// sender is given room, a moment before its message is readable).
    pub fn queued(&self) -> usize {
        usize::try_from(self.counters.queued.load(Ordering::SeqCst)).unwrap_or(0)
    }

    /// The most items one flush writes.
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// How a failed flush is retried.
    pub fn flush_retry(&self) -> FlushRetry {
        self.retry
    }

    /// What has been written so far.
    pub fn report(&self) -> CommitReport {
        self.counters.snapshot()
    }

    /// The counters, for a pool's handle to read.
    pub(crate) fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }
}

/// The flusher task's own state.
struct Flusher<S> {
    store: Arc<S>,
    counters: Arc<Counters>,
    retry: FlushRetry,
    /// When the store's current run of failed flushes began (`None` while
    /// flushes succeed): what [`FlushRetry::give_up_after`] counts from.
    failing_since: Option<Instant>,
}

/// How a flush ended, once it is no longer retried.
enum Sent {
    /// The store answered each item.
    Answered(Vec<flowstate_core::Result<()>>),
    /// The whole flush failed; `gave_up` when retryable and out of time.
    Failed {
        err: flowstate_core::Error,
        gave_up: bool,
    },
}

impl<S: BatchStepStore> Flusher<S> {
    /// Takes what is queued, writes it, answers, again; ends when the queue
    /// is closed (or every sender is gone) and drained.
    async fn run(
        mut self,
        mut receiver: mpsc::Receiver<Message>,
        max_batch: usize,
        finished: watch::Sender<bool>,
    ) {
        let mut messages = Vec::with_capacity(max_batch);
        let mut items = Vec::with_capacity(max_batch);
        let mut replies = Vec::with_capacity(max_batch);
        loop {
            let taken = receiver.recv_many(&mut messages, max_batch).await;
            if taken == 0 {
                break;
            }
            self.counters
                .queued
                .fetch_sub(i64::try_from(taken).unwrap_or(i64::MAX), Ordering::SeqCst);
            for message in messages.drain(..) {
                match message {
                    Message::Item {
                        claim,
                        completion,
                        reply,
                    } => {
                        items.push((claim, completion));
                        replies.push(reply);
                    }
                    // What is already queued is still received and flushed;
                    // recv_many answers 0 once it is drained.
                    Message::Close => receiver.close(),
                }
            }
            if items.is_empty() {
                continue;
            }
            let batch = std::mem::replace(&mut items, Vec::with_capacity(max_batch));
            self.flush(batch, &mut replies).await;
        }
        let _ = finished.send(true);
    }

    /// Writes `batch` as one flush, sent again while it fails with a
    /// retryable error and [`FlushRetry`] allows, then answers `replies`,
    /// one each, in order.
    async fn flush(&mut self, batch: Vec<(StepClaim, Completion)>, replies: &mut Vec<Answered>) {
        let count = batch.len();
        let counters = Arc::clone(&self.counters);
        counters.flushes.fetch_add(1, Ordering::Relaxed);
        counters.items.fetch_add(count as u64, Ordering::Relaxed);
        let span = tracing::debug_span!(
            "flowstate.pool.flush",
            items = count,
            attempts = tracing::field::Empty
        );
        let (sent, attempts) = self.send(batch, &span).await;
        span.record("attempts", attempts);
        let _entered = span.enter();
        let failed = |message: String, retryable, gave_up| FlushFailed {
            message,
            retryable,
            items: count,
            attempts,
            gave_up,
        };
        let failed = match sent {
            Sent::Answered(results) if results.len() == count => {
                for (mut reply, result) in replies.drain(..).zip(results) {
                    reply.answer(result.map_err(Error::Refused));
                }
                return;
            }
            Sent::Answered(results) => {
                let message = format!(
                    "the store answered {} results for {count} items",
                    results.len()
                );
                let failed = failed(message, false, false);
                tracing::error!(%failed, "flush answered the wrong number of results");
                failed
            }
            Sent::Failed { err, gave_up: true } => {
                let failing_for = self.failing_since.map(|since| since.elapsed());
                tracing::error!(
                    error = %err, items = count, attempts, ?failing_for,
                    "flush gave up; its steps stay running for their claim deadline"
                );
                failed(err.to_string(), true, true)
            }
            Sent::Failed {
                err,
                gave_up: false,
            } => {
                tracing::warn!(
                    error = %err, items = count,
                    "flush failed, not retryable; every caller in it fails"
                );
                failed(err.to_string(), false, false)
            }
        };
        counters.failed_flushes.fetch_add(1, Ordering::Relaxed);
        for mut reply in replies.drain(..) {
            reply.answer(Err(Error::FlushFailed(failed.clone())));
        }
    }

    /// Sends `batch` until the store answers it, it fails with an error
    /// that is not retryable, or [`FlushRetry`] gives up; answers how it
    /// ended and how many times it was sent.
    async fn send(
        &mut self,
        mut batch: Vec<(StepClaim, Completion)>,
        span: &tracing::Span,
    ) -> (Sent, u32) {
        let mut attempt = 1;
        loop {
            // The store takes the batch it writes: keep a copy to send
            // again, unless no retry can follow.
            let sent = if self.retry.retries() {
                batch.clone()
            } else {
                std::mem::take(&mut batch)
            };
            let err = match self
                .store
                .complete_batch(sent)
                .instrument(span.clone())
                .await
            {
                Ok(results) => {
                    self.failing_since = None;
                    return (Sent::Answered(results), attempt);
                }
                Err(err) if err.is_retryable() => err,
                Err(err) => {
                    return (
                        Sent::Failed {
                            err,
                            gave_up: false,
                        },
                        attempt,
                    );
                }
            };
            let since = *self.failing_since.get_or_insert_with(Instant::now);
            let Some(delay) = self.retry.delay(attempt, since.elapsed()) else {
                return (Sent::Failed { err, gave_up: true }, attempt);
            };
            self.counters.flush_retries.fetch_add(1, Ordering::Relaxed);
            span.in_scope(|| {
                tracing::warn!(
                    error = %err, items = batch.len(), attempt, ?delay,
                    "flush failed; sending the same items again after the delay"
                );
            });
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }
}
