//! The statements of SQLite's hot writes: the shared fragments of
//! [`crate::sql`] with numbered `?N` placeholders.
//!
//! Why not the DSL: a claim and a transition are two writes in one
//! `BEGIN IMMEDIATE` transaction on the blocking connection, and the
//! history write is `INSERT ... SELECT ... ON CONFLICT DO UPDATE` copying
//! the step row just written, which diesel cannot say.

use std::sync::LazyLock;

use crate::dialect::Connection;
use crate::sql::{
    ByMove, Deadline, HistorySource, LeaseFence, MoveBinds, RunGuard, StepMove, claim_update,
    insert_step_guarded, payload_column,
};

use super::SqliteConn;

/// A claim deadline over SQLite's clock bound at `offset` and `default_us`.
pub(super) const fn deadline<'a>(offset: &'a str, default_us: &'a str) -> Deadline<'a> {
    Deadline {
        now_us: <SqliteConn as Connection>::NOW_US,
        offset,
        default_us,
    }
}

/// What each write answers, so that it runs as a query: diesel keeps a raw
/// statement prepared only on its load path (`execute` re-checks the
/// statement through a reference, which finds a `sql_query` unsafe to
/// cache), and the row answered says whether the write matched.
const RETURNING: &str = "RETURNING id";

/// The two writes of one kind of guarded move.
#[derive(Debug)]
pub(super) struct MoveSql {
    /// The guarded `UPDATE`. Binds: `?1` now, `?2` step id, then, numbered
    /// in this order and only when the move uses them, the payload, the
    /// deadline's offset and default, the claim's attempt ([`Self::payload`],
    /// [`Self::deadline`], [`Self::attempt`]): SQLite refuses a bind past
    /// the highest number a statement names.
    pub update: String,
    /// Whether the `UPDATE` binds a payload.
    pub payload: bool,
    /// Whether it binds a claim deadline's offset and default.
    pub deadline: bool,
    /// Whether it binds the claim's attempt.
    pub attempt: bool,
    /// The history upsert copied from the step row just written. Binds:
    /// `?1` a fresh history id, `?2` now, `?3` step id. Its `WHERE` is what
    /// tells SQLite's parser that `ON CONFLICT` is the upsert clause, not a
    /// join constraint of the `SELECT`.
    pub history: String,
}

fn move_sql(step_move: &StepMove) -> MoveSql {
    const NUMBERED: [&str; 4] = ["?3", "?4", "?5", "?6"];
    let source = HistorySource {
        from: "FROM flowstate_steps WHERE id = ?3",
        prefix: "",
        id: "?1",
        now: "?2",
    };
    let mut next = NUMBERED.iter();
    let mut take = |used: bool| -> &'static str {
        if used {
            next.next()
                .expect("a move binds at most four values after its first two")
        } else {
            ""
        }
    };
    let payload = !step_move.retry && payload_column(step_move.to).is_some();
    let binds = MoveBinds {
        now: "?1",
        payload: take(payload),
        deadline: deadline(
            take(step_move.sets_deadline()),
            take(step_move.sets_deadline()),
        ),
        attempt: take(step_move.fenced),
    };
    MoveSql {
        update: format!("{} {RETURNING}", step_move.update(binds, "?2")),
        payload,
        deadline: step_move.sets_deadline(),
        attempt: step_move.fenced,
        history: format!(
            "{} {RETURNING}",
            step_move.history_upsert(source, super::UPSERT)
        ),
    }
}

/// The claim: the guarded `UPDATE ... RETURNING` the claimed step. Binds:
/// `?1` now, `?2` run, `?3` name, `?4` function, `?5` the lease clock
/// offset, `?6` the default claim timeout (microseconds). Its history write
/// is the transition to running's.
pub(super) static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} RETURNING *",
        claim_update(None, "?1", deadline("?5", "?6"), "?2", "?3", "?4")
    )
});

/// A new step, inserted only into a run that admits it ([`RunGuard`]), a
/// taken name skipped, answering its id when inserted. Binds: `?1` id,
/// `?2` run, `?3` name, `?4` function, `?5` input, `?6` retries, `?7` retry
/// delay, `?8` now, `?9` claim timeout, then, fenced, `?10` the token and
/// `?11` the lease clock offset.
fn insert_step_sql(fenced: bool) -> String {
    let guard = RunGuard {
        run: "?2",
        fence: fenced.then_some(LeaseFence {
            token: "?10",
            now_us: <SqliteConn as Connection>::NOW_US,
            offset: "?11",
        }),
    };
    format!(
        "{} ON CONFLICT (run_id, name) DO NOTHING {RETURNING}",
        insert_step_guarded(
            ["?1", "?2", "?3", "?4", "?5", "?6", "?7", "?8", "?9"],
            guard
        )
    )
}

/// The step insert, unfenced and fenced by a lease token.
pub(super) static INSERT_STEP: LazyLock<[String; 2]> =
    LazyLock::new(|| [insert_step_sql(false), insert_step_sql(true)]);

/// The statements of every move.
pub(super) static MOVES: LazyLock<ByMove<MoveSql>> =
    LazyLock::new(|| ByMove::new(|m| move_sql(&StepMove::of(m))));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::Move;

    #[test]
    fn numbered_placeholders_bind_now_id_payload() {
        let failed = MOVES.get(Move::Transition(flowstate_core::StepStatus::Failed));
        assert!(
            failed
                .update
                .contains("updated_at = ?1, error = ?3, claimed_until = NULL WHERE id = ?2")
        );
        let running = MOVES.get(Move::Transition(flowstate_core::StepStatus::Running));
        assert!(
            running
                .update
                .contains(" + ?3 + COALESCE(claim_timeout_ms * 1000, ?4) WHERE id = ?2")
        );
        let claimed = MOVES.get(Move::Claimed(flowstate_core::StepStatus::Scheduled));
        assert!(
            claimed
                .update
                .contains("AND current_attempt = ?3 RETURNING id")
        );
        assert!(
            failed
                .history
                .contains("FROM flowstate_steps WHERE id = ?3 ON CONFLICT")
        );
        assert!(CLAIM.ends_with("RETURNING *"));
    }
}
