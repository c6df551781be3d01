//! The status-guarded SQL, derived from core's tables at first use: the
//! claim guard from [`ClaimDecision`], the step moves from
//! [`StepStatus::TRANSITIONS`], the run moves from [`RunStatus::TRANSITIONS`].
//! Only status literals from the core enums and column names are spliced,
//! so the guards cannot drift from the rules they carry out.

use std::sync::LazyLock;

use flowstate_core::{ClaimDecision, RunStatus, StepStatus};

use super::sql::{RUN_COLS, STEP_COLS};
use crate::guard::sql_list;

/// The largest attempt number a step can hold (`u32::MAX`), so the SQL
/// saturates exactly where core's `RetryPolicy` arithmetic does.
const MAX_ATTEMPT: u32 = u32::MAX;

/// The claim: one status-guarded UPDATE whose RETURNING row is the claimed
/// step. The guard is [`ClaimDecision`]: the function matches (or the step
/// is not pinned), and the step is fresh-claimable, or retry-claimable with
/// attempts left; a retry starts the next attempt with no result or error.
/// Binds: `?1` now, `?2` run, `?3` name, `?4` function.
pub static CLAIM: LazyLock<String> = LazyLock::new(|| {
    let fresh = sql_list(&ClaimDecision::ClaimFresh.statuses());
    let retry = sql_list(&ClaimDecision::ClaimRetry.statuses());
    let running = StepStatus::Running;
    format!(
        "UPDATE flowstate_steps SET status = '{running}', \
         current_attempt = CASE WHEN status IN ({retry}) THEN current_attempt + 1 ELSE current_attempt END, \
         result = CASE WHEN status IN ({retry}) THEN NULL ELSE result END, \
         error = CASE WHEN status IN ({retry}) THEN NULL ELSE error END, \
         updated_at = ?1 \
         WHERE run_id = ?2 AND name = ?3 \
         AND (function_name IS NULL OR function_name = ?4) \
         AND (status IN ({fresh}) \
              OR (status IN ({retry}) AND current_attempt < min(retries + 1, {MAX_ATTEMPT}))) \
         RETURNING {STEP_COLS}"
    )
});

/// The SQL that moves a step to one status, and writes that attempt's
/// history row.
#[derive(Debug)]
pub struct StatusSql {
    /// The guarded in-place move, from [`StepStatus::sources_of`]. Binds:
    /// `?1` now, `?2` step id, then `?3` the result or error for succeeded
    /// or failed.
    pub transition: String,
    /// The history upsert of the step's current attempt, recreating the
    /// row if it is missing. Binds: `?1` a new history id, `?2` now, `?3`
    /// step id.
    pub history: String,
}

/// The column stamped when an attempt reaches `status`, if any.
fn stamp_column(status: StepStatus) -> Option<&'static str> {
    match status {
        StepStatus::Pending => None,
        StepStatus::Scheduled => Some("scheduled_at"),
        StepStatus::Running => Some("running_at"),
        StepStatus::Succeeded => Some("succeeded_at"),
        StepStatus::Failed => Some("failed_at"),
    }
}

/// The payload column a status writes (the result of a success, the error
/// of a failure), if any.
fn payload_column(status: StepStatus) -> Option<&'static str> {
    match status {
        StepStatus::Succeeded => Some("result"),
        StepStatus::Failed => Some("error"),
        StepStatus::Pending | StepStatus::Scheduled | StepStatus::Running => None,
    }
}

impl StatusSql {
    fn new(to: StepStatus) -> Self {
        let sources = StepStatus::sources_of(to);
        let payload = payload_column(to);
        let set_payload = payload
            .map(|col| format!(", {col} = ?3"))
            .unwrap_or_default();
        let transition = if sources.is_empty() {
            // Nothing may move here in place: a guard that matches nothing.
            format!(
                "UPDATE flowstate_steps SET status = '{to}', updated_at = ?1 WHERE id = ?2 AND 0"
            )
        } else {
            format!(
                "UPDATE flowstate_steps SET status = '{to}', updated_at = ?1{set_payload} \
                 WHERE id = ?2 AND status IN ({})",
                sql_list(&sources)
            )
        };
        Self {
            transition,
            history: history_upsert(to),
        }
    }
}

/// The upsert of the history row `(step, current_attempt)` at status `to`:
/// a missing row is created (begun now), an existing one moves to `to`,
/// stamps `to`'s column and takes the step's result or error.
fn history_upsert(to: StepStatus) -> String {
    let mut columns = vec!["id", "step_id", "attempt", "status", "created_at"];
    let mut values = vec![
        "?1".to_owned(),
        "id".to_owned(),
        "current_attempt".to_owned(),
        format!("'{to}'"),
        "?2".to_owned(),
    ];
    let mut updates = vec!["status = excluded.status".to_owned()];
    if let Some(col) = stamp_column(to) {
        columns.push(col);
        values.push("?2".to_owned());
        updates.push(format!("{col} = excluded.{col}"));
    }
    if let Some(col) = payload_column(to) {
        columns.push(col);
        values.push(col.to_owned());
        updates.push(format!("{col} = excluded.{col}"));
    }
    // `WHERE` is what tells SQLite's parser that ON CONFLICT is the upsert
    // clause, not a join constraint of the SELECT.
    format!(
        "INSERT INTO flowstate_step_history ({}) \
         SELECT {} FROM flowstate_steps WHERE id = ?3 \
         ON CONFLICT (step_id, attempt) DO UPDATE SET {}",
        columns.join(", "),
        values.join(", "),
        updates.join(", ")
    )
}

/// [`StatusSql`] for every step status, in [`StepStatus::ALL`] order.
static STATUS_SQL: LazyLock<Vec<StatusSql>> = LazyLock::new(|| {
    StepStatus::ALL
        .iter()
        .map(|&to| StatusSql::new(to))
        .collect()
});

/// The SQL that moves a step to `to`.
pub fn status_sql(to: StepStatus) -> &'static StatusSql {
    let index = StepStatus::ALL
        .iter()
        .position(|&s| s == to)
        .unwrap_or_else(|| unreachable!("every status is in StepStatus::ALL"));
    &STATUS_SQL[index]
}

/// Starts the next attempt of a failed step in `start` (spliced: it is one
/// of [`StepStatus::RETRY_STARTS`], checked by the caller), with no result
/// or error. Binds: `?1` now, `?2` step id.
pub fn retry_attempt(start: StepStatus) -> String {
    let failed = StepStatus::Failed;
    format!(
        "UPDATE flowstate_steps SET status = '{start}', \
         current_attempt = min(current_attempt + 1, {MAX_ATTEMPT}), \
         result = NULL, error = NULL, updated_at = ?1 \
         WHERE id = ?2 AND status = '{failed}'"
    )
}

/// `UPDATE ... RETURNING` moving a run to each status, guarded on
/// [`RunStatus::sources_of`], in [`RunStatus::ALL`] order. Binds: `?1` now,
/// `?2` run id.
static SET_STATUS: LazyLock<Vec<String>> = LazyLock::new(|| {
    RunStatus::ALL
        .iter()
        .map(|&to| {
            let sources = RunStatus::sources_of(to);
            let guard = if sources.is_empty() {
                "0".to_owned()
            } else {
                format!("status IN ({})", sql_list(&sources))
            };
            format!(
                "UPDATE flowstate_runs SET status = '{to}', updated_at = ?1 \
                 WHERE id = ?2 AND {guard} RETURNING {RUN_COLS}"
            )
        })
        .collect()
});

/// The guarded move of a run to `to`.
pub fn set_run_status_sql(to: RunStatus) -> &'static str {
    let index = RunStatus::ALL
        .iter()
        .position(|&s| s == to)
        .unwrap_or_else(|| unreachable!("every status is in RunStatus::ALL"));
    &SET_STATUS[index]
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
        assert!(CLAIM.contains("status IN ('pending', 'scheduled')"));
        assert!(CLAIM.contains("(function_name IS NULL OR function_name = ?4)"));
    }

    #[test]
    fn transitions_guard_on_the_core_table() {
        let sql = &status_sql(StepStatus::Succeeded).transition;
        assert!(sql.ends_with("status IN ('running')"), "{sql}");
        assert!(sql.contains("result = ?3"));
        let history = &status_sql(StepStatus::Failed).history;
        assert!(history.contains("error = excluded.error"), "{history}");
        assert!(
            history.contains("failed_at = excluded.failed_at"),
            "{history}"
        );
        assert!(
            !status_sql(StepStatus::Pending)
                .history
                .contains("_at = excluded")
        );
    }
}
