//! Migrations on MySQL: applied once, idempotent, reversible to the same
//! schema, a half-applied run finished, every index of SCHEMA.md there, and
//! the database's default charset irrelevant.

use diesel::sql_types::Text;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, StepTransition};
use flowstate_store_diesel::migrate;
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};
use serde_json::json;

use crate::common::db::{TestDb, migration_versions};
use crate::common::records;
use crate::support::{self, TextRow, count};

const UP_SQL: &str =
    include_str!("../../migrations/mysql/2026-11-30-000001_create_flowstate/up.sql");
const TABLES: [&str; 15] = [
    "flowstate_activations",
    "flowstate_effects",
    "flowstate_event_deliveries",
    "flowstate_events",
    "flowstate_published_versions",
    "flowstate_run_signals",
    "flowstate_run_state",
    "flowstate_runs",
    "flowstate_step_history",
    "flowstate_steps",
    "flowstate_virtual_user_runs",
    "flowstate_virtual_user_schedules",
    "flowstate_virtual_user_transcript",
    "flowstate_workflow_versions",
    "flowstate_workflows",
];

/// Every table, column, index, foreign key, check and trigger of the
/// database, as text that does not name the database.
async fn catalog(conn: &mut AsyncMysqlConnection, db: &str) -> Vec<String> {
    let queries = [
        "SELECT CONCAT_WS(' ', 'table', TABLE_NAME, ENGINE, TABLE_COLLATION) AS v \
         FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME",
        "SELECT CONCAT_WS(' ', 'column', TABLE_NAME, ORDINAL_POSITION, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, \
         IFNULL(COLUMN_DEFAULT, '-'), IFNULL(CHARACTER_SET_NAME, '-'), IFNULL(COLLATION_NAME, '-')) AS v \
         FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION",
        "SELECT CONCAT_WS(' ', 'index', TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME) AS v \
         FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
        "SELECT CONCAT_WS(' ', 'fk', TABLE_NAME, CONSTRAINT_NAME, REFERENCED_TABLE_NAME, UPDATE_RULE, DELETE_RULE) AS v \
         FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? ORDER BY CONSTRAINT_NAME",
        "SELECT CONCAT_WS(' ', 'check', TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE) AS v \
         FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? ORDER BY TABLE_NAME, CONSTRAINT_NAME",
        "SELECT CONCAT_WS(' ', 'trigger', EVENT_OBJECT_TABLE, TRIGGER_NAME, ACTION_TIMING, \
         EVENT_MANIPULATION, ACTION_ORDER, ACTION_STATEMENT) AS v \
         FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? ORDER BY TRIGGER_NAME",
    ];
    let mut out = Vec::new();
    for query in queries {
        let rows = diesel::sql_query(query)
            .bind::<Text, _>(db)
            .load::<TextRow>(conn)
            .await
            .expect(query);
        out.extend(rows.into_iter().map(|r| r.v));
    }
    out
}

/// The flowstate tables present, but for the migration lock's (made
/// before the first migration, kept after the last is reverted).
async fn tables(conn: &mut AsyncMysqlConnection, db: &str) -> Vec<String> {
    let mut names: Vec<String> = diesel::sql_query(
        "SELECT TABLE_NAME AS v FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE 'flowstate\\_%' \
         AND TABLE_NAME <> 'flowstate_migration_lock'",
    )
    .bind::<Text, _>(db)
    .load::<TextRow>(conn)
    .await
    .unwrap()
    .into_iter()
    .map(|r| r.v)
    .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_fresh_database_takes_every_migration_and_a_second_up_is_a_no_op() {
    let db = TestDb::empty(Dialect::Mysql).await;
    let versions = migration_versions(Dialect::Mysql);
    let before = migrate::status(&db.url).await.unwrap();
    assert_eq!(before.len(), versions.len());
    assert!(before.iter().all(|m| !m.applied));
    assert_eq!(
        (before[0].version.as_str(), before[0].applied),
        (versions[0].as_str(), false)
    );
    assert!(
        before[0].name.contains("create_flowstate"),
        "{:?}",
        before[0]
    );

    assert_eq!(migrate::up(&db.url).await.unwrap(), versions);
    let mut conn = support::connection(&db).await;
    assert_eq!(tables(&mut conn, &db.name).await, TABLES);
    let status = migrate::status(&db.url).await.unwrap();
    assert_eq!(status.len(), versions.len());
    assert!(status.iter().all(|m| m.applied));

    assert_eq!(migrate::up(&db.url).await.unwrap(), Vec::<String>::new());
    assert!(migrate::status(&db.url).await.unwrap()[0].applied);
    db.drop_database().await;
}

#[tokio::test]
async fn down_then_up_gives_the_same_schema() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let mut conn = support::connection(&db).await;
    let before = catalog(&mut conn, &db.name).await;
    assert!(
        before.len() > 50,
        "the catalog dump found little: {before:?}"
    );

    let versions = migration_versions(Dialect::Mysql);
    let newest_first: Vec<String> = versions.iter().rev().cloned().collect();
    assert_eq!(
        migrate::down(&db.url, usize::MAX).await.unwrap(),
        newest_first
    );
    assert!(
        tables(&mut conn, &db.name).await.is_empty(),
        "down left flowstate tables"
    );
    assert!(!migrate::status(&db.url).await.unwrap()[0].applied);
    assert!(
        migrate::down(&db.url, 1).await.unwrap().is_empty(),
        "nothing left to revert"
    );

    assert_eq!(migrate::up(&db.url).await.unwrap(), versions);
    assert_eq!(catalog(&mut conn, &db.name).await, before);
    db.drop_database().await;
}

#[tokio::test]
async fn up_finishes_a_half_applied_schema() {
    // MySQL's DDL is not transactional: a failed run can leave some tables.
    let reference = TestDb::migrated(Dialect::Mysql).await;
    let db = TestDb::empty(Dialect::Mysql).await;
    let mut conn = support::connection(&db).await;
    let first_table = UP_SQL
        .split(';')
        .find(|s| s.contains("CREATE TABLE"))
        .unwrap();
    conn.batch_execute(first_table).await.unwrap();
    assert_eq!(tables(&mut conn, &db.name).await, ["flowstate_runs"]);

    assert_eq!(
        migrate::up(&db.url).await.unwrap(),
        migration_versions(Dialect::Mysql)
    );
    let mut reference_conn = support::connection(&reference).await;
    assert_eq!(
        catalog(&mut conn, &db.name).await,
        catalog(&mut reference_conn, &reference.name).await
    );
    reference.drop_database().await;
    db.drop_database().await;
}

#[tokio::test]
async fn every_index_of_the_schema_is_there() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let mut conn = support::connection(&db).await;
    let indexes: Vec<String> = diesel::sql_query(
        "SELECT CONCAT(TABLE_NAME, '(', GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX SEPARATOR ', '), ')', \
         IF(NON_UNIQUE = 0, ' unique', '')) AS v FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? \
         GROUP BY TABLE_NAME, INDEX_NAME, NON_UNIQUE ORDER BY v",
    )
    .bind::<Text, _>(&db.name)
    .load::<TextRow>(&mut conn)
    .await
    .unwrap()
    .into_iter()
    .map(|r| r.v)
    .collect();
    let expected = [
        "flowstate_effects(run_id, effect_key) unique",
        "flowstate_effects(settled_at, began_at)",
        "flowstate_run_signals(run_id, name) unique",
        "flowstate_run_state(run_id, state_key) unique",
        "flowstate_runs(id) unique",
        "flowstate_runs(created_at, id)",
        "flowstate_runs(idempotency_key) unique",
        "flowstate_runs(parent_id, created_at, id)",
        "flowstate_runs(parent_id, status)",
        "flowstate_runs(status, created_at, id)",
        "flowstate_runs(workflow, created_at, id)",
        "flowstate_runs(workflow, status, created_at, id)",
        "flowstate_runs(status, updated_at, id)",
        "flowstate_runs(lease_expires_at, id)",
        "flowstate_runs(leasable, cancel_requested, lease_expires_at, sleep_until, created_at, id)",
        // Migration 000022: the waits whose time has come, for the sweep.
        "flowstate_runs(wake_at)",
        "flowstate_step_history(id) unique",
        "flowstate_step_history(step_id, attempt) unique",
        "flowstate_steps(id) unique",
        "flowstate_steps(run_id, name) unique",
        "flowstate_steps(claimable, created_at, id)",
        "flowstate_steps(claimable, function_name, created_at, id)",
        "flowstate_workflow_versions(id) unique",
        "flowstate_workflow_versions(workflow, graph_hash) unique",
        "flowstate_virtual_user_schedules(enabled, next_run_at, persona)",
        "flowstate_virtual_user_runs(persona, created_at, id)",
        "flowstate_virtual_user_runs(status, created_at, id)",
        "flowstate_virtual_user_runs(created_at, id)",
        "flowstate_virtual_user_transcript(run_id, seq) unique",
        "flowstate_workflows(app_id, scope_id, name) unique",
        "flowstate_published_versions(workflow_id, hash) unique",
        "flowstate_activations(event_type, workflow_id)",
        "flowstate_activations(workflow_id, created_at, id)",
        "flowstate_events(app_id, scope_id, event_type, dedupe_key) unique",
        // Migration 000013: in the order dispatchers take pending events.
        "flowstate_events(dispatched_at, dead_lettered_at, dispatch_after, occurred_at, id)",
        "flowstate_events(occurred_at, id)",
        "flowstate_event_deliveries(event_id, activation_id) unique",
        "flowstate_event_deliveries(run_id) unique",
    ];
    for index in expected {
        assert!(
            indexes.iter().any(|i| i == index),
            "no index {index}; found {indexes:#?}"
        );
    }
    // Dropped by migration 000010: every claim and completion rewrote it.
    assert!(
        !indexes
            .iter()
            .any(|i| i == "flowstate_steps(run_id, status)"),
        "{indexes:#?}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn the_database_default_charset_does_not_matter() {
    let db = TestDb::empty(Dialect::Mysql).await;
    let mut conn = support::connection(&db).await;
    conn.batch_execute(&format!(
        "ALTER DATABASE {} CHARACTER SET latin1 COLLATE latin1_swedish_ci",
        db.name
    ))
    .await
    .unwrap();
    migrate::up(&db.url).await.unwrap();
    let store = db.store(StoreConfig::default()).await;
    let input = json!({"emoji": "🦀 ключ 鍵", "zwj": "👩‍💻"});
    let run = store
        .create_run(NewRun::new("wörkflow 🦀", input.clone()))
        .await
        .unwrap()
        .record;
    assert_eq!(store.get_run(run.id).await.unwrap().input, input);
    assert_eq!(store.get_run(run.id).await.unwrap().workflow, "wörkflow 🦀");
    records::step(&store, run.id, "шаг 🦀", input.clone()).await;
    assert_eq!(
        store.find_step(run.id, "шаг 🦀").await.unwrap().input,
        input
    );
    store.write_state(run.id, "ключ 🔑", &input).await.unwrap();
    assert_eq!(store.read_state(run.id).await.unwrap()["ключ 🔑"], input);
    let latin1_columns = count(
        &mut conn,
        &format!(
            "SELECT COUNT(*) AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{}' \
             AND TABLE_NAME LIKE 'flowstate\\_%' AND CHARACTER_SET_NAME = 'latin1'",
            db.name
        ),
    )
    .await;
    assert_eq!(latin1_columns, 0, "a column took the database's charset");
    db.drop_database().await;
}

#[tokio::test]
async fn diesel_store_opens_mysql_and_mariadb_urls() {
    let db = TestDb::empty(Dialect::Mysql).await;
    let store = DieselStore::open_migrated(&db.url, StoreConfig::default())
        .await
        .unwrap();
    assert_eq!(store.dialect(), Dialect::Mysql);
    let run = records::run(&store, json!({"via": "DieselStore"})).await;
    let mariadb_url = db.url.replacen("mysql://", "mariadb://", 1);
    let again = DieselStore::open_migrated(&mariadb_url, StoreConfig::default())
        .await
        .unwrap();
    assert_eq!(again.get_run(run.id).await.unwrap(), run);
    again
        .batch_execute("DELETE FROM flowstate_runs")
        .await
        .unwrap();
    assert!(matches!(
        store.get_run(run.id).await,
        Err(flowstate_core::Error::RunNotFound(_))
    ));
    db.drop_database().await;
}

#[tokio::test]
async fn four_migrators_started_together_all_succeed_and_apply_the_schema_once() {
    let took =
        crate::common::migrators::migrators_started_together_apply_the_schema_once(Dialect::Mysql)
            .await;
    println!(
        "{} concurrent migrate::up on mysql: {took:?}",
        crate::common::migrators::MIGRATORS
    );
}

#[tokio::test]
async fn a_migrator_older_than_the_schema_refuses_naming_both_versions() {
    crate::common::migrators::a_migrator_older_than_the_schema_refuses(Dialect::Mysql).await;
}

/// The history rows of every step, one line each: name, attempt, status,
/// when it ran (at 1000: claimed by `OLD_CLAIM`), whether it settled, and
/// its payload.
async fn history_lines(conn: &mut AsyncMysqlConnection) -> Vec<String> {
    diesel::sql_query(
        "SELECT CONCAT_WS(' ', s.name, h.attempt, h.status, \
         IF(h.running_at IS NULL, '-', IF(h.running_at = 1000, 'ran@1000', 'ran')), \
         IF(h.succeeded_at IS NULL, '-', 'succeeded'), IF(h.failed_at IS NULL, '-', 'failed'), \
         IFNULL(h.result, '-'), IFNULL(h.error, '-')) AS v \
         FROM flowstate_step_history AS h JOIN flowstate_steps AS s ON s.id = h.step_id \
         ORDER BY s.name, h.attempt",
    )
    .load::<TextRow>(conn)
    .await
    .unwrap()
    .into_iter()
    .map(|r| r.v)
    .collect()
}

/// A claim as flowstate sent it before migration 000019 (the claim
/// trigger of 000008 writes the history row from `claim_history_id`), at
/// time 1000, of the step named `{name}`.
const OLD_CLAIM: &str = "UPDATE flowstate_steps SET claim_history_id = UUID(), \
     status = 'running', updated_at = 1000, claimed_until = 9000000000000000 \
     WHERE name = '{name}' AND status = 'pending'";

#[tokio::test]
async fn steps_in_flight_across_the_move_trigger_migration_keep_one_history_row_an_attempt() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    // Back to just before 000019 (and every later migration).
    let versions = migration_versions(Dialect::Mysql);
    let at = versions.iter().position(|v| v.ends_with("000019")).unwrap();
    let back = versions.len() - at;
    assert_eq!(migrate::down(&db.url, back).await.unwrap().len(), back);
    let mut conn = support::connection(&db).await;

    // Before the upgrade: a run and four steps (the store's insert does not
    // touch the column), two of them claimed by the older flowstate.
    let before = db
        .store(StoreConfig::default().without_schema_check())
        .await;
    let run = before
        .create_run(NewRun::new("wf", json!({})))
        .await
        .unwrap()
        .record;
    let retrying = flowstate_core::RetryPolicy::with_retries(1);
    let mut ids = Vec::new();
    for name in ["a", "b", "c", "d"] {
        let step = flowstate_core::NewStep::new(run.id, name, "f", json!({})).with_retry(retrying);
        ids.push(before.insert_step(step).await.unwrap().record.id);
    }
    drop(before);
    for name in ["a", "c"] {
        conn.batch_execute(&OLD_CLAIM.replace("{name}", name))
            .await
            .unwrap();
    }

    // After it: a claimed before succeeds, b claims and succeeds, c
    // claimed before fails and is claimed again.
    migrate::up(&db.url).await.unwrap();
    let store = db.store(StoreConfig::default()).await;
    store
        .transition_step(ids[0], StepTransition::Succeeded(json!({"ok": 1})))
        .await
        .unwrap();
    let b = store.claim_step(run.id, "b", "f").await.unwrap().unwrap();
    store
        .transition_claimed(b.claim(), StepTransition::Succeeded(json!(2)))
        .await
        .unwrap();
    store
        .transition_step(ids[2], StepTransition::Failed(json!("boom")))
        .await
        .unwrap();
    let again = store.claim_step(run.id, "c", "f").await.unwrap().unwrap();
    assert_eq!(again.attempt, 2);
    drop(store);
    let after = [
        "a 1 succeeded ran@1000 succeeded - {\"ok\":1} -",
        "b 1 succeeded ran succeeded - 2 -",
        "c 1 failed ran@1000 - failed - \"boom\"",
        "c 2 running ran - - - -",
        "d 1 pending - - - - -",
    ];
    assert_eq!(history_lines(&mut conn).await, after);

    // And back: down's claim trigger writes the older flowstate's claims.
    migrate::down(&db.url, back).await.unwrap();
    conn.batch_execute(&OLD_CLAIM.replace("{name}", "d"))
        .await
        .unwrap();
    let mut reverted = after.map(str::to_owned).to_vec();
    reverted[4] = "d 1 running ran@1000 - - - -".to_owned();
    assert_eq!(history_lines(&mut conn).await, reverted);
    db.drop_database().await;
}
