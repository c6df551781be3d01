//! The fixed SQL texts the SQLite dialect sends (the status-guarded ones,
//! derived from core's tables, are in `guards.rs`).
//!
//! Every user value is a bound parameter (`?N`), never spliced.

use diesel::migration::{Migration, MigrationSource};
use diesel::sqlite::Sqlite;

/// The columns of a run, as `RunRow` reads them.
pub const RUN_COLS: &str =
    "id, workflow, status, input, graph_hash, parent_id, idempotency_key, created_at, updated_at";

/// The columns of a step, prefixed with the alias `s.`.
macro_rules! step_cols {
    ($p:literal) => {
        concat!(
            $p,
            "id, ",
            $p,
            "run_id, ",
            $p,
            "name, ",
            $p,
            "function_name, ",
            $p,
            "status, ",
            $p,
            "input, ",
            $p,
            "result, ",
            $p,
            "error, ",
            $p,
            "current_attempt, ",
            $p,
            "retries, ",
            $p,
            "retry_delay_ms, ",
            $p,
            "branch_taken, ",
            $p,
            "created_at, ",
            $p,
            "updated_at"
        )
    };
}

/// The columns of a step, as `StepRow` reads them.
pub const STEP_COLS: &str = step_cols!("");

/// A run by id.
pub const GET_RUN: &str = concat!(
    "SELECT id, workflow, status, input, graph_hash, parent_id, idempotency_key, created_at, updated_at ",
    "FROM flowstate_runs WHERE id = ?1"
);

/// A run by idempotency key.
pub const GET_RUN_BY_KEY: &str = concat!(
    "SELECT id, workflow, status, input, graph_hash, parent_id, idempotency_key, created_at, updated_at ",
    "FROM flowstate_runs WHERE idempotency_key = ?1"
);

/// A new run; a taken idempotency key inserts nothing.
pub const INSERT_RUN: &str = "INSERT INTO flowstate_runs \
     (id, workflow, status, input, graph_hash, parent_id, idempotency_key, created_at, updated_at) \
     VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?7) ON CONFLICT (idempotency_key) DO NOTHING";

/// A run's status, for the error path of a refused move.
pub const RUN_STATUS: &str = "SELECT status FROM flowstate_runs WHERE id = ?1";

/// Deletes a run; the foreign keys cascade to its steps, their history and
/// its state, and set its children's parent to NULL.
pub const DELETE_RUN: &str = "DELETE FROM flowstate_runs WHERE id = ?1";

/// Children per status, in one statement: no row means no parent; a row
/// with a NULL status means a parent with no children.
pub const COUNT_CHILDREN: &str = "SELECT c.status AS status, COUNT(c.id) AS n \
     FROM flowstate_runs p LEFT JOIN flowstate_runs c ON c.parent_id = p.id \
     WHERE p.id = ?1 GROUP BY c.status";

/// One run-state key, written in one upsert.
pub const WRITE_STATE: &str = "INSERT INTO flowstate_run_state (run_id, state_key, value) \
     VALUES (?1, ?2, ?3) ON CONFLICT (run_id, state_key) DO UPDATE SET value = excluded.value";

/// A run's state: no row means no run; one NULL row means no keys.
pub const READ_STATE: &str = "SELECT s.state_key AS state_key, s.value AS value \
     FROM flowstate_runs r LEFT JOIN flowstate_run_state s ON s.run_id = r.id \
     WHERE r.id = ?1";

/// A step by id.
pub const GET_STEP: &str = concat!(
    "SELECT ",
    step_cols!(""),
    " FROM flowstate_steps WHERE id = ?1"
);

/// A step by run and name.
pub const FIND_STEP: &str = concat!(
    "SELECT ",
    step_cols!(""),
    " FROM flowstate_steps WHERE run_id = ?1 AND name = ?2"
);

/// Every step of a run in one statement: no row means no run; one NULL row
/// means no steps.
pub const LIST_STEPS: &str = concat!(
    "SELECT ",
    step_cols!("s."),
    " FROM flowstate_runs r LEFT JOIN flowstate_steps s ON s.run_id = r.id",
    " WHERE r.id = ?1 ORDER BY s.created_at, s.name"
);

/// Every attempt of every step of a run in one statement, rows with no
/// history (a run with no steps) coming back NULL.
pub const STEP_HISTORY: &str = "SELECT h.id AS id, h.step_id AS step_id, s.name AS step_name, \
     h.attempt AS attempt, h.status AS status, h.result AS result, h.error AS error, \
     h.created_at AS created_at, h.scheduled_at AS scheduled_at, h.running_at AS running_at, \
     h.succeeded_at AS succeeded_at, h.failed_at AS failed_at \
     FROM flowstate_runs r \
     LEFT JOIN flowstate_steps s ON s.run_id = r.id \
     LEFT JOIN flowstate_step_history h ON h.step_id = s.id \
     WHERE r.id = ?1 ORDER BY h.created_at, h.attempt, h.id";

/// A new step, pending in attempt 1; a taken (run, name) inserts nothing.
pub const INSERT_STEP: &str = "INSERT INTO flowstate_steps \
     (id, run_id, name, function_name, status, input, current_attempt, retries, retry_delay_ms, \
      created_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4, 'pending', ?5, 1, ?6, ?7, ?8, ?8) \
     ON CONFLICT (run_id, name) DO NOTHING";

/// The first history row of a new step.
pub const INSERT_FIRST_ATTEMPT: &str = "INSERT INTO flowstate_step_history \
     (id, step_id, attempt, status, created_at) VALUES (?1, ?2, 1, 'pending', ?3)";

/// A step's status, for the error path of a refused move.
pub const STEP_STATUS: &str = "SELECT status FROM flowstate_steps WHERE id = ?1";

/// Records the branch a graph run took at a step.
pub const SET_BRANCH: &str =
    "UPDATE flowstate_steps SET branch_taken = ?1, updated_at = ?2 WHERE id = ?3";

/// A workflow version; a taken (workflow, hash) inserts nothing.
pub const INSERT_VERSION: &str = "INSERT INTO flowstate_workflow_versions \
     (id, workflow, graph_hash, graph, created_at) VALUES (?1, ?2, ?3, ?4, ?5) \
     ON CONFLICT (workflow, graph_hash) DO NOTHING";

/// A workflow version by (workflow, hash).
pub const GET_VERSION: &str = "SELECT id, workflow, graph_hash, graph, created_at \
     FROM flowstate_workflow_versions WHERE workflow = ?1 AND graph_hash = ?2";

/// The embedded SQLite migrations as a `Copy` source, for `:memory:`
/// databases that migrate on their own connection.
#[derive(Clone, Copy, Debug)]
pub struct Migrations;

impl MigrationSource<Sqlite> for Migrations {
    fn migrations(&self) -> diesel::migration::Result<Vec<Box<dyn Migration<Sqlite>>>> {
        MigrationSource::<Sqlite>::migrations(&crate::migrate::SQLITE)
    }
}
