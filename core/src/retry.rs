//! Retry policy per step and attempt numbering.
//!
//! The first attempt of a step is attempt 1. A policy of `retries: 2` allows
//! attempts 1, 2 and 3.
//!
//! A step given no policy gets [`RetryPolicy::DEFAULT`] (three retries, no
//! delay): that is what [`RetryPolicy::default()`] and
//! [`NewStep::new`](crate::NewStep::new) give, and what a store keeps and
//! reads back. A step that must run at most once says so:
//! [`RetryPolicy::NONE`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, InvalidInput};
use crate::field;

/// How often, and how long apart, a failed step may be tried again.
///
/// The default is [`RetryPolicy::DEFAULT`]: a few retries, not none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// How many retries after the first attempt; 0 means the step runs once.
    pub retries: u32,
    /// How long the engine waits before a retry; `None` retries at once.
    pub retry_delay: Option<Duration>,
}

impl Default for RetryPolicy {
    /// [`RetryPolicy::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl RetryPolicy {
    /// The first attempt's number.
    pub const FIRST_ATTEMPT: u32 = 1;

    /// The policy of a step inserted without one (the one place it is
    /// said): three retries, four attempts in all, with no delay.
    ///
    /// Why not zero: a step that fails once would then be failed for good,
    /// so one transient error (a timeout, a dropped connection) would fail
    /// its run, and nothing in the step says it was meant to. Engines
    /// default to several attempts for that reason; a step that must not
    /// run twice asks for [`RetryPolicy::NONE`]. Why no delay: the delay
    /// between attempts is the engine's to choose (a claim of a failed step
    /// retries it at once whatever the delay; a batch claim waits it out),
    /// and a store should not invent one. A store keeps exactly the policy
    /// a [`NewStep`](crate::NewStep) carries: it never substitutes its own
    /// (a column default, say).
    pub const DEFAULT: Self = Self::with_retries(3);

    /// No retries: the step runs once, and a failure is final.
    pub const NONE: Self = Self::with_retries(0);

    /// The longest retry delay a store keeps: `u32::MAX` milliseconds,
    /// about 49.7 days.
    pub const MAX_RETRY_DELAY: Duration = Duration::from_millis(u32::MAX as u64);

    /// The retry delay as every store keeps it: whole milliseconds (a
    /// fraction of a millisecond is dropped). A delay over
    /// [`Self::MAX_RETRY_DELAY`] is [`InvalidInput::OutOfRange`], refused
    /// before anything is written.
    pub fn retry_delay_millis(self) -> Result<Option<u32>, Error> {
        self.retry_delay
            .map(|delay| {
                u32::try_from(delay.as_millis()).map_err(|_| {
                    Error::InvalidInput(InvalidInput::OutOfRange {
                        field: field::RETRY_DELAY,
                        detail: format!("{delay:?} is over the limit of {} ms", u32::MAX),
                    })
                })
            })
            .transpose()
    }

    /// This policy as a store keeps it: the retry delay in whole
    /// milliseconds (see [`Self::retry_delay_millis`]).
    pub fn as_stored(self) -> Result<Self, Error> {
        Ok(Self {
            retries: self.retries,
            retry_delay: self
                .retry_delay_millis()?
                .map(|ms| Duration::from_millis(u64::from(ms))),
        })
    }

    /// A policy with `retries` retries and no delay.
    pub const fn with_retries(retries: u32) -> Self {
        Self {
            retries,
            retry_delay: None,
        }
    }

    /// The number of attempts the policy allows in all.
    pub const fn max_attempts(self) -> u32 {
        self.retries.saturating_add(1)
    }

    /// Whether an attempt may follow attempt `attempt` once it has failed.
    pub const fn has_attempts_left(self, attempt: u32) -> bool {
        attempt < self.max_attempts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn attempts_left_table() {
        let rows = [
            (0, 1, false),
            (1, 1, true),
            (1, 2, false),
            (3, 3, true),
            (3, 4, false),
            (u32::MAX, u32::MAX - 1, true),
            (u32::MAX, u32::MAX, false),
        ];
        for (retries, attempt, left) in rows {
            assert_eq!(
                RetryPolicy::with_retries(retries).has_attempts_left(attempt),
                left,
                "retries {retries}, attempt {attempt}"
            );
        }
    }

    #[test]
    fn delays_are_kept_to_the_millisecond_up_to_the_limit() {
        let with = |delay| RetryPolicy {
            retries: 1,
            retry_delay: Some(delay),
        };
        assert_eq!(
            with(Duration::from_micros(1_999))
                .retry_delay_millis()
                .unwrap(),
            Some(1)
        );
        assert_eq!(
            with(Duration::from_micros(1_999))
                .as_stored()
                .unwrap()
                .retry_delay,
            Some(Duration::from_millis(1))
        );
        assert_eq!(
            with(RetryPolicy::MAX_RETRY_DELAY)
                .retry_delay_millis()
                .unwrap(),
            Some(u32::MAX)
        );
        assert!(matches!(
            with(RetryPolicy::MAX_RETRY_DELAY + Duration::from_millis(1)).retry_delay_millis(),
            Err(Error::InvalidInput(InvalidInput::OutOfRange {
                field: "retry delay",
                ..
            }))
        ));
        assert_eq!(
            RetryPolicy::with_retries(3).retry_delay_millis().unwrap(),
            None
        );
    }

    #[test]
    fn the_default_retries_three_times_at_once() {
        assert_eq!(RetryPolicy::default(), RetryPolicy::DEFAULT);
        assert_eq!(RetryPolicy::DEFAULT.max_attempts(), 4);
        assert_eq!(RetryPolicy::DEFAULT.retry_delay, None);
        assert!(RetryPolicy::DEFAULT.has_attempts_left(RetryPolicy::FIRST_ATTEMPT));
        assert!(!RetryPolicy::NONE.has_attempts_left(RetryPolicy::FIRST_ATTEMPT));
    }

    proptest! {
        #[test]
        fn a_policy_allows_exactly_retries_plus_one_attempts(retries in 0u32..10_000) {
            let policy = RetryPolicy::with_retries(retries);
            let allowed = (RetryPolicy::FIRST_ATTEMPT..=retries + 2)
                .filter(|&a| a == RetryPolicy::FIRST_ATTEMPT || policy.has_attempts_left(a - 1))
                .count();
            prop_assert_eq!(allowed as u32, retries + 1);
        }
    }
}
