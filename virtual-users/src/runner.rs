//! [`Runner`]: a tokio task that calls [`tick`] at an interval until it is
//! told to stop, for hosts that want a loop rather than their own scheduler.

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

/// A running tick loop. Dropping it stops the loop too, but without waiting
/// for it; [`Runner::shutdown`] waits.
#[derive(Debug)]
pub struct Runner {
    stop: watch::Sender<bool>,
    task: JoinHandle<RunnerReport>,
}

/// What a runner did before it stopped.
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

impl Runner {
    /// Spawns the loop on the current tokio runtime: a [`tick`] at once,
    /// then one every `every` (a tick that overruns delays the next rather
    /// than bunching them up), reading `clock` and drawing from `rng`.
    ///
    /// A tick that fails is logged and the loop goes on; every tick runs in
    /// a `virtual_users.tick` span.
    pub fn spawn<S, D, Fut, E, R>(
        store: Arc<S>,
        mut dispatch: D,
        clock: Arc<dyn Clock>,
        mut rng: R,
        every: Duration,
        options: TickOptions,
    ) -> Self
    where
        S: ScheduleStore + VirtualUserRunStore + 'static,
        D: FnMut(Schedule) -> Fut + Send + 'static,
        Fut: Future<Output = Result<VirtualUserRunId, E>> + Send,
        E: fmt::Display + Send,
        R: Rng + Send + 'static,
    {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut report = RunnerReport::default();
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
                report.ticks += 1;
                match outcome {
                    Ok(outcome) => {
                        report.dispatched += outcome.dispatched.len() as u64;
                        report.reaped += outcome.reaped.len() as u64;
                    }
                    Err(err) => {
                        report.failed_ticks += 1;
                        tracing::warn!(error = %err, "virtual-user tick failed");
                    }
                }
            }
            tracing::info!(ticks = report.ticks, "virtual-user runner stopped");
            report
        });
        Self { stop, task }
    }

    /// Stops the loop: a tick under way finishes, no new one starts. Answers
    /// what the runner did.
    pub async fn shutdown(self) -> RunnerReport {
        // The loop may have ended already (a panic): nothing to tell then.
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(report) => report,
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(_) => RunnerReport::default(),
        }
    }
}
