//! The step ports' budget scenario: every operation of
//! [`RunStore`], [`StepStore`], [`BatchStepStore`] and [`VersionStore`],
//! each captured on its own, won and lost. Reads of steps must never name
//! the history table.

use std::sync::Arc;

use flowstate_core::ports::{BatchStepStore, RunStore, StepStore, VersionStore};
use flowstate_core::{
    BatchClaim, Completion, InlineOutcome, InlineStep, NewRun, NewStep, NewWorkflowVersion,
    RetryPolicy, RetryStart, RunId, RunStatus, StepTransition, Timestamp, VersionStatus,
};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog};
use serde_json::json;

use super::{Sent, assert_budgets, recorder, run_scenario, table};

/// The operations that read steps and must leave history alone.
const STEP_READS: [&str; 3] = ["get_step", "find_step", "list_steps"];

/// Runs the scenario on a fresh `dialect` database and asserts that every
/// operation sent exactly the statements `table` lists for it, and that the
/// table names every operation the scenario runs.
pub async fn every_operation_sends_its_budget(dialect: Dialect) {
    let table = table::STEPS.rows(dialect);
    let sent = Box::pin(run_scenario(dialect, scenario)).await;
    let mut problems = Vec::new();
    for (op, statements) in &sent {
        if STEP_READS.contains(op)
            && statements
                .iter()
                .any(|s| s.contains("flowstate_step_history"))
        {
            problems.push(format!("{op} touched the history table: {statements:#?}"));
        }
    }
    assert!(problems.is_empty(), "{dialect}:\n{}", problems.join("\n"));
    assert_budgets(dialect, "step", &table, &sent);
}

/// Every operation with a budget, each captured on its own.
async fn scenario(store: &DieselStore, log: &Arc<StatementLog>) -> Sent {
    let mut sent = Vec::new();
    recorder!($, sent, log);
    let run = capture!(
        "create_run",
        store.create_run(NewRun::new("wf", json!({"a": 1})))
    )
    .record;
    let keyed = || NewRun::new("wf", json!({})).with_idempotency_key("k");
    let first = capture!("create_run keyed", store.create_run(keyed()));
    let again = capture!("create_run keyed again", store.create_run(keyed()));
    assert!(first.inserted && !again.inserted && again.record.id == first.record.id);

    let retrying = RetryPolicy::with_retries(2);
    let new_step = |name: &str| NewStep::new(run.id, name, "f", json!({})).with_retry(retrying);
    let a = capture!("insert_step", store.insert_step(new_step("a"))).record;
    let dup = capture!("insert_step again", store.insert_step(new_step("a")));
    assert!(!dup.inserted && dup.record.id == a.id);
    for name in ["b", "c", "d"] {
        store.insert_step(new_step(name)).await.expect("insert");
    }

    let won = capture!("claim won", store.claim_step(run.id, "a", "f"));
    assert!(won.is_some());
    let lost = capture!("claim lost", store.claim_step(run.id, "a", "f"));
    assert!(lost.is_none());
    refused!("claim mismatch", store.claim_step(run.id, "b", "other"));
    refused!("claim unknown", store.claim_step(run.id, "nope", "f"));
    capture!(
        "transition succeeded",
        store.transition_step(a.id, StepTransition::Succeeded(json!(1)))
    );
    refused!(
        "transition refused",
        store.transition_step(a.id, StepTransition::Running)
    );

    let b = store
        .claim_step(run.id, "b", "f")
        .await
        .expect("claim")
        .expect("b");
    capture!(
        "transition failed",
        store.transition_step(b.id, StepTransition::Failed(json!("boom")))
    );
    let retried = capture!("claim retry", store.claim_step(run.id, "b", "f"));
    assert_eq!(retried.map(|s| s.attempt), Some(2));

    let c = store
        .claim_step(run.id, "c", "f")
        .await
        .expect("claim")
        .expect("c");
    store
        .transition_step(c.id, StepTransition::Failed(json!("x")))
        .await
        .expect("fail c");
    capture!(
        "create_retry_attempt",
        store.create_retry_attempt(c.id, RetryStart::Pending)
    );
    let d = store.find_step(run.id, "d").await.expect("d");
    capture!(
        "transition scheduled",
        store.transition_step(d.id, StepTransition::Scheduled)
    );

    for name in ["e1", "e2"] {
        store.insert_step(new_step(name)).await.expect("insert");
    }
    let batch = capture!("claim_batch", store.claim_batch(&BatchClaim::new(10)));
    assert_eq!(batch.len(), 3, "c (retried, pending) and e1, e2");
    let done = batch
        .iter()
        .map(|s| (s.claim(), Completion::Succeeded(json!(1))))
        .collect();
    let outcomes = capture!("complete_batch", store.complete_batch(done));
    assert!(outcomes.iter().all(Result::is_ok));
    let none = capture!("claim_batch empty", store.claim_batch(&BatchClaim::new(10)));
    assert!(none.is_empty());
    let again = vec![(a.claim(), Completion::Succeeded(json!(2)))];
    let outcomes = capture!("complete_batch refused", store.complete_batch(again));
    assert!(outcomes[0].is_err());

    capture!("get_step", store.get_step(a.id));
    capture!("find_step", store.find_step(run.id, "a"));
    capture!("list_steps", store.list_steps(run.id));
    refused!(
        "list_steps unknown run",
        store.list_steps(RunId::generate())
    );
    capture!("step_history", store.step_history(run.id));
    capture!("write_state", store.write_state(run.id, "k.1", &json!([1])));
    capture!("read_state", store.read_state(run.id));
    capture!("set_branch_taken", store.set_branch_taken(d.id, "left"));
    capture!(
        "set_run_status",
        store.set_run_status(run.id, RunStatus::Suspended)
    );
    capture!(
        "set_run_status_with_output",
        store.set_run_status_with_output(run.id, RunStatus::Running, &json!({"partial": 1}))
    );
    capture!("list_workflow_names", store.list_workflow_names());
    let ran = InlineStep::new(
        NewStep::new(run.id, "inline", "f", json!({})),
        InlineOutcome::Succeeded(json!({"ok": true})),
        Timestamp::from_millis(1),
        Timestamp::from_millis(2),
    );
    capture!("record_step", store.record_step(ran));
    let version = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "h".into(),
        graph: json!({}),
    };
    capture!("upsert_version", store.upsert_version(version));
    let draft = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "draft".into(),
        graph: json!({}),
    };
    let draft = capture!("propose_version", store.propose_version(draft, Some("src")));
    capture!(
        "set_version_status",
        store.set_version_status(draft.record.id, VersionStatus::Active)
    );
    capture!("get_run", store.get_run(run.id));
    capture!("delete_run", store.delete_run(run.id));
    sent
}
