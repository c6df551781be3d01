//! The statement budgets of DESIGN.md, counted exactly on MySQL: every
//! statement the store sends is in the [`StatementLog`], transaction
//! control included (diesel-async sends `BEGIN`, `COMMIT` and `ROLLBACK`
//! through `batch_execute`, which reports them as queries).

use std::sync::Arc;

use flowstate_core::{
    Error, NewRun, NewStep, RetryPolicy, Run, RunStore, Step, StepStatus, StepStore, StepTransition,
};
use flowstate_store_diesel::mysql::MysqlStore;
use flowstate_store_diesel::{StatementLog, StoreConfig};
use serde_json::json;

use crate::records;
use crate::support::TestDb;

/// A store on a fresh database, with a log.
struct Logged {
    db: TestDb,
    store: MysqlStore,
    log: Arc<StatementLog>,
    run: Run,
}

impl Logged {
    async fn new() -> Self {
        let db = TestDb::migrated().await;
        let log = StatementLog::new();
        let store = db
            .store(StoreConfig::default().statement_log(log.clone()))
            .await;
        let run = records::run(&store, json!({})).await;
        Self {
            db,
            store,
            log,
            run,
        }
    }

    async fn step(&self, name: &str, retries: u32) -> Step {
        let new = NewStep::new(self.run.id, name, "f", json!({"n": 1}))
            .with_retry(RetryPolicy::with_retries(retries));
        self.store.insert_step(new).await.unwrap().record
    }

    /// A step moved through `moves`.
    async fn step_after(&self, name: &str, retries: u32, moves: &[StepTransition]) -> Step {
        let step = self.step(name, retries).await;
        for transition in moves {
            self.store
                .transition_step(step.id, transition.clone())
                .await
                .unwrap();
        }
        step
    }
}

/// A statement's kind: transaction control as sent, otherwise its verb and
/// the table it addresses (`INSERT ... SELECT` is an INSERT: a write).
fn shape(sql: &str) -> String {
    let upper = sql.trim().to_ascii_uppercase();
    let words: Vec<&str> = upper.split_whitespace().collect();
    let table_after = |word: &str| {
        words
            .iter()
            .position(|w| *w == word)
            .and_then(|i| words.get(i + 1))
            .map(|t| t.to_ascii_lowercase())
            .unwrap_or_default()
    };
    match words.first().copied().unwrap_or_default() {
        "UPDATE" => format!("UPDATE {}", table_after("UPDATE")),
        "INSERT" => format!("INSERT {}", table_after("INTO")),
        "DELETE" => format!("DELETE {}", table_after("FROM")),
        "SELECT" => format!("SELECT {}", table_after("FROM")),
        other => other.to_owned(),
    }
}

fn shapes(statements: &[String]) -> Vec<String> {
    statements.iter().map(|s| shape(s)).collect()
}

fn assert_shapes(what: &str, statements: &[String], expected: &[&str]) {
    assert_eq!(
        shapes(statements),
        expected,
        "{what} sent:\n{}",
        statements.join("\n")
    );
}

fn assert_history_untouched(what: &str, statements: &[String]) {
    assert!(
        statements
            .iter()
            .all(|s| !s.contains("flowstate_step_history")),
        "{what} touched the history table:\n{}",
        statements.join("\n")
    );
}

const CLAIM_WON: &[&str] = &[
    "BEGIN",
    "UPDATE flowstate_steps",
    "INSERT flowstate_step_history",
    "SELECT flowstate_steps",
    "COMMIT",
];
const CLAIM_LOST: &[&str] = &[
    "BEGIN",
    "UPDATE flowstate_steps",
    "SELECT flowstate_steps",
    "ROLLBACK",
];
const TRANSITION: &[&str] = &[
    "BEGIN",
    "UPDATE flowstate_steps",
    "INSERT flowstate_step_history",
    "COMMIT",
];

#[tokio::test]
async fn claim_won_is_one_transaction() {
    let t = Logged::new().await;
    t.step("fresh", 0).await;
    let (claimed, statements) = t
        .log
        .capture(t.store.claim_step(t.run.id, "fresh", "f"))
        .await;
    assert_eq!(
        claimed.unwrap().expect("the claim wins").status,
        StepStatus::Running
    );
    assert_shapes("a fresh claim", &statements, CLAIM_WON);

    t.step_after(
        "failed",
        1,
        &[
            StepTransition::Running,
            StepTransition::Failed(json!("boom")),
        ],
    )
    .await;
    let (claimed, statements) = t
        .log
        .capture(t.store.claim_step(t.run.id, "failed", "f"))
        .await;
    assert_eq!(claimed.unwrap().expect("the retry claim wins").attempt, 2);
    assert_shapes("a retry claim", &statements, CLAIM_WON);
    t.db.drop_database().await;
}

#[tokio::test]
async fn claim_lost_is_one_transaction_without_history() {
    let t = Logged::new().await;
    t.step_after("running", 0, &[StepTransition::Running]).await;
    t.step_after(
        "exhausted",
        0,
        &[StepTransition::Running, StepTransition::Failed(json!("x"))],
    )
    .await;
    t.step("pinned", 0).await;
    let cases = [
        ("a running step", "running", "f"),
        ("a failed step out of retries", "exhausted", "f"),
        ("another function", "pinned", "other"),
        ("an unknown name", "nope", "f"),
    ];
    for (what, name, function) in cases {
        let (outcome, statements) = t
            .log
            .capture(t.store.claim_step(t.run.id, name, function))
            .await;
        match (name, outcome) {
            ("pinned", Err(Error::FunctionMismatch { .. }))
            | ("nope", Err(Error::StepNameNotFound { .. }))
            | ("running" | "exhausted", Ok(None)) => {}
            (_, other) => panic!("{what}: unexpected {other:?}"),
        }
        assert_shapes(what, &statements, CLAIM_LOST);
        assert_history_untouched(what, &statements);
    }
    t.db.drop_database().await;
}

#[tokio::test]
async fn transitions_are_one_transaction_of_two_writes() {
    let t = Logged::new().await;
    let rows: [(&str, &[StepTransition], StepTransition); 4] = [
        ("running", &[], StepTransition::Running),
        (
            "succeeded",
            &[StepTransition::Running],
            StepTransition::Succeeded(json!({"ok": true})),
        ),
        (
            "failed",
            &[StepTransition::Running],
            StepTransition::Failed(json!({"message": "boom"})),
        ),
        ("scheduled", &[], StepTransition::Scheduled),
    ];
    for (name, before, transition) in rows {
        let step = t.step_after(name, 0, before).await;
        let target = transition.target();
        let (outcome, statements) = t
            .log
            .capture(t.store.transition_step(step.id, transition))
            .await;
        outcome.unwrap();
        assert_shapes(name, &statements, TRANSITION);
        assert!(
            statements.iter().all(|s| !s.starts_with("SELECT")),
            "{name} read something:\n{}",
            statements.join("\n")
        );
        assert_eq!(t.store.get_step(step.id).await.unwrap().status, target);
    }
    t.db.drop_database().await;
}

#[tokio::test]
async fn a_retry_attempt_is_one_transaction_of_two_writes() {
    let t = Logged::new().await;
    let step = t
        .step_after(
            "s",
            0,
            &[StepTransition::Running, StepTransition::Failed(json!("x"))],
        )
        .await;
    let (outcome, statements) = t
        .log
        .capture(t.store.create_retry_attempt(step.id, StepStatus::Running))
        .await;
    outcome.unwrap();
    assert_shapes("a retry attempt", &statements, TRANSITION);
    t.db.drop_database().await;
}

#[tokio::test]
async fn a_refused_transition_rolls_back_then_reads_once() {
    let t = Logged::new().await;
    let step = t.step("s", 0).await;
    let (outcome, statements) = t
        .log
        .capture(
            t.store
                .transition_step(step.id, StepTransition::Succeeded(json!(1))),
        )
        .await;
    assert!(
        matches!(
            outcome,
            Err(Error::IllegalStepTransition {
                from: StepStatus::Pending,
                ..
            })
        ),
        "{outcome:?}"
    );
    assert_shapes(
        "a refused transition",
        &statements,
        &[
            "BEGIN",
            "UPDATE flowstate_steps",
            "ROLLBACK",
            "SELECT flowstate_steps",
        ],
    );
    assert_history_untouched("a refused transition", &statements);
    t.db.drop_database().await;
}

#[tokio::test]
async fn reading_one_step_is_one_statement_without_history() {
    let t = Logged::new().await;
    let step = t.step_after("s", 0, &[StepTransition::Running]).await;
    let (found, statements) = t.log.capture(t.store.get_step(step.id)).await;
    assert_eq!(found.unwrap().id, step.id);
    assert_shapes("get_step", &statements, &["SELECT flowstate_steps"]);
    assert_history_untouched("get_step", &statements);
    let (found, statements) = t.log.capture(t.store.find_step(t.run.id, "s")).await;
    assert_eq!(found.unwrap().id, step.id);
    assert_shapes("find_step", &statements, &["SELECT flowstate_steps"]);
    assert_history_untouched("find_step", &statements);
    t.db.drop_database().await;
}

#[tokio::test]
async fn reading_a_run_is_one_statement_each() {
    let t = Logged::new().await;
    for name in ["a", "b", "c"] {
        t.step(name, 0).await;
    }
    t.store.write_state(t.run.id, "k", &json!(1)).await.unwrap();
    let (steps, statements) = t.log.capture(t.store.list_steps(t.run.id)).await;
    assert_eq!(steps.unwrap().len(), 3);
    assert_shapes("list_steps", &statements, &["SELECT flowstate_runs"]);
    let (history, statements) = t.log.capture(t.store.step_history(t.run.id)).await;
    assert_eq!(history.unwrap().len(), 3);
    assert_shapes("step_history", &statements, &["SELECT flowstate_runs"]);
    let (state, statements) = t.log.capture(t.store.read_state(t.run.id)).await;
    assert_eq!(state.unwrap().len(), 1);
    assert_shapes("read_state", &statements, &["SELECT flowstate_runs"]);
    let (children, statements) = t.log.capture(t.store.count_children(t.run.id)).await;
    assert!(children.unwrap().is_empty());
    assert_shapes("count_children", &statements, &["SELECT flowstate_runs"]);
    t.db.drop_database().await;
}

#[tokio::test]
async fn writing_one_state_key_is_one_upsert() {
    let t = Logged::new().await;
    for value in [json!(1), json!({"replaced": true})] {
        let (outcome, statements) = t
            .log
            .capture(t.store.write_state(t.run.id, "k", &value))
            .await;
        outcome.unwrap();
        assert_shapes("write_state", &statements, &["INSERT flowstate_run_state"]);
        assert!(
            statements[0].contains("ON DUPLICATE KEY UPDATE"),
            "{}",
            statements[0]
        );
    }
    t.db.drop_database().await;
}

#[tokio::test]
async fn idempotent_creates_ride_on_unique_keys() {
    let t = Logged::new().await;
    let (first, statements) = t
        .log
        .capture(
            t.store
                .create_run(NewRun::new("wf", json!(1)).with_idempotency_key("k")),
        )
        .await;
    assert!(first.unwrap().inserted);
    assert_shapes(
        "create_run with a key",
        &statements,
        &["INSERT flowstate_runs", "SELECT flowstate_runs"],
    );
    let (second, statements) = t
        .log
        .capture(
            t.store
                .create_run(NewRun::new("wf", json!(2)).with_idempotency_key("k")),
        )
        .await;
    assert!(!second.unwrap().inserted);
    assert_shapes(
        "create_run with a taken key",
        &statements,
        &["INSERT flowstate_runs", "SELECT flowstate_runs"],
    );
    let (plain, statements) = t
        .log
        .capture(t.store.create_run(NewRun::new("wf", json!(3))))
        .await;
    assert!(plain.unwrap().inserted);
    assert_shapes(
        "create_run without a key",
        &statements,
        &["INSERT flowstate_runs"],
    );
    let step = NewStep::new(t.run.id, "s", "f", json!(1));
    let (inserted, statements) = t.log.capture(t.store.insert_step(step.clone())).await;
    assert!(inserted.unwrap().inserted);
    assert_shapes(
        "insert_step",
        &statements,
        &[
            "BEGIN",
            "INSERT flowstate_steps",
            "SELECT flowstate_steps",
            "INSERT flowstate_step_history",
            "COMMIT",
        ],
    );
    let (again, statements) = t.log.capture(t.store.insert_step(step)).await;
    assert!(!again.unwrap().inserted);
    assert_shapes(
        "insert_step again",
        &statements,
        &[
            "BEGIN",
            "INSERT flowstate_steps",
            "SELECT flowstate_steps",
            "COMMIT",
        ],
    );
    t.db.drop_database().await;
}
