//! Runs that wait: asleep until a time, or waiting on a named signal with an
//! optional deadline, and the records of
//! [`RunWaitStore`](crate::ports::RunWaitStore).
//!
//! A waiting run is not runnable until its time comes or its signal is
//! there; then the next claim takes it (and clears the wait). A signal is a
//! row of its own, kept until the run's lease holder takes it, so a signal
//! sent before the run waits is not lost: the wait finds it and the run is
//! runnable at once. Times are durations from now on the store's lease
//! clock ([`lease`](crate::lease#one-clock-for-leases)), never instants of
//! the worker's clock.

use std::time::Duration;

use crate::error::{Error, InvalidInput};
use crate::field;
use crate::limits::InputLimits;

/// The longest a run may sleep or wait for a signal: one year.
pub const LONGEST_WAIT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// What a run waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// Sleep: runnable again once this much time has passed.
    For(Duration),
    /// Runnable again once signal `name` is there, or once `timeout` (if
    /// any) has passed.
    Signal {
        /// The signal's name.
        name: String,
        /// How long to wait at most; `None` waits for ever.
        timeout: Option<Duration>,
    },
    /// Runnable again once every child of the run is settled (at once if
    /// it has none), or once `timeout` (if any) has passed.
    Children {
        /// How long to wait at most; `None` waits for ever.
        timeout: Option<Duration>,
    },
}

/// What [`LeaseState::waiting_on`](crate::LeaseState::waiting_on) holds for
/// a run waiting on its children: the empty name, which no signal can have
/// ([`InputLimits::check_key`] refuses it).
pub const CHILDREN: &str = "";

impl Wait {
    /// Wait for signal `name` with no deadline.
    pub fn signal(name: impl Into<String>) -> Self {
        Self::Signal {
            name: name.into(),
            timeout: None,
        }
    }

    /// The signal waited for, if any.
    pub fn signal_name(&self) -> Option<&str> {
        match self {
            Self::Signal { name, .. } => Some(name),
            Self::For(_) | Self::Children { .. } => None,
        }
    }

    /// What a store records the run as waiting on: the signal's name,
    /// [`CHILDREN`], or nothing for a sleep.
    pub fn waiting_on(&self) -> Option<&str> {
        match self {
            Self::Signal { name, .. } => Some(name),
            Self::Children { .. } => Some(CHILDREN),
            Self::For(_) => None,
        }
    }

    /// How long until the run is runnable without a signal, if ever.
    pub fn wake_after(&self) -> Option<Duration> {
        match self {
            Self::For(after) => Some(*after),
            Self::Signal { timeout, .. } | Self::Children { timeout } => *timeout,
        }
    }
}

impl InputLimits {
    /// Checks a wait: its signal name is a key, its time at most
    /// [`LONGEST_WAIT`].
    pub fn check_wait(&self, wait: &Wait) -> Result<(), Error> {
        if let Some(name) = wait.signal_name() {
            self.check_key(field::SIGNAL_NAME, name)?;
        }
        match wait.wake_after() {
            Some(after) if after > LONGEST_WAIT => {
                Err(Error::InvalidInput(InvalidInput::OutOfRange {
                    field: field::WAIT,
                    detail: format!(
                        "{} ms is over {} ms",
                        after.as_millis(),
                        LONGEST_WAIT.as_millis()
                    ),
                }))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_name_their_signal_and_time() {
        let sleep = Wait::For(Duration::from_secs(5));
        assert_eq!(
            (sleep.signal_name(), sleep.wake_after()),
            (None, Some(Duration::from_secs(5)))
        );
        let open = Wait::signal("approved");
        assert_eq!(
            (open.signal_name(), open.wake_after()),
            (Some("approved"), None)
        );
        let limits = InputLimits::default();
        assert!(limits.check_wait(&open).is_ok());
        assert!(limits.check_wait(&Wait::signal("")).is_err());
        assert!(limits.check_wait(&Wait::For(LONGEST_WAIT * 2)).is_err());
    }
}
