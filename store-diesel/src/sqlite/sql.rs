//! The statements of SQLite's hot writes: the shared fragments of
//! [`crate::sql`] with numbered `?N` placeholders.
//!
//! Why not the DSL: a claim and a transition are two writes in one
//! `BEGIN IMMEDIATE` transaction on the blocking connection, and the
//! history write is `INSERT ... SELECT ... ON CONFLICT DO UPDATE` copying
//! the step row just written, which diesel cannot say.

use std::sync::LazyLock;

use crate::sql::{ByStatus, HistorySource, Move, StepMove, Upsert, claim_update};

/// What each write answers, so that it runs as a query: diesel keeps a raw
/// statement prepared only on its load path (`execute` re-checks the
/// statement through a reference, which finds a `sql_query` unsafe to
/// cache), and the row answered says whether the write matched.
const RETURNING: &str = "RETURNING id";

/// The two writes of one kind of guarded move.
#[derive(Debug)]
pub(super) struct MoveSql {
    /// The guarded `UPDATE`. Binds: `?1` now, `?2` step id, `?3` payload.
    pub update: String,
    /// The history upsert copied from the step row just written. Binds:
    /// `?1` a fresh history id, `?2` now, `?3` step id. Its `WHERE` is what
    /// tells SQLite's parser that `ON CONFLICT` is the upsert clause, not a
    /// join constraint of the `SELECT`.
    pub history: String,
}

fn move_sql(step_move: &StepMove) -> MoveSql {
    let source = HistorySource {
        from: "FROM flowstate_steps WHERE id = ?3",
        prefix: "",
        id: "?1",
        now: "?2",
    };
    MoveSql {
        update: format!("{} {RETURNING}", step_move.update("?1", "?3", "?2")),
        history: format!(
            "{} {RETURNING}",
            step_move.history_upsert(source, Upsert::OnConflict)
        ),
    }
}

/// The claim: the guarded `UPDATE ... RETURNING` the claimed step. Binds:
/// `?1` now, `?2` run, `?3` name, `?4` function. Its history write is the
/// transition to running's.
pub(super) static CLAIM: LazyLock<String> =
    LazyLock::new(|| format!("{} RETURNING *", claim_update(None, "?1", "?2", "?3", "?4")));

/// The statements of every move.
pub(super) static MOVES: LazyLock<ByStatus<Move, MoveSql>> =
    LazyLock::new(|| ByStatus::new(&Move::all(), |m| move_sql(&StepMove::of(m))));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_placeholders_bind_now_id_payload() {
        let failed = MOVES.get(Move::Transition(flowstate_core::StepStatus::Failed));
        assert!(
            failed
                .update
                .contains("updated_at = ?1, error = ?3 WHERE id = ?2")
        );
        assert!(
            failed
                .history
                .contains("FROM flowstate_steps WHERE id = ?3 ON CONFLICT")
        );
        assert!(CLAIM.ends_with("RETURNING *"));
    }
}
