//! [`FlushRetry`]: how long a [`GroupCommit`](crate::GroupCommit) keeps
//! trying a flush whose error is retryable, and how long it waits between
//! tries. A value and a pure function ([`FlushRetry::delay`]); the flusher
//! asks it and acts.
//!
//! Retrying a flush is safe because a completion is fenced by its claim's
//! attempt: a flush whose COMMIT was lost in flight (written, the answer
//! lost) is sent again, and the store answers `Ok` for a repeat of a
//! completion it already wrote, with nothing written twice
//! ([`StepClaim`](flowstate_core::StepClaim)); a completion whose attempt
//! was taken back in the meantime is refused as
//! [`Error::ClaimLost`](flowstate_core::Error::ClaimLost).

use std::time::Duration;

/// How a failed flush whose error
/// [`is_retryable`](flowstate_core::Error::is_retryable) is tried again:
/// the same items, as the same flush, after `initial`, then twice as long
/// each time up to `max`, while the store has been failing for less than
/// `give_up_after`.
///
/// `give_up_after` counts from the first failure of the store's current
/// run of failures (an *outage*: it ends at the first flush that succeeds),
/// not from each flush's own first failure. So one outage keeps a flusher
/// trying for `give_up_after` at most: a flush that starts after the limit
/// has passed is tried once, and its items are answered with its error if
/// it fails. A limit of zero ([`FlushRetry::NEVER`]) never retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushRetry {
    /// The wait before the first retry (a zero reads as 1 ms).
    pub initial: Duration,
    /// The longest wait between two tries.
    pub max: Duration,
    /// How long the store may keep failing flushes before a flush gives
    /// up: its items are answered with its error, their steps left as the
    /// store holds them (running, for the claim deadline to recover).
    pub give_up_after: Duration,
}

impl Default for FlushRetry {
    /// 50 ms, doubling up to 2 s, giving up after 60 s.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(50),
            max: Duration::from_secs(2),
            give_up_after: Duration::from_secs(60),
        }
    }
}

impl FlushRetry {
    /// No retry: a failed flush fails its items at once.
    pub const NEVER: Self = Self {
        initial: Duration::ZERO,
        max: Duration::ZERO,
        give_up_after: Duration::ZERO,
    };

    /// The wait before trying a flush again after its `failures`th failure
    /// (from 1), the store having been failing for `failing_for`: `None`
    /// once `failing_for` reached `give_up_after` (give up), otherwise
    /// `initial` doubled `failures - 1` times, capped at `max` and at what
    /// is left of `give_up_after`, so the last try falls on the limit.
    pub fn delay(&self, failures: u32, failing_for: Duration) -> Option<Duration> {
        let left = self.give_up_after.checked_sub(failing_for)?;
        if left.is_zero() {
            return None;
        }
        let initial = self.initial.max(Duration::from_millis(1));
        let doublings = failures.saturating_sub(1).min(31);
        let backoff = initial
            .saturating_mul(1 << doublings)
            .min(self.max.max(initial));
        Some(backoff.min(left))
    }

    /// Whether a failed flush may be tried again at all.
    pub(crate) fn retries(&self) -> bool {
        !self.give_up_after.is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn delays_double_up_to_max_and_stop_at_the_limit() {
        let retry = FlushRetry::default();
        // (failures, failing for, delay)
        let rows = [
            (1, Duration::ZERO, Some(50 * MS)),
            (2, 50 * MS, Some(100 * MS)),
            (3, 150 * MS, Some(200 * MS)),
            (6, 3 * 1000 * MS, Some(1600 * MS)),
            (7, 5 * 1000 * MS, Some(2000 * MS)),
            (40, 10 * 1000 * MS, Some(2000 * MS)),
            (u32::MAX, 10 * 1000 * MS, Some(2000 * MS)),
            // The last wait ends on the limit, then it gives up.
            (30, 59_500 * MS, Some(500 * MS)),
            (31, 60_000 * MS, None),
            (31, 61_000 * MS, None),
            // A flush that starts after the limit is tried once.
            (1, 90_000 * MS, None),
        ];
        for (failures, failing_for, delay) in rows {
            assert_eq!(
                retry.delay(failures, failing_for),
                delay,
                "{failures} failures, failing for {failing_for:?}"
            );
        }
    }

    #[test]
    fn never_gives_up_at_once_and_odd_settings_are_read_sanely() {
        assert_eq!(FlushRetry::NEVER.delay(1, Duration::ZERO), None);
        assert!(!FlushRetry::NEVER.retries());
        assert!(FlushRetry::default().retries());
        // A zero initial wait reads as 1 ms; a max below it as the initial.
        let odd = FlushRetry {
            initial: Duration::ZERO,
            max: Duration::ZERO,
            give_up_after: Duration::from_secs(1),
        };
        assert_eq!(odd.delay(1, Duration::ZERO), Some(MS));
        assert_eq!(odd.delay(9, Duration::ZERO), Some(MS));
    }
}
