//! A worker process killed with SIGKILL mid-step: two `fault-worker`
//! child processes work 200 steps on one SQLite file; one is killed while
//! it holds a step (after its ledger row, before its completion). After
//! the survivor is done and one recovery pass, nothing may be lost or
//! stuck, and nothing may have run twice.
//!
//! EXPECTED TO FAIL until step claims expire (issue 26, bug 1): today the
//! step the dead worker held stays `running` for ever. The test is behind
//! this crate's `claim-expiry` feature, which the second phase turns on by
//! default; its assertions are not weakened.

#![cfg(feature = "claim-expiry")]

use std::sync::Arc;
use std::time::Duration;

use flowstate_faults::child::{Hold, WorkerChild};
use flowstate_faults::ledger::Ledger;
use flowstate_faults::load::seed;
use flowstate_faults::recovery::recover_and_drain;
use flowstate_faults::{Scenario, SharedDb, Verdict};
use flowstate_store_diesel::Dialect;

use crate::support::{bounded, store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_step_sqlite() {
    let db = SharedDb::migrated(Dialect::Sqlite)
        .await
        .expect("a database");
    let store = store(&db.url, 2).await;
    let steps = seed(&store, 20, 10).await.expect("seed the steps");
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_fault-worker"));
    let hold_forever = Hold {
        for_: Duration::from_secs(600),
        at: Some(5),
    };
    let mut doomed = WorkerChild::spawn(binary, &db.url, "doomed", hold_forever).expect("a worker");
    let steady = Hold {
        for_: Duration::from_millis(2),
        at: None,
    };
    let mut survivor = WorkerChild::spawn(binary, &db.url, "survivor", steady).expect("a worker");
    let held = doomed
        .wait_line("holding", Duration::from_secs(30))
        .await
        .expect("the doomed worker holds a step");
    doomed.kill().await;
    let status = survivor
        .wait(Duration::from_secs(60))
        .await
        .expect("the survivor finishes");
    assert!(
        status.success(),
        "the survivor failed: {}",
        survivor.stderr_text()
    );
    let ledger = Arc::new(Ledger::new(&db.url, 2));
    let recovery = bounded(
        "the recovery pass",
        Duration::from_secs(60),
        recover_and_drain(Arc::clone(&store), ledger, &steps),
    )
    .await
    .expect("the recovery pass");
    let mut scenario = Scenario::new(
        "worker killed mid-step",
        Dialect::Sqlite,
        "200 steps, 2 worker processes".into(),
        "SIGKILL of one process holding a step".into(),
    );
    scenario.expected_failure = Some("step claims expire (issue 26 bug 1, feature claim-expiry)");
    Verdict::judge(&mut scenario, &db.url, None, &recovery)
        .await
        .expect("read the verdict");
    scenario.note(format!("killed while {held}"));
    scenario.note(format!(
        "survivor completed {}",
        survivor
            .lines()
            .iter()
            .filter(|l| l.starts_with("completed"))
            .count()
    ));
    scenario.finish();
}
