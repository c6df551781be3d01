//! Rows written behind the store's back that no valid write produces: each
//! read answers a typed `Corrupt` error naming the row, never a panic or a
//! wrong value, and only the calls that read that row fail. Written once,
//! run on every dialect.

use flowstate_core::ports::{RunStore, StepStore, VersionStore, VirtualUserRunStore};
use flowstate_core::{
    Error, NewRun, NewStep, NewWorkflowVersion, Run, RunQuery, RunTally, VirtualUserRunId,
    VirtualUserRunStatus,
};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};
use serde_json::json;

use super::db::TestDb;

/// A bad status, a bad id and an out-of-range attempt, each found on read.
pub async fn corrupt_rows_are_typed_errors(dialect: Dialect) {
    let db = TestDb::migrated(dialect).await;
    let store = db.store(StoreConfig::default()).await;
    let run = store
        .create_run(NewRun::new("wf", json!({})))
        .await
        .unwrap()
        .record;
    let step = store
        .insert_step(NewStep::new(run.id, "s", "f", json!({})))
        .await
        .unwrap()
        .record;
    let cases = [
        (
            format!(
                "UPDATE flowstate_runs SET status = 'bogus' WHERE id = '{}'",
                run.id
            ),
            "run status",
        ),
        (
            format!(
                "UPDATE flowstate_steps SET current_attempt = -1 WHERE id = '{}'",
                step.id
            ),
            "step attempt",
        ),
        (
            format!(
                "UPDATE flowstate_steps SET status = 'nope' WHERE id = '{}'",
                step.id
            ),
            "step status",
        ),
    ];
    for (sql, what) in cases {
        assert_eq!(db.execute(&sql).await, 1, "{sql}");
        let read = match what {
            "run status" => store.get_run(run.id).await.map(drop),
            _ => store.get_step(step.id).await.map(drop),
        };
        match read {
            Err(Error::Corrupt { what: found, .. }) => assert_eq!(found, what, "{sql}"),
            other => panic!("{sql}: expected Corrupt {what}, got {other:?}"),
        }
    }
    drop(store);
    db.drop_database().await;
    undecodable_json_fails_only_its_row(dialect).await;
    virtual_user_run_records(dialect).await;
}

/// A virtual-user run inserted with only the columns migration 000017
/// found (a row stored before it) reads with its defaults: no goals, seed,
/// starter, memory, intents or stop reason, a zero tally, and takes a
/// tally add. A stop reason no store writes, a negative counter and
/// intents that are not a list of strings are each `Corrupt` naming the
/// run.
async fn virtual_user_run_records(dialect: Dialect) {
    let db = TestDb::migrated(dialect).await;
    let store = db.store(StoreConfig::default()).await;
    let id = VirtualUserRunId::generate();
    let insert = format!(
        "INSERT INTO flowstate_virtual_user_runs \
         (id, persona, status, findings, failure, transcript_len, created_at, updated_at) \
         VALUES ('{id}', 'ana', 'running', NULL, NULL, 0, 1, 1)"
    );
    assert_eq!(db.execute(&insert).await, 1);
    let old = store.get_virtual_user_run(id).await.unwrap();
    assert_eq!(old.status, VirtualUserRunStatus::Running);
    assert_eq!(
        (old.goals.len(), old.seed, old.started_by, old.tally),
        (0, None, None, RunTally::ZERO)
    );
    assert_eq!(
        (old.memory, old.intents.len(), old.stop_reason),
        (None, 0, None)
    );
    let tally = store.add_to_tally(id, RunTally::turns(2)).await.unwrap();
    assert_eq!(tally, RunTally::turns(2));

    let cases = [
        ("stop_reason = 'bogus'", "virtual-user run stop reason"),
        (
            "stop_reason = NULL, tally_tokens = -1",
            "virtual-user run tally",
        ),
        (
            "tally_tokens = 0, intents = '{\"a\": 1}'",
            "virtual-user run intents",
        ),
    ];
    for (set, what) in cases {
        let sql = format!("UPDATE flowstate_virtual_user_runs SET {set} WHERE id = '{id}'");
        assert_eq!(db.execute(&sql).await, 1, "{sql}");
        corrupt(store.get_virtual_user_run(id).await, what, &id.to_string());
    }
    drop(store);
    db.drop_database().await;
}

/// JSON text `levels` arrays deep, past what serde_json reads (127).
fn deep_text(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

/// Asserts `read` is `Corrupt` of `what` in row `row`.
fn corrupt<T: std::fmt::Debug>(read: Result<T, Error>, what: &str, row: &str) {
    match read {
        Err(Error::Corrupt {
            what: found,
            row: found_row,
            ..
        }) => assert_eq!((found, found_row.as_str()), (what, row)),
        other => panic!("expected Corrupt {what} in {row}, got {other:?}"),
    }
}

/// A run with a step and a state key, in workflow `workflow`.
async fn seeded(store: &DieselStore, workflow: &str) -> (Run, flowstate_core::Step) {
    let run = store
        .create_run(NewRun::new(workflow, json!({"a": 1})))
        .await
        .unwrap()
        .record;
    store.write_state(run.id, "k", &json!([1])).await.unwrap();
    let step = store
        .insert_step(NewStep::new(run.id, "s", "f", json!({})))
        .await
        .unwrap()
        .record;
    (run, step)
}

/// JSON written by hand that serde_json cannot read back (nested deeper
/// than it reads; on MySQL also text that is not JSON, since MariaDB's JSON
/// columns have no `json_valid` check since migration 000015) fails every
/// call that reads its row with `Corrupt` naming that row, without
/// overflowing the stack however deep it is, and no other call: the other
/// run, its steps, state and listing read and write as before.
async fn undecodable_json_fails_only_its_row(dialect: Dialect) {
    let db = TestDb::migrated(dialect).await;
    let store = db.store(StoreConfig::default()).await;
    let (bad, bad_step) = seeded(&store, "wf").await;
    let (good, good_step) = seeded(&store, "other").await;
    let bad_version = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "bad".into(),
        graph: json!({}),
    };
    let bad_version = store.upsert_version(bad_version).await.unwrap().record;
    let good_version = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "good".into(),
        graph: json!({"g": 1}),
    };
    store.upsert_version(good_version).await.unwrap();
    // As deep as each dialect stores: SQLite's json_valid check refuses
    // more than 1,000 levels, PostgreSQL's jsonb parser runs out of stack
    // near 100,000.
    let levels = if dialect == Dialect::Sqlite {
        900
    } else {
        10_000
    };
    let mut texts = vec![deep_text(128), deep_text(levels)];
    if dialect == Dialect::Mysql {
        texts.push("{not json".to_owned());
    }
    for text in texts {
        let updates = [
            format!(
                "UPDATE flowstate_runs SET input = '{text}' WHERE id = '{}'",
                bad.id
            ),
            format!(
                "UPDATE flowstate_run_state SET value = '{text}' WHERE run_id = '{}'",
                bad.id
            ),
            format!(
                "UPDATE flowstate_steps SET input = '{text}' WHERE id = '{}'",
                bad_step.id
            ),
            format!(
                "UPDATE flowstate_workflow_versions SET graph = '{text}' WHERE id = '{}'",
                bad_version.id
            ),
        ];
        for sql in &updates {
            assert_eq!(db.execute(sql).await, 1, "{}", &sql[..60]);
        }
        let (run_row, step_row) = (bad.id.to_string(), bad_step.id.to_string());
        corrupt(store.get_run(bad.id).await, "run input", &run_row);
        corrupt(
            store.list_runs(&RunQuery::default()).await,
            "run input",
            &run_row,
        );
        corrupt(
            store.read_state(bad.id).await,
            "run state value",
            &format!("{}/k", bad.id),
        );
        corrupt(store.get_step(bad_step.id).await, "step input", &step_row);
        corrupt(store.list_steps(bad.id).await, "step input", &step_row);
        corrupt(
            store.get_version("wf", "bad").await,
            "workflow graph",
            &bad_version.id.to_string(),
        );

        // Every read of another row works.
        assert_eq!(store.get_run(good.id).await.unwrap().input, good.input);
        let others = RunQuery {
            workflow: Some("other".into()),
            ..RunQuery::default()
        };
        let listed = store.list_runs(&others).await.unwrap().items;
        assert_eq!(listed.iter().map(|r| r.id).collect::<Vec<_>>(), [good.id]);
        assert_eq!(
            store.read_state(good.id).await.unwrap().get("k"),
            Some(&json!([1]))
        );
        assert_eq!(
            store.get_step(good_step.id).await.unwrap().input,
            good_step.input
        );
        assert_eq!(store.list_steps(good.id).await.unwrap().len(), 1);
        assert_eq!(store.step_history(good.id).await.unwrap().len(), 1);
        let version = store.get_version("wf", "good").await.unwrap();
        assert_eq!(version.map(|v| v.graph), Some(json!({"g": 1})));
    }
    // And writes to them too.
    store.write_state(good.id, "k2", &json!(2)).await.unwrap();
    let next = NewStep::new(good.id, "s2", "f", json!([2]));
    assert!(store.insert_step(next).await.unwrap().inserted);
    drop(store);
    db.drop_database().await;
}
