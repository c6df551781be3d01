//! [`Runner`]: a tokio task that calls [`tick`] at an interval until its
//! [`RunnerHandle`] stops it, for hosts that want a loop rather than their
//! own scheduler.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::{Clock, Schedule, VirtualUserRunId};
use rand::Rng;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::tick::{TickOptions, tick};

/// How often a spawned [`Runner`] ticks unless told otherwise.
pub const DEFAULT_TICK_INTERVAL: Duration = Duration::from_secs(10);

/// A tick loop, not yet started: its store, the host's dispatch callback,
/// the clock each tick reads and the randomness it draws from. Configure
/// it with the `with_*` methods, then [`Runner::spawn`] it.
pub struct Runner<S, D, R> {
    store: Arc<S>,
    dispatch: D,
    clock: Arc<dyn Clock>,
    rng: R,
    interval: Duration,
    options: TickOptions,
}

impl<S, D, R> fmt::Debug for Runner<S, D, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runner")
            .field("interval", &self.interval)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What a spawned [`Runner`] did: so far ([`RunnerHandle::report`]) or
/// before it stopped ([`RunnerHandle::shutdown`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunnerReport {
    /// Ticks run to the end, failed ones included.
    pub ticks: u64,
    /// Ticks that ended with a store error (logged, then the loop went on).
    pub failed_ticks: u64,
    /// Personas dispatched over all ticks.
    pub dispatched: u64,
    /// Runs reaped over all ticks.
    pub reaped: u64,
}

impl<S, D, Fut, E, R> Runner<S, D, R>
where
    S: ScheduleStore + VirtualUserRunStore + 'static,
    D: FnMut(Schedule) -> Fut + Send + 'static,
    Fut: Future<Output = Result<VirtualUserRunId, E>> + Send,
    E: fmt::Display + Send,
    R: Rng + Send + 'static,
{
    /// A loop over `store` dispatching due personas through `dispatch`,
    /// reading `clock` and drawing from `rng`, with the default interval
    /// ([`DEFAULT_TICK_INTERVAL`]) and [`TickOptions`].
    pub fn new(store: Arc<S>, dispatch: D, clock: Arc<dyn Clock>, rng: R) -> Self {
        Self {
            store,
            dispatch,
            clock,
            rng,
            interval: DEFAULT_TICK_INTERVAL,
            options: TickOptions::default(),
        }
    }

    /// The same loop, ticking every `interval`.
    #[must_use]
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The same loop, ticking with `options`.
    #[must_use]
    pub fn with_options(mut self, options: TickOptions) -> Self {
        self.options = options;
        self
    }

    /// Spawns the loop on the current tokio runtime (panics outside one):
    /// a [`tick`] at once, then one every interval (a tick that overruns
    /// delays the next rather than bunching them up).
    ///
    /// A tick that fails is logged and the loop goes on; every tick runs in
    /// a `virtual_users.tick` span.
    pub fn spawn(self) -> RunnerHandle {
        let Self {
            store,
            mut dispatch,
            clock,
            mut rng,
            interval: every,
            options,
        } = self;
        let (stop, mut stopped) = watch::channel(false);
        let (report, seen) = watch::channel(RunnerReport::default());
        let task = tokio::spawn(async move {
            let mut interval = tokio::time::interval(every);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            tracing::info!(?every, "virtual-user runner started");
            loop {
                tokio::select! {
                    biased;
                    // A send of `true`, or the handle dropped.
                    _ = stopped.wait_for(|stop| *stop) => break,
                    _ = interval.tick() => {}
                }
                // Not raced against the stop: a tick under way finishes.
                let outcome = tick(&*store, &mut dispatch, clock.now(), &mut rng, options).await;
                if let Err(err) = &outcome {
                    tracing::warn!(error = %err, "virtual-user tick failed");
                }
                report.send_modify(|so_far| {
                    so_far.ticks += 1;
                    match &outcome {
                        Ok(outcome) => {
                            so_far.dispatched += outcome.dispatched.len() as u64;
                            so_far.reaped += outcome.reaped.len() as u64;
                        }
                        Err(_) => so_far.failed_ticks += 1,
                    }
                });
            }
            let report = *report.borrow();
            tracing::info!(ticks = report.ticks, "virtual-user runner stopped");
            report
        });
        RunnerHandle { stop, task, seen }
    }
}

/// A running [`Runner`] loop: what it did so far, and a graceful shutdown.
/// Dropping it stops the loop too, without waiting;
/// [`RunnerHandle::shutdown`] waits.
#[derive(Debug)]
pub struct RunnerHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<RunnerReport>,
    seen: watch::Receiver<RunnerReport>,
}

impl RunnerHandle {
    /// What the runner has done so far.
    pub fn report(&self) -> RunnerReport {
        *self.seen.borrow()
    }

    /// Asks the runner to stop after the tick under way, without waiting
    /// for it.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Stops the loop: a tick under way finishes, no new one starts.
    /// Answers what the runner did.
    pub async fn shutdown(self) -> RunnerReport {
        self.stop();
        match self.task.await {
            Ok(report) => report,
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            // Cancelled with its runtime: what it had done is what was seen.
            Err(_) => *self.seen.borrow(),
        }
    }
}
