//! The embedded SQLite migrations: applied once, idempotent, reversible to
//! the same schema, and listed correctly.

use diesel::sql_types::{BigInt, Text};
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};
use flowstate_store_diesel::migrate;

use flowstate_store_diesel::Dialect;

use crate::common::db::migration_versions;
use crate::support::{TABLES, TestDb};

/// One schema object as `sqlite_schema` stores it.
#[derive(Debug, PartialEq, Eq, QueryableByName)]
struct SchemaRow {
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    sql: String,
}

/// One column of one table.
#[derive(Debug, PartialEq, Eq, QueryableByName)]
struct ColumnRow {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    column: String,
    #[diesel(sql_type = Text)]
    declared: String,
    #[diesel(sql_type = BigInt)]
    notnull: i64,
    #[diesel(sql_type = BigInt)]
    pk: i64,
}

/// Every flowstate table, index and column, for comparing schemas.
#[derive(Debug, PartialEq, Eq)]
struct Catalog {
    objects: Vec<SchemaRow>,
    columns: Vec<ColumnRow>,
}

fn catalog(db: &TestDb) -> Catalog {
    let mut conn = SqliteConnection::establish(&db.target()).unwrap();
    let objects = sql_query(
        "SELECT type AS kind, name, coalesce(sql, '') AS sql FROM sqlite_schema \
         WHERE name LIKE 'flowstate%' OR tbl_name LIKE 'flowstate%' ORDER BY type, name",
    )
    .load(&mut conn)
    .unwrap();
    let columns = sql_query(
        "SELECT t.name AS table_name, c.name AS \"column\", c.type AS declared, c.\"notnull\" AS \"notnull\", c.pk AS pk \
         FROM sqlite_schema t, pragma_table_info(t.name) c \
         WHERE t.type = 'table' AND t.name LIKE 'flowstate%' ORDER BY t.name, c.cid",
    )
    .load(&mut conn)
    .unwrap();
    Catalog { objects, columns }
}

#[tokio::test]
async fn a_fresh_database_gets_every_migration_and_a_second_up_is_a_no_op() {
    let db = TestDb::empty();
    let applied = migrate::up(&db.url()).await.unwrap();
    assert_eq!(applied, migration_versions(Dialect::Sqlite));
    assert_eq!(migrate::up(&db.url()).await.unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn the_schema_has_every_table_and_index_of_schema_md() {
    let db = TestDb::migrated().await;
    let catalog = catalog(&db);
    let names: Vec<(&str, &str)> = catalog
        .objects
        .iter()
        .map(|o| (o.kind.as_str(), o.name.as_str()))
        .collect();
    for table in TABLES {
        assert!(
            names.contains(&("table", table)),
            "no table {table}: {names:?}"
        );
        let sql = &catalog
            .objects
            .iter()
            .find(|o| o.name == table)
            .unwrap()
            .sql;
        assert!(sql.ends_with("STRICT"), "{table} is not STRICT: {sql}");
    }
    for (index, columns) in [
        ("flowstate_runs_idempotency_key", "(idempotency_key)"),
        ("flowstate_runs_status_created", "(status, created_at, id)"),
        (
            "flowstate_runs_workflow_status_created",
            "(workflow, status, created_at, id)",
        ),
        ("flowstate_runs_parent_status", "(parent_id, status)"),
        (
            "flowstate_runs_workflow_created",
            "(workflow, created_at, id)",
        ),
        (
            "flowstate_runs_parent_created",
            "(parent_id, created_at, id)",
        ),
        ("flowstate_runs_created", "(created_at, id)"),
        (
            "flowstate_runs_free_idx",
            "(created_at, id)\n    WHERE status IN ('running', 'suspended') AND cancel_requested = 0\n      AND lease_expires_at IS NULL AND (wake_at IS NULL OR waiting_on IS NOT NULL)",
        ),
        (
            "flowstate_runs_sleeping_idx",
            "(wake_at, id)\n    WHERE status IN ('running', 'suspended') AND cancel_requested = 0\n      AND lease_expires_at IS NULL AND wake_at IS NOT NULL AND waiting_on IS NULL",
        ),
        (
            "flowstate_runs_wake_idx",
            "(wake_at)\n    WHERE wake_at IS NOT NULL",
        ),
        (
            "flowstate_runs_cancel_requested_idx",
            "(created_at, id)\n    WHERE status IN ('running', 'suspended') AND cancel_requested = 1",
        ),
        (
            "flowstate_runs_running_updated_idx",
            "(status, updated_at, id)\n    WHERE status = 'running'",
        ),
        (
            "flowstate_runs_lease_expiry_idx",
            "(lease_expires_at, id)\n    WHERE lease_expires_at IS NOT NULL",
        ),
        ("flowstate_steps_run_name", "(run_id, name)"),
        (
            "flowstate_steps_claimable",
            "(created_at, id)\n    WHERE status IN ('pending', 'failed')",
        ),
        (
            "flowstate_steps_claimable_function",
            "(function_name, created_at, id)\n    WHERE status IN ('pending', 'failed')",
        ),
        ("flowstate_step_history_step_attempt", "(step_id, attempt)"),
        (
            "flowstate_workflow_versions_workflow_hash",
            "(workflow, graph_hash)",
        ),
        (
            "flowstate_virtual_user_schedules_due",
            "(enabled, next_run_at, persona)",
        ),
        (
            "flowstate_virtual_user_runs_persona_created",
            "(persona, created_at, id)",
        ),
        (
            "flowstate_virtual_user_runs_status_created",
            "(status, created_at, id)",
        ),
        ("flowstate_virtual_user_runs_created", "(created_at, id)"),
        (
            "flowstate_workflows_app_scope_name",
            "(app_id, scope_id, name)",
        ),
        (
            "flowstate_published_versions_workflow_hash",
            "(workflow_id, hash)",
        ),
        (
            "flowstate_activations_type_workflow",
            "(event_type, workflow_id)",
        ),
        (
            "flowstate_activations_workflow_created",
            "(workflow_id, created_at, id)",
        ),
        (
            "flowstate_events_dedupe",
            "(app_id, scope_id, event_type, dedupe_key)",
        ),
        (
            // Migration 000013: in the order dispatchers take events.
            "flowstate_events_pending",
            "(dispatch_after, occurred_at, id)\n    WHERE dispatched_at IS NULL AND dead_lettered_at IS NULL",
        ),
        ("flowstate_events_occurred", "(occurred_at, id)"),
        ("flowstate_event_deliveries_run", "(run_id)"),
    ] {
        let found = catalog
            .objects
            .iter()
            .find(|o| o.kind == "index" && o.name == index);
        let found = found.unwrap_or_else(|| panic!("no index {index}"));
        assert!(found.sql.ends_with(columns), "{index}: {}", found.sql);
    }
    // Dropped by migrations 000010 and 000011: every attempt wrote them.
    for dropped in [
        "flowstate_steps_run_status",
        "flowstate_step_history_step_created",
    ] {
        assert!(
            !names.contains(&("index", dropped)),
            "index {dropped} still there"
        );
    }
    for unique in [
        "flowstate_runs_idempotency_key",
        "flowstate_steps_run_name",
        "flowstate_step_history_step_attempt",
        "flowstate_workflow_versions_workflow_hash",
        "flowstate_workflows_app_scope_name",
        "flowstate_published_versions_workflow_hash",
        "flowstate_events_dedupe",
        "flowstate_event_deliveries_run",
    ] {
        let found = catalog.objects.iter().find(|o| o.name == unique).unwrap();
        assert!(
            found.sql.starts_with("CREATE UNIQUE INDEX"),
            "{unique} is not unique"
        );
    }
    let attempt = catalog
        .columns
        .iter()
        .find(|c| c.table_name == "flowstate_steps" && c.column == "current_attempt")
        .unwrap();
    assert_eq!((attempt.declared.as_str(), attempt.notnull), ("INTEGER", 1));
}

#[tokio::test]
async fn down_then_up_leaves_the_same_schema() {
    let db = TestDb::migrated().await;
    let before = catalog(&db);
    assert_eq!(
        before.objects.iter().filter(|o| o.kind == "table").count(),
        TABLES.len()
    );
    let versions = migration_versions(Dialect::Sqlite);
    let newest_first: Vec<String> = versions.iter().rev().cloned().collect();
    let reverted = migrate::down(&db.url(), usize::MAX).await.unwrap();
    assert_eq!(reverted, newest_first);
    let empty = catalog(&db);
    assert!(
        empty.objects.is_empty() && empty.columns.is_empty(),
        "down left {empty:?}"
    );
    assert_eq!(
        migrate::down(&db.url(), 1).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(migrate::up(&db.url()).await.unwrap(), versions);
    assert_eq!(catalog(&db), before);
}

#[tokio::test]
async fn status_lists_the_migration_applied_or_not() {
    let db = TestDb::empty();
    let listed = migrate::status(&db.url()).await.unwrap();
    assert_eq!(listed.len(), migration_versions(Dialect::Sqlite).len());
    assert_eq!(listed[0].version, "20261130000001");
    assert!(
        listed[0].name.contains("create_flowstate"),
        "{}",
        listed[0].name
    );
    assert!(
        listed.iter().any(|m| m.name.contains("events")),
        "{listed:?}"
    );
    assert!(listed.iter().all(|m| !m.applied));
    migrate::up(&db.url()).await.unwrap();
    assert!(migrate::status(&db.url()).await.unwrap()[0].applied);
    assert!(
        migrate::status(&db.url())
            .await
            .unwrap()
            .iter()
            .all(|m| m.applied)
    );
    migrate::down(&db.url(), 1).await.unwrap();
    let applied: Vec<bool> = migrate::status(&db.url())
        .await
        .unwrap()
        .iter()
        .map(|m| m.applied)
        .collect();
    let mut expected = vec![true; applied.len()];
    *expected.last_mut().unwrap() = false;
    assert_eq!(applied, expected, "down 1 reverts the newest");
    migrate::down(&db.url(), usize::MAX).await.unwrap();
    assert!(
        migrate::status(&db.url())
            .await
            .unwrap()
            .iter()
            .all(|m| !m.applied)
    );
}

#[tokio::test]
async fn four_migrators_started_together_all_succeed_and_apply_the_schema_once() {
    let took =
        crate::common::migrators::migrators_started_together_apply_the_schema_once(Dialect::Sqlite)
            .await;
    println!(
        "{} concurrent migrate::up on sqlite: {took:?}",
        crate::common::migrators::MIGRATORS
    );
}

#[tokio::test]
async fn a_migrator_older_than_the_schema_refuses_naming_both_versions() {
    crate::common::migrators::a_migrator_older_than_the_schema_refuses(Dialect::Sqlite).await;
}
