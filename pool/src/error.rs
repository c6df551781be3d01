//! [`Error`]: why a completion handed to a [`GroupCommit`](crate::GroupCommit)
//! (or a [`WorkerPool`](crate::WorkerPool)'s commit queue) was not
//! committed, one variant per cause, so a caller matches instead of
//! downcasting.

use std::fmt;

/// Why a completion was not committed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The group commit was closed before the completion was queued:
    /// nothing was written.
    Closed,
    /// The whole flush holding the completion failed, or its flusher ended
    /// before the store answered (see [`FlushFailed`] for which, and
    /// whether anything may have been written).
    FlushFailed(FlushFailed),
    /// The store answered this completion alone with an error: its claim
    /// was lost to recovery ([`flowstate_core::Error::ClaimLost`], nothing
    /// written), an illegal move, an unknown step, a payload over the
    /// limits.
    Refused(flowstate_core::Error),
}

impl Error {
    /// Whether sending the same completion again later may succeed: a
    /// flush that failed with a retryable error (it gave up), or a store
    /// refusal that is retryable. A closed queue is not.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Closed => false,
            Self::FlushFailed(failed) => failed.retryable,
            Self::Refused(err) => err.is_retryable(),
        }
    }

    /// Whether the store refused the completion because its claim had run
    /// out and recovery took the attempt back: nothing was written, and
    /// another worker may run the step again.
    pub fn is_claim_lost(&self) -> bool {
        matches!(self, Self::Refused(flowstate_core::Error::ClaimLost { .. }))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => {
                f.write_str("the group commit is closed; the completion was not queued")
            }
            Self::FlushFailed(failed) => failed.fmt(f),
            Self::Refused(err) => write!(f, "the store refused the completion: {err}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Closed => None,
            Self::FlushFailed(failed) => Some(failed),
            Self::Refused(err) => Some(err),
        }
    }
}

/// The answer of a commit: `Ok` once the completion is durable.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A whole flush that failed: [`flowstate_core::Error`] is not `Clone`, so
/// each caller in the flush gets a copy of the flush's last error's
/// message and of its [`is_retryable`](flowstate_core::Error::is_retryable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlushFailed {
    /// The flush's last error, as it displayed.
    pub message: String,
    /// Whether the flush's error was retryable.
    pub retryable: bool,
    /// How many items the failed flush held.
    pub items: usize,
    /// How many times the flush was sent (1 when it was not retried; 0
    /// when the flusher stopped before the store answered).
    pub attempts: u32,
    /// Whether the flush gave up: its error was retryable and the store
    /// kept failing past [`FlushRetry::give_up_after`](crate::FlushRetry::give_up_after).
    /// Its items are not known to be written; unless the last lost answer
    /// hid a write, their steps are still running in their attempt, for
    /// the claim deadline to recover.
    pub gave_up: bool,
}

impl fmt::Display for FlushFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the flush of {} completion(s) failed", self.items)?;
        if self.gave_up {
            write!(f, " (gave up after {} tries)", self.attempts)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for FlushFailed {}
