//! [`ManualClock`]: a clock that tests hold still or move by hand.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use flowstate_core::{Clock, Timestamp};

/// A [`Clock`] that only moves when told to.
///
/// Share it as an `Arc<ManualClock>` between the test and the store under
/// test (an `Arc<ManualClock>` coerces to the `Arc<dyn Clock>` a backend
/// takes). Held still, every write stamps the same microsecond, which is how
/// the suite checks orderings that must not depend on time; moved by hand, it
/// makes durations exact.
#[derive(Debug)]
pub struct ManualClock {
    micros: AtomicI64,
}

impl ManualClock {
    /// Where a new clock starts: 2025-01-01T00:00:00Z.
    pub const START: Timestamp = Timestamp::from_micros(1_735_689_600_000_000);

    /// A clock standing at [`Self::START`].
    pub const fn new() -> Self {
        Self::starting_at(Self::START)
    }

    /// A clock standing at `at`.
    pub const fn starting_at(at: Timestamp) -> Self {
        Self {
            micros: AtomicI64::new(at.as_micros()),
        }
    }

    /// Moves the clock to `at` (backwards too, if asked).
    pub fn set(&self, at: Timestamp) {
        self.micros.store(at.as_micros(), Ordering::SeqCst);
    }

    /// Moves the clock `by` later and answers the new time.
    pub fn advance(&self, by: Duration) -> Timestamp {
        let by = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
        let before = self
            .micros
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(by))
            })
            .unwrap_or_else(|now| now);
        Timestamp::from_micros(before.saturating_add(by))
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_micros(self.micros.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_stands_still_until_moved() {
        let clock = ManualClock::new();
        assert_eq!(clock.now(), ManualClock::START);
        assert_eq!(clock.now(), ManualClock::START);
        let later = clock.advance(Duration::from_millis(3));
        assert_eq!(later.since(ManualClock::START), Duration::from_millis(3));
        assert_eq!(clock.now(), later);
        clock.set(Timestamp::EPOCH);
        assert_eq!(clock.now(), Timestamp::EPOCH);
    }
}
