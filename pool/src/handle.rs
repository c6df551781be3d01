//! The handles of a running pool: [`PoolHandle`] (what
//! [`WorkerPool::spawn`](crate::WorkerPool::spawn)(crate::WorkerPool::spawn) answers: report, stop,
//! shutdown), the cloneable [`PoolControl`], and the [`PoolReport`] they
//! answer, in which every claimed step is accounted for.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flowstate_core::ports::BatchStepStore;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::commit::{self, GroupCommit};

/// The pool's counters, shared by its tasks.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) claims: AtomicU64,
    pub(crate) empty_claims: AtomicU64,
    pub(crate) claim_errors: AtomicU64,
    pub(crate) claimed: AtomicU64,
    pub(crate) succeeded: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) commit_errors: AtomicU64,
    pub(crate) given_up: AtomicU64,
    pub(crate) claims_lost: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) abandoned: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// What a pool did: so far ([`PoolHandle::report`], [`PoolControl::report`])
/// or in all ([`PoolHandle::shutdown`]). After the shutdown every claimed step is
/// accounted for, each in exactly one of four counters: `claimed ==
/// succeeded + failed + commit_errors + abandoned`
/// ([`PoolReport::accounted`]). `panicked` is a part of `failed`, and
/// `given_up` and `claims_lost` are parts of `commit_errors`, not added
/// again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolReport {
    /// `claim_batch` calls that answered `Ok`.
    pub claims: u64,
    /// Of those, the ones that took no step.
    pub empty_claims: u64,
    /// `claim_batch` calls that answered `Err`.
    pub claim_errors: u64,
    /// Steps claimed.
    pub claimed: u64,
    /// Steps whose handler answered [`Completion::Succeeded`](flowstate_core::Completion::Succeeded), committed.
    pub succeeded: u64,
    /// Steps whose handler answered [`Completion::Failed`](flowstate_core::Completion::Failed) (or panicked),
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
    /// [`FlushRetry::give_up_after`](crate::FlushRetry::give_up_after). Left running in the store (unless a
    /// lost answer hid the write), for the claim deadline to recover:
    /// recovery fails the attempt and the step's retry policy runs it again.
    pub given_up: u64,
    /// Of `commit_errors`, the completions the store refused as
    /// [`Error::ClaimLost`](flowstate_core::Error::ClaimLost): the claim ran out before its completion was
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

impl PoolReport {
    /// Steps claimed that reached an end here: committed, not committed
    /// (refused, given up, claim lost: `commit_errors`), or abandoned.
    /// Equal to `claimed` once the pool has shut down; lower while steps
    /// are in flight (a flush being retried holds its steps in flight).
    pub fn accounted(&self) -> u64 {
        self.succeeded + self.failed + self.commit_errors + self.abandoned
    }
}

/// A cheap, cloneable control of a running pool, from any task: ask it
/// to stop, read what it did so far. [`PoolHandle::control`] gives one.
#[derive(Clone, Debug)]
pub struct PoolControl {
    pub(crate) stop: Arc<watch::Sender<bool>>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) commit: Arc<commit::Counters>,
}

impl PoolControl {
    /// Asks the pool to stop claiming; it finishes what it claimed. Does
    /// not wait: [`PoolHandle::shutdown`] does.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// What the pool did so far.
    pub fn report(&self) -> PoolReport {
        let c = &self.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let commit = self.commit.snapshot();
        PoolReport {
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
/// [`WorkerPool`](crate::WorkerPool) doc), as [`WorkerPool::spawn`](crate::WorkerPool::spawn) answers it. Dropping it and
/// every [`PoolControl`] without [`PoolHandle::shutdown`] stops it too,
/// draining in the background with nobody to wait for it.
#[derive(Debug)]
pub struct PoolHandle<S> {
    pub(crate) control: PoolControl,
    pub(crate) claimers: Vec<JoinHandle<()>>,
    pub(crate) workers: Vec<JoinHandle<()>>,
    pub(crate) commit: GroupCommit<S>,
    pub(crate) room: Arc<Semaphore>,
    pub(crate) in_flight: usize,
}

impl<S: BatchStepStore + 'static> PoolHandle<S> {
    /// A cloneable control that can stop the pool and read what it did,
    /// from any task.
    pub fn control(&self) -> PoolControl {
        self.control.clone()
    }

    /// What the pool did so far.
    pub fn report(&self) -> PoolReport {
        self.control.report()
    }

    /// Asks the pool to stop claiming, without waiting: it finishes what
    /// it claimed. [`PoolHandle::shutdown`] waits.
    pub fn stop(&self) {
        self.control.stop();
    }

    /// Stops claiming, waits for every claimed step to be run and its
    /// completion's answer to be in (however long a handler takes: a step
    /// claimed is a step run), closes the commit queue, and answers the
    /// report, in which every claimed step is accounted for.
    ///
    /// A flush being retried is waited for: until it succeeds or gives up,
    /// which [`PoolConfig::flush_retry`](crate::PoolConfig::flush_retry)'s `give_up_after` bounds from the
    /// store's first failure (then each flush left is tried once; see
    /// [`GroupCommit::close`]).
    pub async fn shutdown(self) -> PoolReport {
        self.control.stop();
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
        self.control.report()
    }
}
