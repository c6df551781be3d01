//! The worker loop of the demo's engine: lease runs, advance each as far as
//! it goes, then finish, wait or release it.
//!
//! Leans on `RunLeaseStore`: `claim_runs` hands each runnable run to one
//! worker with a fencing token (oldest first, asleep and waiting runs left
//! out), and `finish`, `wait` and `release` succeed only for the token of
//! the live lease (`Error::LeaseLost` otherwise), so a worker whose lease
//! ran out and was taken over writes nothing. A run with a cancel requested
//! is settled as cancelled by the claim that finds it, never handed out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flowstate_core::ports::RunLeaseStore;
use flowstate_core::{Error, Release, RunId, RunLease, RunOutcome, Wait};
use flowstate_metrics::Metered;
use flowstate_store_diesel::DieselStore;
use tokio::sync::{Mutex, mpsc, watch};

use super::crash::Crash;
use super::definitions::{IMPORT, NOTIFY, ORDER, REFUND};
use super::provider::Provider;
use super::workflows;

/// How long a run lease lasts unless renewed.
pub const LEASE: Duration = Duration::from_secs(4);

/// How many runs a worker leases at once.
const BATCH: u32 = 4;

/// What the engine does with a run once a workflow has advanced it.
#[derive(Debug)]
pub enum Next {
    /// Settle it (`RunLeaseStore::finish`).
    Finish(RunOutcome),
    /// Put it to sleep or to wait, freeing the lease (`RunWaitStore::wait`).
    Wait(Wait),
    /// Give it back unsettled (`RunLeaseStore::release`).
    Release(Release),
}

/// What every worker shares: the knobs, the crash, the channels to the
/// outside world, and a few counters of what only memory sees.
pub struct Shared {
    /// Percent of `charge` attempts that fail (first two attempts only).
    pub charge_failure_percent: u32,
    /// Percent of orders their customer cancels.
    pub cancel_percent: u32,
    /// The claim timeout of every step.
    pub claim_timeout: Duration,
    /// The crash, armed for one worker.
    pub crash: Crash,
    /// Runs ready for pickup, to the carrier.
    pub carrier: mpsc::UnboundedSender<(RunId, tokio::time::Instant)>,
    /// Orders to cancel, to their customers.
    pub customer: mpsc::UnboundedSender<(RunId, u64)>,
    /// Cancels handed to customers and not yet emitted.
    pub cancels_in_flight: AtomicU64,
    /// Writes refused because a lease or a step claim was lost.
    pub fencing_refusals: AtomicU64,
    /// Effects found begun and never settled, resolved from the provider.
    pub stranded_resolved: AtomicU64,
    /// Effects answered from the journal (already settled).
    pub effects_replayed: AtomicU64,
    /// Store or provider errors a worker met (each gave its run back).
    pub errors: AtomicU64,
    /// The first few of those errors, for the summary.
    pub error_samples: std::sync::Mutex<Vec<String>>,
}

impl Shared {
    /// Counts an error and keeps the first few.
    pub fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(error = %what, "worker error");
        let mut samples = self
            .error_samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if samples.len() < 5 {
            samples.push(what);
        }
    }
}

/// One worker: its name (the lease holder), its own store connection and
/// its own connection to the provider.
pub struct Engine {
    /// The worker's name.
    pub name: String,
    /// Its store (a pool of its own), counted by `flowstate-metrics`.
    pub store: Metered<DieselStore>,
    /// Its connection to the outside world.
    pub provider: Mutex<Provider>,
    /// What all workers share.
    pub shared: Arc<Shared>,
}

impl Engine {
    /// Leases and advances runs until `stop` says so.
    pub async fn work(self, mut stop: watch::Receiver<bool>) {
        let mut idle = Duration::from_millis(5);
        while !*stop.borrow() {
            let claimed_at = Instant::now();
            match self.store.claim_runs(&self.name, BATCH, LEASE).await {
                Ok(leases) if leases.is_empty() => {
                    tokio::select! {
                        _ = stop.changed() => {}
                        () = tokio::time::sleep(idle) => {}
                    }
                    idle = (idle * 2).min(Duration::from_millis(200));
                }
                Ok(leases) => {
                    idle = Duration::from_millis(5);
                    self.shared
                        .crash
                        .holding(&self.name, leases.iter().map(|l| l.run.id).collect());
                    for lease in leases {
                        self.drive(&lease, claimed_at).await;
                    }
                }
                Err(err) => {
                    self.shared
                        .error(format!("{}: claim_runs: {err}", self.name));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Advances one leased run and settles, parks or releases it.
    async fn drive(&self, lease: &RunLease, claimed_at: Instant) {
        let (run, token) = (lease.run.id, lease.token);
        // Runs later in the batch waited for the earlier ones: a lease a
        // third gone is renewed before any work is done under it.
        if claimed_at.elapsed() > LEASE / 3 {
            if let Err(err) = self.store.renew(run, token, LEASE).await {
                self.refused_or_error(run, &err, "renew");
                return;
            }
        }
        let next = match lease.run.workflow.as_str() {
            ORDER => workflows::order(self, lease).await,
            NOTIFY => workflows::notify(self, lease).await,
            REFUND => workflows::refund(self, lease).await,
            IMPORT => workflows::import(self, lease).await,
            other => Ok(Next::Finish(RunOutcome::Failed {
                reason: format!("no engine code for workflow {other:?}"),
            })),
        };
        let written = match next {
            Ok(Next::Finish(outcome)) => self.store.finish(run, token, outcome).await,
            Ok(Next::Wait(wait)) => {
                flowstate_core::ports::RunWaitStore::wait(&self.store, run, token, wait).await
            }
            Ok(Next::Release(release)) => self.store.release(run, token, release).await.map(drop),
            Err(err) => {
                let release = match err.downcast_ref::<Error>() {
                    Some(store_err) if is_fenced(store_err) => {
                        self.refused_or_error(run, store_err, "advance");
                        return;
                    }
                    // A busy database or a dropped connection: give the
                    // run back without counting it as the run's failure.
                    Some(store_err) if store_err.is_retryable() => Release::Yield,
                    _ => Release::failure(format!("{err:#}")),
                };
                self.shared
                    .error(format!("{}: run {run}: {err:#}", self.name));
                self.store.release(run, token, release).await.map(drop)
            }
        };
        if let Err(err) = written {
            self.refused_or_error(run, &err, "settle");
        }
    }

    fn refused_or_error(&self, run: RunId, err: &Error, what: &str) {
        if is_fenced(err) {
            self.shared.fencing_refusals.fetch_add(1, Ordering::Relaxed);
            tracing::info!(worker = %self.name, %run, %err, "fenced: {what} refused");
        } else {
            self.shared
                .error(format!("{}: {what} of run {run}: {err}", self.name));
        }
    }
}

/// A write refused because its lease or its step claim is no longer held.
fn is_fenced(err: &Error) -> bool {
    matches!(err, Error::LeaseLost { .. } | Error::ClaimLost { .. })
}
