//! Bad input on PostgreSQL: unknown ids are typed errors, oversized and
//! NUL-holding JSON is refused before anything is written, SQL in a key is
//! just a key, and a corrupt row is named without poisoning its neighbours.

use flowstate_core::error::InvalidInput;
use flowstate_core::{
    Error, NewRun, NewStep, NewWorkflowVersion, RunId, RunQuery, RunStatus, RunStore, StepId,
    StepStatus, StepStore, StepTransition, VersionStore,
};
use flowstate_store_diesel::StoreConfig;
use flowstate_store_diesel::postgres::PgStore;
use serde_json::json;

use crate::records;
use crate::support;

/// Everything the ports can read about `run`, to show a refused call wrote
/// nothing.
async fn snapshot(store: &PgStore, run: RunId) -> String {
    let query = RunQuery {
        limit: RunQuery::MAX_LIMIT,
        ..RunQuery::default()
    };
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}",
        store.list_runs(&query).await.unwrap(),
        store.list_steps(run).await.unwrap(),
        store.step_history(run).await.unwrap(),
        store.read_state(run).await.unwrap(),
    )
}

#[tokio::test]
async fn unknown_ids_are_typed_errors() {
    let (store, url) = support::store_with(StoreConfig::default()).await;
    let run = RunId::generate();
    let step = StepId::generate();
    let is_run = |r: &Error| matches!(r, Error::RunNotFound(id) if *id == run);
    let is_step = |r: &Error| matches!(r, Error::StepNotFound(id) if *id == step);
    let check = |what: &str, err: Option<Error>, ok: &dyn Fn(&Error) -> bool| {
        let err = err.unwrap_or_else(|| panic!("{what} of an unknown id succeeded"));
        assert!(ok(&err), "{what}: {err:?}");
    };
    check("get_run", store.get_run(run).await.err(), &is_run);
    check(
        "set_run_status",
        store.set_run_status(run, RunStatus::Completed).await.err(),
        &is_run,
    );
    check("delete_run", store.delete_run(run).await.err(), &is_run);
    check(
        "count_children",
        store.count_children(run).await.err(),
        &is_run,
    );
    check(
        "write_state",
        store.write_state(run, "k", &json!(1)).await.err(),
        &is_run,
    );
    check("read_state", store.read_state(run).await.err(), &is_run);
    check("list_steps", store.list_steps(run).await.err(), &is_run);
    check("step_history", store.step_history(run).await.err(), &is_run);
    check(
        "insert_step",
        store
            .insert_step(NewStep::new(run, "s", "f", json!({})))
            .await
            .err(),
        &is_run,
    );
    check(
        "create_run with a parent",
        store
            .create_run(NewRun::new("wf", json!({})).with_parent(run))
            .await
            .err(),
        &is_run,
    );
    check("get_step", store.get_step(step).await.err(), &is_step);
    check(
        "transition_step",
        store
            .transition_step(step, StepTransition::Running)
            .await
            .err(),
        &is_step,
    );
    check(
        "create_retry_attempt",
        store
            .create_retry_attempt(step, StepStatus::Running)
            .await
            .err(),
        &is_step,
    );
    check(
        "set_branch_taken",
        store.set_branch_taken(step, "left").await.err(),
        &is_step,
    );
    let is_name = |r: &Error| matches!(r, Error::StepNameNotFound { run: r, name } if *r == run && name == "s");
    check("find_step", store.find_step(run, "s").await.err(), &is_name);
    check(
        "claim_step",
        store.claim_step(run, "s", "f").await.err(),
        &is_name,
    );
    assert_eq!(store.get_version("wf", "nope").await.unwrap(), None);
    support::drop_database(&url).await;
}

#[tokio::test]
async fn oversized_json_is_refused_and_nothing_is_written() {
    let (store, url) = support::store_with(StoreConfig::default()).await;
    let run = records::run(&store, json!({"a": 1})).await;
    let step = records::step(&store, run.id, "s1", json!({})).await;
    store
        .transition_step(step.id, StepTransition::Running)
        .await
        .unwrap();
    store
        .write_state(run.id, "kept", &json!("value"))
        .await
        .unwrap();
    let before = snapshot(&store, run.id).await;

    let big = json!({"blob": "x".repeat(10 * 1024 * 1024)});
    let too_large = |what: &str, result: Result<(), Error>| {
        assert!(
            matches!(result, Err(Error::InvalidInput(InvalidInput::TooLarge { bytes, limit, .. })) if bytes > limit),
            "{what}: {result:?}"
        );
    };
    too_large("write_state", store.write_state(run.id, "kept", &big).await);
    too_large(
        "create_run",
        store
            .create_run(NewRun::new("wf", big.clone()))
            .await
            .map(drop),
    );
    too_large(
        "insert_step",
        store
            .insert_step(NewStep::new(run.id, "s2", "f", big.clone()))
            .await
            .map(drop),
    );
    too_large(
        "transition_step",
        store
            .transition_step(step.id, StepTransition::Succeeded(big.clone()))
            .await,
    );
    too_large(
        "upsert_version",
        store
            .upsert_version(NewWorkflowVersion {
                workflow: "wf".into(),
                graph_hash: "h".into(),
                graph: big.clone(),
            })
            .await
            .map(drop),
    );
    assert_eq!(
        snapshot(&store, run.id).await,
        before,
        "a refused value was written"
    );
    assert_eq!(store.get_version("wf", "h").await.unwrap(), None);
    support::drop_database(&url).await;
}

/// jsonb cannot hold `\u0000`; the server would answer with an obscure
/// "unsupported Unicode escape sequence". The store refuses it first, typed.
#[tokio::test]
async fn a_nul_in_json_is_refused_before_it_reaches_jsonb() {
    let (store, url) = support::store_with(StoreConfig::default()).await;
    let trap = store.batch_execute("SELECT '\"a\\u0000b\"'::jsonb").await;
    assert!(
        trap.is_err(),
        "jsonb accepted a NUL: the trap this test is about is gone"
    );

    let run = records::run(&store, json!({})).await;
    let step = records::step(&store, run.id, "s1", json!({})).await;
    store
        .transition_step(step.id, StepTransition::Running)
        .await
        .unwrap();
    let before = snapshot(&store, run.id).await;

    let nul = |what: &str, result: Result<(), Error>| {
        assert!(
            matches!(
                result,
                Err(Error::InvalidInput(InvalidInput::NulCharacter { .. }))
            ),
            "{what}: {result:?}"
        );
    };
    nul(
        "write_state value",
        store
            .write_state(run.id, "k", &json!({"v": "a\u{0}b"}))
            .await,
    );
    nul(
        "write_state key",
        store.write_state(run.id, "k\u{0}", &json!(1)).await,
    );
    nul(
        "transition error",
        store
            .transition_step(step.id, StepTransition::Failed(json!(["a\u{0}"])))
            .await,
    );
    nul(
        "transition result key",
        store
            .transition_step(step.id, StepTransition::Succeeded(json!({"\u{0}": 1})))
            .await,
    );
    nul(
        "create_run input",
        store
            .create_run(NewRun::new("wf", json!("\u{0}")))
            .await
            .map(drop),
    );
    nul(
        "insert_step input",
        store
            .insert_step(NewStep::new(run.id, "s2", "f", json!("\u{0}")))
            .await
            .map(drop),
    );
    assert_eq!(
        snapshot(&store, run.id).await,
        before,
        "a refused value was written"
    );
    // The six characters `\u0000` are not a NUL and are stored as they are.
    store
        .write_state(run.id, "text", &json!("\\u0000"))
        .await
        .unwrap();
    assert_eq!(
        store.read_state(run.id).await.unwrap()["text"],
        json!("\\u0000")
    );
    support::drop_database(&url).await;
}

#[tokio::test]
async fn sql_in_a_state_key_is_just_a_key() {
    let (store, url) = support::store_with(StoreConfig::default()).await;
    let run = records::run(&store, json!({})).await;
    let step = records::step(&store, run.id, "s1", json!({})).await;
    let keys = [
        "'; drop table flowstate_runs; --",
        "a.b",
        "it's \"quoted\"",
        "$1",
        "\\",
    ];
    for (i, key) in keys.iter().enumerate() {
        store.write_state(run.id, key, &json!(i)).await.unwrap();
    }
    let state = store.read_state(run.id).await.unwrap();
    assert_eq!(state.len(), keys.len());
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(state.get(*key), Some(&json!(i)), "{key}");
    }
    // Every table is intact and still answers.
    store.batch_execute(
        "SELECT 1 FROM flowstate_runs, flowstate_run_state, flowstate_steps, flowstate_step_history, flowstate_workflow_versions LIMIT 1",
    )
    .await
    .unwrap();
    assert_eq!(store.get_run(run.id).await.unwrap(), run);
    assert_eq!(store.get_step(step.id).await.unwrap(), step);
    assert_eq!(store.step_history(run.id).await.unwrap().len(), 1);
    support::drop_database(&url).await;
}

#[tokio::test]
async fn a_corrupt_status_names_its_row_and_spares_the_others() {
    let (store, url) = support::store_with(StoreConfig::default()).await;
    let run = records::run(&store, json!({})).await;
    let bad = records::step(&store, run.id, "bad", json!({})).await;
    let good = records::step(&store, run.id, "good", json!({})).await;
    store
        .batch_execute(&format!(
            "UPDATE flowstate_steps SET status = 'exploded' WHERE id = '{}'",
            bad.id
        ))
        .await
        .unwrap();
    match store.get_step(bad.id).await {
        Err(Error::Corrupt { what, row, detail }) => {
            assert_eq!(what, "step status");
            assert_eq!(row, bad.id.to_string());
            assert!(detail.contains("exploded"), "{detail}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(store.get_step(good.id).await.unwrap(), good);
    assert_eq!(store.find_step(run.id, "good").await.unwrap(), good);
    // A transition of the corrupt step is refused as corrupt, not as illegal.
    let refused = store.transition_step(bad.id, StepTransition::Running).await;
    assert!(matches!(refused, Err(Error::Corrupt { .. })), "{refused:?}");
    let claimed = store.claim_step(run.id, "bad", "f").await;
    assert!(matches!(claimed, Err(Error::Corrupt { .. })), "{claimed:?}");
    // Repaired by hand, it is a step like any other again.
    store
        .batch_execute(&format!(
            "UPDATE flowstate_steps SET status = 'pending' WHERE id = '{}'",
            bad.id
        ))
        .await
        .unwrap();
    assert!(
        store
            .claim_step(run.id, "bad", "f")
            .await
            .unwrap()
            .is_some()
    );
    support::drop_database(&url).await;
}
