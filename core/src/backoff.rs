//! Backoffs: the per-run redispatch hold-off shared by every recovery sweep,
//! and the event dispatch backoff with its dead-letter point.
//!
//! Both are values and pure functions of the time passed in; the crates that
//! sweep and dispatch ask them and act.

use std::collections::HashMap;
use std::time::Duration;

use crate::ids::RunId;
use crate::time::Timestamp;

/// A per-run doubling hold-off for re-driving runs, capped at
/// [`RedispatchBackoff::MAX_DELAY`].
///
/// One instance is shared by every sweep (stalled runs, undispatched steps):
/// the record is of the action, re-driving a run, not of the signal that
/// prompted it, so a run the relay re-drove a moment ago is not re-driven
/// again by the stalled sweep. That makes the guarantee one message per run
/// per window, not one per run per tick.
///
/// Eligibility and noting are separate calls so a sweep can note a run
/// *before* re-driving it: a run whose re-drive throws is exactly the run
/// most likely to be found again next tick.
///
/// Memory is bounded: an entry whose window has passed without a new note is
/// forgotten, so the map holds only runs re-driven in the last
/// `2 * MAX_DELAY` at most. Losing it on restart costs extra dispatches,
/// never correctness.
#[derive(Clone, Debug)]
pub struct RedispatchBackoff {
    base: Duration,
    entries: HashMap<RunId, Entry>,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    eligible_at: Timestamp,
    delay: Duration,
}

impl Entry {
    /// After this, a new note starts from the base delay again.
    fn forgotten_at(self) -> Timestamp {
        self.eligible_at.plus(self.delay)
    }
}

impl Default for RedispatchBackoff {
    fn default() -> Self {
        Self::new(Self::DEFAULT_BASE)
    }
}

impl RedispatchBackoff {
    /// The first hold-off after a run is re-driven: 30 seconds.
    pub const DEFAULT_BASE: Duration = Duration::from_secs(30);
    /// The longest hold-off: 10 minutes.
    pub const MAX_DELAY: Duration = Duration::from_secs(10 * 60);

    /// A backoff whose first hold-off is `base` (capped at [`Self::MAX_DELAY`]).
    pub fn new(base: Duration) -> Self {
        Self {
            base: base.min(Self::MAX_DELAY),
            entries: HashMap::new(),
        }
    }

    /// Whether `run` may be re-driven at `now`.
    pub fn is_eligible(&self, run: RunId, now: Timestamp) -> bool {
        self.entries
            .get(&run)
            .is_none_or(|entry| now >= entry.eligible_at)
    }

    /// Records that `run` is being re-driven at `now`: it is held off for the
    /// base delay, or for twice its last delay (capped) if it was re-driven
    /// within its last window. Also forgets every entry whose window passed.
    pub fn note(&mut self, run: RunId, now: Timestamp) {
        self.entries.retain(|_, entry| now < entry.forgotten_at());
        let delay = match self.entries.get(&run) {
            Some(entry) => (entry.delay * 2).min(Self::MAX_DELAY),
            None => self.base,
        };
        self.entries.insert(
            run,
            Entry {
                eligible_at: now.plus(delay),
                delay,
            },
        );
    }

    /// The current hold-off of `run`, if it has one.
    pub fn delay_of(&self, run: RunId) -> Option<Duration> {
        self.entries.get(&run).map(|entry| entry.delay)
    }

    /// How many runs the backoff remembers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the backoff remembers no run.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What happens to an event whose dispatch attempt just failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventDispatchOutcome {
    /// Try again after this long.
    RetryAfter(Duration),
    /// Give up: the event is dead-lettered.
    DeadLetter,
}

/// The event dispatch backoff: `1 s x 2^attempts`, capped at 5 minutes, and
/// dead-lettering when the 8th attempt fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventDispatchBackoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// The longest delay.
    pub max_delay: Duration,
    /// The attempt whose failure dead-letters the event.
    pub max_attempts: u32,
}

impl Default for EventDispatchBackoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max_delay: Duration::from_secs(5 * 60),
            max_attempts: 8,
        }
    }
}

impl EventDispatchBackoff {
    /// The outcome once attempt number `failed_attempt` (1-based) has failed,
    /// having had `failed_attempt - 1` failures before it.
    pub fn after_failure(self, failed_attempt: u32) -> EventDispatchOutcome {
        if failed_attempt >= self.max_attempts {
            return EventDispatchOutcome::DeadLetter;
        }
        let previous = failed_attempt.saturating_sub(1);
        let factor = 2u32.checked_pow(previous).unwrap_or(u32::MAX);
        let delay = self.base.saturating_mul(factor).min(self.max_delay);
        EventDispatchOutcome::RetryAfter(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_noted_run_is_held_off_for_the_base_delay() {
        let mut backoff = RedispatchBackoff::new(secs(30));
        let run = RunId::generate();
        let t0 = Timestamp::from_millis(0);
        assert!(backoff.is_eligible(run, t0));
        backoff.note(run, t0);
        assert!(!backoff.is_eligible(run, t0));
        assert!(!backoff.is_eligible(run, t0.plus(secs(29))));
        assert!(backoff.is_eligible(run, t0.plus(secs(30))));
    }

    #[test]
    fn the_hold_off_doubles_while_the_run_keeps_coming_back_and_caps_at_ten_minutes() {
        let mut backoff = RedispatchBackoff::new(secs(30));
        let run = RunId::generate();
        let mut now = Timestamp::from_millis(0);
        let mut seen = Vec::new();
        for _ in 0..8 {
            backoff.note(run, now);
            let delay = backoff.delay_of(run).unwrap();
            seen.push(delay.as_secs());
            now = now.plus(delay);
        }
        assert_eq!(seen, vec![30, 60, 120, 240, 480, 600, 600, 600]);
    }

    #[test]
    fn a_quiet_run_is_forgotten_and_starts_from_the_base_again() {
        let mut backoff = RedispatchBackoff::new(secs(30));
        let run = RunId::generate();
        let other = RunId::generate();
        let t0 = Timestamp::from_millis(0);
        backoff.note(run, t0);
        backoff.note(run, t0.plus(secs(30)));
        assert_eq!(backoff.delay_of(run), Some(secs(60)));
        // eligible at 90 s, forgotten at 150 s
        backoff.note(other, t0.plus(secs(150)));
        assert_eq!(backoff.delay_of(run), None, "the entry outlived its window");
        assert_eq!(backoff.len(), 1);
        backoff.note(run, t0.plus(secs(151)));
        assert_eq!(backoff.delay_of(run), Some(secs(30)));
    }

    #[test]
    fn runs_are_held_off_independently() {
        let mut backoff = RedispatchBackoff::default();
        let (a, b) = (RunId::generate(), RunId::generate());
        let t0 = Timestamp::from_millis(0);
        backoff.note(a, t0);
        assert!(!backoff.is_eligible(a, t0));
        assert!(backoff.is_eligible(b, t0));
    }

    proptest! {
        #[test]
        fn memory_stays_bounded_by_the_runs_of_the_last_window(notes in proptest::collection::vec((0u8..50, 0u64..5), 1..400)) {
            let mut backoff = RedispatchBackoff::default();
            let runs: Vec<RunId> = (0..50).map(|_| RunId::generate()).collect();
            let mut now = Timestamp::from_millis(0);
            for (run, step_minutes) in notes {
                now = now.plus(Duration::from_secs(step_minutes * 60));
                backoff.note(runs[run as usize], now);
                prop_assert!(backoff.len() <= 50);
                prop_assert!(backoff.delay_of(runs[run as usize]).unwrap() <= RedispatchBackoff::MAX_DELAY);
            }
            // Once a whole maximum window has passed in silence, a note forgets all others.
            let later = now.plus(RedispatchBackoff::MAX_DELAY * 2);
            backoff.note(runs[0], later);
            prop_assert_eq!(backoff.len(), 1);
        }
    }

    #[test]
    fn event_backoff_table() {
        let backoff = EventDispatchBackoff::default();
        let rows = [
            (1, EventDispatchOutcome::RetryAfter(secs(1))),
            (2, EventDispatchOutcome::RetryAfter(secs(2))),
            (3, EventDispatchOutcome::RetryAfter(secs(4))),
            (7, EventDispatchOutcome::RetryAfter(secs(64))),
            (8, EventDispatchOutcome::DeadLetter),
            (9, EventDispatchOutcome::DeadLetter),
        ];
        for (attempt, expected) in rows {
            assert_eq!(
                backoff.after_failure(attempt),
                expected,
                "attempt {attempt}"
            );
        }
    }

    #[test]
    fn event_backoff_caps_at_five_minutes() {
        let backoff = EventDispatchBackoff {
            max_attempts: 100,
            ..EventDispatchBackoff::default()
        };
        assert_eq!(
            backoff.after_failure(10),
            EventDispatchOutcome::RetryAfter(secs(300))
        );
        assert_eq!(
            backoff.after_failure(60),
            EventDispatchOutcome::RetryAfter(secs(300))
        );
    }

    proptest! {
        #[test]
        fn event_backoff_is_monotonic_and_capped(attempt in 1u32..200) {
            let backoff = EventDispatchBackoff { max_attempts: 1_000, ..EventDispatchBackoff::default() };
            let (EventDispatchOutcome::RetryAfter(a), EventDispatchOutcome::RetryAfter(b)) =
                (backoff.after_failure(attempt), backoff.after_failure(attempt + 1)) else {
                    return Err(TestCaseError::fail("dead-lettered below max_attempts"));
                };
            prop_assert!(a <= b);
            prop_assert!(b <= secs(300));
            prop_assert!(a >= secs(1));
        }
    }
}
