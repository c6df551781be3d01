//! Retention: what a prune may delete, decided once for every backend
//! ([`ports::RetentionStore`](crate::ports::RetentionStore) carries it
//! out, `flowstate-recovery`'s `Pruner` runs it).
//!
//! Nothing in flowstate is deleted on its own: runs, their steps and
//! history, events and virtual-user transcripts stay until a prune removes
//! them. A prune removes records of one [`PruneKind`] whose settle time is
//! older than a window, in bounded batches, oldest first, and never a
//! record that work may still touch: a run that is not settled, a settled
//! run whose lease is still held, a parent with a child that is not
//! settled, an event not yet dispatched (unless it is a dead letter past
//! its own, longer window).
//!
//! Each rule is a pure function of the record and a cutoff (the window
//! before the store's now, [`cutoff`]), so the reference backend asks
//! them and SQL backends spell the same terms in their `WHERE`.

use std::fmt;
use std::time::Duration;

use crate::events::Event;
use crate::records::Run;
use crate::status::{RunStatus, VirtualUserRunStatus};
use crate::time::Timestamp;
use crate::virtual_users::VirtualUserRun;

/// What one prune call removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PruneKind {
    /// Settled runs (completed, failed, cancelled) by their settle time
    /// (`updated_at`), with their steps, step history, state, signals,
    /// effects and lease; their children stay, with no parent, and are
    /// pruned by their own age.
    Runs,
    /// Dispatched events (a redriven dead letter once it is dispatched,
    /// and an event that matched nothing) by their dispatch time, with
    /// their deliveries.
    Events,
    /// Dead-lettered events never redriven, by the time they were
    /// dead-lettered, with their deliveries: a longer window than
    /// [`PruneKind::Events`], so an operator has time to redrive them.
    DeadLetters,
    /// Finished virtual-user runs (completed or failed) by their settle
    /// time (`updated_at`), with their transcripts.
    VirtualUserRuns,
}

impl PruneKind {
    /// Every kind, in the order a pruner takes them.
    pub const ALL: [Self; 4] = [
        Self::Runs,
        Self::Events,
        Self::DeadLetters,
        Self::VirtualUserRuns,
    ];

    /// Its name in metrics labels, logs and the operator's output:
    /// `runs`, `events`, `dead_letters`, `virtual_user_runs`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Runs => "runs",
            Self::Events => "events",
            Self::DeadLetters => "dead_letters",
            Self::VirtualUserRuns => "virtual_user_runs",
        }
    }
}

impl fmt::Display for PruneKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The batch a prune takes when asked for `0`.
pub const DEFAULT_PRUNE_LIMIT: u32 = 500;

/// The most records one prune call deletes.
pub const MAX_PRUNE_LIMIT: u32 = 5_000;

/// The batch a store applies to a prune: `0` reads as
/// [`DEFAULT_PRUNE_LIMIT`], more than [`MAX_PRUNE_LIMIT`] as that.
pub fn effective_limit(limit: u32) -> u32 {
    match limit {
        0 => DEFAULT_PRUNE_LIMIT,
        n => n.min(MAX_PRUNE_LIMIT),
    }
}

/// The time `older_than` before `now`: a record settled strictly before it
/// is old enough to prune. Saturates at the epoch, so a window longer than
/// the clock's age prunes nothing.
pub fn cutoff(now: Timestamp, older_than: Duration) -> Timestamp {
    crate::recovery::idle_cutoff(now, older_than)
}

/// The run statuses a prune may delete: the settled ones
/// ([`RunStatus::is_settled`]), for SQL guards.
pub fn prunable_run_statuses() -> Vec<RunStatus> {
    RunStatus::ALL
        .iter()
        .copied()
        .filter(|s| s.is_settled())
        .collect()
}

/// The virtual-user run statuses a prune may delete: every one but
/// running.
pub fn prunable_virtual_user_statuses() -> Vec<VirtualUserRunStatus> {
    VirtualUserRunStatus::ALL
        .iter()
        .copied()
        .filter(|s| *s != VirtualUserRunStatus::Running)
        .collect()
}

/// Whether `run` may be pruned at `cutoff`: settled, settled (last moved)
/// before the cutoff, no lease still held at lease-clock `now`
/// (`lease_expires_at`, `None` for none) and no child that is not settled
/// (`live_children`). A settled run is never re-opened by the ports, so
/// once this holds it holds until the run is deleted; a backend still
/// re-checks it in its delete.
pub fn is_prunable_run(
    run: &Run,
    lease_expires_at: Option<Timestamp>,
    live_children: bool,
    cutoff: Timestamp,
    now: Timestamp,
) -> bool {
    run.status.is_settled()
        && run.updated_at < cutoff
        && lease_expires_at.is_none_or(|expires| expires <= now)
        && !live_children
}

/// Whether `event` may be pruned as `kind` ([`PruneKind::Events`] or
/// [`PruneKind::DeadLetters`]; any other kind is `false`) at `cutoff`:
/// dispatched before the cutoff, or dead-lettered before it and never
/// dispatched. An event is also never pruned before it occurred
/// (`occurred_at < cutoff`), which lets a backend walk its events by
/// occurrence.
pub fn is_prunable_event(event: &Event, kind: PruneKind, cutoff: Timestamp) -> bool {
    if event.occurred_at >= cutoff {
        return false;
    }
    match kind {
        PruneKind::Events => event.dispatched_at.is_some_and(|at| at < cutoff),
        PruneKind::DeadLetters => {
            event.dispatched_at.is_none() && event.dead_lettered_at.is_some_and(|at| at < cutoff)
        }
        PruneKind::Runs | PruneKind::VirtualUserRuns => false,
    }
}

/// Whether virtual-user run `run` may be pruned at `cutoff`: finished,
/// and last moved before the cutoff.
pub fn is_prunable_virtual_user_run(run: &VirtualUserRun, cutoff: Timestamp) -> bool {
    run.status != VirtualUserRunStatus::Running && run.updated_at < cutoff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_default_and_cap() {
        assert_eq!(effective_limit(0), DEFAULT_PRUNE_LIMIT);
        assert_eq!(effective_limit(7), 7);
        assert_eq!(effective_limit(u32::MAX), MAX_PRUNE_LIMIT);
    }

    #[test]
    fn the_cutoff_saturates_at_the_epoch() {
        let now = Timestamp::from_micros(10_000_000);
        assert_eq!(
            cutoff(now, Duration::from_secs(4)),
            Timestamp::from_micros(6_000_000)
        );
        assert_eq!(cutoff(now, Duration::MAX), Timestamp::EPOCH);
    }

    #[test]
    fn only_settled_statuses_are_prunable() {
        assert_eq!(
            prunable_run_statuses(),
            vec![
                RunStatus::Completed,
                RunStatus::Failed,
                RunStatus::Cancelled
            ]
        );
        assert_eq!(
            prunable_virtual_user_statuses(),
            vec![
                VirtualUserRunStatus::Completed,
                VirtualUserRunStatus::Failed
            ]
        );
    }

    #[test]
    fn kinds_have_one_name_each() {
        let names: Vec<_> = PruneKind::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            ["runs", "events", "dead_letters", "virtual_user_runs"]
        );
    }
}
