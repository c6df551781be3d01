//! Query plans on tables of 100k rows: the SQL the store really sends (the
//! diesel DSL's, taken from its `StatementLog`) is prepared and `EXPLAIN EXECUTE`d with real
//! values, and every plan must reach the big tables through the expected
//! index, never a `Seq Scan`.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::ports::{BatchStepStore, RunStore, StepStore};
use flowstate_core::{
    BatchClaim, Completion, RunCursor, RunId, RunQuery, RunStatus, StepId, Timestamp,
};

use crate::support;

const ROWS: u32 = 100_000;

#[derive(QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = Text)]
    #[diesel(column_name = "QUERY PLAN")]
    line: String,
}

/// Fills the tables: `ROWS` runs over 10 workflows and 5 statuses, the
/// hundred whose number ends in 000 children of run 1; `ROWS` steps, five for each of the first 20k
/// runs; one history row per step.
const LOAD: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, parent_id, created_at, updated_at)
SELECT 'run-' || lpad(g::text, 8, '0'), 'wf' || (g % 10),
       (ARRAY['running','suspended','completed','failed','cancelled'])[g % 5 + 1],
       '{}'::jsonb, NULL, g, g
FROM generate_series(1, 100000) AS g;
UPDATE flowstate_runs SET parent_id = 'run-00000001' WHERE id <> 'run-00000001' AND right(id, 3) = '000';
INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, current_attempt, retries, created_at, updated_at)
SELECT 'step-' || lpad(g::text, 8, '0'), 'run-' || lpad((g % 20000 + 1)::text, 8, '0'), 'step' || (g / 20000),
       'f', 'pending', '{}'::jsonb, 1, 0, g, g
FROM generate_series(1, 100000) AS g;
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at)
SELECT 'hist-' || lpad(g::text, 8, '0'), 'step-' || lpad(g::text, 8, '0'), 1, 'pending', g
FROM generate_series(1, 100000) AS g;
ANALYZE;
";

/// The plan of `sql` run with `args` (SQL literals, in `$n` order).
pub(crate) async fn plan(conn: &mut AsyncPgConnection, sql: &str, args: &[String]) -> String {
    plan_with(conn, sql, "FORMAT TEXT", args).await
}

/// The plan of `sql` run with `args`, `EXPLAIN`ed with `options` (e.g.
/// `ANALYZE, BUFFERS`), in a transaction rolled back after: an `EXPLAIN
/// ANALYZE` runs the statement.
pub(crate) async fn plan_with(
    conn: &mut AsyncPgConnection,
    sql: &str,
    options: &str,
    args: &[String],
) -> String {
    conn.batch_execute("DEALLOCATE ALL; BEGIN").await.unwrap();
    conn.batch_execute(&format!("PREPARE q AS {sql}"))
        .await
        .unwrap();
    let explain = format!("EXPLAIN ({options}) EXECUTE q({})", args.join(", "));
    let lines: Vec<PlanLine> = diesel::sql_query(explain).load(conn).await.unwrap();
    conn.batch_execute("ROLLBACK").await.unwrap();
    let plan = lines
        .into_iter()
        .map(|l| l.line)
        .collect::<Vec<_>>()
        .join("\n");
    if std::env::var_os("FLOWSTATE_PRINT_PLANS").is_some() {
        eprintln!("{sql}\n{plan}\n");
    }
    plan
}

pub(crate) fn lit(text: &str) -> String {
    format!("'{text}'")
}

/// Asserts the plan uses `index` and scans no table sequentially.
pub(crate) fn assert_indexed(what: &str, plan: &str, indexes: &[&str]) {
    assert!(!plan.contains("Seq Scan"), "{what} scans a table:\n{plan}");
    for index in indexes {
        assert!(
            plan.contains(&format!("Index Scan using {index}"))
                || plan.contains(&format!("Index Scan Backward using {index}"))
                || plan.contains(&format!("Index Only Scan using {index}"))
                || plan.contains(&format!("Index Only Scan Backward using {index}"))
                || plan.contains(&format!("Bitmap Index Scan on {index}")),
            "{what} does not use {index}:\n{plan}"
        );
    }
}

#[tokio::test]
async fn hot_reads_use_their_indexes_on_100k_rows() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(LOAD).await.unwrap();
    assert_eq!(ROWS, 100_000);

    // The SQL each operation sends, captured from the store itself.
    let run: RunId = "00000000-0000-7000-8000-000000000001".parse().unwrap();
    let step: StepId = "00000000-0000-7000-8000-000000000002".parse().unwrap();
    let sent = |statements: Vec<String>| {
        assert_eq!(statements.len(), 1, "{statements:?}");
        statements.into_iter().next().unwrap()
    };
    let get_step = sent(log.capture(store.get_step(step)).await.1);
    let find_step = sent(log.capture(store.find_step(run, "step")).await.1);
    let list_steps = sent(log.capture(store.list_steps(run)).await.1);
    let history = sent(log.capture(store.step_history(run)).await.1);
    let get_run = sent(log.capture(store.get_run(run)).await.1);

    let step_id = lit("step-00050000");
    let run_id = lit("run-00012345");
    let p = plan(&mut conn, &get_step, &[step_id, "1".into()]).await;
    assert_indexed("get_step", &p, &["flowstate_steps_pkey"]);
    let p = plan(
        &mut conn,
        &find_step,
        &[run_id.clone(), lit("step2"), "1".into()],
    )
    .await;
    assert_indexed("find_step", &p, &["flowstate_steps_run_name_key"]);
    let p = plan(&mut conn, &get_run, &[run_id.clone(), "1".into()]).await;
    assert_indexed("get_run", &p, &["flowstate_runs_pkey"]);
    let p = plan(&mut conn, &list_steps, std::slice::from_ref(&run_id)).await;
    assert_indexed("list_steps", &p, &["flowstate_runs_pkey"]);
    assert!(p.contains("on flowstate_steps"), "{p}");
    let p = plan(&mut conn, &history, std::slice::from_ref(&run_id)).await;
    assert_indexed("step_history", &p, &["flowstate_runs_pkey"]);
    assert!(
        p.contains("flowstate_step_history_step_attempt_key"),
        "step_history does not reach history by step:\n{p}"
    );

    // Listings: every filter combination the store sends, with a cursor.
    let cursor = RunCursor {
        created_at: Timestamp::from_micros(60_000),
        id: run,
    };
    let listings = [
        (RunQuery::default(), vec![], "flowstate_runs_created_idx"),
        (
            RunQuery {
                cursor: Some(cursor),
                ..RunQuery::default()
            },
            vec![
                lit("60000"),
                lit("60000"),
                lit("60000"),
                lit("run-00060000"),
            ],
            "flowstate_runs_created_idx",
        ),
        (
            RunQuery {
                workflow: Some("wf3".into()),
                status: Some(RunStatus::Failed),
                ..RunQuery::default()
            },
            vec![lit("wf3"), lit("failed")],
            "flowstate_runs_workflow_status_created_idx",
        ),
        (
            RunQuery {
                workflow: Some("wf3".into()),
                status: Some(RunStatus::Failed),
                cursor: Some(cursor),
                ..RunQuery::default()
            },
            vec![
                lit("wf3"),
                lit("failed"),
                lit("60000"),
                lit("60000"),
                lit("60000"),
                lit("run-00060000"),
            ],
            "flowstate_runs_workflow_status_created_idx",
        ),
        (
            RunQuery {
                status: Some(RunStatus::Suspended),
                ..RunQuery::default()
            },
            vec![lit("suspended")],
            "flowstate_runs_status_created_idx",
        ),
    ];
    for (query, mut args, index) in listings {
        let sql = sent(log.capture(store.list_runs(&query)).await.1);
        args.push(query.effective_limit().to_string());
        let p = plan(&mut conn, &sql, &args).await;
        assert_indexed(&format!("list_runs {query:?}"), &p, &[index]);
        assert!(
            !p.contains("Sort"),
            "list_runs {query:?} sorts instead of walking an index:\n{p}"
        );
    }
    // A parent's children and a workflow's runs each walk an index of
    // their own, newest first, with no sort.
    let by_parent = RunQuery {
        parent: Some(run),
        ..RunQuery::default()
    };
    let by_workflow = RunQuery {
        workflow: Some("wf3".into()),
        ..RunQuery::default()
    };
    for (query, arg, index) in [
        (
            by_parent,
            lit("run-00000001"),
            "flowstate_runs_parent_created_idx",
        ),
        (
            by_workflow,
            lit("wf3"),
            "flowstate_runs_workflow_created_idx",
        ),
    ] {
        let sql = sent(log.capture(store.list_runs(&query)).await.1);
        let p = plan(&mut conn, &sql, &[arg, "50".into()]).await;
        assert_indexed(&format!("list_runs {query:?}"), &p, &[index]);
        assert!(
            !p.contains("Sort"),
            "list_runs {query:?} sorts instead of walking an index:\n{p}"
        );
    }
    support::drop_database(&url).await;
}

/// 100k steps, most of them finished: 97% succeeded, 2% pending, 1%
/// failed with a retry left; each with its history row.
const LOAD_MOSTLY_DONE: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at)
SELECT '00000000-0000-7000-9000-' || lpad(g::text, 12, '0'), 'wf', 'running', '{}'::jsonb, g, g
FROM generate_series(1, 1000) AS g;
INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, current_attempt, retries, created_at, updated_at)
SELECT '00000000-0000-7000-8000-' || lpad(g::text, 12, '0'),
       '00000000-0000-7000-9000-' || lpad((g % 1000 + 1)::text, 12, '0'), 'step' || g,
       'f' || (g % 4),
       CASE WHEN g % 100 < 97 THEN 'succeeded' WHEN g % 100 < 99 THEN 'pending' ELSE 'failed' END,
       '{}'::jsonb, 1, 1, g, g
FROM generate_series(1, 100000) AS g;
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at)
SELECT 'hist-' || id, id, 1, status, created_at FROM flowstate_steps;
ANALYZE;
";

#[tokio::test]
async fn the_batch_claim_reaches_steps_through_its_partial_index_on_100k_steps() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(LOAD_MOSTLY_DONE).await.unwrap();
    let ids = (0..64)
        .map(|i| format!("'h{i}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let history_ids = format!("ARRAY[{ids}]::text[]");
    for (claim, index, mut args) in [
        (BatchClaim::new(64), "flowstate_steps_claimable_idx", vec![]),
        (
            BatchClaim::new(64).for_function("f1"),
            "flowstate_steps_claimable_function_idx",
            vec![lit("f1")],
        ),
    ] {
        let (claimed, statements) = log.capture(store.claim_batch(&claim)).await;
        assert_eq!(claimed.unwrap().len(), 64);
        let verbs: Vec<&str> = statements
            .iter()
            .map(|s| s.split_whitespace().next().unwrap_or_default())
            .collect();
        assert_eq!(verbs, ["BEGIN", "SET", "WITH", "COMMIT"], "{statements:#?}");
        assert_eq!(statements[1], "SET LOCAL enable_bitmapscan = off");
        // `$4` the lease clock offset, `$5` the default claim timeout.
        let mut all = vec![
            "1000000".to_owned(),
            "64".to_owned(),
            history_ids.clone(),
            "0".to_owned(),
            "600000000".to_owned(),
        ];
        all.append(&mut args);
        // Planned as the claim runs it: with bitmap scans off. It must walk
        // its partial index in order (which marks the entries of claimed
        // steps dead for the next claims), never fetch the claimable rows
        // through a bitmap and sort them, and never scan the finished steps.
        conn.batch_execute("SET enable_bitmapscan = off")
            .await
            .unwrap();
        let p = plan(&mut conn, &statements[2], &all).await;
        conn.batch_execute("RESET enable_bitmapscan").await.unwrap();
        assert_indexed(&format!("claim_batch {claim:?}"), &p, &[index]);
        // The pick is the plan from `CTE picked` to `CTE claimed`; the
        // answer's own sort of the claimed rows comes after.
        let pick = p
            .split("CTE picked")
            .nth(1)
            .and_then(|rest| rest.split("CTE claimed").next())
            .unwrap_or_else(|| panic!("claim_batch {claim:?} has no pick:\n{p}"));
        assert!(
            !pick.contains("Bitmap") && !pick.contains("Sort"),
            "claim_batch {claim:?} does not walk {index} in order:\n{p}"
        );
        assert!(
            p.contains("Tid Scan"),
            "claim_batch {claim:?} finds what it locked other than by tuple id:\n{p}"
        );
        assert!(
            p.contains("LockRows"),
            "claim_batch {claim:?} locks nothing:\n{p}"
        );
    }
    support::drop_database(&url).await;
}

/// 20,000 pending steps, analyzed before any is claimed: the statistics a
/// small queue has when its completions come in.
const LOAD_SMALL_QUEUE: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at)
SELECT '00000000-0000-7000-9000-' || lpad(g::text, 12, '0'), 'wf', 'running', '{}'::jsonb, g, g
FROM generate_series(1, 200) AS g;
INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, current_attempt, retries, created_at, updated_at)
SELECT '00000000-0000-7000-8000-' || lpad(g::text, 12, '0'),
       '00000000-0000-7000-9000-' || lpad((g % 200 + 1)::text, 12, '0'), 'step' || g,
       'f', 'pending', '{}'::jsonb, 1, 1, g, g
FROM generate_series(1, 20000) AS g;
ANALYZE;
";

/// The completions reach each step by key on a queue of 20,000 steps whose
/// statistics say none is running. The planner weighs the key lookups
/// against one scan of the whole table filtered on `status`, and on random
/// (v4) ids, which make each lookup look dearer than flowstate's
/// time-ordered ones, it took the scan at this size (15.9 ms for 256
/// completions against 2.6 ms by key).
#[tokio::test]
async fn the_completions_reach_their_steps_by_key_on_a_small_queue() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(LOAD_SMALL_QUEUE).await.unwrap();
    let claimed = store.claim_batch(&BatchClaim::new(256)).await.unwrap();
    assert_eq!(claimed.len(), 256);
    let completions: Vec<_> = claimed
        .iter()
        .map(|step| (step.claim(), Completion::Succeeded(serde_json::json!(1))))
        .collect();
    let (outcomes, statements) = log.capture(store.complete_batch(completions)).await;
    assert!(outcomes.unwrap().iter().all(Result::is_ok));
    let verbs: Vec<&str> = statements
        .iter()
        .map(|s| s.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(verbs, ["WITH"], "{statements:#?}");

    let array = |items: Vec<String>| format!("ARRAY[{}]::text[]", items.join(", "));
    let ids = array(claimed.iter().map(|s| lit(&s.id.to_string())).collect());
    let payloads = array(vec![lit("1"); 256]);
    let history = array((0..256).map(|i| lit(&format!("h{i}"))).collect());
    let attempts = format!("ARRAY[{}]::bigint[]", vec!["1"; 256].join(", "));
    let none = "ARRAY[]::text[]".to_owned();
    let args = [
        "2000000".to_owned(),
        ids,
        payloads,
        history,
        attempts,
        none.clone(),
        none.clone(),
        none,
        "ARRAY[]::bigint[]".to_owned(),
    ];
    conn.batch_execute("SET enable_seqscan = off")
        .await
        .unwrap();
    let p = plan(&mut conn, &statements[0], &args).await;
    conn.batch_execute("RESET enable_seqscan").await.unwrap();
    assert_indexed(
        "complete_batch",
        &p,
        &[
            "flowstate_steps_pkey",
            "flowstate_step_history_step_attempt_key",
        ],
    );
    support::drop_database(&url).await;
}

/// 100k schedules (one in a hundred disabled, one due every millisecond of
/// the first 100 s) and 100k virtual-user runs over 1000 personas.
const LOAD_VIRTUAL_USERS: &str = "
INSERT INTO flowstate_virtual_user_schedules (persona, enabled, min_interval_ms, max_interval_ms, next_run_at, updated_at)
SELECT 'p' || g, g % 100 <> 0, 1000, 2000, g * 1000, 0
FROM generate_series(1, 100000) AS g;
INSERT INTO flowstate_virtual_user_runs (id, persona, status, created_at, updated_at)
SELECT 'vur-' || lpad(g::text, 8, '0'), 'p' || (g % 1000),
       (ARRAY['running','completed','failed'])[g % 3 + 1], g, g
FROM generate_series(1, 100000) AS g;
ANALYZE;
";

#[tokio::test]
async fn the_due_query_and_a_personas_runs_use_their_indexes_on_100k_rows() {
    use flowstate_core::VirtualUserRunQuery;
    use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};

    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(LOAD_VIRTUAL_USERS).await.unwrap();
    let sent = |statements: Vec<String>| {
        assert_eq!(statements.len(), 1, "{statements:?}");
        statements.into_iter().next().unwrap()
    };
    let now = Timestamp::from_micros(500_000);
    let due = sent(log.capture(store.due_schedules(now, 100)).await.1);
    let p = plan(
        &mut conn,
        &due,
        &["true".into(), "500000".into(), "100".into()],
    )
    .await;
    assert_indexed(
        "due_schedules",
        &p,
        &["flowstate_virtual_user_schedules_due_idx"],
    );
    assert!(!p.contains("Sort"), "due_schedules sorts:\n{p}");

    let latest = VirtualUserRunQuery::persona("p7", 1);
    let listing = sent(log.capture(store.list_virtual_user_runs(&latest)).await.1);
    let p = plan(&mut conn, &listing, &[lit("p7"), "1".into()]).await;
    assert_indexed(
        "list_virtual_user_runs by persona",
        &p,
        &["flowstate_virtual_user_runs_persona_created_idx"],
    );
    assert!(!p.contains("Sort"), "the persona listing sorts:\n{p}");
    let every = VirtualUserRunQuery::default();
    let listing = sent(log.capture(store.list_virtual_user_runs(&every)).await.1);
    let p = plan(&mut conn, &listing, &["50".into()]).await;
    assert_indexed(
        "list_virtual_user_runs",
        &p,
        &["flowstate_virtual_user_runs_created_idx"],
    );
    assert!(!p.contains("Sort"), "the unfiltered listing sorts:\n{p}");
    support::drop_database(&url).await;
}
