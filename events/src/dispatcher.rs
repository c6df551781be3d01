//! [`Dispatcher`]: a tokio task that calls [`dispatch_pending`] (or, made
//! [`Dispatcher::queued`], [`dispatch_queued`]) on an interval until its
//! [`DispatcherHandle`] shuts it down, counting what it did.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::Result;
use flowstate_core::backoff::EventDispatchBackoff;
use flowstate_core::ports::{EventQueueStore, EventStore};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::{DispatchReport, dispatch_pending, dispatch_queued};

/// One batch of a dispatcher over `S`: [`dispatch_pending`] or
/// [`dispatch_queued`].
type Pass<S> = for<'s> fn(
    &'s S,
    EventDispatchBackoff,
    u32,
) -> Pin<Box<dyn Future<Output = Result<DispatchReport>> + Send + 's>>;

fn listed<S: EventStore>(
    store: &S,
    backoff: EventDispatchBackoff,
    batch: u32,
) -> Pin<Box<dyn Future<Output = Result<DispatchReport>> + Send + '_>> {
    Box::pin(dispatch_pending(store, backoff, batch))
}

fn queued<S: EventQueueStore>(
    store: &S,
    backoff: EventDispatchBackoff,
    batch: u32,
) -> Pin<Box<dyn Future<Output = Result<DispatchReport>> + Send + '_>> {
    Box::pin(dispatch_queued(store, backoff, batch))
}

/// What a spawned [`Dispatcher`] did: so far ([`DispatcherHandle::report`])
/// or before it stopped ([`DispatcherHandle::shutdown`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DispatcherReport {
    /// Batches run to the end, failed ones included.
    pub ticks: u64,
    /// Batches that ended with a store error (listing or recording failed;
    /// logged, then the loop went on).
    pub failed_ticks: u64,
    /// Events dispatched.
    pub dispatched: u64,
    /// Dispatch attempts that failed.
    pub failed: u64,
    /// Events dead-lettered.
    pub dead_lettered: u64,
}

impl DispatcherReport {
    fn add(&mut self, report: DispatchReport) {
        self.dispatched += u64::from(report.dispatched);
        self.failed += u64::from(report.failed);
        self.dead_lettered += u64::from(report.dead_lettered);
    }
}

/// Dispatches deferred events in the background, one [`dispatch_pending`]
/// batch per tick (a [`dispatch_queued`] batch once made
/// [`Dispatcher::queued`]); a full batch is followed by the next at once
/// rather than after the interval.
#[derive(Debug)]
pub struct Dispatcher<S> {
    store: Arc<S>,
    backoff: EventDispatchBackoff,
    batch: u32,
    interval: Duration,
    pass: Pass<S>,
}

impl<S: EventStore + 'static> Dispatcher<S> {
    /// A dispatcher over `store`: the default backoff, batches of 100, a
    /// tick a second.
    pub fn new(store: Arc<S>) -> Self {
        Self {
            store,
            backoff: EventDispatchBackoff::default(),
            batch: 100,
            interval: Duration::from_secs(1),
            pass: listed::<S>,
        }
    }

    /// The same dispatcher, ticking every `interval` (default 1 s).
    #[must_use]
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The same dispatcher, taking up to `batch` events a tick (default
    /// 100).
    #[must_use]
    pub fn with_batch(mut self, batch: u32) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// The same dispatcher, backing off failures with `backoff`.
    #[must_use]
    pub fn with_backoff(mut self, backoff: EventDispatchBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Starts the dispatcher on the current tokio runtime (panics outside
    /// one): a batch at once, then one every interval, or at once after a
    /// full batch. A batch that fails is logged and the loop goes on.
    pub fn spawn(self) -> DispatcherHandle {
        let (stop, mut stopped) = watch::channel(false);
        let (report, seen) = watch::channel(DispatcherReport::default());
        let task = tokio::spawn(
            async move {
                loop {
                    let full = self.tick(&report).await;
                    if *stopped.borrow() {
                        break;
                    }
                    if full {
                        continue;
                    }
                    tokio::select! {
                        _ = stopped.changed() => break,
                        () = tokio::time::sleep(self.interval) => {}
                    }
                }
                let report = *report.borrow();
                tracing::debug!(ticks = report.ticks, "event dispatcher stopped");
                report
            }
            .instrument(tracing::info_span!("event_dispatcher")),
        );
        DispatcherHandle { stop, task, seen }
    }

    /// One batch, added to `report`; answers whether it was full of work
    /// done (more may be waiting).
    async fn tick(&self, report: &watch::Sender<DispatcherReport>) -> bool {
        let outcome = (self.pass)(&*self.store, self.backoff, self.batch).await;
        let mut full = false;
        report.send_modify(|so_far| {
            so_far.ticks += 1;
            match &outcome {
                Ok(batch) => {
                    so_far.add(*batch);
                    // Skipped events are held by another dispatcher:
                    // waiting for the interval, not spinning on them, is
                    // right.
                    full = batch.dispatched + batch.failed >= self.batch;
                }
                Err(_) => so_far.failed_ticks += 1,
            }
        });
        if let Err(err) = outcome {
            tracing::warn!(%err, "event dispatch tick failed");
        }
        full
    }
}

impl<S: EventQueueStore + 'static> Dispatcher<S> {
    /// The same dispatcher, taking its events in batches with
    /// [`EventQueueStore::dispatch_next_batch`] ([`dispatch_queued`])
    /// instead of listing first: the mode for several dispatchers over one
    /// store, which then take disjoint events rather than all trying the
    /// oldest, many per transaction.
    #[must_use]
    pub fn queued(mut self) -> Self {
        self.pass = queued::<S>;
        self
    }
}

/// The handle of a spawned [`Dispatcher`]: what it did so far, and a
/// graceful shutdown that lets the batch under way finish. Dropping it
/// stops the loop too, without waiting; [`DispatcherHandle::shutdown`]
/// waits.
#[derive(Debug)]
pub struct DispatcherHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<DispatcherReport>,
    seen: watch::Receiver<DispatcherReport>,
}

impl DispatcherHandle {
    /// What the dispatcher has done so far.
    pub fn report(&self) -> DispatcherReport {
        *self.seen.borrow()
    }

    /// Asks the dispatcher to stop after its current batch, without
    /// waiting for it.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Asks the dispatcher to stop after its current batch and waits until
    /// it has; answers what it did.
    pub async fn shutdown(self) -> DispatcherReport {
        self.stop();
        match self.task.await {
            Ok(report) => report,
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            // Cancelled with its runtime: what it had done is what was seen.
            Err(_) => *self.seen.borrow(),
        }
    }
}
