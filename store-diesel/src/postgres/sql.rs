//! The statements of PostgreSQL's hot writes: the shared fragments of
//! [`crate::sql`] wrapped in one CTE each.
//!
//! Why not the DSL: diesel cannot put an `UPDATE ... RETURNING` or an
//! `INSERT` inside a `WITH`, so each of these would be two or three round
//! trips (or a transaction) in the DSL, against a budget of one.

use std::sync::LazyLock;

use flowstate_core::StepStatus;

use crate::sql::{ByStatus, HistorySource, Move, StepMove, Upsert, claim_move, claim_update};

/// The history row of the step a CTE named `alias` returned.
pub(super) fn history_from<'a>(
    from: &'a str,
    prefix: &'a str,
    id: &'a str,
    now: &'a str,
) -> HistorySource<'a> {
    HistorySource {
        from,
        prefix,
        id,
        now,
    }
}

/// The history writes after a batch of moves, as two CTEs to follow the
/// CTE `moved` (step rows with `id`, `current_attempt` and the move's
/// payload column): `{tag}_settled` updates the history rows those steps'
/// attempts already have, and `{tag}_history` upserts the ones missing,
/// each new row's id `id` (over the moved row `m`).
///
/// Nearly every attempt's row exists when it moves (the step's insert or
/// its claim wrote it), and a plain `UPDATE` writes it once, where an
/// upsert's conflict path also locked it first (a WAL record of its own)
/// and ran the insert's checks: 6% fewer server instructions per step on
/// the batched path. A single step's move keeps its upsert: there the two
/// more CTEs cost more per statement than the row saves (12% more
/// instructions per claim + succeed). The upsert stays for the rows the
/// update missed (a retry's new attempt, a row deleted behind the store's
/// back), through a hashed anti-join over what the update returned; both
/// read the statement's one snapshot, and nothing else writes the history
/// of a step the statement holds moved.
pub(super) fn history_ctes(
    step_move: &StepMove,
    moved: &str,
    tag: &str,
    id: &str,
    now: &str,
) -> String {
    let settled = format!("{tag}_settled");
    let set: Vec<String> = step_move
        .history_settles("m.", now)
        .into_iter()
        .map(|(col, value)| format!("{col} = {value}"))
        .collect();
    let settle = format!(
        "UPDATE flowstate_step_history AS h SET {} FROM {moved} AS m \
         WHERE h.step_id = m.id AND h.attempt = m.current_attempt RETURNING h.step_id",
        set.join(", ")
    );
    let missing = format!("FROM {moved} AS m WHERE m.id NOT IN (SELECT step_id FROM {settled})");
    let history =
        step_move.history_upsert(history_from(&missing, "m.", id, now), Upsert::OnConflict);
    format!("{settled} AS ({settle}), {tag}_history AS ({history})")
}

/// The claim, win or lose. Binds: `$1` now, `$2` run, `$3` name, `$4`
/// function, `$5` a fresh history id. Every row is `won` and the step: after
/// the claim (won), or as the statement's snapshot saw it (lost; no row: no
/// such step).
pub(super) static CLAIM: LazyLock<String> = LazyLock::new(|| {
    let update = claim_update(None, "$1", "$2", "$3", "$4");
    let history = claim_move().history_upsert(
        history_from("FROM claimed AS c", "c.", "$5", "$1"),
        Upsert::OnConflict,
    );
    format!(
        "WITH claimed AS ({update} RETURNING *), history AS ({history}) \
         SELECT TRUE AS won, c.* FROM claimed AS c \
         UNION ALL \
         SELECT FALSE AS won, s.* FROM flowstate_steps AS s \
         WHERE s.run_id = $2 AND s.name = $3 AND NOT EXISTS (SELECT 1 FROM claimed)"
    )
});

/// A guarded move of step `$1` and its history upsert. Binds: `$1` step,
/// `$2` now, `$3` a fresh history id, then `$4` the payload for the moves
/// that carry one. One row (none: no such step) and whether the guarded
/// write moved the step: the status it moved to, or, when it matched
/// nothing, the step's status in the statement's snapshot.
///
/// The step is read only when nothing moved (the claim's shape): a move
/// that matches, the hot path, costs its `UPDATE` and the history upsert
/// alone, with no second lookup of the step by key.
fn move_sql(step_move: &StepMove) -> String {
    let update = step_move.update("$2", "$4", "$1");
    let history = step_move.history_upsert(
        history_from("FROM moved AS m", "m.", "$3", "$2"),
        Upsert::OnConflict,
    );
    format!(
        "WITH moved AS ({update} RETURNING id, status, current_attempt, result, error), \
         history AS ({history}) \
         SELECT m.status, TRUE AS moved FROM moved AS m \
         UNION ALL \
         SELECT s.status, FALSE AS moved FROM flowstate_steps AS s \
         WHERE s.id = $1 AND NOT EXISTS (SELECT 1 FROM moved)"
    )
}

/// The statement of every move.
pub(super) static MOVES: LazyLock<ByStatus<Move, String>> =
    LazyLock::new(|| ByStatus::new(&Move::all(), |m| move_sql(&StepMove::of(m))));

/// A new step and its first history row, or nothing if the name is taken.
/// Binds: `$1` id, `$2` run, `$3` name, `$4` function, `$5` input, `$6`
/// retries, `$7` retry delay, `$8` now, `$9` a fresh history id. One row,
/// `inserted`: how many steps it inserted (0 or 1).
pub(super) static INSERT_STEP: LazyLock<String> = LazyLock::new(|| {
    let pending = StepStatus::Pending.as_str();
    let history = StepMove::transition(StepStatus::Pending)
        .history_upsert(history_from("FROM s", "s.", "$9", "$8"), Upsert::OnConflict);
    format!(
        "WITH s AS (\
            INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, \
                current_attempt, retries, retry_delay_ms, created_at, updated_at) \
            VALUES ($1, $2, $3, $4, '{pending}', $5, 1, $6, $7, $8, $8) \
            ON CONFLICT (run_id, name) DO NOTHING RETURNING id, current_attempt\
        ), history AS ({history}) \
        SELECT count(*) AS inserted FROM s"
    )
});

#[cfg(test)]
mod tests {
    use super::*;
    use flowstate_core::RetryStart;

    #[test]
    fn each_statement_is_one_cte_over_the_shared_fragments() {
        assert!(CLAIM.starts_with("WITH claimed AS (UPDATE flowstate_steps SET"));
        assert!(
            CLAIM.contains("SELECT $5, c.id, c.current_attempt, 'running', $1, $1 FROM claimed")
        );
        let succeeded = MOVES.get(Move::Transition(StepStatus::Succeeded));
        assert!(succeeded.contains("result = $4 WHERE id = $1 AND status IN ('running')"));
        assert!(succeeded.contains("result = EXCLUDED.result"));
        assert!(
            !succeeded.contains("prior"),
            "a move that matches reads nothing more"
        );
        assert!(succeeded.ends_with("WHERE s.id = $1 AND NOT EXISTS (SELECT 1 FROM moved)"));
        assert!(
            !MOVES
                .get(Move::Transition(StepStatus::Running))
                .contains("$4")
        );
        assert!(
            MOVES
                .get(Move::Retry(RetryStart::Running))
                .contains("running_at")
        );
        assert!(
            !MOVES
                .get(Move::Retry(RetryStart::Pending))
                .contains("running_at")
        );
        assert!(INSERT_STEP.contains("SELECT $9, s.id, s.current_attempt, 'pending', $8 FROM s"));
    }
}
