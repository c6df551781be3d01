//! Run leases across machines: which runs a worker may take, what a release
//! does to a run's consecutive failures, and the records the
//! [`RunLeaseStore`](crate::ports::RunLeaseStore) port reads and writes.
//!
//! A lease is held by a *worker* (a name the caller picks) until it
//! expires; every claim of a run raises its *fencing token* by one, and
//! every write a holder makes carries the token it was given, so a worker
//! whose lease was taken over writes nothing ([`Error::LeaseLost`]).
//!
//! # One clock for leases
//!
//! Lease expiry is measured on the *store's* clock, never on the worker's:
//! every worker asks the same clock, so two workers whose own clocks are
//! minutes apart still agree on whether a lease has run out. The timestamps
//! a lease carries ([`RunLease::expires_at`], [`LeaseState::expires_at`])
//! are on that clock, which may differ from the clock that stamps
//! `created_at` and `updated_at`. What the store's clock is, is the
//! backend's to say: for a database, the database server's clock
//! (`flowstate-store-diesel`); for the in-memory store, the one clock it
//! was given for leases.
//!
//! This module reads no clock itself: durations come in, and the backend
//! adds them to its own time.

use std::time::Duration;

use crate::error::{Error, InvalidInput};
use crate::field;
use crate::limits::InputLimits;
use crate::records::Run;
use crate::status::RunStatus;
use crate::time::Timestamp;

/// How many failures in a row a run may have before a release with a
/// failure fails the run for good (the default of
/// [`Release::failure`]; [`Release::Failure::limit`] overrides it).
pub const MAX_CONSECUTIVE_FAILURES: u32 = 5;

/// The longest lease a claim or a renewal may ask for: one day.
pub const LONGEST_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// The most runs one batch claim may take.
pub const MAX_CLAIM_BATCH: u32 = 1_000;

/// The statuses a run may be leased in: every status that is not settled
/// ([`RunStatus::is_settled`]), for the guards of a claim.
pub fn leasable_statuses() -> Vec<RunStatus> {
    RunStatus::ALL
        .iter()
        .copied()
        .filter(|status| !status.is_settled())
        .collect()
}

/// Whether a run that has now failed `failures` times in a row, against a
/// limit of `limit`, is failed for good. A limit of 0 reads as 1: the
/// first failure is the last.
pub const fn fails_run(failures: u32, limit: u32) -> bool {
    failures >= limit || limit == 0
}

/// A run as a claim hands it out: the run, and the lease on it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunLease {
    /// The run, as it was when claimed.
    pub run: Run,
    /// The fencing token of this claim: higher than any earlier claim of
    /// the run. Every write under the lease carries it.
    pub token: u64,
    /// The worker holding the lease.
    pub worker: String,
    /// When the lease runs out unless renewed, on the store's lease clock.
    pub expires_at: Timestamp,
    /// How many releases in a row failed before this claim.
    pub failures: u32,
}

/// How a lease holder settles its run for good.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// The run finished with its work done.
    Completed,
    /// The run failed for good, with the reason recorded.
    Failed {
        /// Why, as the run's failure reason.
        reason: String,
    },
    /// The run stopped on request.
    Cancelled,
}

impl RunOutcome {
    /// The status the run settles in.
    pub const fn status(&self) -> RunStatus {
        match self {
            Self::Completed => RunStatus::Completed,
            Self::Failed { .. } => RunStatus::Failed,
            Self::Cancelled => RunStatus::Cancelled,
        }
    }

    /// The failure reason to record, if any.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Failed { reason } => Some(reason),
            Self::Completed | Self::Cancelled => None,
        }
    }
}

/// How a lease holder gives its run back without settling it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Release {
    /// The holder made progress and stops for now: the lease is freed and
    /// the consecutive failures go back to zero.
    Yield,
    /// The attempt failed: the consecutive failures rise by one and, once
    /// they reach `limit` ([`fails_run`]), the run fails for good with
    /// `reason` recorded; otherwise the lease is freed for another claim.
    Failure {
        /// Why the attempt failed (recorded on the run either way).
        reason: String,
        /// How many failures in a row fail the run.
        limit: u32,
    },
}

impl Release {
    /// A failed attempt, against [`MAX_CONSECUTIVE_FAILURES`].
    pub fn failure(reason: impl Into<String>) -> Self {
        Self::Failure {
            reason: reason.into(),
            limit: MAX_CONSECUTIVE_FAILURES,
        }
    }

    /// The same release, failing the run after `limit` failures in a row
    /// (only a [`Release::Failure`] has a limit).
    #[must_use]
    pub fn with_limit(self, limit: u32) -> Self {
        match self {
            Self::Failure { reason, .. } => Self::Failure { reason, limit },
            other => other,
        }
    }
}

/// What a release did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// The run's status after the release: failed if the limit was reached.
    pub status: RunStatus,
    /// The consecutive failures after the release.
    pub failures: u32,
}

/// A run's lease bookkeeping, as read by
/// [`RunLeaseStore::lease_state`](crate::ports::RunLeaseStore::lease_state).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseState {
    /// The fencing token of the last claim (0: never claimed).
    pub token: u64,
    /// Who holds the lease, if anyone (an expired lease still names its
    /// last holder until the run is claimed or released).
    pub worker: Option<String>,
    /// When the lease runs out, on the store's lease clock.
    pub expires_at: Option<Timestamp>,
    /// Releases in a row that failed.
    pub failures: u32,
    /// The last failure reason recorded.
    pub failure_reason: Option<String>,
    /// Whether a cancel was requested and not yet carried out.
    pub cancel_requested: bool,
    /// When a sleeping or waiting run becomes runnable without a signal, on
    /// the store's lease clock ([`crate::wait`]).
    pub wake_at: Option<Timestamp>,
    /// The signal a waiting run waits on.
    pub waiting_on: Option<String>,
}

impl InputLimits {
    /// Checks a claim's worker name and lease length: a key, and a lease
    /// longer than zero and at most [`LONGEST_LEASE`].
    pub fn check_lease(&self, worker: &str, lease_for: Duration) -> Result<(), Error> {
        self.check_key(field::WORKER, worker)?;
        self.check_lease_for(lease_for)
    }

    /// Checks a lease length alone (a renewal).
    pub fn check_lease_for(&self, lease_for: Duration) -> Result<(), Error> {
        if lease_for.is_zero() || lease_for > LONGEST_LEASE {
            return Err(Error::InvalidInput(InvalidInput::OutOfRange {
                field: field::LEASE,
                detail: format!(
                    "{} ms is not between 1 ms and {} ms",
                    lease_for.as_millis(),
                    LONGEST_LEASE.as_millis()
                ),
            }));
        }
        Ok(())
    }

    /// Checks a batch claim: its worker, lease and size (1 to
    /// [`MAX_CLAIM_BATCH`]).
    pub fn check_claim_batch(
        &self,
        worker: &str,
        n: u32,
        lease_for: Duration,
    ) -> Result<(), Error> {
        self.check_lease(worker, lease_for)?;
        if n == 0 || n > MAX_CLAIM_BATCH {
            return Err(Error::InvalidInput(InvalidInput::OutOfRange {
                field: field::CLAIM_BATCH,
                detail: format!("{n} is not between 1 and {MAX_CLAIM_BATCH}"),
            }));
        }
        Ok(())
    }

    /// Checks a failure reason: at most [`Self::max_value_bytes`], no NUL.
    pub fn check_reason(&self, reason: &str) -> Result<(), Error> {
        if reason.len() > self.max_value_bytes {
            return Err(Error::InvalidInput(InvalidInput::TooLarge {
                field: field::FAILURE_REASON,
                bytes: reason.len(),
                limit: self.max_value_bytes,
            }));
        }
        if reason.contains('\0') {
            return Err(Error::InvalidInput(InvalidInput::NulCharacter {
                field: field::FAILURE_REASON,
            }));
        }
        Ok(())
    }
}

/// A lease length in whole microseconds, as stores add it to their clock.
pub fn lease_micros(lease_for: Duration) -> i64 {
    i64::try_from(lease_for.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unsettled_runs_are_leasable() {
        assert_eq!(
            leasable_statuses(),
            vec![RunStatus::Running, RunStatus::Suspended]
        );
    }

    #[test]
    fn the_limit_fails_the_run_when_reached() {
        let rows = [
            (1, 5, false),
            (4, 5, false),
            (5, 5, true),
            (6, 5, true),
            (1, 1, true),
            (1, 0, true),
        ];
        for (failures, limit, fails) in rows {
            assert_eq!(fails_run(failures, limit), fails, "{failures}/{limit}");
        }
    }

    #[test]
    fn leases_must_be_positive_and_at_most_a_day() {
        let limits = InputLimits::default();
        assert!(limits.check_lease("w", Duration::from_millis(1)).is_ok());
        assert!(limits.check_lease("w", LONGEST_LEASE).is_ok());
        assert!(limits.check_lease("w", Duration::ZERO).is_err());
        assert!(
            limits
                .check_lease("w", LONGEST_LEASE + Duration::from_micros(1))
                .is_err()
        );
        assert!(limits.check_lease("", Duration::from_secs(1)).is_err());
        assert!(
            limits
                .check_claim_batch("w", 0, Duration::from_secs(1))
                .is_err()
        );
        assert!(
            limits
                .check_claim_batch("w", MAX_CLAIM_BATCH + 1, Duration::from_secs(1))
                .is_err()
        );
        assert!(limits.check_reason("bad\0").is_err());
    }

    #[test]
    fn release_limits_default_to_the_constant() {
        assert_eq!(
            Release::failure("x"),
            Release::Failure {
                reason: "x".into(),
                limit: MAX_CONSECUTIVE_FAILURES
            }
        );
        assert_eq!(
            Release::failure("x").with_limit(2),
            Release::Failure {
                reason: "x".into(),
                limit: 2
            }
        );
        assert_eq!(Release::Yield.with_limit(2), Release::Yield);
    }
}
