//! The statement budgets of DESIGN.md, counted exactly on SQLite.
//!
//! Transaction control is recorded too: the BEGIN IMMEDIATE, COMMIT and
//! ROLLBACK of the blocking connection go through `batch_execute`, which
//! diesel's SQLite connection reports to the statement log like any query.

use std::time::Duration;

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, RetryPolicy, RunId, Step, StepTransition};
use flowstate_store_diesel::StatementLog;
use flowstate_store_diesel::sqlite::SqliteStore;
use serde_json::json;

use crate::records;
use crate::support::logged_store;

/// What a statement is, for comparing sequences: transaction control as
/// sent, a write as its verb and table, any read as `SELECT`.
fn shape(sql: &str) -> String {
    let words: Vec<&str> = sql.split_whitespace().collect();
    match words.as_slice() {
        ["UPDATE", table, ..] => format!("UPDATE {table}"),
        ["INSERT", "INTO", table, ..] => format!("INSERT {table}"),
        ["DELETE", "FROM", table, ..] => format!("DELETE {table}"),
        ["SELECT", ..] => "SELECT".to_owned(),
        _ => sql.to_owned(),
    }
}

fn shapes(statements: &[String]) -> Vec<String> {
    statements.iter().map(|s| shape(s)).collect()
}

fn assert_no_history(statements: &[String]) {
    for sql in statements {
        assert!(
            !sql.contains("flowstate_step_history"),
            "history touched by {sql}"
        );
    }
}

/// A run with one pending step `a` pinned to `f`, with `retries`.
async fn run_with_step(store: &SqliteStore, retries: u32) -> (RunId, Step) {
    let run = records::run(store, json!({})).await;
    let step = NewStep::new(run.id, "a", "f", json!({"n": 1}))
        .with_retry(RetryPolicy::with_retries(retries));
    let step = store.insert_step(step).await.unwrap().record;
    (run.id, step)
}

const TX_CLAIM_WIN: [&str; 4] = [
    "BEGIN IMMEDIATE",
    "UPDATE flowstate_steps",
    "INSERT flowstate_step_history",
    "COMMIT",
];

#[tokio::test]
async fn claim_fresh_is_one_transaction_of_two_writes() {
    let (_db, store, log) = logged_store().await;
    let (run, _) = run_with_step(&store, 0).await;
    let (claimed, sent) = log.capture(store.claim_step(run, "a", "f")).await;
    assert_eq!(claimed.unwrap().unwrap().attempt, 1);
    assert_eq!(shapes(&sent), TX_CLAIM_WIN);
    assert!(sent[1].contains("RETURNING"), "{}", sent[1]);
}

#[tokio::test]
async fn claim_retry_is_one_transaction_of_two_writes() {
    let (_db, store, log) = logged_store().await;
    let (run, step) = run_with_step(&store, 2).await;
    store.claim_step(run, "a", "f").await.unwrap().unwrap();
    store
        .transition_step(step.id, StepTransition::Failed(json!("boom")))
        .await
        .unwrap();
    let (claimed, sent) = log.capture(store.claim_step(run, "a", "f")).await;
    assert_eq!(claimed.unwrap().unwrap().attempt, 2);
    assert_eq!(shapes(&sent), TX_CLAIM_WIN);
}

#[tokio::test]
async fn claim_lost_reads_once_in_the_same_transaction() {
    let (_db, store, log) = logged_store().await;
    let (run, _) = run_with_step(&store, 0).await;
    store.claim_step(run, "a", "f").await.unwrap().unwrap();
    let (claimed, sent) = log.capture(store.claim_step(run, "a", "f")).await;
    assert_eq!(claimed.unwrap(), None);
    assert_eq!(
        shapes(&sent),
        [
            "BEGIN IMMEDIATE",
            "UPDATE flowstate_steps",
            "SELECT",
            "COMMIT"
        ]
    );
    assert_no_history(&sent);
}

#[tokio::test]
async fn claim_refused_for_another_function_writes_nothing() {
    let (_db, store, log) = logged_store().await;
    let (run, _) = run_with_step(&store, 0).await;
    let (claimed, sent) = log.capture(store.claim_step(run, "a", "other")).await;
    assert!(
        matches!(claimed, Err(flowstate_core::Error::FunctionMismatch { .. })),
        "{claimed:?}"
    );
    assert_eq!(
        shapes(&sent),
        [
            "BEGIN IMMEDIATE",
            "UPDATE flowstate_steps",
            "SELECT",
            "ROLLBACK"
        ]
    );
}

/// Every in-place transition, from a step standing where it is legal.
#[tokio::test]
async fn every_transition_is_one_transaction_two_writes_no_read() {
    let (_db, store, log) = logged_store().await;
    let cases = [
        ("scheduled", StepTransition::Scheduled),
        ("running", StepTransition::Running),
        ("succeeded", StepTransition::Succeeded(json!({"ok": true}))),
        ("failed", StepTransition::Failed(json!({"why": "x"}))),
    ];
    for (what, transition) in cases {
        let (run, step) = run_with_step(&store, 0).await;
        if matches!(
            transition,
            StepTransition::Succeeded(_) | StepTransition::Failed(_)
        ) {
            store.claim_step(run, "a", "f").await.unwrap().unwrap();
        }
        let (done, sent) = log
            .capture(store.transition_step(step.id, transition))
            .await;
        done.unwrap_or_else(|err| panic!("{what}: {err}"));
        assert_eq!(shapes(&sent), TX_CLAIM_WIN, "{what}");
        let reads = sent.iter().filter(|s| shape(s) == "SELECT").count();
        assert_eq!(reads, 0, "{what} read: {sent:#?}");
    }
}

#[tokio::test]
async fn a_refused_transition_reads_once_and_rolls_back() {
    let (_db, store, log) = logged_store().await;
    let (_, step) = run_with_step(&store, 0).await;
    let (done, sent) = log
        .capture(store.transition_step(step.id, StepTransition::Succeeded(json!(1))))
        .await;
    assert!(
        matches!(
            done,
            Err(flowstate_core::Error::IllegalStepTransition { .. })
        ),
        "{done:?}"
    );
    assert_eq!(
        shapes(&sent),
        [
            "BEGIN IMMEDIATE",
            "UPDATE flowstate_steps",
            "SELECT",
            "ROLLBACK"
        ]
    );
}

#[tokio::test]
async fn retry_attempt_is_one_transaction_of_two_writes() {
    let (_db, store, log) = logged_store().await;
    let (run, step) = run_with_step(&store, 0).await;
    store.claim_step(run, "a", "f").await.unwrap().unwrap();
    store
        .transition_step(step.id, StepTransition::Failed(json!(1)))
        .await
        .unwrap();
    let (done, sent) = log
        .capture(store.create_retry_attempt(step.id, flowstate_core::StepStatus::Pending))
        .await;
    done.unwrap();
    assert_eq!(shapes(&sent), TX_CLAIM_WIN);
}

fn one_read(log: &StatementLog, sent: &[String]) {
    assert_eq!(shapes(sent), ["SELECT"], "{sent:#?}");
    assert_eq!(log.count(), 1);
}

#[tokio::test]
async fn reading_one_step_is_one_statement_without_history() {
    let (_db, store, log) = logged_store().await;
    let (run, step) = run_with_step(&store, 0).await;
    let (got, sent) = log.capture(store.get_step(step.id)).await;
    assert_eq!(got.unwrap(), step);
    one_read(&log, &sent);
    assert_no_history(&sent);
    let (found, sent) = log.capture(store.find_step(run, "a")).await;
    assert_eq!(found.unwrap(), step);
    one_read(&log, &sent);
    assert_no_history(&sent);
}

#[tokio::test]
async fn reading_all_steps_is_one_statement() {
    let (_db, store, log) = logged_store().await;
    let (run, step) = run_with_step(&store, 0).await;
    records::step(&store, run, "b", json!(2)).await;
    let (steps, sent) = log.capture(store.list_steps(run)).await;
    let steps = steps.unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0], step);
    one_read(&log, &sent);
    assert_no_history(&sent);
    // An unknown run and a run with no steps: still one statement each.
    let (missing, sent) = log.capture(store.list_steps(RunId::generate())).await;
    assert!(matches!(
        missing,
        Err(flowstate_core::Error::RunNotFound(_))
    ));
    one_read(&log, &sent);
    let empty = records::run(&store, json!({})).await;
    let (none, sent) = log.capture(store.list_steps(empty.id)).await;
    assert_eq!(none.unwrap(), []);
    one_read(&log, &sent);
    let (history, sent) = log.capture(store.step_history(run)).await;
    assert_eq!(history.unwrap().len(), 2);
    one_read(&log, &sent);
}

#[tokio::test]
async fn writing_a_state_key_is_one_upsert() {
    let (_db, store, log) = logged_store().await;
    let (run, _) = run_with_step(&store, 0).await;
    for value in [json!(1), json!({"replaced": [true]})] {
        let (done, sent) = log.capture(store.write_state(run, "k", &value)).await;
        done.unwrap();
        assert_eq!(shapes(&sent), ["INSERT flowstate_run_state"], "{sent:#?}");
        assert!(
            sent[0].contains("ON CONFLICT (run_id, state_key) DO UPDATE"),
            "{}",
            sent[0]
        );
    }
    let (state, sent) = log.capture(store.read_state(run)).await;
    assert_eq!(state.unwrap()["k"], json!({"replaced": [true]}));
    one_read(&log, &sent);
}

#[tokio::test]
async fn single_statement_writes_send_no_transaction_control() {
    let (_db, store, log) = logged_store().await;
    let (run, step) = run_with_step(&store, 0).await;
    let (done, sent) = log.capture(store.set_branch_taken(step.id, "left")).await;
    done.unwrap();
    assert_eq!(shapes(&sent), ["UPDATE flowstate_steps"]);
    let (moved, sent) = log
        .capture(store.set_run_status(run, flowstate_core::RunStatus::Suspended))
        .await;
    moved.unwrap();
    assert_eq!(shapes(&sent), ["UPDATE flowstate_runs"]);
    let (created, sent) = log
        .capture(store.create_run(NewRun::new("wf", json!(1))))
        .await;
    assert!(created.unwrap().inserted);
    assert_eq!(shapes(&sent), ["INSERT flowstate_runs"]);
    // With an idempotency key: insert, and read only if the key was taken.
    let keyed = || NewRun::new("wf", json!(1)).with_idempotency_key("k1");
    let (first, sent) = log.capture(store.create_run(keyed())).await;
    assert!(first.unwrap().inserted);
    assert_eq!(
        shapes(&sent),
        ["BEGIN IMMEDIATE", "INSERT flowstate_runs", "COMMIT"]
    );
    let (second, sent) = log.capture(store.create_run(keyed())).await;
    assert!(!second.unwrap().inserted);
    assert_eq!(
        shapes(&sent),
        [
            "BEGIN IMMEDIATE",
            "INSERT flowstate_runs",
            "SELECT",
            "COMMIT"
        ]
    );
    let (deleted, sent) = log.capture(store.delete_run(run)).await;
    deleted.unwrap();
    assert_eq!(shapes(&sent), ["DELETE flowstate_runs"]);
}

#[tokio::test]
async fn a_step_lifecycle_costs_what_the_budgets_add_up_to() {
    let (_db, store, log) = logged_store().await;
    let (run, step) = run_with_step(&store, 0).await;
    log.clear();
    store.claim_step(run, "a", "f").await.unwrap().unwrap();
    store
        .transition_step(step.id, StepTransition::Succeeded(json!(1)))
        .await
        .unwrap();
    // claim (4) + transition (4), nothing else, and nothing in between.
    assert_eq!(log.count(), 8, "{:#?}", log.statements());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(log.count(), 8, "statements sent after the calls returned");
}
