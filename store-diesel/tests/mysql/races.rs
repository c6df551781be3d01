//! Concurrency on MySQL beyond the conformance races: a mixed workload on
//! one run with exact outcomes, and a forced deadlock whose victim (the
//! store's claim) is run again whole and wins.

use std::collections::BTreeMap;
use std::sync::Arc;

use diesel::sql_types::Text;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, RunStatus, StepStatus, StepTransition};
use flowstate_store_diesel::{Dialect, StatementLog, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::records;
use crate::support::{self, TextRow, eventually, lock_waits};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mixed_workload_claims_every_step_exactly_once() {
    const TASKS: usize = 32;
    const STEPS: usize = 16;
    let db = TestDb::migrated(Dialect::Mysql).await;
    let store = Arc::new(db.warm_store(StoreConfig::default(), TASKS).await);
    let run = records::run(&*store, json!({})).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let child = NewRun::new("child", json!(task))
                .with_parent(run.id)
                .with_idempotency_key(format!("child-{}", task % 4));
            store.create_run(child).await.unwrap();
            let mut won = Vec::new();
            for i in 0..8 {
                let name = format!("s{}", (task + i) % STEPS);
                records::step(&*store, run.id, &name, json!({})).await;
                if let Some(step) = store.claim_step(run.id, &name, "f").await.unwrap() {
                    store
                        .transition_step(step.id, StepTransition::Succeeded(json!(task)))
                        .await
                        .unwrap();
                    won.push(name);
                }
                store
                    .write_state(run.id, &format!("k{}", i % 3), &json!(task))
                    .await
                    .unwrap();
            }
            (task, won)
        }));
    }
    let mut winner_of: BTreeMap<String, usize> = BTreeMap::new();
    for task in tasks {
        let (task, won) = task.await.unwrap();
        for name in won {
            assert!(
                winner_of.insert(name.clone(), task).is_none(),
                "{name} was claimed twice"
            );
        }
    }
    assert_eq!(
        winner_of.len(),
        STEPS,
        "some step was never claimed: {winner_of:?}"
    );
    let steps = store.list_steps(run.id).await.unwrap();
    assert_eq!(steps.len(), STEPS);
    for step in &steps {
        assert_eq!((step.status, step.attempt), (StepStatus::Succeeded, 1));
        assert_eq!(
            step.result,
            Some(json!(winner_of[&step.name])),
            "{} holds another task's result",
            step.name
        );
    }
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), STEPS, "one history row per step");
    assert!(
        history
            .iter()
            .all(|h| h.status == StepStatus::Succeeded && h.running_at.is_some())
    );
    assert_eq!(store.read_state(run.id).await.unwrap().len(), 3);
    let children = store.count_children(run.id).await.unwrap();
    assert_eq!(
        children,
        BTreeMap::from([(RunStatus::Running, 4)]),
        "one child per idempotency key"
    );
    drop(store);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_picked_as_deadlock_victim_runs_again_and_wins() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let log = StatementLog::new();
    let store = Arc::new(
        db.store(StoreConfig::default().statement_log(log.clone()))
            .await,
    );
    let run = records::run(&*store, json!({})).await;
    let step = records::step(&*store, run.id, "s", json!({})).await;

    // A rival transaction that has written more than the claim will have
    // (so InnoDB picks the claim as the victim) and holds the history row
    // the claim is about to upsert.
    let mut rival = support::connection(&db).await;
    rival.batch_execute("BEGIN").await.unwrap();
    for i in 0..50 {
        rival
            .batch_execute(&format!(
                "INSERT INTO flowstate_run_state (run_id, state_key, value) VALUES ('{}', 'r{i}', '1')",
                run.id
            ))
            .await
            .unwrap();
    }
    let locked = diesel::sql_query(
        "SELECT id AS v FROM flowstate_step_history WHERE step_id = ? FOR UPDATE",
    )
    .bind::<Text, _>(step.id.to_string())
    .load::<TextRow>(&mut rival)
    .await
    .unwrap();
    assert_eq!(locked.len(), 1);
    assert_eq!(lock_waits(&db).await, 0);

    log.clear();
    let claim = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.claim_step(run.id, "s", "f").await }
    });
    // The claim updates the step (locking its row), and its trigger waits
    // on the history row the rival holds: the server reports the wait.
    let server = &db;
    eventually("the claim waits on the history row", move || async move {
        lock_waits(server).await == 1
    })
    .await;
    // The rival now asks for the step row: a cycle. The claim is the
    // lighter transaction, so it is rolled back; the rival gets its lock.
    diesel::sql_query("SELECT id AS v FROM flowstate_steps WHERE id = ? FOR UPDATE")
        .bind::<Text, _>(step.id.to_string())
        .load::<TextRow>(&mut rival)
        .await
        .expect("the rival survives the deadlock");
    // The claim runs again and waits on the step row the rival now holds;
    // then the rival gives way.
    eventually(
        "the retried claim waits on the step row",
        move || async move { lock_waits(server).await == 1 },
    )
    .await;
    rival.batch_execute("ROLLBACK").await.unwrap();

    let claimed = claim.await.unwrap().expect("the retried claim succeeds");
    let claimed = claimed.expect("the retried claim wins");
    assert_eq!((claimed.status, claimed.attempt), (StepStatus::Running, 1));
    let verbs: Vec<String> = log
        .statements()
        .iter()
        .map(|s| s.split_whitespace().next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        verbs,
        // The UPDATE rolled back as the victim, the UPDATE again, the read.
        ["UPDATE", "UPDATE", "SELECT"],
        "{:#?}",
        log.statements()
    );
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Running);
    assert!(
        store.read_state(run.id).await.unwrap().is_empty(),
        "the rival's writes were rolled back"
    );
    drop(rival);
    drop(store);
    db.drop_database().await;
}

/// The wake sweep meets a run whose due wait another transaction is
/// replacing with one not due (a claimer took it and put it to wait
/// again): the sweep waits for that transaction's row lock, and InnoDB
/// evaluates its single-table `UPDATE`'s condition on the row as
/// committed, so the new wait stands (PostgreSQL's sweep, whose picks are
/// a subquery, needs the condition restated for this; see its test).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_wake_sweep_leaves_a_wait_begun_while_it_waited_for_the_row() {
    crate::common::wake_race::a_wait_begun_under_the_sweep_stands::<
        diesel_async::AsyncMysqlConnection,
    >(
        Dialect::Mysql,
        "SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' \
         AND trx_query LIKE 'UPDATE flowstate_runs SET wake_at = NULL%'",
    )
    .await;
}
