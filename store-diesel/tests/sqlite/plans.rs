//! Query plans: every statement the store sends is an index search, never
//! a scan of a whole table, whatever the table holds.

use diesel::sql_types::Text;
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};
use std::time::Duration;

use flowstate_core::ports::{
    RecoveryStore, RunLeaseStore, RunRecoveryStore, RunStore, RunWaitStore, StepStore, VersionStore,
};
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
    store.undispatched_steps(minute, 0).await.unwrap();
    store.stalled_runs(minute, 0).await.unwrap();
    store.lease_run(other.id, "w", minute).await.unwrap();
    store.lease_run(run.id, "w", minute).await.unwrap();
    store.reap_expired_leases(0).await.unwrap();
    store.delete_run(run.id).await.unwrap();
    let mut statements = log.statements();
    statements.sort();
    statements.dedup();
    let mut conn = SqliteConnection::establish(&db.target()).unwrap();
    let mut planned = 0;
    let mut saw_recovery = [false; 4];
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
            // walks an index in order (the unfiltered listing, LIMITed);
            // `SCAN (subquery-N)` reads the few rows a LIMITed subquery
            // answered (the run claim's two picks, merged).
            assert!(
                !step.starts_with("SCAN")
                    || step.contains("USING")
                    || step.starts_with("SCAN (subquery-"),
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
        // The claim walks the free runs, the sleeping runs whose time has
        // come and the run-out leases, each in its index's order, and
        // sorts only the merge of the three (at most three times its
        // size); the cancel sweep walks the runs with a cancel requested:
        // no sort, no scan.
        if sql.starts_with("UPDATE flowstate_runs SET lease_token") {
            let merges = plan.iter().filter(|s| s.contains("TEMP B-TREE")).count();
            assert_eq!(merges, 1, "{sql}\n{plan:#?}");
            for index in [
                "flowstate_runs_free_idx",
                "flowstate_runs_sleeping_idx",
                "flowstate_runs_lease_expiry_idx",
            ] {
                assert!(
                    plan.iter().any(|s| s.contains(index)),
                    "{index}: {sql}\n{plan:#?}"
                );
            }
        }
        if sql.starts_with("UPDATE flowstate_runs SET status = 'cancelled'") {
            assert!(!sorts, "{sql}\n{plan:#?}");
            assert!(
                plan.iter()
                    .any(|s| s.contains("flowstate_runs_cancel_requested_idx")),
                "{sql}\n{plan:#?}"
            );
        }
        // The recovery queries walk their own indexes: the relay the
        // claimable steps in order, the stalled sweep the running runs in
        // order, the reaper the held leases in order.
        if sql.starts_with("SELECT") && sql.contains("current_attempt < 4294967295") {
            saw_recovery[0] = true;
            assert!(!sorts, "{sql}\n{plan:#?}");
            assert!(
                plan.iter()
                    .any(|s| s.contains("flowstate_steps_claimable ")),
                "{sql}\n{plan:#?}"
            );
        }
        if sql.contains("WHERE (((((status = 'running'") {
            saw_recovery[1] = true;
            assert!(!sorts, "{sql}\n{plan:#?}");
            assert!(
                plan.iter()
                    .any(|s| s.contains("flowstate_runs_running_updated_idx")),
                "{sql}\n{plan:#?}"
            );
        }
        if sql.contains("`lease_expires_at` IS NOT NULL") {
            saw_recovery[2] = true;
            assert!(!sorts, "{sql}\n{plan:#?}");
            assert!(
                plan.iter()
                    .any(|s| s.contains("flowstate_runs_lease_expiry_idx")),
                "{sql}\n{plan:#?}"
            );
        }
        // The wake sweep reads the waits by their time (migration 000022),
        // not every unsettled run by its status.
        if sql.starts_with("UPDATE flowstate_runs SET wake_at = NULL, waiting_on = NULL") {
            saw_recovery[3] = true;
            assert!(
                plan.iter().any(|s| s.contains("flowstate_runs_wake_idx")),
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
    assert_eq!(
        saw_recovery, [true; 4],
        "the relay, the stalled sweep, the reaper and the wake sweep were planned"
    );
}

#[tokio::test]
async fn every_virtual_user_statement_searches_an_index() {
    use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
    use flowstate_core::schedule::Interval;
    use flowstate_core::{NewSchedule, Timestamp, VirtualUserRunQuery, VirtualUserRunStatus};

    let (db, store, log) = logged_store().await;
    let now = Timestamp::from_millis(1_000);
    let schedule = NewSchedule {
        persona: "alice".into(),
        enabled: true,
        interval: Interval {
            min_ms: 1,
            max_ms: 2,
        },
        next_run_at: now,
    };
    store.upsert_schedule(schedule.clone()).await.unwrap();
    store.upsert_schedule(schedule).await.unwrap();
    store.get_schedule("alice").await.unwrap();
    store.due_schedules(now, 10).await.unwrap();
    store.claim_schedule("alice", now, now, None).await.unwrap();
    let run = store.start_virtual_user_run("alice").await.unwrap();
    store.get_virtual_user_run(run.id).await.unwrap();
    for query in [
        VirtualUserRunQuery::default(),
        VirtualUserRunQuery::persona("alice", 1),
        VirtualUserRunQuery {
            status: Some(VirtualUserRunStatus::Running),
            ..VirtualUserRunQuery::default()
        },
        VirtualUserRunQuery {
            status: Some(VirtualUserRunStatus::Running),
            ..VirtualUserRunQuery::persona("alice", 5)
        },
    ] {
        store.list_virtual_user_runs(&query).await.unwrap();
    }
    store
        .append_transcript(run.id, &[json!(1), json!(2)])
        .await
        .unwrap();
    store.read_transcript(run.id, 1, 10).await.unwrap();
    store
        .complete_virtual_user_run(run.id, &json!({}))
        .await
        .unwrap();
    store.fail_virtual_user_run(run.id, "x").await.unwrap_err();

    let mut statements = log.statements();
    statements.sort();
    statements.dedup();
    let mut conn = SqliteConnection::establish(&db.target()).unwrap();
    let mut planned = 0;
    let mut saw_due = false;
    for sql in statements {
        if !["SELECT", "UPDATE", "INSERT"]
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
            // A chunk's multi-row insert scans its own VALUES, no table;
            // `SCAN t USING INDEX` walks an index in order (the unfiltered
            // listing, LIMITed).
            assert!(
                !step.starts_with("SCAN")
                    || step.ends_with("-ROW VALUES CLAUSE")
                    || step.contains("USING"),
                "{sql}\n{plan:#?}"
            );
        }
        let sorts = plan.iter().any(|step| step.contains("TEMP B-TREE"));
        // The due query and the listings walk their index in order.
        if sql.starts_with("SELECT") && sql.contains("ORDER BY") {
            assert!(!sorts, "{sql}\n{plan:#?}");
        }
        if sql.contains("`flowstate_virtual_user_schedules`.`next_run_at` <= ?") {
            saw_due = true;
            assert!(
                plan.iter()
                    .any(|s| s.contains("flowstate_virtual_user_schedules_due")),
                "{sql}\n{plan:#?}"
            );
        }
    }
    assert!(planned >= 12, "only {planned} statements planned");
    assert!(saw_due, "the due query was not planned");
}
