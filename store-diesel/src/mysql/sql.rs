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

/// The two writes of one kind of guarded move.
#[derive(Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each says whether one optional bind is in the statement"
)]
pub(super) struct MoveSql {
    /// The guarded `UPDATE`. Binds: now, [payload], [offset, default claim
    /// timeout], step id, [attempt].
    pub update: String,
    /// Whether the `UPDATE` binds a payload.
    pub payload: bool,
    /// Whether the `UPDATE` binds a claim deadline's offset and default.
    pub deadline: bool,
    /// Whether the `UPDATE` binds the claim's attempt.
    pub attempt: bool,
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
    let binds = MoveBinds {
        now: "?",
        payload: "?",
        deadline: DEADLINE,
        attempt: "?",
    };
    MoveSql {
        update: step_move.update(binds, "?"),
        payload: !step_move.retry && payload_column(step_move.to).is_some(),
        deadline: step_move.sets_deadline(),
        attempt: step_move.fenced,
        history: step_move.history_upsert(BY_ID, super::UPSERT),
        stamps: crate::sql::stamp_column(step_move.to).is_some(),
    }
}

/// The claim's guarded `UPDATE`, which also stamps `claim_history_id` with
/// the id of the attempt's history row: the trigger of migration
/// `2026-12-01-000008_claim_history` writes that row inside this same
/// statement (its `INSERT` is the scaffold's claim upsert, which a test
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
    use super::*;
    use crate::sql::Move;
    use crate::sql::Upsert;
    use crate::sql::claim_move;
    use flowstate_core::RetryStart;

    /// The `INSERT` the claim's trigger runs for the NEW step row: the
    /// scaffold's claim upsert, which `up.sql` must spell exactly.
    fn claim_history_trigger() -> String {
        claim_move().history_upsert(
            HistorySource {
                from: "FROM DUAL WHERE NOT (NEW.claim_history_id <=> OLD.claim_history_id)",
                prefix: "NEW.",
                id: "NEW.claim_history_id",
                now: "NEW.updated_at",
            },
            Upsert::OnDuplicateKey,
        )
    }

    /// The migration that creates the claim's trigger.
    const CLAIM_HISTORY_UP: &str =
        include_str!("../../migrations/mysql/2026-12-01-000008_claim_history/up.sql");

    #[test]
    fn the_claim_trigger_writes_the_scaffolds_claim_history_row() {
        let trigger = claim_history_trigger();
        assert!(
            trigger.contains("SELECT NEW.claim_history_id, NEW.id, NEW.current_attempt, 'running'")
        );
        assert!(
            CLAIM_HISTORY_UP
                .lines()
                .any(|line| line == format!("{trigger};")),
            "up.sql must run exactly the claim upsert:\n{trigger};"
        );
    }

    #[test]
    fn statements_bind_in_the_order_their_placeholders_appear() {
        let succeeded = MOVES.get(Move::Transition(StepStatus::Succeeded));
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
        assert!(succeeded.stamps);
        assert!(!MOVES.get(Move::Transition(StepStatus::Pending)).stamps);
        assert!(!MOVES.get(Move::Retry(RetryStart::Pending)).stamps);
        assert!(
            CLAIM.starts_with("UPDATE flowstate_steps SET claim_history_id = ?, current_attempt")
        );
        assert!(FIRST_HISTORY.contains("SELECT ?, id, current_attempt, 'pending', ? FROM"));
    }
}
