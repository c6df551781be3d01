//! Hostile input: oversized JSON, JSON one level and 100,000 levels too
//! deep, NUL bytes, overlong and empty keys, unknown ids and malformed
//! names, each sent to the call that takes it. Each must be refused with
//! its typed error and write nothing, and the good data written before (a
//! run at the depth limit among it) must stay readable.
//!
//! Counted: lost = good runs (or their steps, or their state) no longer
//! readable afterwards; doubled = rows written by refused calls; stuck =
//! calls that did not answer within 10 s; wrong = calls answered other
//! than with their typed error.

use std::future::Future;
use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::{RunStore as _, StepStore as _};
use flowstate_core::{
    Error, InputLimits, NewRun, NewStep, RetryStart, RunId, RunQuery, RunStatus, StepId,
    StepTransition,
};
use flowstate_faults::sql::RawConn;
use flowstate_faults::{Scenario, SharedDb};
use flowstate_store_diesel::{Dialect, StoreConfig};
use serde_json::{Value, json};

/// What a hostile call must answer.
#[derive(Clone, Copy, Debug)]
enum Expect {
    TooLarge,
    TooDeep,
    Nul,
    Empty,
    RunNotFound,
    StepNotFound,
    StepNameNotFound,
}

impl Expect {
    fn matches(self, err: &Error) -> bool {
        let Error::InvalidInput(refusal) = err else {
            return match self {
                Self::RunNotFound => matches!(err, Error::RunNotFound(_)),
                Self::StepNotFound => matches!(err, Error::StepNotFound(_)),
                Self::StepNameNotFound => matches!(err, Error::StepNameNotFound { .. }),
                _ => false,
            };
        };
        match self {
            Self::TooLarge => matches!(refusal, InvalidInput::TooLarge { .. }),
            Self::TooDeep => matches!(refusal, InvalidInput::TooDeep { .. }),
            Self::Nul => matches!(refusal, InvalidInput::NulCharacter { .. }),
            Self::Empty => matches!(refusal, InvalidInput::Empty { .. }),
            _ => false,
        }
    }
}

/// How long one hostile call may take to answer.
const CALL_BOUND: Duration = Duration::from_secs(10);

/// A call's answer, its value dropped; `None` if it took longer than
/// [`CALL_BOUND`].
type Answer = Option<Result<(), Error>>;

/// `call`'s [`Answer`].
async fn within<T>(call: impl Future<Output = Result<T, Error>>) -> Answer {
    tokio::time::timeout(CALL_BOUND, call)
        .await
        .ok()
        .map(|answer| answer.map(drop))
}

/// JSON nested `levels` deep, arrays and objects in turn.
fn nested(levels: usize) -> Value {
    let mut value = json!("leaf");
    for level in 0..levels {
        value = if level % 2 == 0 {
            Value::Array(vec![json!(level), value])
        } else {
            // Not `json!`, which would serialise `value` again, recursively.
            let mut fields = serde_json::Map::new();
            fields.insert("n".to_owned(), json!(level));
            fields.insert("inner".to_owned(), value);
            Value::Object(fields)
        };
    }
    value
}

/// Drops `value` without recursion (serde_json drops recursively, which a
/// test thread's stack does not survive 100,000 levels deep).
fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(fields) => stack.extend(fields.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// The rows of every table a refused call could write, summed.
async fn rows(url: &str) -> u64 {
    let mut conn = RawConn::connect(url).await.expect("connect");
    let mut total = 0;
    for table in [
        "flowstate_runs",
        "flowstate_steps",
        "flowstate_step_history",
        "flowstate_run_state",
    ] {
        total += conn
            .count(&format!("SELECT COUNT(*) AS n FROM {table}"))
            .await
            .expect("count rows");
    }
    total
}

async fn hostile_input(dialect: Dialect) {
    let db = SharedDb::migrated(dialect).await.expect("a database");
    let store = db
        .store(StoreConfig::default().pool_size(2))
        .await
        .expect("a store");
    let limits = InputLimits::default();

    // Good data first: it must survive whatever comes after.
    let mut good = Vec::new();
    for i in 0..3 {
        let run = store
            .create_run(NewRun::new("good", json!({ "i": i, "text": "ünïcode ✓" })))
            .await
            .expect("a good run")
            .record;
        for name in ["a", "b"] {
            store
                .insert_step(NewStep::new(run.id, name, "good.step", json!([1, 2, 3])))
                .await
                .expect("a good step");
        }
        store
            .write_state(run.id, "k", &json!({ "nested": [true, null, 1.5] }))
            .await
            .expect("good state");
        good.push(run.id);
    }
    // A run at the depth limit: stored, and every read of it (and of the
    // others) keeps working.
    let deepest = nested(limits.max_json_depth);
    let deep_run = store
        .create_run(NewRun::new("good", deepest.clone()))
        .await
        .expect("a run at the depth limit")
        .record
        .id;
    let run = good[0];
    let step = store.find_step(run, "a").await.expect("a good step").id;
    let before = rows(&db.url).await;

    let big = Value::String("x".repeat(limits.max_value_bytes + 1));
    let long = "k".repeat(limits.max_key_bytes + 1);
    let nul_string = json!({ "a": "before\u{0}after" });
    let mut nul_key = serde_json::Map::new();
    nul_key.insert("k\u{0}".into(), json!(1));
    let nul_key = Value::Object(nul_key);
    let unknown_run = RunId::generate();
    let unknown_step = StepId::generate();

    let s = &store;
    // Built, sent and taken apart at once: nothing may unwind in between.
    let abyss = nested(100_000);
    let abyss_answer = within(s.write_state(run, "k2", &abyss)).await;
    dismantle(abyss);
    let cases: Vec<(&str, Expect, Answer)> = vec![
        (
            "write_state: 100,000 levels deep",
            Expect::TooDeep,
            abyss_answer,
        ),
        (
            "create_run: one level too deep",
            Expect::TooDeep,
            within(s.create_run(NewRun::new("w", nested(limits.max_json_depth + 1)))).await,
        ),
        (
            "write_state: one level too deep",
            Expect::TooDeep,
            within(s.write_state(run, "k2", &nested(limits.max_json_depth + 1))).await,
        ),
        (
            "create_run: oversized input",
            Expect::TooLarge,
            within(s.create_run(NewRun::new("w", big.clone()))).await,
        ),
        (
            "create_run: NUL in a string",
            Expect::Nul,
            within(s.create_run(NewRun::new("w", nul_string.clone()))).await,
        ),
        (
            "create_run: NUL in a key",
            Expect::Nul,
            within(s.create_run(NewRun::new("w", nul_key.clone()))).await,
        ),
        (
            "create_run: overlong workflow",
            Expect::TooLarge,
            within(s.create_run(NewRun::new(long.clone(), json!({})))).await,
        ),
        (
            "create_run: NUL in the workflow",
            Expect::Nul,
            within(s.create_run(NewRun::new("w\u{0}", json!({})))).await,
        ),
        (
            "create_run: empty workflow",
            Expect::Empty,
            within(s.create_run(NewRun::new("", json!({})))).await,
        ),
        (
            "create_run: overlong idempotency key",
            Expect::TooLarge,
            within(s.create_run(NewRun::new("w", json!({})).with_idempotency_key(long.clone())))
                .await,
        ),
        (
            "create_run: unknown parent",
            Expect::RunNotFound,
            within(s.create_run(NewRun::new("w", json!({})).with_parent(unknown_run))).await,
        ),
        (
            "insert_step: oversized input",
            Expect::TooLarge,
            within(s.insert_step(NewStep::new(run, "c", "f", big.clone()))).await,
        ),
        (
            "insert_step: overlong name",
            Expect::TooLarge,
            within(s.insert_step(NewStep::new(run, long.clone(), "f", json!({})))).await,
        ),
        (
            "insert_step: NUL in the name",
            Expect::Nul,
            within(s.insert_step(NewStep::new(run, "c\u{0}", "f", json!({})))).await,
        ),
        (
            "insert_step: empty name",
            Expect::Empty,
            within(s.insert_step(NewStep::new(run, "", "f", json!({})))).await,
        ),
        (
            "insert_step: overlong function",
            Expect::TooLarge,
            within(s.insert_step(NewStep::new(run, "c", long.clone(), json!({})))).await,
        ),
        (
            "insert_step: NUL in the input",
            Expect::Nul,
            within(s.insert_step(NewStep::new(run, "c", "f", nul_string.clone()))).await,
        ),
        (
            "insert_step: unknown run",
            Expect::RunNotFound,
            within(s.insert_step(NewStep::new(unknown_run, "c", "f", json!({})))).await,
        ),
        (
            "write_state: oversized value",
            Expect::TooLarge,
            within(s.write_state(run, "k2", &big)).await,
        ),
        (
            "write_state: overlong key",
            Expect::TooLarge,
            within(s.write_state(run, &long, &json!(1))).await,
        ),
        (
            "write_state: NUL in the key",
            Expect::Nul,
            within(s.write_state(run, "k\u{0}", &json!(1))).await,
        ),
        (
            "write_state: empty key",
            Expect::Empty,
            within(s.write_state(run, "", &json!(1))).await,
        ),
        (
            "write_state: NUL in the value",
            Expect::Nul,
            within(s.write_state(run, "k2", &nul_key)).await,
        ),
        (
            "write_state: unknown run",
            Expect::RunNotFound,
            within(s.write_state(unknown_run, "k", &json!(1))).await,
        ),
        (
            "claim_step: unknown run",
            Expect::StepNameNotFound,
            within(s.claim_step(unknown_run, "a", "good.step")).await,
        ),
        (
            "claim_step: unknown name",
            Expect::StepNameNotFound,
            within(s.claim_step(run, "nope", "good.step")).await,
        ),
        (
            "claim_step: NUL in the name",
            Expect::Nul,
            within(s.claim_step(run, "a\u{0}", "good.step")).await,
        ),
        (
            "claim_step: overlong function",
            Expect::TooLarge,
            within(s.claim_step(run, "a", &long)).await,
        ),
        (
            "claim_step: empty name",
            Expect::Empty,
            within(s.claim_step(run, "", "good.step")).await,
        ),
        (
            "find_step: NUL in the name",
            Expect::Nul,
            within(s.find_step(run, "a\u{0}")).await,
        ),
        (
            "transition_step: unknown step",
            Expect::StepNotFound,
            within(s.transition_step(unknown_step, StepTransition::Running)).await,
        ),
        (
            "transition_step: oversized result",
            Expect::TooLarge,
            within(s.transition_step(step, StepTransition::Succeeded(big.clone()))).await,
        ),
        (
            "transition_step: NUL in the error",
            Expect::Nul,
            within(s.transition_step(step, StepTransition::Failed(nul_string.clone()))).await,
        ),
        (
            "create_retry_attempt: unknown step",
            Expect::StepNotFound,
            within(s.create_retry_attempt(unknown_step, RetryStart::Pending)).await,
        ),
        (
            "get_run: unknown run",
            Expect::RunNotFound,
            within(s.get_run(unknown_run)).await,
        ),
        (
            "set_run_status: unknown run",
            Expect::RunNotFound,
            Box::pin(within(s.set_run_status(unknown_run, RunStatus::Completed))).await,
        ),
        (
            "list_steps: unknown run",
            Expect::RunNotFound,
            within(s.list_steps(unknown_run)).await,
        ),
        (
            "get_step: unknown step",
            Expect::StepNotFound,
            within(s.get_step(unknown_step)).await,
        ),
    ];
    let calls = cases.len();
    let mut scenario = Scenario::new(
        "hostile input",
        dialect,
        format!("{calls} hostile calls, 4 good runs (one 64 deep)"),
        "oversized and too-deep JSON, NUL bytes, overlong/empty keys, unknown ids, malformed names"
            .into(),
    );
    for (what, expect, answer) in cases {
        match answer {
            None => {
                scenario.stuck += 1;
                scenario.note(format!("{what}: no answer within {CALL_BOUND:?}"));
            }
            Some(Err(err)) if expect.matches(&err) => {}
            Some(Err(err)) => {
                scenario.wrong += 1;
                scenario.note(format!("{what}: {err} (expected {expect:?})"));
            }
            Some(Ok(())) => {
                scenario.wrong += 1;
                scenario.note(format!("{what}: accepted (expected {expect:?})"));
            }
        }
    }
    let after = rows(&db.url).await;
    scenario.doubled = after.saturating_sub(before);
    if after != before {
        scenario.note(format!("rows {before} before, {after} after"));
    }
    // The good data reads back as it was written.
    for id in &good {
        let readable = async {
            let run = store.get_run(*id).await?;
            let steps = store.list_steps(*id).await?;
            let state = store.read_state(*id).await?;
            Ok::<bool, Error>(
                run.workflow == "good"
                    && steps.len() == 2
                    && steps
                        .iter()
                        .all(|s| s.status == flowstate_core::StepStatus::Pending)
                    && state.get("k") == Some(&json!({ "nested": [true, null, 1.5] })),
            )
        };
        match tokio::time::timeout(CALL_BOUND, readable).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                scenario.lost += 1;
                scenario.note(format!("good run {id} changed"));
            }
            Ok(Err(err)) => {
                scenario.lost += 1;
                scenario.note(format!("good run {id} unreadable: {err}"));
            }
            Err(_) => scenario.stuck += 1,
        }
    }
    match tokio::time::timeout(CALL_BOUND, store.get_run(deep_run)).await {
        Ok(Ok(read)) if read.input == deepest => {}
        Ok(Ok(_)) => {
            scenario.lost += 1;
            scenario.note("the run at the depth limit reads back changed");
        }
        Ok(Err(err)) => {
            scenario.lost += 1;
            scenario.note(format!("the run at the depth limit is unreadable: {err}"));
        }
        Err(_) => scenario.stuck += 1,
    }
    match store.list_runs(&RunQuery::default()).await {
        Ok(page) if page.items.len() == good.len() + 1 => {}
        Ok(page) => {
            scenario.lost += 1;
            scenario.note(format!("list_runs answers {} runs", page.items.len()));
        }
        Err(err) => {
            scenario.lost += 1;
            scenario.note(format!("list_runs fails: {err}"));
        }
    }
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_postgres() {
    Box::pin(hostile_input(Dialect::Postgres)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_mariadb() {
    Box::pin(hostile_input(Dialect::Mysql)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_sqlite() {
    Box::pin(hostile_input(Dialect::Sqlite)).await;
}
