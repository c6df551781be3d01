//! The embedded migrations on PostgreSQL: applied once, idempotent,
//! reversible to the same schema, and reported by `migrate::status`.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use flowstate_store_diesel::migrate;

use flowstate_store_diesel::Dialect;

use crate::common::db::migration_versions;
use crate::support;

#[derive(QueryableByName)]
struct Dump {
    #[diesel(sql_type = Text)]
    dump: String,
}

/// Every flowstate table's columns, indexes and constraints, as text.
async fn catalog(url: &str) -> String {
    let mut conn = AsyncPgConnection::establish(url).await.unwrap();
    let parts = [
        "SELECT coalesce(string_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable \
             || ' ' || coalesce(column_default, '-') || ' ' || coalesce(collation_name, '-'), E'\\n' \
             ORDER BY table_name, ordinal_position), '') AS dump \
         FROM information_schema.columns WHERE table_schema = 'public' AND table_name LIKE 'flowstate%'",
        "SELECT coalesce(string_agg(indexdef, E'\\n' ORDER BY indexname), '') AS dump \
         FROM pg_indexes WHERE schemaname = 'public' AND tablename LIKE 'flowstate%'",
        "SELECT coalesce(string_agg(c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid), \
             E'\\n' ORDER BY c.conname), '') AS dump \
         FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace \
         WHERE n.nspname = 'public' AND c.conrelid::regclass::text LIKE 'flowstate%'",
    ];
    let mut out = String::new();
    for sql in parts {
        let dump: Dump = diesel::sql_query(sql).get_result(&mut conn).await.unwrap();
        out.push_str(&dump.dump);
        out.push_str("\n--\n");
    }
    out
}

#[tokio::test]
async fn up_applies_once_and_down_then_up_restores_the_same_schema() {
    let url = support::fresh_database().await;
    let versions = migration_versions(Dialect::Postgres);
    let status = migrate::status(&url).await.unwrap();
    assert_eq!(status.len(), versions.len(), "{status:?}");
    assert!(
        status.iter().all(|m| !m.applied),
        "nothing is applied on a fresh database"
    );
    assert!(status[0].name.contains("create_flowstate"), "{status:?}");
    for name in [
        "run_leases",
        "events",
        "virtual_users",
        "batch_claim",
        "recovery",
    ] {
        assert!(
            status.iter().any(|m| m.name.contains(name)),
            "no {name} migration: {status:?}"
        );
    }

    let applied = migrate::up(&url).await.unwrap();
    assert_eq!(applied, versions);
    assert_eq!(
        migrate::up(&url).await.unwrap(),
        Vec::<String>::new(),
        "a second up must be a no-op"
    );
    let status = migrate::status(&url).await.unwrap();
    assert!(status.iter().all(|m| m.applied), "{status:?}");

    let before = catalog(&url).await;
    for column in [
        "flowstate_runs.id text NO - C",
        "flowstate_run_state.value jsonb NO",
        "flowstate_steps.current_attempt bigint NO 1 ",
        "flowstate_step_history.attempt bigint NO",
        "flowstate_workflow_versions.graph jsonb NO",
        "flowstate_virtual_user_schedules.enabled boolean NO",
        "flowstate_virtual_user_runs.transcript_len bigint NO 0 ",
        "flowstate_virtual_user_transcript.entry jsonb NO",
        "flowstate_workflows.enabled boolean NO",
        "flowstate_events.data jsonb NO",
        "flowstate_event_deliveries.run_id text NO - C",
        "flowstate_runs.lease_token bigint NO 0 ",
        "flowstate_runs.cancel_requested boolean NO false ",
    ] {
        assert!(before.contains(column), "{column} missing:\n{before}");
    }
    for index in [
        "flowstate_runs_status_created_idx",
        "flowstate_runs_workflow_status_created_idx",
        "flowstate_runs_parent_status_idx",
        "flowstate_runs_workflow_created_idx",
        "flowstate_runs_parent_created_idx",
        "flowstate_step_history_step_attempt_key",
        "flowstate_steps_run_name_key",
        "flowstate_workflow_versions_workflow_hash_key",
        "flowstate_runs_idempotency_key_key",
        "flowstate_steps_claimable_idx",
        "flowstate_steps_claimable_function_idx",
        "flowstate_virtual_user_schedules_due_idx",
        "flowstate_virtual_user_runs_persona_created_idx",
        "flowstate_virtual_user_runs_status_created_idx",
        "flowstate_virtual_user_runs_created_idx",
        "flowstate_virtual_user_transcript_pkey",
        "flowstate_workflows_app_scope_name_key",
        "flowstate_published_versions_workflow_hash_key",
        "flowstate_activations_type_workflow_idx",
        "flowstate_activations_workflow_created_idx",
        "flowstate_events_dedupe_key",
        "flowstate_events_pending_idx",
        "flowstate_events_occurred_idx",
        "flowstate_event_deliveries_run_key",
        "flowstate_runs_free_idx",
        "flowstate_runs_sleeping_idx",
        "flowstate_runs_wake_idx",
        "flowstate_runs_cancel_requested_idx",
        "flowstate_run_signals_pkey",
        "flowstate_effects_pkey",
        "flowstate_effects_stranded_idx",
        "flowstate_runs_running_updated_idx",
        "flowstate_runs_lease_expiry_idx",
    ] {
        assert!(before.contains(index), "index {index} missing:\n{before}");
    }
    // Migration 000013: the pending events in the order dispatchers take them.
    assert!(
        before.contains(
            "flowstate_events_pending_idx ON public.flowstate_events USING btree \
             (dispatch_after, occurred_at, id) \
             WHERE ((dispatched_at IS NULL) AND (dead_lettered_at IS NULL))"
        ),
        "the pending index is not in the taking order:\n{before}"
    );
    // Dropped by migrations 000010 and 000011: every attempt wrote them.
    for dropped in [
        "flowstate_steps_run_status_idx",
        "flowstate_step_history_step_created_idx",
    ] {
        assert!(
            !before.contains(dropped),
            "index {dropped} still there:\n{before}"
        );
    }

    // Migration 000012: no key from history to steps; a trigger cascades.
    assert!(
        !before.contains("flowstate_step_history_step_id_fkey"),
        "history still has its foreign key:\n{before}"
    );
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    let trigger: Dump = diesel::sql_query(
        "SELECT coalesce(string_agg(tgname, ','), '') AS dump FROM pg_trigger \
         WHERE tgrelid = 'flowstate_steps'::regclass AND NOT tgisinternal",
    )
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(trigger.dump, "flowstate_steps_delete_history");
    drop(conn);

    let reverted = migrate::down(&url, usize::MAX).await.unwrap();
    let newest_first: Vec<String> = versions.iter().rev().cloned().collect();
    assert_eq!(reverted, newest_first);
    assert_eq!(
        catalog(&url).await,
        "\n--\n\n--\n\n--\n",
        "down left flowstate objects behind"
    );
    assert!(!migrate::status(&url).await.unwrap()[0].applied);
    assert_eq!(
        migrate::down(&url, 1).await.unwrap(),
        Vec::<String>::new(),
        "nothing left to revert"
    );

    assert_eq!(migrate::up(&url).await.unwrap(), versions);
    assert_eq!(
        catalog(&url).await,
        before,
        "down then up changed the schema"
    );
    support::drop_database(&url).await;
}

#[tokio::test]
async fn four_migrators_started_together_all_succeed_and_apply_the_schema_once() {
    let took = crate::common::migrators::migrators_started_together_apply_the_schema_once(
        Dialect::Postgres,
    )
    .await;
    println!(
        "{} concurrent migrate::up on postgres: {took:?}",
        crate::common::migrators::MIGRATORS
    );
}

#[tokio::test]
async fn a_migrator_older_than_the_schema_refuses_naming_both_versions() {
    crate::common::migrators::a_migrator_older_than_the_schema_refuses(Dialect::Postgres).await;
}
