//! What the sweeps ask of the engine (a dispatch callback, called with a
//! [`Reason`]), how far back they look ([`SweepOptions`]) and what they
//! answer ([`RedriveReport`]).

use std::time::Duration;

use flowstate_core::RunId;
use flowstate_core::recovery::DEFAULT_RECOVERY_LIMIT;

/// Why a run is re-driven: which observation found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// It has a step claimable but untouched ([`crate::relay_undispatched`]).
    Undispatched,
    /// It is running with nothing moving ([`crate::sweep_stalled`]).
    Stalled,
    /// A step's claim ran out and recovery took the attempt back; the step
    /// has an attempt left ([`crate::expire_claims`]).
    ClaimExpired,
}

impl Reason {
    /// The reason as a short word, for logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Undispatched => "undispatched",
            Self::Stalled => "stalled",
            Self::ClaimExpired => "claim_expired",
        }
    }
}

/// How far back the sweeps look and how much one call takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepOptions {
    /// A claimable step untouched this long is owed a dispatch.
    pub relay_after: Duration,
    /// A running run with nothing moving this long is stalled.
    pub stalled_after: Duration,
    /// At most this many rows per query (`0` reads as the store default).
    pub limit: u32,
}

impl SweepOptions {
    /// The default idle time before the relay re-dispatches: one minute.
    pub const DEFAULT_RELAY_AFTER: Duration = Duration::from_secs(60);
    /// The default idle time before a run reads as stalled: five minutes.
    pub const DEFAULT_STALLED_AFTER: Duration = Duration::from_secs(5 * 60);
}

impl Default for SweepOptions {
    fn default() -> Self {
        Self {
            relay_after: Self::DEFAULT_RELAY_AFTER,
            stalled_after: Self::DEFAULT_STALLED_AFTER,
            limit: DEFAULT_RECOVERY_LIMIT,
        }
    }
}

/// What one relay or sweep call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedriveReport {
    /// Runs whose dispatch was called and answered `Ok`, in the order found.
    pub redispatched: Vec<RunId>,
    /// Runs found but held off by the backoff: re-driven a moment ago.
    pub held_off: Vec<RunId>,
    /// Runs whose dispatch failed, with the error; they are backed off like
    /// the others (a failing dispatch is the likeliest to be found again).
    pub failed: Vec<(RunId, String)>,
}

impl RedriveReport {
    /// Every run the dispatch was called for, failed ones included.
    pub fn attempted(&self) -> usize {
        self.redispatched.len() + self.failed.len()
    }
}
