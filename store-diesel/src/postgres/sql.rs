//! The statements of PostgreSQL's hot writes: the shared fragments of
//! [`crate::sql`] wrapped in one CTE each.
//!
//! Why not the DSL: diesel cannot put an `UPDATE ... RETURNING` or an
//! `INSERT` inside a `WITH`, so each of these would be two or three round
//! trips (or a transaction) in the DSL, against a budget of one.

use std::sync::LazyLock;

use diesel_async::AsyncPgConnection;
use flowstate_core::StepStatus;

use crate::dialect::Connection;
use crate::sql::{
    ByMove, Deadline, HistorySource, LeaseFence, MoveBinds, RunGuard, StepMove, claim_move,
    claim_update, insert_step_guarded, payload_column,
};

/// PostgreSQL's clock, in microseconds: the lease clock's base.
const NOW_US: &str = <AsyncPgConnection as Connection>::NOW_US;

/// A claim deadline bound at `offset` and `default_us`.
pub(super) const fn deadline<'a>(offset: &'a str, default_us: &'a str) -> Deadline<'a> {
    Deadline {
        now_us: NOW_US,
        offset,
        default_us,
    }
}

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
/// and ran the insert's checks. A single step's move keeps its upsert:
/// there the two more CTEs cost more per statement than the row saves
/// (SCHEMA.md, Decisions, "PostgreSQL's history update"). The upsert stays for the rows the
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
    let history = step_move.history_upsert(history_from(&missing, "m.", id, now), super::UPSERT);
    format!("{settled} AS ({settle}), {tag}_history AS ({history})")
}

/// The claim, win or lose. Binds: `$1` now, `$2` run, `$3` name, `$4`
/// function, `$5` a fresh history id, `$6` the lease clock offset, `$7`
/// the default claim timeout (microseconds). Every row is `won`, the run's
/// status when lost, and the step: after the claim (won), or as the
/// statement's snapshot saw it (lost; no row: no such step).
pub(super) static CLAIM: LazyLock<String> = LazyLock::new(|| {
    let update = claim_update(None, "$1", deadline("$6", "$7"), "$2", "$3", "$4");
    let history = claim_move().history_upsert(
        history_from("FROM claimed AS c", "c.", "$5", "$1"),
        super::UPSERT,
    );
    format!(
        "WITH claimed AS ({update} RETURNING *), history AS ({history}) \
         SELECT TRUE AS won, NULL::text AS run_status, c.* FROM claimed AS c \
         UNION ALL \
         SELECT FALSE AS won, \
         (SELECT r.status FROM flowstate_runs AS r WHERE r.id = s.run_id) AS run_status, s.* \
         FROM flowstate_steps AS s \
         WHERE s.run_id = $2 AND s.name = $3 AND NOT EXISTS (SELECT 1 FROM claimed)"
    )
});

/// The numbered placeholders of a move after its first three (`$1` step,
/// `$2` now, `$3` history id), in this order, each only if the move uses
/// it: the payload, the deadline's offset and default, the claim's
/// attempt ([`MoveParams`]).
fn move_binds(step_move: &StepMove) -> (MoveBinds<'static>, MoveParams) {
    const NUMBERED: [&str; 5] = ["$4", "$5", "$6", "$7", "$8"];
    let mut next = NUMBERED.iter();
    let mut take = |used: bool| -> &'static str {
        if used {
            next.next()
                .expect("a move binds at most five values after its first three")
        } else {
            ""
        }
    };
    let params = MoveParams {
        payload: !step_move.retry && payload_column(step_move.to).is_some(),
        deadline: step_move.sets_deadline(),
        attempt: step_move.fenced,
    };
    let payload = take(params.payload);
    let offset = take(params.deadline);
    let default_us = take(params.deadline);
    let attempt = take(params.attempt);
    let binds = MoveBinds {
        now: "$2",
        payload,
        deadline: deadline(offset, default_us),
        attempt,
    };
    (binds, params)
}

/// Which binds a move's statement takes after its first three, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MoveParams {
    /// The payload (JSON).
    pub payload: bool,
    /// The lease clock offset and the default claim timeout.
    pub deadline: bool,
    /// The claim's attempt.
    pub attempt: bool,
}

/// A guarded move's statement and the binds it takes.
#[derive(Debug)]
pub(super) struct MoveSql {
    /// The statement.
    pub sql: String,
    /// What it binds after `$1` step, `$2` now, `$3` history id.
    pub params: MoveParams,
}

/// A guarded move of step `$1` and its history upsert. Binds: `$1` step,
/// `$2` now, `$3` a fresh history id, then what [`move_binds`] numbers.
/// One row (none: no such step) and whether the guarded write moved the
/// step: the status it moved to, or, when it matched nothing, the step's
/// status in the statement's snapshot.
///
/// The step is read only when nothing moved (the claim's shape): a move
/// that matches, the hot path, costs its `UPDATE` and the history upsert
/// alone, with no second lookup of the step by key.
fn move_sql(step_move: &StepMove) -> MoveSql {
    let (binds, params) = move_binds(step_move);
    let update = step_move.update(binds, "$1");
    let history = step_move.history_upsert(
        history_from("FROM moved AS m", "m.", "$3", "$2"),
        super::UPSERT,
    );
    let sql = format!(
        "WITH moved AS ({update} RETURNING id, status, current_attempt, result, error), \
         history AS ({history}) \
         SELECT m.status, TRUE AS moved FROM moved AS m \
         UNION ALL \
         SELECT s.status, FALSE AS moved FROM flowstate_steps AS s \
         WHERE s.id = $1 AND NOT EXISTS (SELECT 1 FROM moved)"
    );
    MoveSql { sql, params }
}

/// The statement of every move.
pub(super) static MOVES: LazyLock<ByMove<MoveSql>> =
    LazyLock::new(|| ByMove::new(|m| move_sql(&StepMove::of(m))));

/// A new step and its first history row, or nothing if the name is taken
/// or the run refuses it ([`RunGuard`]: missing, settled, or, `fenced`,
/// its lease not held by the token). Binds: `$1` id, `$2` run, `$3` name,
/// `$4` function, `$5` input, `$6` retries, `$7` retry delay, `$8` now,
/// `$9` a fresh history id, `$10` the step's own claim timeout, then, when
/// fenced, `$11` the token and `$12` the lease clock offset. One row,
/// `inserted`: how many steps it inserted (0 or 1).
fn insert_step_sql(fenced: bool) -> String {
    let guard = RunGuard {
        run: "$2",
        fence: fenced.then_some(LeaseFence {
            token: "$11",
            now_us: NOW_US,
            offset: "$12",
        }),
    };
    let insert = insert_step_guarded(
        ["$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$10"],
        guard,
    );
    let history = StepMove::transition(StepStatus::Pending)
        .history_upsert(history_from("FROM s", "s.", "$9", "$8"), super::UPSERT);
    format!(
        "WITH s AS ({insert} ON CONFLICT (run_id, name) DO NOTHING RETURNING id, current_attempt), \
         history AS ({history}) \
         SELECT count(*) AS inserted FROM s"
    )
}

/// The step insert, unfenced and fenced by a lease token.
pub(super) static INSERT_STEP: LazyLock<[String; 2]> =
    LazyLock::new(|| [insert_step_sql(false), insert_step_sql(true)]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::Move;
    use flowstate_core::RetryStart;

    #[test]
    fn each_statement_is_one_cte_over_the_shared_fragments() {
        assert!(CLAIM.starts_with("WITH claimed AS (UPDATE flowstate_steps SET"));
        assert!(
            CLAIM.contains("SELECT $5, c.id, c.current_attempt, 'running', $1, $1 FROM claimed")
        );
        let succeeded = &MOVES.get(Move::Transition(StepStatus::Succeeded)).sql;
        assert!(
            succeeded.contains(
                "result = $4, claimed_until = NULL WHERE id = $1 AND status IN ('running')"
            )
        );
        assert!(succeeded.contains("result = EXCLUDED.result"));
        assert!(
            !succeeded.contains("prior"),
            "a move that matches reads nothing more"
        );
        assert!(succeeded.ends_with("WHERE s.id = $1 AND NOT EXISTS (SELECT 1 FROM moved)"));
        let running = MOVES.get(Move::Transition(StepStatus::Running));
        assert!(running.sql.contains("claimed_until = (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::BIGINT + $4 + COALESCE(claim_timeout_ms * 1000, $5)"));
        assert!(!running.params.payload && running.params.deadline);
        let retry = MOVES.get(Move::Retry(RetryStart::Running));
        assert!(retry.sql.contains("running_at"));
        assert!(
            !MOVES
                .get(Move::Retry(RetryStart::Pending))
                .sql
                .contains("running_at")
        );
        let claimed = MOVES.get(Move::Claimed(StepStatus::Failed));
        assert!(claimed.sql.contains("error = $4, claimed_until = NULL WHERE id = $1 AND status IN ('running') AND current_attempt = $5"));
        assert_eq!(
            claimed.params,
            MoveParams {
                payload: true,
                deadline: false,
                attempt: true
            }
        );
        assert!(CLAIM.contains("$6 + COALESCE(claim_timeout_ms * 1000, $7)"));
        let [open, fenced] = &*INSERT_STEP;
        assert!(open.contains("SELECT $9, s.id, s.current_attempt, 'pending', $8 FROM s"));
        assert!(open.contains(
            "FROM flowstate_runs AS guard_run WHERE guard_run.id = $2 \
             AND guard_run.status IN ('running', 'suspended') ON CONFLICT"
        ));
        assert!(!open.contains("$11"));
        assert!(
            fenced.contains("guard_run.lease_token = $11 AND guard_run.lease_owner IS NOT NULL")
        );
    }
}
