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
//! before. A pick that asks for rows it will not take
//! ([`Spread::reads_beyond_its_rows`]) must not lock them: on Galera a
//! local transaction holding a row lock is brute-force aborted by any
//! other node's write set touching that row, so a pick locking the other
//! nodes' windows was aborted by their every claim (2,443 aborts and a
//! conflict past the budget in one lease round of 12 workers). The run
//! claim reads such a pick without locking and then locks only the rows
//! it takes, by primary key, skipping those a claimer of its own node
//! holds (one statement more, on a node with a slot only).
//!
//! A pick that runs again after a conflict ([`Spread::again`]) has just
//! collided with another node's claim of the same rows: when its queue is
//! short (the end of a burst, when every node falls back to the oldest
//! rows) the nodes would collide again on the next try, and a claimer
//! could lose every try of its budget. So a retry on a node with a slot
//! asks for every slot's windows and takes its rows at a random start
//! among those answered, in order from there, whatever its slot: nodes
//! that collided part. A first try, and every try on one server, is as
//! above, so a lone claimer still takes the oldest rows first.

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
    /// A retry's random draw: where among the rows answered it starts
    /// ([`Spread::again`]); `None` for a pick by windows.
    draw: Option<u64>,
}

impl Spread {
    /// The pick of `n` rows on a connection in `slot`, windows of
    /// `window` rows (at least `n`).
    pub(super) fn of(slot: Option<usize>, n: usize, window: usize) -> Self {
        let skip = slot.map_or(0, |slot| (slot % SLOTS) * window.max(n));
        Self {
            skip,
            n,
            draw: None,
        }
    }

    /// The pick of `n` rows by a unit of work on a connection in `slot`
    /// that runs for the `attempt`-th time (0: the first): the first as
    /// [`Spread::of`]; a retry on a node with a slot asks for every slot's
    /// windows and starts at a random row among those answered (`draw`).
    /// On one server (no slot) every try is the first.
    pub(super) fn again(
        slot: Option<usize>,
        n: usize,
        window: usize,
        attempt: u32,
        draw: u64,
    ) -> Self {
        match slot {
            Some(_) if attempt > 0 => Self {
                skip: (SLOTS - 1) * window.max(n),
                n,
                draw: Some(draw),
            },
            _ => Self::of(slot, n, window),
        }
    }

    /// Whether the pick asks for rows it will not take (the windows before
    /// its own, or a retry's): then it must not lock what it reads, or
    /// another node's commit of a row it read and left would abort it (a
    /// Galera applier brute-force aborts a local transaction that holds a
    /// lock on a row its write set touches). Such a pick reads without
    /// locking and then locks only the rows it takes.
    pub(super) fn reads_beyond_its_rows(self) -> bool {
        self.skip > 0 || self.draw.is_some()
    }

    /// The `LIMIT` the pick binds.
    pub(super) fn limit(self) -> i64 {
        i64::try_from(self.n.saturating_add(self.skip)).unwrap_or(i64::MAX)
    }

    /// The rows it takes out of those the pick answered (in the pick's
    /// order): its window when the queue filled it, else the oldest `n`
    /// (a queue too short to fill the windows has little to contend for,
    /// and a lone claimer must still take the oldest rows first).
    ///
    /// A retry takes `n` rows in order from a random start among those
    /// answered (the last `n` at the latest), or all of them when they are
    /// no more than `n`.
    pub(super) fn take<T>(self, mut rows: Vec<T>) -> Vec<T> {
        let start = if let Some(draw) = self.draw {
            let starts = rows.len().saturating_sub(self.n).saturating_add(1);
            usize::try_from(draw % starts as u64).unwrap_or(0)
        } else if rows.len() >= self.skip.saturating_add(self.n) {
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

    #[test]
    fn a_retry_on_a_node_starts_at_a_random_row_of_every_slots_windows() {
        let rows: Vec<u32> = (0..40).collect();
        assert_eq!(
            Spread::again(None, 3, RUN_WINDOW, 5, 17),
            Spread::of(None, 3, RUN_WINDOW),
            "one server: every try is the first"
        );
        assert_eq!(
            Spread::again(Some(2), 3, RUN_WINDOW, 0, 17),
            Spread::of(Some(2), 3, RUN_WINDOW),
            "a first try picks by windows"
        );
        for slot in 0..SLOTS {
            let retry = Spread::again(Some(slot), 3, RUN_WINDOW, 1, 17);
            assert_eq!(retry.limit(), 27, "every slot's windows");
            // 27 rows answered: starts 0..=24, draw 17 starts at 17.
            assert_eq!(retry.take(rows[..27].to_vec()), [17, 18, 19]);
        }
        let retry = Spread::again(Some(0), 3, RUN_WINDOW, 2, 17);
        // A short queue of 5: starts 0..=2, 17 % 3 = 2.
        assert_eq!(retry.take(rows[..5].to_vec()), [2, 3, 4]);
        assert_eq!(retry.take(rows[..3].to_vec()), [0, 1, 2], "no more than n");
        assert_eq!(retry.take(rows[..2].to_vec()), [0, 1]);
        assert!(retry.take(Vec::<u32>::new()).is_empty());
        let starts: std::collections::HashSet<Vec<u32>> = (0..64_u64)
            .map(|draw| Spread::again(Some(1), 1, RUN_WINDOW, 1, draw).take(rows[..6].to_vec()))
            .collect();
        assert_eq!(starts.len(), 6, "every row of a short queue is a start");
    }
}
