//! The statement budgets of DESIGN.md, counted exactly with `StatementLog`.
//!
//! On PostgreSQL no port method opens a transaction: every hot operation is
//! one statement (one round trip once its prepared form is cached, which
//! `statements_are_prepared_once_per_connection` proves). diesel-async sends
//! `BEGIN`/`COMMIT` through `batch_execute`, which the log records, so a
//! transaction would show up in these sequences; the pool sends no ping on
//! checkout, which would too.

use flowstate_core::{
    Error, NewRun, NewStep, RetryPolicy, RunStatus, RunStore, StepStatus, StepStore, StepTransition,
};
use serde_json::json;

use crate::records;
use crate::support;

const HISTORY: &str = "flowstate_step_history";

/// The first word of each statement.
fn verbs(statements: &[String]) -> Vec<&str> {
    statements
        .iter()
        .map(|s| s.split_whitespace().next().unwrap_or(""))
        .collect()
}

/// Asserts `statements` is exactly one statement starting with `prefix`,
/// and answers it.
fn one<'a>(what: &str, statements: &'a [String], prefix: &str) -> &'a str {
    assert_eq!(
        statements.len(),
        1,
        "{what} sent {} statements: {statements:#?}",
        statements.len()
    );
    assert!(
        statements[0].starts_with(prefix),
        "{what} sent {:?}, expected it to start with {prefix:?}",
        statements[0]
    );
    &statements[0]
}

/// A claim's single statement: the guarded UPDATE, the history upsert and
/// the answer, win or lose.
fn assert_claim_statement(what: &str, statements: &[String]) {
    let sql = one(what, statements, "WITH claimed AS (UPDATE flowstate_steps");
    assert!(
        sql.contains(&format!("INSERT INTO {HISTORY}")),
        "{what}: {sql}"
    );
    assert!(
        sql.contains("ON CONFLICT (step_id, attempt) DO UPDATE"),
        "{what}: {sql}"
    );
}

/// A transition's single statement: the guarded UPDATE of the step and the
/// upsert of its current attempt's history row, reading nothing first
/// (the `prior` CTE reads the same snapshot in the same round trip).
fn assert_transition_statement(what: &str, statements: &[String]) {
    let sql = one(
        what,
        statements,
        "WITH prior AS (SELECT s.status FROM flowstate_steps",
    );
    assert!(sql.contains("UPDATE flowstate_steps"), "{what}: {sql}");
    assert!(
        sql.contains(&format!("INSERT INTO {HISTORY}")),
        "{what}: {sql}"
    );
    assert!(
        sql.contains("ON CONFLICT (step_id, attempt) DO UPDATE"),
        "{what}: {sql}"
    );
}

#[tokio::test]
async fn claim_is_one_statement_win_or_lose() {
    let (store, log, url) = support::logged_store().await;
    let run = records::run(&store, json!({})).await;
    let step = NewStep::new(run.id, "s1", "f", json!({})).with_retry(RetryPolicy::with_retries(1));
    let step = store.insert_step(step).await.unwrap().record;

    let (won, statements) = log.capture(store.claim_step(run.id, "s1", "f")).await;
    assert!(won.unwrap().is_some());
    assert_claim_statement("a winning claim", &statements);

    let (lost, statements) = log.capture(store.claim_step(run.id, "s1", "f")).await;
    assert_eq!(lost.unwrap(), None);
    assert_claim_statement("a losing claim", &statements);

    let (refused, statements) = log.capture(store.claim_step(run.id, "s1", "other")).await;
    assert!(
        matches!(refused, Err(Error::FunctionMismatch { .. })),
        "{refused:?}"
    );
    assert_claim_statement("a mismatched claim", &statements);

    let (missing, statements) = log.capture(store.claim_step(run.id, "nope", "f")).await;
    assert!(
        matches!(missing, Err(Error::StepNameNotFound { .. })),
        "{missing:?}"
    );
    assert_claim_statement("a claim of no step", &statements);

    store
        .transition_step(step.id, StepTransition::Failed(json!("boom")))
        .await
        .unwrap();
    let (retry, statements) = log.capture(store.claim_step(run.id, "s1", "f")).await;
    assert_eq!(retry.unwrap().map(|s| s.attempt), Some(2));
    assert_claim_statement("a retrying claim", &statements);
    support::drop_database(&url).await;
}

#[tokio::test]
async fn each_transition_is_one_statement() {
    let (store, log, url) = support::logged_store().await;
    let run = records::run(&store, json!({})).await;
    let a = records::step(&store, run.id, "a", json!({})).await;
    let b = records::step(&store, run.id, "b", json!({})).await;
    let moves = [
        (a.id, StepTransition::Scheduled),
        (a.id, StepTransition::Running),
        (a.id, StepTransition::Succeeded(json!({"ok": true}))),
        (b.id, StepTransition::Running),
        (b.id, StepTransition::Failed(json!({"message": "boom"}))),
    ];
    for (step, transition) in moves {
        let what = format!("{:?}", transition.target());
        let (result, statements) = log.capture(store.transition_step(step, transition)).await;
        result.unwrap();
        assert_transition_statement(&what, &statements);
    }
    // A refused move is diagnosed by the same single statement.
    let (refused, statements) = log
        .capture(store.transition_step(a.id, StepTransition::Running))
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::IllegalStepTransition {
                from: StepStatus::Succeeded,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_transition_statement("a refused transition", &statements);
    // So is a retry attempt.
    let (retry, statements) = log
        .capture(store.create_retry_attempt(b.id, StepStatus::Pending))
        .await;
    retry.unwrap();
    let sql = one("create_retry_attempt", &statements, "WITH prior AS (");
    assert!(sql.contains(&format!("INSERT INTO {HISTORY}")), "{sql}");
    support::drop_database(&url).await;
}

#[tokio::test]
async fn reading_steps_is_one_statement_that_leaves_history_alone() {
    let (store, log, url) = support::logged_store().await;
    let run = records::run(&store, json!({})).await;
    let step = records::step(&store, run.id, "s1", json!({})).await;
    records::step(&store, run.id, "s2", json!({})).await;

    let (got, statements) = log.capture(store.get_step(step.id)).await;
    assert_eq!(got.unwrap(), step);
    let sql = one("get_step", &statements, "SELECT");
    assert!(!sql.contains(HISTORY), "get_step read the history: {sql}");

    let (found, statements) = log.capture(store.find_step(run.id, "s1")).await;
    assert_eq!(found.unwrap(), step);
    let sql = one("find_step", &statements, "SELECT");
    assert!(!sql.contains(HISTORY), "find_step read the history: {sql}");

    let (all, statements) = log.capture(store.list_steps(run.id)).await;
    assert_eq!(all.unwrap().len(), 2);
    let sql = one("list_steps", &statements, "SELECT");
    assert!(!sql.contains(HISTORY), "list_steps read the history: {sql}");

    let (none, statements) = log
        .capture(store.list_steps(flowstate_core::RunId::generate()))
        .await;
    assert!(matches!(none, Err(Error::RunNotFound(_))), "{none:?}");
    one("list_steps of an unknown run", &statements, "SELECT");

    let (history, statements) = log.capture(store.step_history(run.id)).await;
    assert_eq!(history.unwrap().len(), 2);
    one("step_history", &statements, "SELECT");
    support::drop_database(&url).await;
}

#[tokio::test]
async fn writing_a_state_key_is_one_upsert() {
    let (store, log, url) = support::logged_store().await;
    let run = records::run(&store, json!({})).await;
    for value in [json!(1), json!({"nested": [true]})] {
        let (written, statements) = log
            .capture(store.write_state(run.id, "alpha", &value))
            .await;
        written.unwrap();
        let sql = one(
            "write_state",
            &statements,
            "INSERT INTO flowstate_run_state",
        );
        assert!(
            sql.contains("ON CONFLICT (run_id, state_key) DO UPDATE"),
            "{sql}"
        );
    }
    let (read, statements) = log.capture(store.read_state(run.id)).await;
    assert_eq!(read.unwrap().get("alpha"), Some(&json!({"nested": [true]})));
    one("read_state", &statements, "SELECT");
    support::drop_database(&url).await;
}

#[tokio::test]
async fn other_operations_send_what_they_should() {
    let (store, log, url) = support::logged_store().await;
    let (created, statements) = log
        .capture(store.create_run(NewRun::new("wf", json!({})).with_idempotency_key("k")))
        .await;
    let run = created.unwrap();
    assert!(run.inserted);
    one("create_run", &statements, "INSERT INTO flowstate_runs");

    // A second create with the key: the insert does nothing, then one read.
    let (again, statements) = log
        .capture(store.create_run(NewRun::new("wf", json!({})).with_idempotency_key("k")))
        .await;
    let again = again.unwrap();
    assert!(!again.inserted);
    assert_eq!(again.record, run.record);
    assert_eq!(verbs(&statements), ["INSERT", "SELECT"], "{statements:#?}");

    let (inserted, statements) = log
        .capture(store.insert_step(NewStep::new(run.record.id, "s", "f", json!({}))))
        .await;
    assert!(inserted.unwrap().inserted);
    let sql = one(
        "insert_step",
        &statements,
        "WITH s AS (INSERT INTO flowstate_steps",
    );
    assert!(
        sql.contains(&format!("INSERT INTO {HISTORY}")),
        "the first history row is written by the same statement: {sql}"
    );

    let (moved, statements) = log
        .capture(store.set_run_status(run.record.id, RunStatus::Suspended))
        .await;
    assert_eq!(moved.unwrap().status, RunStatus::Suspended);
    one(
        "set_run_status",
        &statements,
        "WITH prior AS (SELECT r.status FROM flowstate_runs",
    );

    let (refused, statements) = log
        .capture(store.set_run_status(run.record.id, RunStatus::Completed))
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::IllegalRunTransition {
                from: RunStatus::Suspended,
                ..
            })
        ),
        "{refused:?}"
    );
    one("a refused set_run_status", &statements, "WITH prior AS (");

    let (deleted, statements) = log.capture(store.delete_run(run.record.id)).await;
    deleted.unwrap();
    one("delete_run", &statements, "DELETE FROM flowstate_runs");
    support::drop_database(&url).await;
}

/// What makes the sequences above honest: transaction control on this
/// dialect goes through `batch_execute`, which the log records, so a port
/// method that opened a transaction would show its `BEGIN` and `COMMIT`.
#[tokio::test]
async fn the_log_records_transaction_control() {
    use diesel_async::{AnsiTransactionManager, SimpleAsyncConnection, TransactionManager};

    let (store, log, url) = support::logged_store().await;
    let mut conn = store.pool().get("test").await.unwrap();
    log.clear();
    AnsiTransactionManager::begin_transaction(&mut *conn)
        .await
        .unwrap();
    conn.batch_execute("SELECT 1").await.unwrap();
    AnsiTransactionManager::commit_transaction(&mut *conn)
        .await
        .unwrap();
    AnsiTransactionManager::begin_transaction(&mut *conn)
        .await
        .unwrap();
    AnsiTransactionManager::rollback_transaction(&mut *conn)
        .await
        .unwrap();
    assert_eq!(
        log.statements(),
        ["BEGIN", "SELECT 1", "COMMIT", "BEGIN", "ROLLBACK"]
    );
    support::drop_database(&url).await;
}
