//! The loop a spawned [`Sweeper`](crate::Sweeper) and a spawned
//! [`Pruner`](crate::Pruner) run, written once: a pass at once, then one
//! every interval (a pass that overruns delays the next rather than
//! bunching them up), a failed pass logged and the loop going on, every
//! pass added to a report the [`LoopHandle`] reads, and a stop that lets
//! the pass under way finish.

use std::future::Future;
use std::time::Duration;

use flowstate_core::Result;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// Work a spawned loop does at an interval: one pass, and the report its
/// passes add up to.
pub(crate) trait Periodic: Send + 'static {
    /// What one pass did.
    type Pass: Send;
    /// What the passes add up to, readable while the loop runs.
    type Report: LoopReport<Self::Pass> + Copy + Default + Send + Sync + 'static;
    /// The loop's name in its log lines.
    const NAME: &'static str;

    /// One pass.
    fn pass(&mut self) -> impl Future<Output = Result<Self::Pass>> + Send;
}

/// What a loop's passes add up to: every pass counted, the failed ones
/// apart, and what each pass that ended well did.
pub(crate) trait LoopReport<Pass> {
    /// The passes run to the end and, of those, the failed ones: the
    /// counters [`LoopReport::add`] moves.
    fn passes_mut(&mut self) -> (&mut u64, &mut u64);

    /// Adds what `pass`, one that ended well, did.
    fn add_pass(&mut self, pass: &Pass);

    /// Adds one pass, whether it ended well or with an error.
    fn add(&mut self, outcome: &Result<Pass>) {
        let (passes, failed_passes) = self.passes_mut();
        *passes += 1;
        match outcome {
            Ok(pass) => self.add_pass(pass),
            Err(_) => *failed_passes += 1,
        }
    }
}

/// Spawns `work`'s loop on the current tokio runtime (panics outside one),
/// passing every `interval`.
pub(crate) fn spawn<P: Periodic>(mut work: P, interval: Duration) -> LoopHandle<P::Report> {
    let (stop, mut stopped) = watch::channel(false);
    let (report, seen) = watch::channel(P::Report::default());
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tracing::info!(every = ?interval, "{} started", P::NAME);
        let mut passes = 0_u64;
        loop {
            tokio::select! {
                biased;
                // A send of `true`, or the handle dropped.
                _ = stopped.wait_for(|stop| *stop) => break,
                _ = ticks.tick() => {}
            }
            // Not raced against the stop: a pass under way finishes.
            let outcome = work.pass().await;
            if let Err(err) = &outcome {
                tracing::warn!(error = %err, "{} pass failed", P::NAME);
            }
            passes += 1;
            report.send_modify(|so_far| so_far.add(&outcome));
        }
        tracing::info!(passes, "{} stopped", P::NAME);
        *report.borrow()
    });
    LoopHandle { stop, task, seen }
}

/// A running loop ([`SweeperHandle`](crate::SweeperHandle),
/// [`PrunerHandle`](crate::PrunerHandle)): what it did so far, and a
/// graceful shutdown. Dropping it stops the loop too, without waiting;
/// [`LoopHandle::shutdown`] waits.
#[derive(Debug)]
pub struct LoopHandle<R> {
    stop: watch::Sender<bool>,
    task: JoinHandle<R>,
    seen: watch::Receiver<R>,
}

impl<R: Copy> LoopHandle<R> {
    /// What the loop has done so far, summed over its passes.
    pub fn report(&self) -> R {
        *self.seen.borrow()
    }

    /// Asks the loop to stop after the pass under way, without waiting for
    /// it.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Stops the loop: a pass under way finishes, no new one starts.
    /// Answers what the loop did.
    pub async fn shutdown(self) -> R {
        self.stop();
        match self.task.await {
            Ok(report) => report,
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            // Cancelled with its runtime: what it had done is what was seen.
            Err(_) => *self.seen.borrow(),
        }
    }
}
