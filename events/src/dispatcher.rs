//! [`Dispatcher`]: a tokio task that calls [`dispatch_pending`] (or, made
//! [`Dispatcher::queued`], [`dispatch_queued`]) on an interval until its
//! [`DispatcherHandle`] shuts it down, counting what it did.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// What a running dispatcher has done so far.
#[derive(Debug, Default)]
pub struct Counters {
    /// Batches run (ticks).
    pub ticks: AtomicU64,
    /// Events dispatched.
    pub dispatched: AtomicU64,
    /// Dispatch attempts that failed.
    pub failed: AtomicU64,
    /// Events dead-lettered.
    pub dead_lettered: AtomicU64,
    /// Ticks that returned an error (listing or recording failed).
    pub errors: AtomicU64,
}

impl Counters {
    fn add(&self, report: DispatchReport) {
        self.dispatched
            .fetch_add(u64::from(report.dispatched), Ordering::Relaxed);
        self.failed
            .fetch_add(u64::from(report.failed), Ordering::Relaxed);
        self.dead_lettered
            .fetch_add(u64::from(report.dead_lettered), Ordering::Relaxed);
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

    /// The same dispatcher, ticking every `interval`.
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The same dispatcher, taking up to `batch` events a tick.
    #[must_use]
    pub fn batch(mut self, batch: u32) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// The same dispatcher, backing off failures with `backoff`.
    #[must_use]
    pub fn backoff(mut self, backoff: EventDispatchBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Starts the dispatcher on the current tokio runtime.
    pub fn spawn(self) -> DispatcherHandle {
        let (stop, mut stopped) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let seen = Arc::clone(&counters);
        let task = tokio::spawn(
            async move {
                loop {
                    let full = self.tick(&seen).await;
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
                tracing::debug!("event dispatcher stopped");
            }
            .instrument(tracing::info_span!("event_dispatcher")),
        );
        DispatcherHandle {
            stop,
            task,
            counters,
        }
    }

    /// One batch; answers whether it was full of work done (more may be
    /// waiting).
    async fn tick(&self, counters: &Counters) -> bool {
        counters.ticks.fetch_add(1, Ordering::Relaxed);
        match (self.pass)(&*self.store, self.backoff, self.batch).await {
            Ok(report) => {
                counters.add(report);
                // Skipped events are held by another dispatcher: waiting
                // for the interval, not spinning on them, is right.
                report.dispatched + report.failed >= self.batch
            }
            Err(err) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%err, "event dispatch tick failed");
                false
            }
        }
    }
}

impl<S: EventQueueStore + 'static> Dispatcher<S> {
    /// The same dispatcher, taking each event with
    /// [`EventQueueStore::dispatch_next`] ([`dispatch_queued`]) instead of
    /// listing first: the mode for several dispatchers over one store,
    /// which then take disjoint events rather than all trying the oldest.
    #[must_use]
    pub fn queued(mut self) -> Self {
        self.pass = queued::<S>;
        self
    }
}

/// The handle of a spawned [`Dispatcher`]: its counters, and a graceful
/// shutdown that lets the batch under way finish.
#[derive(Debug)]
pub struct DispatcherHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    counters: Arc<Counters>,
}

impl DispatcherHandle {
    /// What the dispatcher has done so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Asks the dispatcher to stop after its current batch and waits until
    /// it has; answers its counters.
    pub async fn shutdown(self) -> Arc<Counters> {
        // The receiver lives as long as the task; a send error means the
        // task already ended.
        let _ = self.stop.send(true);
        if let Err(err) = self.task.await {
            if err.is_panic() {
                std::panic::resume_unwind(err.into_panic());
            }
        }
        self.counters
    }
}
