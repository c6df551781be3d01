//! The statements of MySQL's hot writes: the shared fragments of
//! [`crate::sql`] with positional `?` placeholders.
//!
//! Why not the DSL: the claim's `UPDATE` assigns `status` last and reads it
//! in `CASE`s before (MySQL's left-to-right `SET`), and the history upserts
//! are `INSERT ... SELECT ... ON DUPLICATE KEY UPDATE c = VALUES(c)`; diesel
//! can say neither.

use std::sync::LazyLock;

use diesel_async::AsyncMysqlConnection;
use flowstate_core::StepStatus;

use crate::dialect::Connection;
use crate::sql::{
    ByMove, Deadline, HistorySource, LeaseFence, MoveBinds, RunGuard, StepMove, claim_update,
    insert_step_guarded, payload_column,
};

/// A claim deadline over MySQL's clock, its offset and default bound in
/// that order.
pub(super) const DEADLINE: Deadline<'static> = Deadline {
    now_us: <AsyncMysqlConnection as Connection>::NOW_US,
    offset: "?",
    default_us: "?",
};

/// The one statement of one kind of guarded move.
#[derive(Debug)]
pub(super) struct MoveSql {
    /// The guarded `UPDATE`, which also stamps `move_history_id` with the
    /// id of the attempt's history row: the trigger of migration
    /// `2026-12-06-000019_move_history` upserts that row inside this same
    /// statement. Binds: history id, now, [payload], [offset, default
    /// claim timeout], step id, [attempt].
    pub update: String,
    /// Whether the `UPDATE` binds a payload.
    pub payload: bool,
    /// Whether the `UPDATE` binds a claim deadline's offset and default.
    pub deadline: bool,
    /// Whether the `UPDATE` binds the claim's attempt.
    pub attempt: bool,
}

/// The history row of the step with id `?`.
const BY_ID: HistorySource<'static> = HistorySource {
    from: "FROM flowstate_steps WHERE id = ?",
    prefix: "",
    id: "?",
    now: "?",
};

fn move_sql(step_move: &StepMove) -> MoveSql {
    let binds = MoveBinds {
        now: "?",
        payload: "?",
        deadline: DEADLINE,
        attempt: "?",
    };
    MoveSql {
        update: step_move.update_stamping(binds, "?", "?"),
        payload: !step_move.retry && payload_column(step_move.to).is_some(),
        deadline: step_move.sets_deadline(),
        attempt: step_move.fenced,
    }
}

/// The claim's guarded `UPDATE`, which also stamps `move_history_id` with
/// the id of the attempt's history row: the trigger of migration
/// `2026-12-06-000019_move_history` writes that row inside this same
/// statement (for a running step, the scaffold's claim upsert, which a test
/// compares with `up.sql`). Binds: history id, now, lease clock offset,
/// default claim timeout, run, name, function.
pub(super) static CLAIM: LazyLock<String> =
    LazyLock::new(|| claim_update(Some("?"), "?", DEADLINE, "?", "?", "?"));

/// The statements of every move.
pub(super) static MOVES: LazyLock<ByMove<MoveSql>> =
    LazyLock::new(|| ByMove::new(|m| move_sql(&StepMove::of(m))));

/// A new step, inserted only into a run that admits it ([`RunGuard`]), a
/// taken name skipped. Binds: id, run, name, function, input, retries,
/// retry delay, now, now, claim timeout, run, then, fenced, the token and
/// the lease clock offset.
fn insert_step_sql(fenced: bool) -> String {
    let guard = RunGuard {
        run: "?",
        fence: fenced.then_some(LeaseFence {
            token: "?",
            now_us: DEADLINE.now_us,
            offset: "?",
        }),
    };
    format!(
        "{} ON DUPLICATE KEY UPDATE flowstate_steps.id = flowstate_steps.id",
        insert_step_guarded(["?"; 9], guard)
    )
}

/// The step insert, unfenced and fenced by a lease token.
pub(super) static INSERT_STEP: LazyLock<[String; 2]> =
    LazyLock::new(|| [insert_step_sql(false), insert_step_sql(true)]);

/// A new step's first history row (pending). Binds: history id, now, step
/// id.
pub(super) static FIRST_HISTORY: LazyLock<String> = LazyLock::new(|| {
    StepMove::transition(StepStatus::Pending).history_upsert(BY_ID, super::UPSERT)
});

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;
    use crate::sql::Move;
    use crate::sql::Upsert;
    use crate::sql::{MOVE_HISTORY_ID, claim_move};
    use flowstate_core::RetryStart;

    /// The history upsert of `step_move` over the NEW step row, as the
    /// move trigger runs it.
    fn upsert_from_new(step_move: &StepMove) -> String {
        step_move.history_upsert(
            HistorySource {
                from: "FROM DUAL",
                prefix: "NEW.",
                id: "NEW.move_history_id",
                now: "NEW.updated_at",
            },
            Upsert::OnDuplicateKey,
        )
    }

    /// The move trigger as `up.sql` must spell it: when a statement
    /// stamps a fresh `move_history_id`, the scaffold's history upsert of
    /// a move to the status the step now has.
    fn move_history_trigger() -> String {
        let mut branches = String::new();
        for (i, &status) in StepStatus::ALL.iter().enumerate() {
            let keyword = if i == 0 { "IF" } else { "ELSEIF" };
            let _ = write!(
                branches,
                "{keyword} NEW.status = '{}' THEN\n{};\n",
                status.as_str(),
                upsert_from_new(&StepMove::transition(status))
            );
        }
        format!(
            "CREATE TRIGGER flowstate_steps_move_history AFTER UPDATE ON flowstate_steps \
             FOR EACH ROW\nBEGIN\n\
             IF NOT (NEW.{MOVE_HISTORY_ID} <=> OLD.{MOVE_HISTORY_ID}) THEN\n\
             {branches}END IF;\nEND IF;\nEND;\n"
        )
    }

    /// The migration that creates the move trigger.
    const MOVE_HISTORY_UP: &str =
        include_str!("../../migrations/mysql/2026-12-06-000019_move_history/up.sql");

    #[test]
    fn the_move_trigger_writes_the_scaffolds_history_row_of_every_move() {
        let trigger = move_history_trigger();
        assert!(
            MOVE_HISTORY_UP.ends_with(&trigger),
            "up.sql must end with the move trigger:\n{trigger}"
        );
        // Each move's history row depends only on the status it moves
        // to, so one branch per status writes what every move wrote
        // itself: the claim's, a transition's, a retry's, a claimer's.
        for step_move in Move::all() {
            let upsert = upsert_from_new(&StepMove::of(step_move));
            let branch = format!(
                "NEW.status = '{}' THEN\n{upsert};\n",
                step_move.target().as_str()
            );
            assert!(trigger.contains(&branch), "{step_move:?}: {upsert}");
        }
        assert!(trigger.contains(&format!("{};", upsert_from_new(&claim_move()))));
        assert!(trigger.contains(
            "SELECT NEW.move_history_id, NEW.id, NEW.current_attempt, 'succeeded', \
             NEW.updated_at, NEW.updated_at, NEW.result FROM DUAL"
        ));
    }

    #[test]
    fn statements_bind_in_the_order_their_placeholders_appear() {
        let succeeded = MOVES.get(Move::Transition(StepStatus::Succeeded));
        assert!(
            succeeded.update.starts_with(
                "UPDATE flowstate_steps SET move_history_id = ?, status = 'succeeded'"
            )
        );
        assert!(
            succeeded
                .update
                .contains("updated_at = ?, result = ?, claimed_until = NULL WHERE id = ?")
        );
        let claimed = MOVES.get(Move::Claimed(StepStatus::Succeeded));
        assert!(claimed.update.ends_with("AND current_attempt = ?"));
        assert!(claimed.payload && claimed.attempt && !claimed.deadline);
        let running = MOVES.get(Move::Transition(StepStatus::Running));
        assert!(running.deadline && !running.payload);
        let retry = MOVES.get(Move::Retry(RetryStart::Pending));
        assert!(retry.update.starts_with(
            "UPDATE flowstate_steps SET move_history_id = ?, status = 'pending', updated_at = ?, \
             current_attempt = current_attempt + 1"
        ));
        assert!(
            CLAIM.starts_with("UPDATE flowstate_steps SET move_history_id = ?, current_attempt")
        );
        assert!(FIRST_HISTORY.contains("SELECT ?, id, current_attempt, 'pending', ? FROM"));
    }
}
