//! Schedules, staleness and leases: when something is due, when a run counts
//! as stranded, when a lease has run out.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The shortest gap a schedule written without one gets: 6 hours.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(6 * 60 * 60);

/// The longest gap a schedule written without one gets: 24 hours.
pub const DEFAULT_MAX_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a run may sit at `running` before a sweep reaps it: 2 hours.
///
/// Twice the longest budget anyone sets in practice: reaping a run that was
/// still working loses its work, keeping a stranded one a little longer costs
/// almost nothing.
pub const STALE_RUN_AFTER: Duration = Duration::from_secs(2 * 60 * 60);

/// A schedule's interval in milliseconds, as written in configuration.
///
/// Signed on purpose: configuration may say anything. Negative bounds read as
/// zero and swapped bounds read as a range, because a swapped pair is a typo,
/// not an attack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    /// One bound, in milliseconds.
    pub min_ms: i64,
    /// The other bound, in milliseconds.
    pub max_ms: i64,
}

impl Default for Interval {
    fn default() -> Self {
        Self {
            min_ms: DEFAULT_MIN_INTERVAL.as_millis() as i64,
            max_ms: DEFAULT_MAX_INTERVAL.as_millis() as i64,
        }
    }
}

impl Interval {
    /// The interval's bounds as a non-negative, ordered pair of milliseconds.
    pub fn bounds(self) -> (u64, u64) {
        let low = self.min_ms.min(self.max_ms).max(0).unsigned_abs();
        let high = self.min_ms.max(self.max_ms).max(0).unsigned_abs();
        (low, high)
    }
}

/// When a schedule should next fire: uniform in `[now + low, now + high]`,
/// with the interval read as [`Interval::bounds`] does.
pub fn next_run_at<R: Rng + ?Sized>(interval: Interval, now: Timestamp, rng: &mut R) -> Timestamp {
    let (low, high) = interval.bounds();
    let offset_ms = if low == high {
        low
    } else {
        rng.random_range(low..=high)
    };
    now.plus(Duration::from_millis(offset_ms))
}

/// Whether an enabled schedule whose next run is at `next_run_at` is due.
pub fn is_due(enabled: bool, next_run_at: Timestamp, now: Timestamp) -> bool {
    enabled && next_run_at <= now
}

/// Whether a run started at `started_at` and still running has been running
/// for at least `limit` (see [`STALE_RUN_AFTER`]) and may be reaped.
pub fn is_stale(started_at: Timestamp, now: Timestamp, limit: Duration) -> bool {
    now.since(started_at) >= limit
}

/// A time-limited claim on something, held by one owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it.
    pub holder: String,
    /// When it runs out unless renewed.
    pub expires_at: Timestamp,
}

impl Lease {
    /// A lease for `holder` taken at `now` for `ttl`.
    pub fn new(holder: impl Into<String>, now: Timestamp, ttl: Duration) -> Self {
        Self {
            holder: holder.into(),
            expires_at: now.plus(ttl),
        }
    }

    /// Whether the lease has run out at `now`: expiry is exclusive, so a lease
    /// is gone at the instant it expires.
    pub fn is_expired(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }

    /// The same lease renewed at `now` for `ttl`.
    #[must_use]
    pub fn renewed(&self, now: Timestamp, ttl: Duration) -> Self {
        Self::new(self.holder.clone(), now, ttl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    const HOUR_MS: i64 = 60 * 60 * 1000;

    fn bounds(min_ms: i64, max_ms: i64) -> (u64, u64) {
        Interval { min_ms, max_ms }.bounds()
    }

    #[test]
    fn bounds_table() {
        assert_eq!(bounds(10, 20), (10, 20));
        assert_eq!(bounds(20, 10), (10, 20));
        assert_eq!(bounds(-5, 10), (0, 10));
        assert_eq!(bounds(10, -5), (0, 10));
        assert_eq!(bounds(-5, -10), (0, 0));
        assert_eq!(bounds(7, 7), (7, 7));
    }

    #[test]
    fn the_default_interval_is_six_to_twenty_four_hours() {
        assert_eq!(
            bounds(Interval::default().min_ms, Interval::default().max_ms),
            (6 * HOUR_MS as u64, 24 * HOUR_MS as u64)
        );
    }

    #[test]
    fn due_table() {
        let t = Timestamp::from_millis(1_000);
        assert!(is_due(true, t, t));
        assert!(is_due(true, Timestamp::from_millis(999), t));
        assert!(!is_due(true, Timestamp::from_millis(1_001), t));
        assert!(!is_due(false, Timestamp::from_millis(0), t));
    }

    #[test]
    fn staleness_starts_at_the_limit() {
        let start = Timestamp::from_millis(0);
        let limit = STALE_RUN_AFTER;
        assert!(!is_stale(
            start,
            start.plus(limit.saturating_sub(Duration::from_micros(1))),
            limit
        ));
        assert!(is_stale(start, start.plus(limit), limit));
        assert_eq!(STALE_RUN_AFTER, Duration::from_secs(7_200));
    }

    #[test]
    fn a_lease_expires_at_its_expiry_and_renews_from_now() {
        let now = Timestamp::from_millis(0);
        let lease = Lease::new("worker-1", now, Duration::from_secs(30));
        assert!(!lease.is_expired(now.plus(Duration::from_secs(29))));
        assert!(lease.is_expired(now.plus(Duration::from_secs(30))));
        let later = now.plus(Duration::from_secs(20));
        assert_eq!(
            lease.renewed(later, Duration::from_secs(30)).expires_at,
            later.plus(Duration::from_secs(30))
        );
    }

    proptest! {
        #[test]
        fn next_run_at_is_within_the_read_bounds(min_ms in -10 * HOUR_MS..48 * HOUR_MS, max_ms in -10 * HOUR_MS..48 * HOUR_MS, now_ms in 0i64..4_000_000_000_000, seed: u64) {
            let mut rng = SmallRng::seed_from_u64(seed);
            let now = Timestamp::from_millis(now_ms);
            let interval = Interval { min_ms, max_ms };
            let (low, high) = interval.bounds();
            let next = next_run_at(interval, now, &mut rng);
            prop_assert!(next >= now.plus(Duration::from_millis(low)));
            prop_assert!(next <= now.plus(Duration::from_millis(high)));
            prop_assert!(next >= now, "a negative bound never schedules into the past");
        }

        #[test]
        fn swapped_bounds_draw_the_same_values(a in 0i64..48 * HOUR_MS, b in 0i64..48 * HOUR_MS, seed: u64) {
            let now = Timestamp::from_millis(0);
            let x = next_run_at(Interval { min_ms: a, max_ms: b }, now, &mut SmallRng::seed_from_u64(seed));
            let y = next_run_at(Interval { min_ms: b, max_ms: a }, now, &mut SmallRng::seed_from_u64(seed));
            prop_assert_eq!(x, y);
        }
    }

    #[test]
    fn next_run_at_covers_the_whole_interval() {
        let mut rng = SmallRng::seed_from_u64(7);
        let now = Timestamp::from_millis(0);
        let interval = Interval {
            min_ms: 0,
            max_ms: 9,
        };
        let mut seen = [false; 10];
        for _ in 0..1_000 {
            let ms = next_run_at(interval, now, &mut rng).as_micros() / 1_000;
            seen[ms as usize] = true;
        }
        assert!(
            seen.iter().all(|s| *s),
            "uniform draw missed a value: {seen:?}"
        );
    }
}
