//! Concurrency on MySQL beyond the conformance races: a mixed workload on
//! one run with exact outcomes, and a forced deadlock whose victim (the
//! store's claim) is run again and wins.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use diesel::sql_types::Text;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::{NewRun, RunStore, StepStatus, StepStore, StepTransition};
use flowstate_store_diesel::{StatementLog, StoreConfig};
use serde_json::json;

use crate::records;
use crate::support::{TestDb, TextRow};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mixed_workload_claims_every_step_exactly_once() {
    const TASKS: usize = 32;
    const STEPS: usize = 16;
    let db = TestDb::migrated().await;
    let store = Arc::new(db.store(StoreConfig::default().pool_size(TASKS)).await);
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
            won
        }));
    }
    let mut winners: BTreeMap<String, usize> = BTreeMap::new();
    for task in tasks {
        for name in task.await.unwrap() {
            *winners.entry(name).or_default() += 1;
        }
    }
    assert_eq!(
        winners.len(),
        STEPS,
        "some step was never claimed: {winners:?}"
    );
    assert!(
        winners.values().all(|&n| n == 1),
        "a step was claimed twice: {winners:?}"
    );
    let steps = store.list_steps(run.id).await.unwrap();
    assert_eq!(steps.len(), STEPS);
    assert!(
        steps
            .iter()
            .all(|s| s.status == StepStatus::Succeeded && s.attempt == 1)
    );
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
        children.get(&flowstate_core::RunStatus::Running),
        Some(&4),
        "one child per idempotency key"
    );
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_picked_as_deadlock_victim_runs_again_and_wins() {
    let db = TestDb::migrated().await;
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
    let mut rival = db.connection().await;
    rival.batch_execute("BEGIN").await.unwrap();
    for i in 0..50 {
        rival
            .batch_execute(&format!("INSERT INTO flowstate_run_state (run_id, state_key, value) VALUES ('{}', 'r{i}', '1')", run.id))
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

    log.clear();
    let claim = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.claim_step(run.id, "s", "f").await }
    });
    // The claim updates the step, then waits on the history row...
    tokio::time::sleep(Duration::from_millis(500)).await;
    // ...and the rival now asks for the step row: a cycle. The claim is the
    // lighter transaction, so it is rolled back; the rival gets its lock.
    diesel::sql_query("SELECT id AS v FROM flowstate_steps WHERE id = ? FOR UPDATE")
        .bind::<Text, _>(step.id.to_string())
        .load::<TextRow>(&mut rival)
        .await
        .expect("the rival survives the deadlock");
    // The claim runs again and waits for the rival, which gives way.
    tokio::time::sleep(Duration::from_millis(200)).await;
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
        [
            "BEGIN", "UPDATE", "INSERT", "ROLLBACK", "BEGIN", "UPDATE", "INSERT", "SELECT",
            "COMMIT"
        ],
        "{:#?}",
        log.statements()
    );
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Running);
    db.drop_database().await;
}
