//! Query plans: every statement the store sends is an index search, never
//! a scan of a whole table, whatever the table holds.

use diesel::sql_types::Text;
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};
use std::time::Duration;

use flowstate_core::ports::{RunLeaseStore, RunStore, RunWaitStore, StepStore, VersionStore};
use flowstate_core::{NewRun, NewWorkflowVersion, Release, RunQuery, RunStatus, StepTransition};
use serde_json::json;

use crate::common::records;
use crate::support::logged_store;

#[derive(QueryableByName)]
struct PlanRow {
    #[diesel(sql_type = Text)]
    detail: String,
}

#[tokio::test]
async fn every_statement_searches_an_index() {
    let (db, store, log) = logged_store().await;
    let parent = store
        .create_run(NewRun::new("wf", json!(1)).with_idempotency_key("k"))
        .await
        .unwrap()
        .record;
    store
        .create_run(NewRun::new("wf", json!(1)).with_idempotency_key("k"))
        .await
        .unwrap();
    let run = store
        .create_run(NewRun::new("wf", json!(1)).with_parent(parent.id))
        .await
        .unwrap()
        .record;
    let step = records::step(&store, run.id, "a", json!(1)).await;
    records::step(&store, run.id, "a", json!(1)).await;
    store.claim_step(run.id, "a", "f").await.unwrap();
    store.claim_step(run.id, "a", "f").await.unwrap();
    store
        .transition_step(step.id, StepTransition::Failed(json!(1)))
        .await
        .unwrap();
    store
        .create_retry_attempt(step.id, flowstate_core::RetryStart::Pending)
        .await
        .unwrap();
    store.get_step(step.id).await.unwrap();
    store.find_step(run.id, "a").await.unwrap();
    store.list_steps(run.id).await.unwrap();
    store.step_history(run.id).await.unwrap();
    store.set_branch_taken(step.id, "b").await.unwrap();
    store.write_state(run.id, "k", &json!(1)).await.unwrap();
    store.read_state(run.id).await.unwrap();
    store.count_children(parent.id).await.unwrap();
    store.get_run(run.id).await.unwrap();
    store
        .set_run_status(run.id, RunStatus::Completed)
        .await
        .unwrap();
    store
        .set_run_status(run.id, RunStatus::Completed)
        .await
        .unwrap_err();
    for query in [
        RunQuery::default(),
        RunQuery {
            workflow: Some("wf".into()),
            ..RunQuery::default()
        },
        RunQuery {
            status: Some(RunStatus::Running),
            ..RunQuery::default()
        },
        RunQuery {
            workflow: Some("wf".into()),
            status: Some(RunStatus::Running),
            ..RunQuery::default()
        },
        RunQuery {
            parent: Some(parent.id),
            ..RunQuery::default()
        },
        RunQuery {
            limit: 1,
            ..RunQuery::default()
        },
    ] {
        let page = store.list_runs(&query).await.unwrap();
        if let Some(cursor) = page.next {
            store
                .list_runs(&RunQuery {
                    cursor: Some(cursor),
                    ..query
                })
                .await
                .unwrap();
        }
    }
    let v = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "h".into(),
        graph: json!(1),
    };
    store.upsert_version(v.clone()).await.unwrap();
    store.upsert_version(v).await.unwrap();
    store.get_version("wf", "h").await.unwrap();
    let minute = Duration::from_secs(60);
    let lease = store
        .claim_run("w", minute)
        .await
        .unwrap()
        .expect("the parent");
    store.renew(parent.id, lease.token, minute).await.unwrap();
    store.renew(parent.id, 99, minute).await.unwrap_err();
    store
        .release(parent.id, lease.token, Release::failure("x"))
        .await
        .unwrap();
    store.request_cancel(parent.id).await.unwrap();
    store.claim_runs("w", 2, minute).await.unwrap();
    store.lease_state(parent.id).await.unwrap();
    store.request_cancel(parent.id).await.unwrap();
    let other = store
        .create_run(NewRun::new("wf", json!(1)))
        .await
        .unwrap()
        .record;
    store.signal(other.id, "s", &json!(1)).await.unwrap();
    let lease = store.claim_run("w", minute).await.unwrap().expect("other");
    store.take_signal(other.id, lease.token, "s").await.unwrap();
    store.take_signal(other.id, lease.token, "s").await.unwrap();
    store
        .wait(other.id, lease.token, flowstate_core::Wait::For(minute))
        .await
        .unwrap();
    store.wake_expired().await.unwrap();
    store.delete_run(run.id).await.unwrap();
    let mut statements = log.statements();
    statements.sort();
    statements.dedup();
    let mut conn = SqliteConnection::establish(&db.target()).unwrap();
    let mut planned = 0;
    for sql in statements {
        if !["SELECT", "UPDATE", "INSERT", "DELETE"]
            .iter()
            .any(|verb| sql.starts_with(verb))
        {
            continue; // transaction control
        }
        let plan: Vec<String> = sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
            .load::<PlanRow>(&mut conn)
            .unwrap()
            .into_iter()
            .map(|row| row.detail)
            .collect();
        planned += 1;
        for step in &plan {
            // `SCAN t` alone reads the whole table; `SCAN t USING INDEX`
            // walks an index in order (the unfiltered listing, LIMITed).
            assert!(
                !step.starts_with("SCAN") || step.contains("USING"),
                "{sql}\n{plan:#?}"
            );
        }
        let sorts = plan.iter().any(|step| step.contains("TEMP B-TREE"));
        if sql.starts_with("UPDATE flowstate_steps SET status = 'running', current_attempt") {
            assert_eq!(
                plan,
                [
                    "SEARCH flowstate_steps USING INDEX flowstate_steps_run_name (run_id=? AND name=?)"
                ]
            );
        }
        // The claim walks the claimable runs in index order, the cancel
        // sweep the runs with a cancel requested: no sort, no scan.
        if sql.starts_with("UPDATE flowstate_runs SET lease_token") {
            assert!(!sorts, "{sql}\n{plan:#?}");
            assert!(
                plan.iter()
                    .any(|s| s.contains("flowstate_runs_claimable_idx")),
                "{sql}\n{plan:#?}"
            );
        }
        if sql.starts_with("UPDATE flowstate_runs SET status = 'cancelled'") {
            assert!(!sorts, "{sql}\n{plan:#?}");
            assert!(
                plan.iter()
                    .any(|s| s.contains("flowstate_runs_cancel_requested_idx")),
                "{sql}\n{plan:#?}"
            );
        }
        // Every page of runs (all, by status, by workflow, by both, by
        // parent) is read in index order: no sort of the matching rows.
        if sql.contains("FROM flowstate_runs WHERE 1 = 1") {
            assert!(!sorts, "{sql}\n{plan:#?}");
        }
    }
    assert!(planned >= 25, "only {planned} statements planned");
}
