//! How the subject's claim deadlines relate to the reference's
//! ([`LeaseClock`]), and [`reconcile`]: what may legitimately differ between
//! two canonical replies to one op, taken out so they compare with `==`.

use std::time::Instant;

use flowstate_core::{ClaimOutcome, Step, Timestamp};

use super::answer::{Answer, Reply};

/// How the subject's lease clock (claim deadlines, expiry) relates to the
/// reference's.
#[derive(Clone, Copy, Debug)]
pub enum LeaseClock {
    /// Both read the same clock: deadlines match to the microsecond (two
    /// [`MemoryStore`](crate::MemoryStore)s, say).
    Same,
    /// The subject's reads the reference's clock plus the real time passed
    /// since an instant before the subject was opened: a `DieselStore`
    /// whose `LeaseClockOffset` follows the harness clock, whose deadlines
    /// come from the database's clock. A subject deadline counts as the
    /// reference's if it is at most [`LeaseClock::SLACK_MICROS`] behind it
    /// and at most the real time passed since that instant (plus the slack)
    /// ahead of it.
    AheadByRealTimeSince(Instant),
}

impl LeaseClock {
    /// How far a subject deadline may read *behind* the reference's, or
    /// beyond the real time passed: 2 ms. SQLite's clock (`julianday('now')`)
    /// keeps milliseconds, so a deadline it stamps may read up to 1 ms
    /// earlier than the real time it was taken at, and its `REAL` day
    /// number rounds by some tens of microseconds more.
    pub const SLACK_MICROS: i64 = 2_000;

    /// Whether the subject's `subject` deadline is the reference's
    /// `reference` read on the subject's lease clock.
    pub fn agrees(self, reference: Timestamp, subject: Timestamp) -> bool {
        let ahead = subject.as_micros().saturating_sub(reference.as_micros());
        match self {
            Self::Same => ahead == 0,
            Self::AheadByRealTimeSince(since) => {
                let passed = i64::try_from(since.elapsed().as_micros()).unwrap_or(i64::MAX);
                (-Self::SLACK_MICROS..=passed.saturating_add(Self::SLACK_MICROS)).contains(&ahead)
            }
        }
    }

    fn snap(self, reference: Timestamp, subject: &mut Timestamp) {
        if self.agrees(reference, *subject) {
            *subject = reference;
        }
    }

    fn snap_step(self, reference: &Step, subject: &mut Step) {
        if let (Some(r), Some(s)) = (reference.claimed_until, subject.claimed_until.as_mut()) {
            self.snap(r, s);
        }
    }
}

/// Takes out of two canonical replies to one op what may legitimately
/// differ: the subject's deadlines that agree with the reference's become
/// the reference's, and ties the port leaves unordered are put in one
/// order. An answer out of its port's order is left as it is, to differ.
pub(crate) fn reconcile(lease: LeaseClock, reference: &mut Reply, subject: &mut Reply) {
    let (Ok(r), Ok(s)) = (reference, subject) else {
        return;
    };
    match (r, s) {
        (Answer::Step(a), Answer::Step(b))
        | (Answer::Claimed(Some(a)), Answer::Claimed(Some(b)))
        | (Answer::Outcome(ClaimOutcome::Claimed(a)), Answer::Outcome(ClaimOutcome::Claimed(b))) => {
            lease.snap_step(a, b);
        }
        (Answer::NewStep(a), Answer::NewStep(b)) => lease.snap_step(&a.record, &mut b.record),
        (Answer::Steps(a), Answer::Steps(b)) => {
            for step in b.iter_mut() {
                if let Some(r) = a.iter().find(|r| r.id == step.id) {
                    lease.snap_step(r, step);
                }
            }
        }
        (Answer::Deadline(a), Answer::Deadline(b)) => lease.snap(*a, b),
        (Answer::History(a), Answer::History(b)) => {
            for rows in [a, b] {
                if rows.is_sorted_by_key(|row| (row.created_at, row.attempt)) {
                    rows.sort_by_key(|row| (row.created_at, row.attempt, row.step));
                }
            }
        }
        (Answer::Expired(a), Answer::Expired(b)) => {
            if !b.is_sorted_by_key(|claim| claim.claimed_until) {
                return;
            }
            for claim in b.iter_mut() {
                if let Some(r) = a.iter().find(|r| r.step == claim.step) {
                    lease.snap(r.claimed_until, &mut claim.claimed_until);
                }
            }
            for claims in [a, b] {
                if claims.is_sorted_by_key(|claim| claim.claimed_until) {
                    claims.sort_by_key(|claim| (claim.claimed_until, claim.step));
                }
            }
        }
        _ => {}
    }
}
