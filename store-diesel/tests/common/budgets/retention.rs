//! The statement budgets of retention, checked like [`super`]: one prune
//! batch of each kind and the dry run's counts, each compared exactly with
//! its rows of the one [`table`](super::table) ([`table::RETENTION`]).

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{RetentionStore, RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, PruneKind, RunStatus};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog};
use serde_json::json;

use super::{Sent, check_scenario, recorder, table};

/// Runs the scenario on a fresh `dialect` database and asserts that every
/// operation sent exactly what the table lists.
pub async fn every_operation_sends_its_budget(dialect: Dialect) {
    check_scenario(
        dialect,
        "retention",
        &table::RETENTION.rows(dialect),
        scenario,
    )
    .await;
}

/// Two settled runs with a step each pruned in one batch, a batch that
/// finds nothing, one batch of each other kind, and two counts. The
/// window is zero: what settled before the call is old enough.
async fn scenario(store: &DieselStore, log: &Arc<StatementLog>) -> Sent {
    let mut sent = Vec::new();
    recorder!($, sent, log);
    for _ in 0..2 {
        let run = store
            .create_run(NewRun::new("wf", json!({})))
            .await
            .unwrap()
            .record;
        store
            .insert_step(NewStep::new(run.id, "a", "fn", json!({})))
            .await
            .unwrap();
        store
            .set_run_status(run.id, RunStatus::Completed)
            .await
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(2));
    let zero = Duration::ZERO;
    assert_eq!(
        capture!(
            "count_prunable runs",
            store.count_prunable(PruneKind::Runs, zero)
        ),
        2
    );
    assert_eq!(
        capture!("prune runs", store.prune(PruneKind::Runs, zero, 10)),
        2
    );
    assert_eq!(
        capture!("prune runs none", store.prune(PruneKind::Runs, zero, 10)),
        0
    );
    capture!("prune events", store.prune(PruneKind::Events, zero, 10));
    capture!(
        "prune dead_letters",
        store.prune(PruneKind::DeadLetters, zero, 10)
    );
    capture!(
        "prune virtual_user_runs",
        store.prune(PruneKind::VirtualUserRuns, zero, 10)
    );
    capture!(
        "count_prunable events",
        store.count_prunable(PruneKind::Events, zero)
    );
    sent
}
