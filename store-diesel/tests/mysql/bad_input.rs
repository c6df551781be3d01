//! Bad input on MySQL: unknown ids, oversized and NUL-bearing JSON refused
//! with nothing written (checked row by row in the tables), SQL in keys,
//! byte-exact names and keys, and hand-corrupted rows reported as corrupt.

use flowstate_core::error::InvalidInput;
use flowstate_core::{
    Error, NewRun, NewStep, NewWorkflowVersion, Result, RunId, RunStatus, RunStore, StepId,
    StepStatus, StepStore, StepTransition, VersionStore,
};
use flowstate_store_diesel::StoreConfig;
use flowstate_store_diesel::mysql::MysqlStore;
use serde_json::{Value, json};

use crate::records;
use crate::support::{TestDb, count, dump};

/// A run with a running step "s" and a state key, on a fresh database.
async fn seeded() -> (TestDb, MysqlStore, RunId, StepId) {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!({"n": 1})).await;
    let step = records::step(&store, run.id, "s", json!({})).await;
    store
        .transition_step(step.id, StepTransition::Running)
        .await
        .unwrap();
    store.write_state(run.id, "k", &json!("v")).await.unwrap();
    let version = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "h".into(),
        graph: json!({}),
    };
    store.upsert_version(version).await.unwrap();
    (db, store, run.id, step.id)
}

/// Stores `value` through every method that takes JSON.
async fn store_everywhere(
    store: &MysqlStore,
    run: RunId,
    step: StepId,
    value: &Value,
) -> Vec<(&'static str, Result<()>)> {
    let version = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "h2".into(),
        graph: value.clone(),
    };
    vec![
        (
            "create_run",
            store
                .create_run(NewRun::new("wf", value.clone()))
                .await
                .map(drop),
        ),
        (
            "insert_step",
            store
                .insert_step(NewStep::new(run, "t", "f", value.clone()))
                .await
                .map(drop),
        ),
        ("write_state", store.write_state(run, "k", value).await),
        (
            "succeeded",
            store
                .transition_step(step, StepTransition::Succeeded(value.clone()))
                .await,
        ),
        (
            "failed",
            store
                .transition_step(step, StepTransition::Failed(value.clone()))
                .await,
        ),
        (
            "upsert_version",
            store.upsert_version(version).await.map(drop),
        ),
    ]
}

#[tokio::test]
async fn a_10_mb_value_is_refused_and_nothing_is_written() {
    let (db, store, run, step) = seeded().await;
    let mut conn = db.connection().await;
    let before = dump(&mut conn).await;
    let big = json!({"blob": "x".repeat(10 * 1024 * 1024)});
    for (method, outcome) in store_everywhere(&store, run, step, &big).await {
        match outcome {
            Err(Error::InvalidInput(InvalidInput::TooLarge { bytes, limit, .. }))
                if bytes > limit => {}
            other => panic!("{method} took a 10 MB value: {other:?}"),
        }
    }
    assert_eq!(dump(&mut conn).await, before);
    db.drop_database().await;
}

#[tokio::test]
async fn a_nul_in_json_is_refused_and_nothing_is_written() {
    let (db, store, run, step) = seeded().await;
    let mut conn = db.connection().await;
    let before = dump(&mut conn).await;
    for value in [
        json!({"a": "x\u{0}y"}),
        json!({"k\u{0}": 1}),
        json!(["\u{0}"]),
    ] {
        for (method, outcome) in store_everywhere(&store, run, step, &value).await {
            match outcome {
                Err(Error::InvalidInput(InvalidInput::NulCharacter { .. })) => {}
                other => panic!("{method} took a NUL: {other:?}"),
            }
        }
    }
    assert_eq!(dump(&mut conn).await, before);
    db.drop_database().await;
}

#[tokio::test]
async fn sql_in_a_key_is_just_a_key() {
    let (db, store, run, _) = seeded().await;
    let evil = "'; drop table flowstate_runs; --";
    store
        .write_state(run, evil, &json!({"still": "here"}))
        .await
        .unwrap();
    assert_eq!(
        store.read_state(run).await.unwrap()[evil],
        json!({"still": "here"})
    );
    let step = store
        .insert_step(NewStep::new(run, evil, evil, json!(1)))
        .await
        .unwrap()
        .record;
    assert_eq!(store.find_step(run, evil).await.unwrap().id, step.id);
    assert!(store.claim_step(run, evil, evil).await.unwrap().is_some());
    let keyed = store
        .create_run(NewRun::new(evil, json!(1)).with_idempotency_key(evil))
        .await
        .unwrap();
    assert!(keyed.inserted);
    assert_eq!(keyed.record.workflow, evil);
    let mut conn = db.connection().await;
    let tables = count(
        &mut conn,
        &format!(
            "SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{}' \
             AND TABLE_NAME LIKE 'flowstate\\_%'",
            db.name
        ),
    )
    .await;
    assert_eq!(tables, 5, "a table went missing");
    assert_eq!(
        count(&mut conn, "SELECT COUNT(*) AS n FROM flowstate_runs").await,
        2
    );
    db.drop_database().await;
}

#[tokio::test]
async fn names_and_keys_compare_byte_for_byte() {
    // MySQL's default collations would merge case ("a" = "A") and, even
    // with utf8mb4_bin (PAD SPACE), trailing spaces ("a" = "a "); NFC and
    // NFD spellings of é are different bytes, so different keys too.
    let lookalikes = ["a", "A", "a ", "\u{e9}", "e\u{301}"];
    let (db, store, run, _) = seeded().await;
    for (i, key) in lookalikes.iter().enumerate() {
        store.write_state(run, key, &json!(i)).await.unwrap();
        let step = store
            .insert_step(NewStep::new(run, *key, "f", json!(i)))
            .await
            .unwrap();
        assert!(step.inserted, "step {key:?} was taken as an existing one");
        let created = store
            .create_run(NewRun::new("wf", json!(i)).with_idempotency_key(*key))
            .await
            .unwrap();
        assert!(
            created.inserted,
            "idempotency key {key:?} was taken as an existing one"
        );
        let version = NewWorkflowVersion {
            workflow: (*key).to_owned(),
            graph_hash: (*key).to_owned(),
            graph: json!(i),
        };
        assert!(
            store.upsert_version(version).await.unwrap().inserted,
            "version {key:?}"
        );
    }
    let state = store.read_state(run).await.unwrap();
    for (i, key) in lookalikes.iter().enumerate() {
        assert_eq!(state[*key], json!(i), "state key {key:?}");
        assert_eq!(
            store.find_step(run, key).await.unwrap().input,
            json!(i),
            "step {key:?}"
        );
        assert_eq!(
            store.get_version(key, key).await.unwrap().unwrap().graph,
            json!(i),
            "version {key:?}"
        );
    }
    assert_eq!(
        store.list_steps(run).await.unwrap().len(),
        lookalikes.len() + 1
    );
    db.drop_database().await;
}

#[tokio::test]
async fn unknown_ids_are_typed_not_found_errors() {
    let (db, store, run, _) = seeded().await;
    let (no_run, no_step) = (RunId::generate(), StepId::generate());
    let run_missing: Vec<(&str, Result<()>)> = vec![
        ("get_run", store.get_run(no_run).await.map(drop)),
        (
            "set_run_status",
            store
                .set_run_status(no_run, RunStatus::Failed)
                .await
                .map(drop),
        ),
        ("delete_run", store.delete_run(no_run).await),
        (
            "write_state",
            store.write_state(no_run, "k", &json!(1)).await,
        ),
        ("read_state", store.read_state(no_run).await.map(drop)),
        ("list_steps", store.list_steps(no_run).await.map(drop)),
        ("step_history", store.step_history(no_run).await.map(drop)),
        (
            "count_children",
            store.count_children(no_run).await.map(drop),
        ),
        (
            "insert_step",
            store
                .insert_step(NewStep::new(no_run, "s", "f", json!(1)))
                .await
                .map(drop),
        ),
        (
            "create_run",
            store
                .create_run(NewRun::new("wf", json!(1)).with_parent(no_run))
                .await
                .map(drop),
        ),
    ];
    for (method, outcome) in run_missing {
        assert!(
            matches!(outcome, Err(Error::RunNotFound(id)) if id == no_run),
            "{method}: {outcome:?}"
        );
    }
    let step_missing: Vec<(&str, Result<()>)> = vec![
        ("get_step", store.get_step(no_step).await.map(drop)),
        (
            "transition_step",
            store
                .transition_step(no_step, StepTransition::Running)
                .await,
        ),
        (
            "create_retry_attempt",
            store
                .create_retry_attempt(no_step, StepStatus::Running)
                .await,
        ),
        (
            "set_branch_taken",
            store.set_branch_taken(no_step, "left").await,
        ),
    ];
    for (method, outcome) in step_missing {
        assert!(
            matches!(outcome, Err(Error::StepNotFound(id)) if id == no_step),
            "{method}: {outcome:?}"
        );
    }
    for (method, outcome) in [
        ("find_step", store.find_step(run, "nope").await.map(drop)),
        (
            "claim_step",
            store.claim_step(run, "nope", "f").await.map(drop),
        ),
    ] {
        assert!(
            matches!(&outcome, Err(Error::StepNameNotFound { name, .. }) if name == "nope"),
            "{method}: {outcome:?}"
        );
    }
    db.drop_database().await;
}

#[tokio::test]
async fn a_corrupt_status_names_its_row_and_spares_the_others() {
    let (db, store, run, bad) = seeded().await;
    let good = records::step(&store, run, "good", json!({})).await;
    store
        .batch_execute(&format!(
            "UPDATE flowstate_steps SET status = 'exploded' WHERE id = '{bad}'"
        ))
        .await
        .unwrap();
    let corrupt = |outcome: Result<()>, what: &str| match outcome {
        Err(Error::Corrupt {
            what: "step status",
            row,
            detail,
        }) => {
            assert_eq!(row, bad.to_string(), "{what}");
            assert!(detail.contains("exploded"), "{what}: {detail}");
        }
        other => panic!("{what}: expected Corrupt, got {other:?}"),
    };
    corrupt(store.get_step(bad).await.map(drop), "get_step");
    corrupt(store.find_step(run, "s").await.map(drop), "find_step");
    corrupt(
        store.claim_step(run, "s", "f").await.map(drop),
        "claim_step",
    );
    corrupt(
        store.transition_step(bad, StepTransition::Running).await,
        "transition_step",
    );
    // Listing every step has to read the corrupt one.
    corrupt(store.list_steps(run).await.map(drop), "list_steps");
    assert_eq!(
        store.get_step(good.id).await.unwrap().status,
        StepStatus::Pending
    );
    assert!(store.claim_step(run, "good", "f").await.unwrap().is_some());

    store
        .batch_execute(&format!(
            "UPDATE flowstate_runs SET status = 'exploded' WHERE id = '{run}'"
        ))
        .await
        .unwrap();
    assert!(
        matches!(store.get_run(run).await, Err(Error::Corrupt { what: "run status", ref row, .. }) if *row == run.to_string())
    );
    assert!(matches!(
        store.set_run_status(run, RunStatus::Failed).await,
        Err(Error::Corrupt { .. })
    ));
    db.drop_database().await;
}

#[tokio::test]
async fn the_schema_refuses_malformed_json_written_by_hand() {
    let (db, store, _, step) = seeded().await;
    let refused = store
        .batch_execute(&format!(
            "UPDATE flowstate_steps SET result = '{{not json' WHERE id = '{step}'"
        ))
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::Backend {
                retryable: false,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(store.get_step(step).await.unwrap().result, None);
    db.drop_database().await;
}
