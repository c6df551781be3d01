//! Pure folds over a run's steps and history: the graph state and the status
//! summary. Backends only read rows; the shaping is done once, here.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::records::{GraphState, Step, StepAttempt, StepSummary};
use crate::status::StepStatus;

/// The graph state of a run whose steps are `steps`.
pub fn graph_state(steps: &[Step]) -> GraphState {
    let mut state = GraphState::default();
    for step in steps {
        match step.status {
            StepStatus::Succeeded => state.completed.push(step.name.clone()),
            StepStatus::Failed if step.retry.has_attempts_left(step.attempt) => {
                state.retrying.push(step.name.clone());
            }
            StepStatus::Failed => state.failed.push(step.name.clone()),
            _ => {}
        }
        if let Some(branch) = &step.branch {
            state.branches.insert(step.name.clone(), branch.clone());
        }
    }
    state.completed.sort();
    state.failed.sort();
    state.retrying.sort();
    state
}

/// The results of the steps in `names` that have one, keyed by name.
pub fn step_results(steps: &[Step], names: &[&str]) -> BTreeMap<String, Value> {
    steps
        .iter()
        .filter(|step| names.contains(&step.name.as_str()))
        .filter_map(|step| Some((step.name.clone(), step.result.clone()?)))
        .collect()
}

/// The status summary of a run from its history: one entry per step, in
/// order of the step's first attempt, the latest attempt deciding status and
/// duration.
///
/// `history` must be ordered as the history port returns it (creation, then
/// attempt), so a retry created in the same microsecond still comes after
/// the attempt it replaces.
pub fn summarize(history: &[StepAttempt]) -> Vec<StepSummary> {
    let mut order: Vec<String> = Vec::new();
    let mut latest: BTreeMap<&str, &StepAttempt> = BTreeMap::new();
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for attempt in history {
        let name = attempt.step_name.as_str();
        *counts.entry(name).or_default() += 1;
        match latest.get(name) {
            None => {
                order.push(name.to_owned());
                latest.insert(name, attempt);
            }
            Some(seen) if attempt.attempt >= seen.attempt => {
                latest.insert(name, attempt);
            }
            Some(_) => {}
        }
    }
    order
        .into_iter()
        .map(|name| {
            let attempt = latest[name.as_str()];
            StepSummary {
                status: attempt.status,
                attempts: counts[name.as_str()],
                duration: attempt.duration(),
                name,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{HistoryId, RunId, StepId};
    use crate::retry::RetryPolicy;
    use crate::time::Timestamp;
    use serde_json::json;
    use std::time::Duration;

    fn step(name: &str, status: StepStatus, branch: Option<&str>, result: Option<Value>) -> Step {
        Step {
            id: StepId::generate(),
            run: RunId::generate(),
            name: name.into(),
            function: None,
            status,
            input: json!({}),
            result,
            error: None,
            attempt: 1,
            retry: RetryPolicy::NONE,
            claim_timeout: None,
            claimed_until: None,
            branch: branch.map(Into::into),
            created_at: Timestamp::EPOCH,
            updated_at: Timestamp::EPOCH,
        }
    }

    fn attempt(name: &str, n: u32, status: StepStatus, ran: Option<(i64, i64)>) -> StepAttempt {
        StepAttempt {
            id: HistoryId::generate(),
            step: StepId::generate(),
            step_name: name.into(),
            attempt: n,
            status,
            result: None,
            error: None,
            created_at: Timestamp::from_millis(5),
            scheduled_at: None,
            running_at: ran.map(|(a, _)| Timestamp::from_millis(a)),
            succeeded_at: ran
                .filter(|_| status == StepStatus::Succeeded)
                .map(|(_, b)| Timestamp::from_millis(b)),
            failed_at: ran
                .filter(|_| status == StepStatus::Failed)
                .map(|(_, b)| Timestamp::from_millis(b)),
        }
    }

    #[test]
    fn graph_state_sorts_names_and_keeps_branches() {
        let steps = [
            step("b", StepStatus::Succeeded, Some("left"), None),
            step("a", StepStatus::Succeeded, None, None),
            step("c", StepStatus::Failed, None, None),
            step("d", StepStatus::Running, Some("right"), None),
        ];
        let state = graph_state(&steps);
        assert_eq!(state.completed, vec!["a", "b"]);
        assert_eq!(state.failed, vec!["c"]);
        assert_eq!(state.branches.len(), 2);
        assert_eq!(state.branches["d"], "right");
    }

    #[test]
    fn step_results_picks_named_steps_with_results() {
        let steps = [
            step("a", StepStatus::Succeeded, None, Some(json!(1))),
            step("b", StepStatus::Succeeded, None, Some(json!(false))),
            step("c", StepStatus::Running, None, None),
        ];
        let results = step_results(&steps, &["a", "c", "zz"]);
        assert_eq!(results.len(), 1);
        assert_eq!(results["a"], json!(1));
    }

    #[test]
    fn a_retried_step_collapses_to_its_latest_attempt() {
        let history = [
            attempt("fetch", 1, StepStatus::Failed, Some((10, 20))),
            attempt("other", 1, StepStatus::Pending, None),
            attempt("fetch", 2, StepStatus::Succeeded, Some((30, 75))),
        ];
        let summary = summarize(&history);
        assert_eq!(summary.len(), 2);
        assert_eq!(summary[0].name, "fetch");
        assert_eq!(summary[0].status, StepStatus::Succeeded);
        assert_eq!(summary[0].attempts, 2);
        assert_eq!(summary[0].duration, Some(Duration::from_millis(45)));
        assert_eq!(summary[1].name, "other");
        assert_eq!(summary[1].duration, None);
    }
}
