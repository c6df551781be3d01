//! [`SkewedClock`]: the system clock moved by a fixed amount, as on a
//! worker machine whose clock is wrong.

use flowstate_core::{Clock, SystemClock, Timestamp};

/// The system clock, `skew_micros` off (earlier if negative).
#[derive(Clone, Copy, Debug)]
pub struct SkewedClock {
    /// How far off, in microseconds.
    pub skew_micros: i64,
}

impl SkewedClock {
    /// A clock `minutes` off the system's (behind if negative).
    pub fn minutes(minutes: i64) -> Self {
        Self {
            skew_micros: minutes * 60 * 1_000_000,
        }
    }
}

impl Clock for SkewedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_micros(
            SystemClock
                .now()
                .as_micros()
                .saturating_add(self.skew_micros),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skewed_clock_reads_the_system_clock_moved() {
        let before = SystemClock.now().as_micros();
        let ahead = SkewedClock::minutes(10).now().as_micros();
        let behind = SkewedClock::minutes(-10).now().as_micros();
        let ten = 10 * 60 * 1_000_000;
        assert!(ahead >= before + ten && ahead < before + ten + 60_000_000);
        assert!(behind >= before - ten && behind < before - ten + 60_000_000);
    }
}
