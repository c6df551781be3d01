//! [`Sweeper`]: a tokio task doing a [`Sweeper::pass`] at an interval
//! until it is told to stop, with one [`RedispatchBackoff`] for all of its
//! sweeps.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{RecoveryStore, RunRecoveryStore, RunWaitStore};
use flowstate_core::{Clock, RedispatchBackoff, Result, RunId};
use tracing::Instrument;

use crate::dispatch::{Reason, RedriveReport, SweepOptions};
use crate::periodic::{self, LoopHandle, LoopReport, Periodic};
use crate::relay::{ExpiryReport, expire_claims, relay_undispatched, sweep_stalled};

/// What one [`Sweeper::pass`] did, in the order it did it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Waits whose time had come, ended
    /// ([`RunWaitStore::wake_expired`]): those runs are runnable now.
    pub woken: u64,
    /// Runs whose lease had run out, freed
    /// ([`RunRecoveryStore::reap_expired_leases`]) for the next claim.
    pub reaped: Vec<RunId>,
    /// Step claims that had run out, taken back, and the re-drive of their
    /// runs ([`expire_claims`]).
    pub expiry: ExpiryReport,
    /// The relay ([`relay_undispatched`]).
    pub relay: RedriveReport,
    /// The stalled sweep ([`sweep_stalled`]), after the relay and sharing
    /// its backoff.
    pub stalled: RedriveReport,
}

/// What a spawned [`Sweeper`] did, summed over its passes: so far
/// ([`LoopHandle::report`]) or before it stopped
/// ([`LoopHandle::shutdown`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweeperReport {
    /// Passes run to the end, failed ones included.
    pub passes: u64,
    /// Passes that ended with a store error (logged; the loop went on).
    pub failed_passes: u64,
    /// Waits ended.
    pub woken: u64,
    /// Leases reaped.
    pub reaped: u64,
    /// Step claims taken back ([`expire_claims`]).
    pub expired_claims: u64,
    /// Runs re-driven after a claim of theirs ran out (dispatch answered
    /// `Ok`).
    pub requeued: u64,
    /// Runs re-dispatched by the relay (dispatch answered `Ok`).
    pub relayed: u64,
    /// Stalled runs resumed (dispatch answered `Ok`).
    pub resumed: u64,
    /// Dispatches that failed, either sweep.
    pub failed_dispatches: u64,
    /// Runs found but held off by the backoff, either sweep.
    pub held_off: u64,
}

impl LoopReport<PassReport> for SweeperReport {
    fn passes_mut(&mut self) -> (&mut u64, &mut u64) {
        (&mut self.passes, &mut self.failed_passes)
    }

    fn add_pass(&mut self, pass: &PassReport) {
        self.woken += pass.woken;
        self.reaped += pass.reaped.len() as u64;
        self.expired_claims += pass.expiry.expired.len() as u64;
        self.requeued += pass.expiry.redrive.redispatched.len() as u64;
        self.relayed += pass.relay.redispatched.len() as u64;
        self.resumed += pass.stalled.redispatched.len() as u64;
        let reports = [&pass.expiry.redrive, &pass.relay, &pass.stalled];
        self.failed_dispatches += reports.iter().map(|r| r.failed.len() as u64).sum::<u64>();
        self.held_off += reports.iter().map(|r| r.held_off.len() as u64).sum::<u64>();
    }
}

/// The recovery loop of one process: its store, the engine's dispatch
/// callback, the clock the backoff reads and one [`RedispatchBackoff`]
/// shared by the relay and the stalled sweep.
///
/// Run a pass yourself with [`Sweeper::pass`], or hand the sweeper to
/// [`Sweeper::spawn`] for a loop. Several processes may sweep one store:
/// each backs off on its own, and the claims keep duplicates harmless.
pub struct Sweeper<S, D> {
    store: Arc<S>,
    dispatch: D,
    clock: Arc<dyn Clock>,
    backoff: RedispatchBackoff,
    options: SweepOptions,
    interval: Duration,
}

/// How often a spawned [`Sweeper`] passes unless told otherwise.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(5);

impl<S, D> fmt::Debug for Sweeper<S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sweeper")
            .field("options", &self.options)
            .field("interval", &self.interval)
            .field("backed_off_runs", &self.backoff.len())
            .finish_non_exhaustive()
    }
}

impl<S, D, Fut, E> Sweeper<S, D>
where
    S: RecoveryStore + RunRecoveryStore + RunWaitStore + 'static,
    D: FnMut(RunId, Reason) -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send,
    E: fmt::Display + Send,
{
    /// A sweeper over `store` re-driving runs through `dispatch`, with the
    /// default [`SweepOptions`] and backoff, reading `clock` for the
    /// backoff.
    pub fn new(store: Arc<S>, dispatch: D, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            dispatch,
            clock,
            backoff: RedispatchBackoff::default(),
            options: SweepOptions::default(),
            interval: DEFAULT_SWEEP_INTERVAL,
        }
    }

    /// The same sweeper, passing every `interval` once spawned (default
    /// [`DEFAULT_SWEEP_INTERVAL`]).
    #[must_use]
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The same sweeper with `options`.
    #[must_use]
    pub fn with_options(mut self, options: SweepOptions) -> Self {
        self.options = options;
        self
    }

    /// The same sweeper with `backoff` (for example a shorter base delay).
    #[must_use]
    pub fn with_backoff(mut self, backoff: RedispatchBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The backoff as the passes so far left it.
    pub fn backoff(&self) -> &RedispatchBackoff {
        &self.backoff
    }

    /// One pass: wake-ups first (a run whose time passed is runnable in
    /// this same pass), then lease reaping, claim expiry (its runs
    /// re-driven before the relay, so the shared backoff holds them off
    /// there), the relay and the stalled sweep. A store error ends the pass
    /// there with that error; the backoff keeps what the pass noted.
    pub async fn pass(&mut self) -> Result<PassReport> {
        let span = tracing::info_span!("recovery.pass");
        async {
            let woken = self.store.wake_expired().await?;
            let reaped = self.store.reap_expired_leases(self.options.limit).await?;
            let expiry = expire_claims(
                &*self.store,
                &mut self.backoff,
                &mut self.dispatch,
                self.clock.now(),
                self.options,
            )
            .await?;
            let relay = relay_undispatched(
                &*self.store,
                &mut self.backoff,
                &mut self.dispatch,
                self.clock.now(),
                self.options,
            )
            .await?;
            let stalled = sweep_stalled(
                &*self.store,
                &mut self.backoff,
                &mut self.dispatch,
                self.clock.now(),
                self.options,
            )
            .await?;
            let report = PassReport {
                woken,
                reaped,
                expiry,
                relay,
                stalled,
            };
            tracing::info!(
                woken = report.woken,
                reaped = report.reaped.len(),
                expired_claims = report.expiry.expired.len(),
                requeued = report.expiry.redrive.redispatched.len(),
                relayed = report.relay.redispatched.len(),
                resumed = report.stalled.redispatched.len(),
                failed = report.expiry.redrive.failed.len()
                    + report.relay.failed.len()
                    + report.stalled.failed.len(),
                held_off = report.expiry.redrive.held_off.len()
                    + report.relay.held_off.len()
                    + report.stalled.held_off.len(),
                "recovery pass done"
            );
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// Spawns the loop on the current tokio runtime (panics outside one):
    /// a pass at once, then one every interval ([`Sweeper::with_interval`];
    /// a pass that overruns delays the next rather than bunching them up).
    /// A pass that fails is logged and the loop goes on.
    pub fn spawn(self) -> SweeperHandle {
        let interval = self.interval;
        periodic::spawn(self, interval)
    }
}

impl<S, D, Fut, E> Periodic for Sweeper<S, D>
where
    S: RecoveryStore + RunRecoveryStore + RunWaitStore + 'static,
    D: FnMut(RunId, Reason) -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send,
    E: fmt::Display + Send,
{
    type Pass = PassReport;
    type Report = SweeperReport;
    const NAME: &'static str = "recovery sweeper";

    fn pass(&mut self) -> impl Future<Output = Result<PassReport>> + Send {
        Sweeper::pass(self)
    }
}

/// A running [`Sweeper`] loop: what it did so far ([`SweeperReport`]),
/// and a graceful shutdown. Dropping it stops the loop too, without
/// waiting; [`LoopHandle::shutdown`] waits.
pub type SweeperHandle = LoopHandle<SweeperReport>;
