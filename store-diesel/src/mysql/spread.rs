//! Spread picks: where a pick of the oldest claimable rows (`claim_batch`,
//! `claim_run`) starts when the server is one of several that take
//! writes.
//!
//! `SKIP LOCKED` keeps the claimers of one server off each other's rows,
//! but a Galera node does not see another node's row locks: every node's
//! claimers would pick the same oldest rows, and all but one node's
//! claims of them fail certification (1213) and run again. So a
//! connection whose node has a slot ([`crate::health::pick_slot`]: a
//! Galera node's `wsrep_local_index`, or its place in a URL of several
//! nodes) skips that many windows of rows: its pick asks for the rows of
//! the windows before its own as well (the same statement, a larger
//! `LIMIT` bound, no statement added) and takes its own window, in
//! order, or the oldest `n` when the queue is too short to fill it. Slot 0,
//! and one server that is not a Galera node (no slot), pick exactly as
//! before. The rows asked for and not taken stay locked by the pick until
//! its transaction ends (a few milliseconds); the node's other claimers
//! skip them.

/// Slots above this wrap around: a pick asks for at most this many
/// windows.
const SLOTS: usize = 4;

/// The least window of a run claim: claims of one or a few runs on
/// several nodes must not start one row apart.
pub(super) const RUN_WINDOW: usize = 8;

/// How a pick of `n` rows asks for and takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Spread {
    /// Rows before its own window.
    skip: usize,
    /// Rows it takes.
    n: usize,
}

impl Spread {
    /// The pick of `n` rows on a connection in `slot`, windows of
    /// `window` rows (at least `n`).
    pub(super) fn of(slot: Option<usize>, n: usize, window: usize) -> Self {
        let skip = slot.map_or(0, |slot| (slot % SLOTS) * window.max(n));
        Self { skip, n }
    }

    /// The `LIMIT` the pick binds.
    pub(super) fn limit(self) -> i64 {
        i64::try_from(self.n.saturating_add(self.skip)).unwrap_or(i64::MAX)
    }

    /// The rows it takes out of those the pick answered (in the pick's
    /// order): its window when the queue filled it, else the oldest `n`
    /// (a queue too short to fill the windows has little to contend for,
    /// and a lone claimer must still take the oldest rows first).
    pub(super) fn take<T>(self, mut rows: Vec<T>) -> Vec<T> {
        let start = if rows.len() >= self.skip.saturating_add(self.n) {
            self.skip
        } else {
            0
        };
        rows.truncate(start.saturating_add(self.n));
        rows.drain(..start);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_takes_its_own_window_in_order_or_the_oldest_rows() {
        let rows: Vec<u32> = (0..20).collect();
        let oldest = Spread::of(None, 3, RUN_WINDOW);
        assert_eq!(oldest.limit(), 3);
        assert_eq!(oldest.take(rows[..3].to_vec()), [0, 1, 2]);
        assert_eq!(
            Spread::of(Some(0), 3, RUN_WINDOW),
            oldest,
            "slot 0 as one server"
        );

        let second = Spread::of(Some(1), 3, RUN_WINDOW);
        assert_eq!(second.limit(), 11);
        assert_eq!(second.take(rows[..11].to_vec()), [8, 9, 10]);
        assert_eq!(
            second.take(rows[..5].to_vec()),
            [0, 1, 2],
            "a short queue: the oldest"
        );
        assert_eq!(
            second.take(rows[..10].to_vec()),
            [0, 1, 2],
            "a window not filled: the oldest"
        );
        assert_eq!(second.take(rows[..2].to_vec()), [0, 1]);
        assert!(second.take(Vec::<u32>::new()).is_empty());

        let batch = Spread::of(Some(2), 256, 256);
        assert_eq!(batch.limit(), 768);
        assert_eq!(Spread::of(Some(5), 1, RUN_WINDOW).limit(), 9, "slots wrap");
    }
}
