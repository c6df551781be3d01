//! The status-guarded writes of steps, built once from core's tables:
//! the claim from [`ClaimDecision`], transitions from
//! [`StepStatus::TRANSITIONS`], and the history upsert each of them pairs
//! with. Only status literals from the enums are spliced; every value is
//! bound.

use std::sync::LazyLock;

use flowstate_core::{ClaimDecision, StepStatus};

use crate::guard::sql_list;

/// The claim: one status-guarded `UPDATE` of the step named (run, name),
/// whose guard is `ClaimDecision`: the function matches or the step is not
/// pinned, and the step is fresh, or retryable with attempts left
/// (`current_attempt < retries + 1` is `RetryPolicy::has_attempts_left`). A
/// retry raises the attempt and clears result and error.
///
/// MySQL evaluates single-table `SET` assignments left to right, each seeing
/// the ones before, so `status` is assigned last: the `IF`s read the status
/// the step had, under that order and under MariaDB's
/// `SIMULTANEOUS_ASSIGNMENT` mode alike.
pub(super) static CLAIM_STEP: LazyLock<String> = LazyLock::new(|| {
    let retry = sql_list(&ClaimDecision::ClaimRetry.statuses());
    format!(
        "UPDATE flowstate_steps SET \
         current_attempt = IF(status IN ({retry}), current_attempt + 1, current_attempt), \
         result = IF(status IN ({retry}), NULL, result), \
         error = IF(status IN ({retry}), NULL, error), \
         status = '{running}', updated_at = ? \
         WHERE run_id = ? AND name = ? AND (function_name IS NULL OR function_name = ?) \
         AND (status IN ({fresh}) OR (status IN ({retry}) AND current_attempt < retries + 1))",
        fresh = sql_list(&ClaimDecision::ClaimFresh.statuses()),
        running = StepStatus::Running,
    )
});

/// After a won claim: moves the history row of the step's (new) current
/// attempt to running, creating it if missing. Reads the step row the claim
/// just locked.
pub(super) const CLAIM_HISTORY: &str = "INSERT INTO flowstate_step_history \
     (id, step_id, attempt, status, created_at, running_at) \
     SELECT ?, s.id, s.current_attempt, s.status, ?, ? FROM flowstate_steps s \
     WHERE s.run_id = ? AND s.name = ? \
     ON DUPLICATE KEY UPDATE status = VALUES(status), running_at = VALUES(running_at)";

/// The two writes of a step transition to one target status.
pub(super) struct TransitionSql {
    /// The status-guarded `UPDATE` of the step. Binds: status, [payload],
    /// updated_at, id.
    pub update: String,
    /// The upsert of the history row of the step's current attempt, copied
    /// from the step row just written. Binds: history id, created_at,
    /// stamp, step id.
    pub history: String,
}

/// The statements of a transition to `to`, built once per status; `None`
/// if no status may move there in place.
pub(super) fn transition(to: StepStatus) -> Option<&'static TransitionSql> {
    static BY_TARGET: LazyLock<Vec<(StepStatus, TransitionSql)>> = LazyLock::new(|| {
        StepStatus::ALL
            .iter()
            .filter_map(|&to| build_transition(to).map(|sql| (to, sql)))
            .collect()
    });
    BY_TARGET
        .iter()
        .find(|(target, _)| *target == to)
        .map(|(_, sql)| sql)
}

fn build_transition(to: StepStatus) -> Option<TransitionSql> {
    let sources = StepStatus::sources_of(to);
    if sources.is_empty() {
        return None;
    }
    let (payload, stamp) = match to {
        StepStatus::Succeeded => (Some("result"), Some("succeeded_at")),
        StepStatus::Failed => (Some("error"), Some("failed_at")),
        StepStatus::Running => (None, Some("running_at")),
        StepStatus::Scheduled => (None, Some("scheduled_at")),
        StepStatus::Pending => (None, None),
    };
    let set_payload = payload.map_or_else(String::new, |col| format!("{col} = ?, "));
    let update = format!(
        "UPDATE flowstate_steps SET status = ?, {set_payload}updated_at = ? \
         WHERE id = ? AND status IN ({})",
        sql_list(&sources)
    );
    Some(TransitionSql {
        update,
        history: history_upsert(payload, stamp),
    })
}

/// The statements of a retry attempt: the guarded `UPDATE` (binds: status,
/// updated_at, id) and the history upsert of the new attempt (binds:
/// history id, created_at, running_at or NULL, step id).
pub(super) static RETRY_ATTEMPT: LazyLock<TransitionSql> = LazyLock::new(|| {
    let update = format!(
        "UPDATE flowstate_steps SET current_attempt = current_attempt + 1, result = NULL, \
         error = NULL, status = ?, updated_at = ? WHERE id = ? AND status IN ({})",
        sql_list(&ClaimDecision::ClaimRetry.statuses())
    );
    TransitionSql {
        update,
        history: history_upsert(None, Some("running_at")),
    }
});

/// `INSERT ... SELECT ... ON DUPLICATE KEY UPDATE` of the history row of a
/// step's current attempt: a new row begins at the bound `created_at`; the
/// row's status (and `payload` column) are copied from the step; the `stamp`
/// column is set to the bound time, kept if that is NULL.
fn history_upsert(payload: Option<&str>, stamp: Option<&str>) -> String {
    let mut columns = vec!["id", "step_id", "attempt", "status", "created_at"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    let mut values = vec!["?", "id", "current_attempt", "status", "?"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    let mut updates = vec![String::from("status = VALUES(status)")];
    if let Some(col) = stamp {
        columns.push(col.to_owned());
        values.push("?".to_owned());
        updates.push(format!("{col} = COALESCE(VALUES({col}), {col})"));
    }
    if let Some(col) = payload {
        columns.push(col.to_owned());
        values.push(col.to_owned());
        updates.push(format!("{col} = VALUES({col})"));
    }
    format!(
        "INSERT INTO flowstate_step_history ({}) SELECT {} FROM flowstate_steps \
         WHERE id = ? ON DUPLICATE KEY UPDATE {}",
        columns.join(", "),
        values.join(", "),
        updates.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_guard_is_the_claim_decision() {
        assert_eq!(
            ClaimDecision::ClaimFresh.statuses(),
            vec![StepStatus::Pending, StepStatus::Scheduled]
        );
        assert_eq!(
            ClaimDecision::ClaimRetry.statuses(),
            vec![StepStatus::Failed]
        );
        assert!(CLAIM_STEP.contains(
            "AND (function_name IS NULL OR function_name = ?) AND (status IN ('pending', 'scheduled') \
             OR (status IN ('failed') AND current_attempt < retries + 1))"
        ));
        // `status` is assigned after every assignment that reads it.
        let status_at = CLAIM_STEP.find("status = 'running'").unwrap();
        assert!(CLAIM_STEP.rfind("IF(status").unwrap() < status_at);
    }

    #[test]
    fn transitions_guard_on_the_transition_table() {
        let succeeded = transition(StepStatus::Succeeded).unwrap();
        assert!(succeeded.update.ends_with("AND status IN ('running')"));
        assert!(succeeded.update.contains("result = ?"));
        assert!(
            succeeded
                .history
                .contains("succeeded_at = COALESCE(VALUES(succeeded_at), succeeded_at)")
        );
        assert!(succeeded.history.contains("result = VALUES(result)"));
        let scheduled = transition(StepStatus::Scheduled).unwrap();
        assert!(
            scheduled
                .update
                .ends_with("AND status IN ('pending', 'running')")
        );
        assert!(!scheduled.history.contains("result"));
        for &to in StepStatus::ALL {
            let sources = StepStatus::sources_of(to);
            match transition(to) {
                None => assert!(sources.is_empty(), "{to}"),
                Some(sql) => {
                    let guard = format!("IN ({})", sql_list(&sources));
                    assert!(sql.update.ends_with(&guard), "{to}: {}", sql.update);
                }
            }
        }
        assert!(RETRY_ATTEMPT.update.ends_with("AND status IN ('failed')"));
    }
}
