//! [`Pruner`]: retention as a loop. A [`RetentionPolicy`] says how long
//! each kind of record is kept and how many go per batch; a
//! [`Pruner::pass`] prunes every kind the policy keeps for a limited time,
//! batch after batch until a batch comes back short; a spawned pruner does
//! a pass at an interval until it is told to stop.
//!
//! What may be deleted is decided by the store
//! ([`RetentionStore`](flowstate_core::ports::RetentionStore)): never a
//! live, waiting or leased run, never the parent of a live child. The
//! pruner only chooses when and how much, so any number of pruners may run
//! over one store.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::RetentionStore;
use flowstate_core::retention::{DEFAULT_PRUNE_LIMIT, MAX_PRUNE_LIMIT};
use flowstate_core::{PruneKind, Result};
use tracing::Instrument;

use crate::periodic::{self, LoopHandle, LoopReport, Periodic};

/// A day.
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// How long each kind of record is kept once settled, and the batch a
/// prune takes. `None` keeps that kind for ever.
///
/// The defaults follow the queues flowstate is compared with (River's job
/// cleaner, Oban's pruner): settled runs and dispatched events 7 days,
/// dead letters 30 days (time for an operator to redrive them), finished
/// virtual-user runs 30 days, 500 records per batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Settled runs ([`PruneKind::Runs`]), by their settle time.
    pub runs: Option<Duration>,
    /// Dispatched events ([`PruneKind::Events`]), by their dispatch time.
    /// A dedupe key protects for this long after its event's dispatch.
    pub events: Option<Duration>,
    /// Dead letters never redriven ([`PruneKind::DeadLetters`]), by the
    /// time they were dead-lettered.
    pub dead_letters: Option<Duration>,
    /// Finished virtual-user runs ([`PruneKind::VirtualUserRuns`]).
    pub virtual_user_runs: Option<Duration>,
    /// Records per prune call (the store caps it at 5,000).
    pub batch: u32,
    /// The most batches of one kind a pass takes, so a pass over a large
    /// backlog ends and the next pass goes on where it stopped.
    pub max_batches: u32,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self {
            runs: Some(7 * DAY),
            events: Some(7 * DAY),
            dead_letters: Some(30 * DAY),
            virtual_user_runs: Some(30 * DAY),
            batch: DEFAULT_PRUNE_LIMIT,
            max_batches: 100,
        }
    }
}

impl RetentionPolicy {
    /// Every kind kept for `older_than` (dead letters too): what
    /// `cargo xtask prune --older-than` asks.
    pub fn uniform(older_than: Duration) -> Self {
        Self {
            runs: Some(older_than),
            events: Some(older_than),
            dead_letters: Some(older_than),
            virtual_user_runs: Some(older_than),
            ..Self::default()
        }
    }

    /// How long `kind` is kept; `None` for ever.
    pub fn window(&self, kind: PruneKind) -> Option<Duration> {
        match kind {
            PruneKind::Runs => self.runs,
            PruneKind::Events => self.events,
            PruneKind::DeadLetters => self.dead_letters,
            PruneKind::VirtualUserRuns => self.virtual_user_runs,
        }
    }

    /// The batch the store is asked for: at least 1, at most its cap.
    fn limit(&self) -> u32 {
        self.batch.clamp(1, MAX_PRUNE_LIMIT)
    }
}

/// What one [`Pruner::pass`] deleted, per kind (a kind kept for ever is
/// left out), and the batches it took.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Records deleted, per kind.
    pub deleted: BTreeMap<PruneKind, u64>,
    /// Prune calls made, all kinds.
    pub batches: u64,
}

impl PruneReport {
    /// Records deleted, all kinds.
    pub fn total(&self) -> u64 {
        self.deleted.values().sum()
    }
}

/// What a spawned [`Pruner`] did, summed over its passes: so far
/// ([`LoopHandle::report`]) or before it stopped
/// ([`LoopHandle::shutdown`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrunerReport {
    /// Passes run to the end, failed ones included.
    pub passes: u64,
    /// Passes that ended with a store error (logged; the loop went on).
    pub failed_passes: u64,
    /// Settled runs deleted.
    pub runs: u64,
    /// Dispatched events deleted.
    pub events: u64,
    /// Dead letters deleted.
    pub dead_letters: u64,
    /// Virtual-user runs deleted.
    pub virtual_user_runs: u64,
}

impl LoopReport<PruneReport> for PrunerReport {
    fn passes_mut(&mut self) -> (&mut u64, &mut u64) {
        (&mut self.passes, &mut self.failed_passes)
    }

    fn add_pass(&mut self, pass: &PruneReport) {
        for (kind, n) in &pass.deleted {
            *match kind {
                PruneKind::Runs => &mut self.runs,
                PruneKind::Events => &mut self.events,
                PruneKind::DeadLetters => &mut self.dead_letters,
                PruneKind::VirtualUserRuns => &mut self.virtual_user_runs,
            } += n;
        }
    }
}

/// How often a spawned [`Pruner`] passes unless told otherwise.
pub const DEFAULT_PRUNE_INTERVAL: Duration = Duration::from_secs(60);

/// The retention loop of one process: its store and its
/// [`RetentionPolicy`].
///
/// Run a pass yourself with [`Pruner::pass`] (from a cron, or beside the
/// [`Sweeper`](crate::Sweeper)), or hand it to [`Pruner::spawn`] for a
/// loop.
pub struct Pruner<S> {
    store: Arc<S>,
    policy: RetentionPolicy,
    interval: Duration,
}

impl<S> fmt::Debug for Pruner<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pruner")
            .field("policy", &self.policy)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl<S: RetentionStore + 'static> Pruner<S> {
    /// A pruner over `store` keeping records as `policy` says.
    pub fn new(store: Arc<S>, policy: RetentionPolicy) -> Self {
        Self {
            store,
            policy,
            interval: DEFAULT_PRUNE_INTERVAL,
        }
    }

    /// The same pruner, passing every `interval` once spawned (default
    /// [`DEFAULT_PRUNE_INTERVAL`]).
    #[must_use]
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The policy it prunes by.
    pub fn policy(&self) -> &RetentionPolicy {
        &self.policy
    }

    /// One pass: each kind the policy does not keep for ever, in
    /// [`PruneKind::ALL`]'s order, batch after batch until one deletes
    /// fewer than the batch asked (or the policy's `max_batches`). A store
    /// error ends the pass there with that error.
    pub async fn pass(&self) -> Result<PruneReport> {
        let span = tracing::info_span!("retention.pass");
        async {
            let limit = self.policy.limit();
            let mut report = PruneReport::default();
            for kind in PruneKind::ALL {
                let Some(window) = self.policy.window(kind) else {
                    continue;
                };
                let mut deleted = 0;
                for _ in 0..self.policy.max_batches.max(1) {
                    let n = self
                        .store
                        .prune(kind, window, limit)
                        .instrument(tracing::debug_span!("retention.batch", kind = %kind))
                        .await?;
                    report.batches += 1;
                    deleted += n;
                    if n < u64::from(limit) {
                        break;
                    }
                }
                report.deleted.insert(kind, deleted);
            }
            tracing::info!(
                deleted = report.total(),
                batches = report.batches,
                runs = report.deleted.get(&PruneKind::Runs).copied().unwrap_or(0),
                events = report.deleted.get(&PruneKind::Events).copied().unwrap_or(0),
                "retention pass done"
            );
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// Spawns the loop on the current tokio runtime (panics outside one):
    /// a pass at once, then one every interval
    /// ([`Pruner::with_interval`]; a pass that overruns delays the next).
    /// A pass that fails is logged and the loop goes on.
    pub fn spawn(self) -> PrunerHandle {
        let interval = self.interval;
        periodic::spawn(self, interval)
    }
}

impl<S: RetentionStore + 'static> Periodic for Pruner<S> {
    type Pass = PruneReport;
    type Report = PrunerReport;
    const NAME: &'static str = "pruner";

    fn pass(&mut self) -> impl Future<Output = Result<PruneReport>> + Send {
        Pruner::pass(self)
    }
}

/// A running [`Pruner`] loop: what it deleted so far
/// ([`PrunerReport`]), and a graceful shutdown. Dropping it stops the loop
/// too, without waiting; [`LoopHandle::shutdown`] waits.
pub type PrunerHandle = LoopHandle<PrunerReport>;
