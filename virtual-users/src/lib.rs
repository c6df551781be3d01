//! flowstate-virtual-users: scheduled synthetic-user runs that never double
//! up and never stall a persona.
//!
//! This crate does not start a timer on its own, and knows no database.
//! [`tick`] is the whole cadence in one call, generic over core's
//! [`ScheduleStore`](flowstate_core::ports::ScheduleStore) and
//! [`VirtualUserRunStore`](flowstate_core::ports::VirtualUserRunStore): the host
//! decides what calls it (a cron wiring, a platform scheduler, a button),
//! and supplies the time, the randomness and the dispatch callback that
//! starts a run. A tick spends whatever a run costs with no caller present
//! to notice, so nothing here begins spending on an app's behalf. For hosts
//! that want a loop, [`Runner`] is a tokio task ticking at an interval,
//! started only when the host calls [`Runner::spawn`], whose
//! [`RunnerHandle`] reports what it did and shuts it down gracefully: the
//! same vocabulary as the event `Dispatcher`, the recovery `Sweeper` and
//! the `WorkerPool`.
//!
//! The rules, each from the seed this follows:
//! - a persona whose latest run is still running is skipped, not queued
//!   ([`SkipReason::InFlight`]): two copies of one user acting at once is a
//!   different test, and its findings cannot be reproduced;
//! - a run running longer than the stale limit
//!   ([`STALE_RUN_AFTER`](flowstate_core::schedule::STALE_RUN_AFTER), 2 h)
//!   is reaped: failed with a message saying how long it ran and the stop
//!   reason [`StopReason::Abandoned`](flowstate_core::StopReason::Abandoned), after which
//!   the persona dispatches in the same tick. A deploy mid-run strands the
//!   record; kept, it would block its persona for good;
//! - the claim is a compare-and-set on `next_run_at`, so of two ticks at
//!   once only the one that still sees the value it read dispatches
//!   ([`SkipReason::ClaimedElsewhere`] for the other);
//! - a failed dispatch is reported ([`SkipReason::DispatchFailed`]) and the
//!   persona waits for its next draw: see [`tick`] for why.

mod runner;
mod tick;

pub use runner::{DEFAULT_TICK_INTERVAL, Runner, RunnerHandle, RunnerReport};
pub use tick::{Dispatched, Reaped, SkipReason, Skipped, TickOptions, TickOutcome, tick};
