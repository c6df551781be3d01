//! The SQL this dialect sends. User values are always bound (`?`); only
//! status lists and literals from the core enums are spliced, through
//! [`crate::guard::sql_list`] and `as_str`. The status-guarded writes
//! (claims, transitions, retry attempts) are built in [`super::guarded`]
//! and re-exported here.

pub(super) use super::guarded::{
    CLAIM_HISTORY, CLAIM_STEP, RETRY_ATTEMPT, TransitionSql, transition,
};

/// The columns of [`crate::rows::RunRow`], from `flowstate_runs r`.
macro_rules! run_columns {
    () => {
        "r.id, r.workflow, r.status, r.input, r.graph_hash, r.parent_id, \
         r.idempotency_key, r.created_at, r.updated_at"
    };
}

/// The columns of [`crate::rows::StepRow`], from `flowstate_steps s`.
macro_rules! step_columns {
    () => {
        "s.id, s.run_id, s.name, s.function_name, s.status, s.input, s.result, \
         s.error, s.current_attempt, s.retries, s.retry_delay_ms, s.branch_taken, \
         s.created_at, s.updated_at"
    };
}

// ---- runs -------------------------------------------------------------

/// Inserts a run without an idempotency key.
pub(super) const INSERT_RUN: &str = "INSERT INTO flowstate_runs \
     (id, workflow, status, input, graph_hash, parent_id, idempotency_key, created_at, updated_at) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// Inserts a run with an idempotency key, or does nothing if the key is
/// taken (never `INSERT IGNORE`: that would turn a foreign-key violation
/// into a warning).
pub(super) const INSERT_RUN_IDEMPOTENT: &str = "INSERT INTO flowstate_runs \
     (id, workflow, status, input, graph_hash, parent_id, idempotency_key, created_at, updated_at) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id";

/// One run by id.
pub(super) const SELECT_RUN: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM flowstate_runs r WHERE r.id = ?"
);

/// One run by idempotency key.
pub(super) const SELECT_RUN_BY_KEY: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM flowstate_runs r WHERE r.idempotency_key = ?"
);

/// The start of a runs listing; [`super::runs`] appends the filters.
pub(super) const LIST_RUNS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM flowstate_runs r WHERE 1 = 1"
);

/// A run's status, to explain a refused status change.
pub(super) const SELECT_RUN_STATUS: &str = "SELECT status FROM flowstate_runs WHERE id = ?";

/// Deletes a run; the foreign keys cascade to its steps, their history and
/// its state, and set its children's `parent_id` to NULL.
pub(super) const DELETE_RUN: &str = "DELETE FROM flowstate_runs WHERE id = ?";

/// Children per status; one row with a NULL status when the parent has
/// none, no row when there is no such parent.
pub(super) const COUNT_CHILDREN: &str = "SELECT c.status AS status, COUNT(c.id) AS n \
     FROM flowstate_runs p LEFT JOIN flowstate_runs c ON c.parent_id = p.id \
     WHERE p.id = ? GROUP BY c.status";

/// Writes one state key: one upsert, no read.
pub(super) const WRITE_STATE: &str = "INSERT INTO flowstate_run_state (run_id, state_key, value) \
     VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)";

/// Every state key of a run; one row of NULLs for a run with no state, no
/// row when there is no such run.
pub(super) const READ_STATE: &str = "SELECT s.state_key, s.value \
     FROM flowstate_runs r LEFT JOIN flowstate_run_state s ON s.run_id = r.id WHERE r.id = ?";

/// Moves a run to a status if it is in one the transition table allows.
pub(super) fn set_run_status(sources: &str) -> String {
    format!(
        "UPDATE flowstate_runs SET status = ?, updated_at = ? WHERE id = ? AND status IN ({sources})"
    )
}

// ---- steps ------------------------------------------------------------

/// Inserts a step, or does nothing if its (run, name) is taken.
pub(super) const INSERT_STEP: &str = "INSERT INTO flowstate_steps \
     (id, run_id, name, function_name, status, input, current_attempt, retries, retry_delay_ms, \
     created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id";

/// The first history row of a step just inserted.
pub(super) const INSERT_FIRST_HISTORY: &str = "INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at) VALUES (?, ?, 1, ?, ?)";

/// One step by id.
pub(super) const SELECT_STEP: &str = concat!(
    "SELECT ",
    step_columns!(),
    " FROM flowstate_steps s WHERE s.id = ?"
);

/// One step by run and name.
pub(super) const SELECT_STEP_BY_NAME: &str = concat!(
    "SELECT ",
    step_columns!(),
    " FROM flowstate_steps s WHERE s.run_id = ? AND s.name = ?"
);

/// Every step of a run; one row of NULLs for a run with no steps, no row
/// when there is no such run.
pub(super) const LIST_STEPS: &str = concat!(
    "SELECT ",
    step_columns!(),
    " FROM flowstate_runs r LEFT JOIN flowstate_steps s ON s.run_id = r.id \
     WHERE r.id = ? ORDER BY s.created_at, s.name"
);

/// Every attempt of every step of a run, in the order the port promises;
/// rows of NULLs for a run with no steps (or steps with no history), no row
/// when there is no such run.
pub(super) const STEP_HISTORY: &str = "SELECT h.id, h.step_id, s.name AS step_name, h.attempt, \
     h.status, h.result, h.error, h.created_at, h.scheduled_at, h.running_at, h.succeeded_at, \
     h.failed_at FROM flowstate_runs r \
     LEFT JOIN flowstate_steps s ON s.run_id = r.id \
     LEFT JOIN flowstate_step_history h ON h.step_id = s.id \
     WHERE r.id = ? ORDER BY h.created_at, h.attempt, h.id";

/// A step's status, to explain a refused transition.
pub(super) const SELECT_STEP_STATUS: &str = "SELECT status FROM flowstate_steps WHERE id = ?";

/// Records the branch a step took. With `CLIENT_FOUND_ROWS`, zero affected
/// rows means no such step.
pub(super) const SET_BRANCH: &str =
    "UPDATE flowstate_steps SET branch_taken = ?, updated_at = ? WHERE id = ?";

// ---- versions -----------------------------------------------------------

/// Inserts a version, or does nothing if its (workflow, hash) is taken.
pub(super) const INSERT_VERSION: &str = "INSERT INTO flowstate_workflow_versions \
     (id, workflow, graph_hash, graph, created_at) VALUES (?, ?, ?, ?, ?) \
     ON DUPLICATE KEY UPDATE id = id";

/// One version by (workflow, hash).
pub(super) const SELECT_VERSION: &str = "SELECT id, workflow, graph_hash, graph, created_at \
     FROM flowstate_workflow_versions WHERE workflow = ? AND graph_hash = ?";
