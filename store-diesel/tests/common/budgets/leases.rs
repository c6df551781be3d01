//! The statement budgets of the run leases ([`RunLeaseStore`]), as tables
//! like [`super`]: the one [`table`](super::table) lists, per lease operation, the
//! first word of every statement it sends, and [`every_operation_sends_its_budget`] runs one
//! scenario through a logged store and compares exactly.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{ChildRunStore, EffectJournal, RunLeaseStore, RunStore, RunWaitStore};
use flowstate_core::{EffectBegin, NewChild, NewRun, Release, RunOutcome, Wait};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog};
use serde_json::json;

use super::{Sent, check_scenario, recorder, table};

/// Runs the lease scenario on a fresh `dialect` database and asserts that
/// every operation sent exactly the statements `table` lists for it, and
/// that the table names every operation the scenario runs.
pub async fn every_operation_sends_its_budget(dialect: Dialect) {
    check_scenario(dialect, "lease", &table::LEASES.rows(dialect), scenario).await;
}

/// Every lease operation with a budget, each captured on its own.
async fn scenario(store: &DieselStore, log: &Arc<StatementLog>) -> Sent {
    let mut sent = Vec::new();
    recorder!($, sent, log);
    let lease = Duration::from_secs(300);
    for _ in 0..4 {
        store
            .create_run(NewRun::new("wf", json!({})))
            .await
            .expect("create_run");
    }
    let held = capture!("claim_run", store.claim_run("w", lease)).expect("a run");
    let run = held.run.id;
    let batch = capture!("claim_runs", store.claim_runs("w", 2, lease));
    assert_eq!(batch.len(), 2);
    capture!("renew", store.renew(run, held.token, lease));
    refused!("renew lost", store.renew(run, held.token + 1, lease));
    let failed = capture!(
        "release failure",
        store.release(run, held.token, Release::failure("boom"))
    );
    assert_eq!(failed.failures, 1);
    let again = store
        .claim_run("w", lease)
        .await
        .expect("claim")
        .expect("a run");
    capture!(
        "release yield",
        store.release(again.run.id, again.token, Release::Yield)
    );
    let last = store
        .claim_run("w", lease)
        .await
        .expect("claim")
        .expect("a run");
    capture!(
        "finish",
        store.finish(last.run.id, last.token, RunOutcome::Completed)
    );
    store
        .create_run(NewRun::new("wf", json!({})))
        .await
        .expect("create_run");
    let output = store
        .claim_run("w", lease)
        .await
        .expect("claim")
        .expect("a run");
    capture!(
        "finish_with_output",
        store.finish_with_output(
            output.run.id,
            output.token,
            RunOutcome::Completed,
            &json!({"total": 3})
        )
    );
    let next = store
        .claim_run("w", lease)
        .await
        .expect("claim")
        .expect("a run");
    capture!("request_cancel", store.request_cancel(next.run.id));
    capture!("lease_state", store.lease_state(next.run.id));
    capture!(
        "signal",
        store.signal(next.run.id, "s", &json!({"ok": true}))
    );
    capture!(
        "wait",
        store.wait(next.run.id, next.token, Wait::For(Duration::from_secs(60)))
    );
    capture!("wake_expired", store.wake_expired());
    let empty = capture!("claim_run none", store.claim_run("w", lease));
    assert!(empty.is_none());
    let batch_run = batch[0].run.id;
    let taken = capture!(
        "take_signal none",
        store.take_signal(batch_run, batch[0].token, "s")
    );
    assert_eq!(taken, None);
    store
        .signal(batch_run, "s", &json!(2))
        .await
        .expect("signal");
    let taken = capture!(
        "take_signal",
        store.take_signal(batch_run, batch[0].token, "s")
    );
    assert_eq!(taken, Some(json!(2)));
    let kids = || {
        vec![
            NewChild::new("a", "child", json!(1)),
            NewChild::new("b", "child", json!(2)),
        ]
    };
    capture!("create_children", store.create_children(batch_run, kids()));
    capture!(
        "create_children again",
        store.create_children(batch_run, kids())
    );
    let begun = capture!("begin_effect", store.begin_effect(batch_run, "charge"));
    assert_eq!(begun, EffectBegin::Started);
    capture!(
        "settle_effect",
        store.settle_effect(batch_run, "charge", &json!({"id": 1}))
    );
    let replayed = capture!(
        "begin_effect replayed",
        store.begin_effect(batch_run, "charge")
    );
    assert!(matches!(replayed, EffectBegin::Settled(_)));
    capture!(
        "stranded_effects",
        store.stranded_effects(Duration::from_secs(60))
    );
    sent
}
