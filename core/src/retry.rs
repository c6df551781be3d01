//! Retry policy per step and attempt numbering.
//!
//! The first attempt of a step is attempt 1. A policy of `retries: 2` allows
//! attempts 1, 2 and 3.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How often, and how long apart, a failed step may be tried again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// How many retries after the first attempt; 0 means the step runs once.
    pub retries: u32,
    /// How long the engine waits before a retry; `None` retries at once.
    pub retry_delay: Option<Duration>,
}

impl RetryPolicy {
    /// The first attempt's number.
    pub const FIRST_ATTEMPT: u32 = 1;

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
