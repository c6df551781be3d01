//! The statements of MySQL's hot writes: the shared fragments of
//! [`crate::sql`] with positional `?` placeholders.
//!
//! Why not the DSL: the claim's `UPDATE` assigns `status` last and reads it
//! in `CASE`s before (MySQL's left-to-right `SET`), and the history upserts
//! are `INSERT ... SELECT ... ON DUPLICATE KEY UPDATE c = VALUES(c)`; diesel
//! can say neither.

use std::sync::LazyLock;

use flowstate_core::StepStatus;

use crate::sql::{ByStatus, HistorySource, Move, StepMove, Upsert, claim_move, claim_update};

/// The two writes of one kind of guarded move.
#[derive(Debug)]
pub(super) struct MoveSql {
    /// The guarded `UPDATE`. Binds: now, [payload], step id.
    pub update: String,
    /// The history upsert copied from the step row just written. Binds:
    /// history id, now, [now for the stamp], step id.
    pub history: String,
    /// Whether the history statement binds the time twice.
    pub stamps: bool,
}

/// The history row of the step with id `?`.
const BY_ID: HistorySource<'static> = HistorySource {
    from: "FROM flowstate_steps WHERE id = ?",
    prefix: "",
    id: "?",
    now: "?",
};

fn move_sql(step_move: &StepMove) -> MoveSql {
    MoveSql {
        update: step_move.update("?", "?", "?"),
        history: step_move.history_upsert(BY_ID, Upsert::OnDuplicateKey),
        stamps: crate::sql::stamp_column(step_move.to).is_some(),
    }
}

/// The claim's guarded `UPDATE`. Binds: now, run, name, function.
pub(super) static CLAIM: LazyLock<String> = LazyLock::new(|| claim_update("?", "?", "?", "?"));

/// After a won claim: the history row of the step's new attempt, moved to
/// running (created if missing). Binds: history id, now, now, run, name.
pub(super) static CLAIM_HISTORY: LazyLock<String> = LazyLock::new(|| {
    claim_move().history_upsert(
        HistorySource {
            from: "FROM flowstate_steps WHERE run_id = ? AND name = ?",
            ..BY_ID
        },
        Upsert::OnDuplicateKey,
    )
});

/// The statements of every move.
pub(super) static MOVES: LazyLock<ByStatus<Move, MoveSql>> =
    LazyLock::new(|| ByStatus::new(&Move::all(), |m| move_sql(&StepMove::of(m))));

/// A new step's first history row (pending). Binds: history id, now, step
/// id.
pub(super) static FIRST_HISTORY: LazyLock<String> = LazyLock::new(|| {
    StepMove::transition(StepStatus::Pending).history_upsert(BY_ID, Upsert::OnDuplicateKey)
});

#[cfg(test)]
mod tests {
    use super::*;
    use flowstate_core::RetryStart;

    #[test]
    fn statements_bind_in_the_order_their_placeholders_appear() {
        let succeeded = MOVES.get(Move::Transition(StepStatus::Succeeded));
        assert!(
            succeeded
                .update
                .contains("updated_at = ?, result = ? WHERE id = ?")
        );
        assert!(succeeded.stamps);
        assert!(!MOVES.get(Move::Transition(StepStatus::Pending)).stamps);
        assert!(!MOVES.get(Move::Retry(RetryStart::Pending)).stamps);
        assert!(CLAIM_HISTORY.contains("SELECT ?, id, current_attempt, 'running', ?, ? FROM"));
        assert!(FIRST_HISTORY.contains("SELECT ?, id, current_attempt, 'pending', ? FROM"));
    }
}
