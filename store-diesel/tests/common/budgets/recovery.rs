//! The statement budgets of the recovery ports ([`RecoveryStore`],
//! [`RunRecoveryStore`]), as tables like [`super`]: the one [`table`](super::table)
//! lists, per operation and outcome, the first word of every statement it
//! sends, and [`every_operation_sends_its_budget`] runs one scenario through a logged store
//! and compares exactly.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{RecoveryStore, RunLeaseStore, RunRecoveryStore, RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, RunId};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog};
use serde_json::json;

use super::{Sent, check_scenario, recorder, table};

/// Runs the recovery scenario on a fresh `dialect` database and asserts
/// that every operation sent exactly the statements `table` lists for it,
/// and that the table names every operation the scenario runs.
pub async fn every_operation_sends_its_budget(dialect: Dialect) {
    check_scenario(
        dialect,
        "recovery",
        &table::RECOVERY.rows(dialect),
        scenario,
    )
    .await;
}

/// Every recovery operation with a budget, each captured on its own.
async fn scenario(store: &DieselStore, log: &Arc<StatementLog>) -> Sent {
    let mut sent = Vec::new();
    recorder!($, sent, log);
    let lease = Duration::from_secs(60);
    let run = store
        .create_run(NewRun::new("wf", json!({})))
        .await
        .expect("create_run")
        .record
        .id;
    store
        .insert_step(NewStep::new(run, "a", "f", json!({})))
        .await
        .expect("insert_step");
    // The row clock is the system's: let the step be older than now.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let found = capture!(
        "undispatched_steps",
        store.undispatched_steps(Duration::ZERO, 0)
    );
    assert_eq!(found.len(), 1);
    let found = capture!("stalled_runs", store.stalled_runs(Duration::ZERO, 0));
    assert_eq!(found.len(), 1);
    let won = capture!("lease_run", store.lease_run(run, "w", lease));
    assert!(won.is_some());
    let held = capture!("lease_run held", store.lease_run(run, "w", lease));
    assert!(held.is_none());
    let (out, statements) = log
        .capture(store.lease_run(RunId::generate(), "w", lease))
        .await;
    sent.push(("lease_run unknown", statements));
    assert!(matches!(out, Err(flowstate_core::Error::RunNotFound(_))));
    let cancel = store
        .create_run(NewRun::new("wf", json!({})))
        .await
        .expect("create_run")
        .record
        .id;
    store.request_cancel(cancel).await.expect("request_cancel");
    let cancelled = capture!("lease_run cancelled", store.lease_run(cancel, "w", lease));
    assert!(cancelled.is_none());
    let none = capture!("reap_expired_leases none", store.reap_expired_leases(0));
    assert!(none.is_empty());
    store.lease_clock_offset().advance(lease * 2);
    let reaped = capture!("reap_expired_leases", store.reap_expired_leases(0));
    assert_eq!(reaped, [run]);
    sent
}
