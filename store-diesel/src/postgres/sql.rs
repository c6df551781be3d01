//! The SQL every PostgreSQL statement sends, and `cached` (see
//! [`crate::cached`]), which keeps a `sql_query` prepared per connection.
//!
//! Only status literals from core's enums are spliced into this text (via
//! [`crate::guard::sql_list`]); every user value is a bound parameter. Each
//! statement's text is fixed per operation (per target status, per filter
//! combination for listings), so the per-connection cache stays small.

use std::sync::LazyLock;

use flowstate_core::{ClaimDecision, RunStatus, StepStatus};

use crate::guard::sql_list;

pub(super) use crate::cached::cached;

/// The columns of [`crate::rows::RunRow`], from `flowstate_runs AS r`.
pub(super) const RUN_COLUMNS: &str = "r.id, r.workflow, r.status, r.input::text AS input, \
     r.graph_hash, r.parent_id, r.idempotency_key, r.created_at, r.updated_at";

/// The columns of [`crate::rows::StepRow`], from `flowstate_steps AS s`.
pub(super) const STEP_COLUMNS: &str = "s.id, s.run_id, s.name, s.function_name, s.status, \
     s.input::text AS input, s.result::text AS result, s.error::text AS error, \
     s.current_attempt, s.retries, s.retry_delay_ms, s.branch_taken, s.created_at, s.updated_at";

/// The columns of [`crate::rows::AttemptRow`], from `flowstate_step_history
/// AS h` joined with `flowstate_steps AS s`.
pub(super) const ATTEMPT_COLUMNS: &str = "h.id, h.step_id, s.name AS step_name, h.attempt, \
     h.status, h.result::text AS result, h.error::text AS error, h.created_at, \
     h.scheduled_at, h.running_at, h.succeeded_at, h.failed_at";

/// The columns of [`crate::rows::VersionRow`], from
/// `flowstate_workflow_versions AS v`.
pub(super) const VERSION_COLUMNS: &str =
    "v.id, v.workflow, v.graph_hash, v.graph::text AS graph, v.created_at";

/// `column IN (statuses)`, or `FALSE` for no status at all.
fn status_guard<S: std::fmt::Display>(column: &str, statuses: &[S]) -> String {
    if statuses.is_empty() {
        "FALSE".to_owned()
    } else {
        format!("{column} IN ({})", sql_list(statuses))
    }
}

/// The history column a move to `to` stamps, if any.
const fn stamp_column(to: StepStatus) -> Option<&'static str> {
    match to {
        StepStatus::Pending => None,
        StepStatus::Scheduled => Some("scheduled_at"),
        StepStatus::Running => Some("running_at"),
        StepStatus::Succeeded => Some("succeeded_at"),
        StepStatus::Failed => Some("failed_at"),
    }
}

/// The column a move to `to` writes its JSON payload to, if any.
const fn payload_column(to: StepStatus) -> Option<&'static str> {
    match to {
        StepStatus::Succeeded => Some("result"),
        StepStatus::Failed => Some("error"),
        _ => None,
    }
}

/// The claim, win or lose, in one statement. Binds: `$1` run, `$2` name,
/// `$3` function, `$4` now, `$5` a fresh history id. Every row is
/// `won` followed by [`STEP_COLUMNS`]: the step after the claim (won), or as
/// the statement's snapshot saw it (lost; no row: no such step).
///
/// The guard is [`ClaimDecision`]'s: a fresh claim from the statuses it
/// claims fresh, a retry from the statuses it retries while
/// `current_attempt < retries + 1` ([`RetryPolicy::has_attempts_left`]).
pub(super) static CLAIM: LazyLock<String> = LazyLock::new(|| {
    let fresh = ClaimDecision::ClaimFresh.statuses();
    let retry = ClaimDecision::ClaimRetry.statuses();
    let running = StepStatus::Running.as_str();
    let retrying = status_guard("s.status", &retry);
    format!(
        "WITH claimed AS (\
            UPDATE flowstate_steps AS s SET status = '{running}', \
                current_attempt = CASE WHEN {retrying} THEN s.current_attempt + 1 ELSE s.current_attempt END, \
                result = CASE WHEN {retrying} THEN NULL ELSE s.result END, \
                error = CASE WHEN {retrying} THEN NULL ELSE s.error END, \
                updated_at = $4 \
            WHERE s.run_id = $1 AND s.name = $2 \
                AND (s.function_name IS NULL OR s.function_name = $3) \
                AND ({fresh_guard} OR ({retrying} AND s.current_attempt < s.retries + 1)) \
            RETURNING s.*\
        ), history AS (\
            INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at, running_at) \
            SELECT $5, s.id, s.current_attempt, '{running}', $4, $4 FROM claimed AS s \
            ON CONFLICT (step_id, attempt) DO UPDATE \
                SET status = EXCLUDED.status, running_at = EXCLUDED.running_at\
        ) \
        SELECT TRUE AS won, {STEP_COLUMNS} FROM claimed AS s \
        UNION ALL \
        SELECT FALSE AS won, {STEP_COLUMNS} FROM flowstate_steps AS s \
        WHERE s.run_id = $1 AND s.name = $2 AND NOT EXISTS (SELECT 1 FROM claimed)",
        fresh_guard = status_guard("s.status", &fresh),
    )
});

/// The step transition to `to`, in one statement. Binds: `$1` step, `$2`
/// now, `$3` a fresh history id, then for succeeded/failed `$4` the JSON
/// payload. One row (none: no such step): the step's status in the
/// statement's snapshot and whether the guarded write moved it.
fn transition_sql(to: StepStatus) -> String {
    let guard = status_guard("s.status", &StepStatus::sources_of(to));
    let (set_payload, payload_col, payload_val, payload_update) = match payload_column(to) {
        Some(col) => (
            format!(", {col} = $4::jsonb"),
            format!(", {col}"),
            ", $4::jsonb".to_owned(),
            format!(", {col} = EXCLUDED.{col}"),
        ),
        None => Default::default(),
    };
    let (stamp_col, stamp_val, stamp_update) = match stamp_column(to) {
        Some(col) => (
            format!(", {col}"),
            ", $2".to_owned(),
            format!(", {col} = EXCLUDED.{col}"),
        ),
        None => Default::default(),
    };
    format!(
        "WITH prior AS (\
            SELECT s.status FROM flowstate_steps AS s WHERE s.id = $1\
        ), moved AS (\
            UPDATE flowstate_steps AS s SET status = '{to}', updated_at = $2{set_payload} \
            WHERE s.id = $1 AND {guard} \
            RETURNING s.id, s.current_attempt\
        ), history AS (\
            INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at{stamp_col}{payload_col}) \
            SELECT $3, m.id, m.current_attempt, '{to}', $2{stamp_val}{payload_val} FROM moved AS m \
            ON CONFLICT (step_id, attempt) DO UPDATE SET status = EXCLUDED.status{stamp_update}{payload_update}\
        ) \
        SELECT p.status, EXISTS (SELECT 1 FROM moved) AS moved FROM prior AS p"
    )
}

/// The next attempt of a failed step, starting in `start`, in one
/// statement. Binds: `$1` step, `$2` now, `$3` a fresh history id. One row
/// (none: no such step), as [`transition`].
fn retry_sql(start: StepStatus) -> String {
    let from = StepStatus::Failed.as_str();
    let (stamp_col, stamp_val, stamp_update) = match stamp_column(start) {
        Some(col) => (
            format!(", {col}"),
            ", $2".to_owned(),
            format!(", {col} = EXCLUDED.{col}"),
        ),
        None => Default::default(),
    };
    format!(
        "WITH prior AS (\
            SELECT s.status FROM flowstate_steps AS s WHERE s.id = $1\
        ), moved AS (\
            UPDATE flowstate_steps AS s SET status = '{start}', \
                current_attempt = s.current_attempt + 1, result = NULL, error = NULL, updated_at = $2 \
            WHERE s.id = $1 AND s.status = '{from}' \
            RETURNING s.id, s.current_attempt\
        ), history AS (\
            INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at{stamp_col}) \
            SELECT $3, m.id, m.current_attempt, '{start}', $2{stamp_val} FROM moved AS m \
            ON CONFLICT (step_id, attempt) DO UPDATE SET status = EXCLUDED.status{stamp_update}\
        ) \
        SELECT p.status, EXISTS (SELECT 1 FROM moved) AS moved FROM prior AS p"
    )
}

/// A run status change to `to`, in one statement. Binds: `$1` run, `$2`
/// now. One row (none: no such run): `prior_status` from the statement's
/// snapshot, then [`RUN_COLUMNS`] of the moved run (all NULL if the guarded
/// write matched nothing).
fn run_status_sql(to: RunStatus) -> String {
    let guard = status_guard("r.status", &RunStatus::sources_of(to));
    format!(
        "WITH prior AS (\
            SELECT r.status FROM flowstate_runs AS r WHERE r.id = $1\
        ), moved AS (\
            UPDATE flowstate_runs AS r SET status = '{to}', updated_at = $2 \
            WHERE r.id = $1 AND {guard} RETURNING r.*\
        ) \
        SELECT p.status AS prior_status, {RUN_COLUMNS} FROM prior AS p LEFT JOIN moved AS r ON TRUE"
    )
}

/// Statement text per target status, built once.
struct PerStatus<S: 'static> {
    sql: Vec<(S, String)>,
}

impl<S: Copy + PartialEq> PerStatus<S> {
    fn new(all: &[S], build: fn(S) -> String) -> Self {
        Self {
            sql: all.iter().map(|&s| (s, build(s))).collect(),
        }
    }

    fn get(&self, status: S) -> &str {
        self.sql
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, sql)| sql.as_str())
            .expect("every status has its statement")
    }
}

static TRANSITIONS: LazyLock<PerStatus<StepStatus>> =
    LazyLock::new(|| PerStatus::new(StepStatus::ALL, transition_sql));
static RETRIES: LazyLock<PerStatus<StepStatus>> =
    LazyLock::new(|| PerStatus::new(StepStatus::RETRY_STARTS, retry_sql));
static RUN_MOVES: LazyLock<PerStatus<RunStatus>> =
    LazyLock::new(|| PerStatus::new(RunStatus::ALL, run_status_sql));

/// The statement of a step transition to `to`.
pub(super) fn transition(to: StepStatus) -> &'static str {
    TRANSITIONS.get(to)
}

/// The statement of a retry attempt starting in `start` (one of
/// [`StepStatus::RETRY_STARTS`]).
pub(super) fn retry(start: StepStatus) -> &'static str {
    RETRIES.get(start)
}

/// The statement of a run status change to `to`.
pub(super) fn run_status(to: RunStatus) -> &'static str {
    RUN_MOVES.get(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_guard_is_the_claim_decision() {
        assert_eq!(
            ClaimDecision::ClaimFresh.statuses(),
            [StepStatus::Pending, StepStatus::Scheduled]
        );
        assert_eq!(ClaimDecision::ClaimRetry.statuses(), [StepStatus::Failed]);
        assert!(CLAIM.contains("s.status IN ('pending', 'scheduled')"));
        assert!(CLAIM.contains("s.status IN ('failed') AND s.current_attempt < s.retries + 1"));
    }

    #[test]
    fn transitions_guard_on_the_core_table() {
        assert!(transition(StepStatus::Succeeded).contains("s.status IN ('running')"));
        assert!(transition(StepStatus::Succeeded).contains("result = $4::jsonb"));
        assert!(transition(StepStatus::Failed).contains("error = EXCLUDED.error"));
        assert!(!transition(StepStatus::Running).contains("$4"));
        assert!(retry(StepStatus::Running).contains("running_at"));
        assert!(!retry(StepStatus::Pending).contains("running_at"));
        assert!(run_status(RunStatus::Running).contains("r.status IN ('suspended')"));
    }
}
