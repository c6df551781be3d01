//! One round of the run lease's operations on a store, written once for
//! the tests that read what a connection prepared (PostgreSQL's
//! `pg_prepared_statements`, MySQL's `Com_stmt_prepare`): the oldest free
//! run claimed, renewed, yielded, claimed again, released with a failure,
//! claimed again and finished.

use std::time::Duration;

use flowstate_core::ports::{RunLeaseStore, RunStore};
use flowstate_core::{Release, RunId, RunOutcome, RunStatus};
use flowstate_store_diesel::DieselStore;

/// Runs the round on the oldest free run of `store` (round `i` names its
/// failure); answers the run, completed.
pub async fn lease_round(store: &DieselStore, i: usize) -> RunId {
    let lease_for = Duration::from_secs(60);
    let claim = || async {
        store
            .claim_run("w", lease_for)
            .await
            .unwrap()
            .expect("a free run")
    };
    let lease = claim().await;
    let run = lease.run.id;
    store.renew(run, lease.token, lease_for).await.unwrap();
    store
        .release(run, lease.token, Release::Yield)
        .await
        .unwrap();
    let lease = claim().await;
    assert_eq!(lease.run.id, run, "the yielded run is the oldest free one");
    let failure = Release::Failure {
        reason: format!("r{i}"),
        limit: 5,
    };
    store.release(run, lease.token, failure).await.unwrap();
    let lease = claim().await;
    assert_eq!(lease.run.id, run, "the released run is the oldest free one");
    store
        .finish(run, lease.token, RunOutcome::Completed)
        .await
        .unwrap();
    assert_eq!(
        store.get_run(run).await.unwrap().status,
        RunStatus::Completed
    );
    run
}
