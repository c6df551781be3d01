//! Query plans on MySQL/MariaDB: the SQL the store really sends (taken
//! from its `StatementLog`: the diesel DSL's for the reads and listings,
//! the hand-written scaffold's for the claim and the transition), with its
//! `?` placeholders bound to real values, finds its rows through an index,
//! never a full scan, on tables with enough rows that the optimizer has a
//! choice; listings read an index in order instead of sorting.

use diesel::sql_types::{Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{RunCursor, RunId, RunQuery, RunStatus, StepId, StepTransition, Timestamp};

use crate::support;

/// One row of `EXPLAIN`.
#[derive(Debug, diesel::QueryableByName)]
pub(crate) struct PlanRow {
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) table: Option<String>,
    #[diesel(sql_type = Nullable<Text>, column_name = "type")]
    pub(crate) access: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) key: Option<String>,
    #[diesel(sql_type = Nullable<Text>, column_name = "Extra")]
    pub(crate) extra: Option<String>,
}

/// `sql` with its `?` placeholders replaced, in order, by `args` (SQL
/// literals); the number of arguments must be the number of placeholders.
pub(crate) fn bound(sql: &str, args: &[String]) -> String {
    let parts: Vec<&str> = sql.split('?').collect();
    assert_eq!(
        parts.len() - 1,
        args.len(),
        "wrong number of arguments {args:?} for {sql}"
    );
    let mut out = parts[0].to_owned();
    for (arg, part) in args.iter().zip(&parts[1..]) {
        out.push_str(arg);
        out.push_str(part);
    }
    out
}

/// The plan of `sql` run with `args`.
pub(crate) async fn plan(
    conn: &mut AsyncMysqlConnection,
    sql: &str,
    args: &[String],
) -> Vec<PlanRow> {
    let sql = bound(sql, args);
    let rows = diesel::sql_query(format!("EXPLAIN {sql}"))
        .load::<PlanRow>(conn)
        .await
        .expect(&sql);
    if std::env::var_os("FLOWSTATE_PRINT_PLANS").is_some() {
        eprintln!("{sql}\n{rows:#?}\n");
    }
    rows
}

fn lit(text: &str) -> String {
    format!("'{text}'")
}

/// Asserts every table of the plan is reached through an index, the first
/// (driving) one through `first_key` if given, and, for a listing, that
/// nothing is sorted.
pub(crate) fn assert_indexed(what: &str, rows: &[PlanRow], first_key: Option<&str>, no_sort: bool) {
    assert!(!rows.is_empty(), "{what}: no plan");
    for row in rows {
        assert!(
            row.access.as_deref() != Some("ALL") && row.key.is_some(),
            "{what} scans {:?} without an index: {rows:#?}",
            row.table
        );
        if no_sort {
            let extra = row.extra.as_deref().unwrap_or_default();
            assert!(
                !extra.contains("filesort"),
                "{what} sorts instead of reading the index in order: {rows:#?}"
            );
        }
    }
    if let Some(key) = first_key {
        assert_eq!(rows[0].key.as_deref(), Some(key), "{what}: {rows:#?}");
    }
}

/// The one statement of `statements` that starts with `verb`.
pub(crate) fn the(verb: &str, statements: &[String]) -> String {
    let found: Vec<&String> = statements.iter().filter(|s| s.starts_with(verb)).collect();
    assert_eq!(found.len(), 1, "one {verb} expected: {statements:#?}");
    found[0].clone()
}

/// The only statement of `statements`.
fn only(statements: Vec<String>) -> String {
    assert_eq!(statements.len(), 1, "{statements:#?}");
    statements.into_iter().next().unwrap()
}

/// 10,000 runs (half of them children of the first), 4 steps each, one
/// history row per step. (At 2,000 runs MariaDB reads 50 newest runs with
/// a full scan and a sort rather than the index: too few rows to tell.)
const SEED: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, parent_id, created_at, updated_at)
  VALUES ('00000000-0000-7000-8000-000000000000', 'wf0', 'running', '{}', NULL, 0, 0);
INSERT INTO flowstate_runs (id, workflow, status, input, parent_id, created_at, updated_at)
  SELECT CONCAT('00000000-0000-7000-8000-', LPAD(i, 12, '0')), CONCAT('wf', i % 10),
         ELT(1 + i % 5, 'running', 'suspended', 'completed', 'failed', 'cancelled'), '{}',
         IF(i % 2 = 0, '00000000-0000-7000-8000-000000000000', NULL), i, i
  FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d AS i
        FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e) n
  WHERE i > 0;
INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, retries, created_at, updated_at)
  SELECT CONCAT(SUBSTRING(r.id, 1, 24), LPAD(k.j, 4, '0'), SUBSTRING(r.id, 29)), r.id, CONCAT('s', k.j), 'f',
         'pending', '{}', 0, r.created_at, r.created_at
  FROM flowstate_runs r CROSS JOIN (SELECT 1 AS j UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) k;
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at)
  SELECT CONCAT('f', SUBSTRING(id, 2)), id, 1, 'pending', created_at FROM flowstate_steps;
ANALYZE TABLE flowstate_runs, flowstate_steps, flowstate_step_history;
";

const RUN: &str = "00000000-0000-7000-8000-000000000042";
/// Step `s1` of run 42, as the seed names it.
const STEP: &str = "00000000-0000-7000-8000-000100000042";
const PARENT: &str = "00000000-0000-7000-8000-000000000000";

#[tokio::test]
async fn hot_statements_use_indexes() {
    let (db, mut conn, log, store) = support::seeded(SEED).await;

    // The SQL each operation sends, captured from the store itself on ids
    // the seed does not have (so nothing is written); the plans below bind
    // the seed's.
    let run: RunId = "00000000-0000-7000-8000-0000000000aa".parse().unwrap();
    let step: StepId = "00000000-0000-7000-8000-0000000000bb".parse().unwrap();
    let claimed = log.capture(store.claim_step(run, "s1", "f")).await;
    assert!(claimed.0.is_err(), "no such step: {:?}", claimed.0);
    let claim = the("UPDATE", &claimed.1);
    let moved = log
        .capture(store.transition_step(step, StepTransition::Succeeded(serde_json::json!(1))))
        .await;
    assert!(moved.0.is_err(), "no such step: {:?}", moved.0);
    let transition = the("UPDATE", &moved.1);
    let get_step = only(log.capture(store.get_step(step)).await.1);
    let find_step = only(log.capture(store.find_step(run, "s2")).await.1);
    let list_steps = only(log.capture(store.list_steps(run)).await.1);
    let history = only(log.capture(store.step_history(run)).await.1);
    let get_run = only(log.capture(store.get_run(run)).await.1);
    let count_children = only(log.capture(store.count_children(run)).await.1);

    let (run, step, parent) = (lit(RUN), lit(STEP), lit(PARENT));
    let now = "1".to_owned();
    let one = "1".to_owned();
    let checks = [
        (
            "claim",
            &claim,
            // History id, now, lease clock offset, default claim timeout,
            // run, name, function.
            vec![
                lit("h"),
                now.clone(),
                "0".to_owned(),
                "600000000".to_owned(),
                run.clone(),
                lit("s1"),
                lit("f"),
            ],
            Some("flowstate_steps_run_name"),
        ),
        (
            "transition",
            &transition,
            // History id, now, result, step.
            vec![lit("h"), now, lit("1"), step.clone()],
            Some("PRIMARY"),
        ),
        (
            "get_step",
            &get_step,
            vec![step, one.clone()],
            Some("PRIMARY"),
        ),
        (
            "find_step",
            &find_step,
            vec![run.clone(), lit("s2"), one.clone()],
            Some("flowstate_steps_run_name"),
        ),
        (
            "list_steps",
            &list_steps,
            vec![run.clone()],
            Some("PRIMARY"),
        ),
        ("step_history", &history, vec![run.clone()], Some("PRIMARY")),
        ("get_run", &get_run, vec![run, one], Some("PRIMARY")),
        (
            "count_children",
            &count_children,
            vec![parent.clone()],
            Some("PRIMARY"),
        ),
    ];
    for (what, sql, args, key) in checks {
        let rows = plan(&mut conn, sql, &args).await;
        assert_indexed(what, &rows, key, false);
    }

    // Listings: every filter combination the store sends, with and without
    // a cursor (`created_at <= ? AND (created_at < ? OR (created_at = ?
    // AND id < ?))`), then the limit.
    let cursor = RunCursor {
        created_at: Timestamp::from_micros(1500),
        id: "00000000-0000-7000-8000-000000001500".parse().unwrap(),
    };
    let after = || {
        vec![
            "1500".to_owned(),
            "1500".to_owned(),
            "1500".to_owned(),
            lit("00000000-0000-7000-8000-000000001500"),
        ]
    };
    let by_parent = RunQuery {
        parent: Some(PARENT.parse().unwrap()),
        ..RunQuery::default()
    };
    let listings = [
        (RunQuery::default(), vec![], "flowstate_runs_created"),
        (
            RunQuery {
                cursor: Some(cursor),
                ..RunQuery::default()
            },
            after(),
            "flowstate_runs_created",
        ),
        (
            RunQuery {
                status: Some(RunStatus::Failed),
                ..RunQuery::default()
            },
            vec![lit("failed")],
            "flowstate_runs_status_created",
        ),
        (
            RunQuery {
                status: Some(RunStatus::Failed),
                cursor: Some(cursor),
                ..RunQuery::default()
            },
            [vec![lit("failed")], after()].concat(),
            "flowstate_runs_status_created",
        ),
        (
            RunQuery {
                workflow: Some("wf3".into()),
                ..RunQuery::default()
            },
            vec![lit("wf3")],
            "flowstate_runs_workflow_created",
        ),
        (
            RunQuery {
                workflow: Some("wf3".into()),
                status: Some(RunStatus::Suspended),
                ..RunQuery::default()
            },
            vec![lit("wf3"), lit("suspended")],
            "flowstate_runs_workflow_status_created",
        ),
        (
            RunQuery {
                workflow: Some("wf3".into()),
                status: Some(RunStatus::Suspended),
                cursor: Some(cursor),
                ..RunQuery::default()
            },
            [vec![lit("wf3"), lit("suspended")], after()].concat(),
            "flowstate_runs_workflow_status_created",
        ),
        (by_parent, vec![parent], "flowstate_runs_parent_created"),
    ];
    for (query, mut args, index) in listings {
        let sql = only(log.capture(store.list_runs(&query)).await.1);
        args.push(query.effective_limit().to_string());
        let rows = plan(&mut conn, &sql, &args).await;
        assert_indexed(&format!("list_runs {query:?}"), &rows, Some(index), true);
    }
    drop(store);
    db.drop_database().await;
}

/// 10,000 runs, 99% of them settled; one in three of the running ones
/// leased, half of those leases long run out. One step per run: the running
/// runs' steps pending, running, succeeded or failed in turn, one settled
/// run's step in 97 left pending, the rest succeeded.
const SEED_RECOVERY: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at,
                            lease_owner, lease_expires_at, lease_token)
  SELECT CONCAT('00000000-0000-7000-9000-', LPAD(i, 12, '0')), 'wf',
         IF(i % 100 = 0, 'running', ELT(1 + i % 3, 'completed', 'failed', 'cancelled')), '{}', i, i,
         IF(i % 300 = 0, 'w', NULL),
         IF(i % 600 = 0, 1, IF(i % 300 = 0, 9000000000000000, NULL)),
         IF(i % 300 = 0, 1, 0)
  FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d AS i
        FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e) n
  WHERE i > 0;
INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, retries, created_at, updated_at)
  SELECT CONCAT('00000000-0000-7000-8000-', SUBSTRING(r.id, 25)), r.id, 's', 'f',
         IF(r.created_at % 100 = 0, ELT(1 + (r.created_at DIV 100) % 4, 'pending', 'running', 'succeeded', 'failed'),
            IF(r.created_at % 97 = 0, 'pending', 'succeeded')),
         '{}', 1, r.created_at, r.created_at
  FROM flowstate_runs r;
ANALYZE TABLE flowstate_runs, flowstate_steps;
";

#[tokio::test]
async fn the_recovery_queries_use_their_indexes() {
    use flowstate_core::ports::{RecoveryStore, RunRecoveryStore};
    use std::time::Duration;

    let (db, mut conn, log, store) = support::seeded(SEED_RECOVERY).await;
    let idle = Duration::from_secs(60);
    let (found, statements) = log.capture(store.undispatched_steps(idle, 100)).await;
    assert_eq!(
        found.unwrap().len(),
        49,
        "the running runs' pending and failed steps"
    );
    let relay = only(statements);
    let (found, statements) = log.capture(store.stalled_runs(idle, 100)).await;
    assert!(!found.unwrap().is_empty());
    let stalled = only(statements);
    let (reaped, statements) = log.capture(store.reap_expired_leases(100)).await;
    assert_eq!(
        reaped.unwrap().len(),
        16,
        "one running run in 600 has a lease run out"
    );
    let reap = the("SELECT", &statements);
    let unknown: RunId = "00000000-0000-7000-9000-0000000000aa".parse().unwrap();
    let (_, statements) = log.capture(store.lease_run(unknown, "w", idle)).await;
    let lease_run = the("SELECT", &statements);

    let now = flowstate_core::Clock::now(&flowstate_core::SystemClock).as_micros();
    let cutoff = (now - 60_000_000).to_string();
    let checks = [
        (
            "undispatched_steps",
            &relay,
            vec![
                now.to_string(),
                cutoff.clone(),
                cutoff.clone(),
                "100".into(),
            ],
            // MariaDB may turn the run test into a semi-join driven from
            // the unsettled runs (by `flowstate_runs_status_created`) and
            // sort the few steps it finds, when those runs are few: its
            // choice by cost. Either way no settled run and no finished
            // step is read.
            None,
            false,
        ),
        (
            "stalled_runs",
            &stalled,
            vec![
                "1".into(),
                cutoff.clone(),
                "0".into(),
                "0".into(),
                cutoff.clone(),
                "100".into(),
            ],
            Some("flowstate_runs_status_updated"),
            true,
        ),
        (
            "reap_expired_leases",
            &reap,
            vec!["0".into(), "100".into()],
            Some("flowstate_runs_lease_expiry"),
            true,
        ),
        (
            "lease_run",
            &lease_run,
            vec![
                "0".into(),
                "0".into(),
                lit("00000000-0000-7000-9000-000000000100"),
                "1".into(),
            ],
            Some("PRIMARY"),
            false,
        ),
    ];
    for (what, sql, args, first_key, no_sort) in checks {
        let mut rows = plan(&mut conn, sql, &args).await;
        // A subquery the optimizer proved empty from the run's row
        // ("Impossible WHERE noticed after reading const tables") reads no
        // table at all.
        rows.retain(|row| row.table.is_some());
        assert_indexed(what, &rows, first_key, no_sort);
    }
    db.drop_database().await;
}
