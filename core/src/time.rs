//! Time as a value: microsecond UTC timestamps and the [`Clock`] port.
//!
//! Pure decisions take a [`Timestamp`] argument; only a backend or a runner
//! asks a [`Clock`], so tests can hold time still or move it by hand.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time: whole microseconds since the Unix epoch, UTC.
///
/// Microseconds are the finest precision every supported database keeps, so a
/// timestamp survives a round trip through any backend unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Self = Self(0);

    /// A timestamp from microseconds since the epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Self(micros)
    }

    /// A timestamp from milliseconds since the epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis.saturating_mul(1_000))
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// A [`SystemTime`], truncated to microseconds.
    pub fn from_system_time(time: SystemTime) -> Self {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Self(i64::try_from(after.as_micros()).unwrap_or(i64::MAX)),
            Err(before) => Self(-i64::try_from(before.duration().as_micros()).unwrap_or(i64::MAX)),
        }
    }

    /// This timestamp moved `by` later, saturating at the end of time.
    #[must_use]
    pub fn plus(self, by: Duration) -> Self {
        Self(self.0.saturating_add(duration_micros(by)))
    }

    /// This timestamp moved `by` earlier, saturating at the start of time.
    #[must_use]
    pub fn minus(self, by: Duration) -> Self {
        Self(self.0.saturating_sub(duration_micros(by)))
    }

    /// How long after `earlier` this is; zero if it is not after it.
    pub fn since(self, earlier: Self) -> Duration {
        Duration::from_micros(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}us", self.0)
    }
}

fn duration_micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Where a backend or runner reads the current time.
///
/// Implementations must be cheap and never go backwards by more than the
/// system clock does.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_system_time(SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn since_is_zero_for_an_earlier_time() {
        let t = Timestamp::from_micros(10);
        assert_eq!(Timestamp::from_micros(5).since(t), Duration::ZERO);
        assert_eq!(t.since(Timestamp::from_micros(4)), Duration::from_micros(6));
    }

    #[test]
    fn system_time_before_the_epoch_is_negative() {
        let t = UNIX_EPOCH - Duration::from_micros(3);
        assert_eq!(Timestamp::from_system_time(t).as_micros(), -3);
    }

    proptest! {
        #[test]
        fn plus_then_since_gives_the_duration_back(start in -1_000_000_000_000i64..1_000_000_000_000, us in 0u64..1_000_000_000_000) {
            let t = Timestamp::from_micros(start);
            let d = Duration::from_micros(us);
            prop_assert_eq!(t.plus(d).since(t), d);
            prop_assert_eq!(t.plus(d).minus(d), t);
        }
    }
}
