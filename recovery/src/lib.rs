//! flowstate-recovery: nothing lost, nothing stuck, nothing re-queued
//! forever.
//!
//! Policy over the core ports, knowing nothing of which database is behind
//! them:
//!
//! - [`relay_undispatched`]: steps claimable but untouched for a while get
//!   their run re-dispatched (a lost dispatch message costs a delay, not a
//!   run);
//! - [`sweep_stalled`]: running runs with nothing moving get resumed (a
//!   worker that died costs a delay, not a run);
//! - [`expire_claims`]: a step whose claim ran out (its worker died or
//!   hangs) has its attempt failed and, with an attempt left, its run
//!   re-driven (a worker that died holding a step costs a retry, not a
//!   step stuck `running` for ever);
//! - both share one [`RedispatchBackoff`](flowstate_core::RedispatchBackoff),
//!   noted *before* the dispatch callback runs, so a run is re-driven at
//!   most once per window whichever sweep finds it and however its dispatch
//!   fares;
//! - [`handle_run_message`]: the settled-run guard, the entry point for an
//!   orchestrator message, which answers a message for a completed, failed
//!   or cancelled run without taking its lease or running its body;
//! - [`Sweeper`]: a tokio task doing a [`Sweeper::pass`] at an interval
//!   (wake-ups, lease reaping, claim expiry, relay, stalled sweep) with graceful
//!   shutdown, for hosts that want a loop rather than their own scheduler;
//! - [`Pruner`]: retention, by a [`RetentionPolicy`] (how long settled
//!   runs, dispatched events, dead letters and finished virtual-user runs
//!   are kept, the batch), one [`Pruner::pass`] or a loop with the same
//!   [`LoopHandle`] as the sweeper's; what may be deleted is the store's
//!   ([`RetentionStore`](flowstate_core::ports::RetentionStore)).
//!
//! Each re-drive counts what it found and re-drove, by [`Reason`], through
//! the `metrics` facade (`flowstate_sweep_finds_total`,
//! `flowstate_sweep_redrives_total`: `flowstate-metrics` lists every name).
//!
//! Re-driving a run twice is safe by construction: a step claim is
//! exclusive (`StepStore::claim_step`, a status-guarded write in every
//! backend), so a duplicate dispatch finds its step claimed and does
//! nothing. The backoff bounds the cost, not the correctness.

mod dispatch;
mod guard;
mod periodic;
mod pruner;
mod relay;
mod sweeper;

pub use dispatch::{Reason, RedriveReport, SweepOptions};
pub use guard::{Handled, handle_run_message};
pub use periodic::LoopHandle;
pub use pruner::{
    DEFAULT_PRUNE_INTERVAL, PruneReport, Pruner, PrunerHandle, PrunerReport, RetentionPolicy,
};
pub use relay::{ExpiryReport, expire_claims, relay_undispatched, sweep_stalled};
pub use sweeper::{DEFAULT_SWEEP_INTERVAL, PassReport, Sweeper, SweeperHandle, SweeperReport};
