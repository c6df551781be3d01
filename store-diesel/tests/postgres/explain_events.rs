//! Query plans of the event statements on 100k events and deliveries: the
//! pending scan, the dedupe holder's read and the cause of a run reach
//! their tables through their indexes, never a `Seq Scan` (the SQL is the
//! store's own, taken from its `StatementLog`, as in `explain.rs`); and
//! `dispatch_next`'s pick, on 100k pending events, walks the pending index
//! in the taking order and sorts nothing, as `dispatch_next_batch`'s (the
//! same statement) does for 64.

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use flowstate_core::ports::{EventQueueStore, EventStore};
use flowstate_core::{Dispatch, NewEvent, RunId};

use crate::common::records::pick_of_dispatch_next;
use crate::explain::{assert_indexed, lit, plan};
use crate::support;

/// 100k events, all dispatched but the last ten, each with one delivery
/// and its run (ids in uuid form: the duplicate's answer parses them).
const LOAD: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at)
SELECT '00000000-0000-7000-9000-' || lpad(g::text, 12, '0'), 'wf', 'running', '{}'::jsonb, g, g
FROM generate_series(1, 100000) AS g;
INSERT INTO flowstate_events (id, app_id, scope_id, event_type, data, context, authorization_snapshot,
    dedupe_key, occurred_at, matched, dispatched_at, attempts, dispatch_after)
SELECT '00000000-0000-7000-8000-' || lpad(g::text, 12, '0'), 'app', 'scope' || (g % 10), 'app.tick', '{}'::jsonb, '{}'::jsonb,
       '{}'::jsonb, 'key-' || g, g, 1, CASE WHEN g > 99990 THEN NULL ELSE g END, 1, g
FROM generate_series(1, 100000) AS g;
INSERT INTO flowstate_event_deliveries (event_id, activation_id, workflow_id, workflow_name, version_id,
    version_hash, authorization_snapshot, run_id)
SELECT '00000000-0000-7000-8000-' || lpad(g::text, 12, '0'), 'act', 'wf', 'wf', 'v', 'h', '{}'::jsonb, '00000000-0000-7000-9000-' || lpad(g::text, 12, '0')
FROM generate_series(1, 100000) AS g;
ANALYZE;
";

#[tokio::test]
async fn event_reads_use_their_indexes_on_100k_events() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(LOAD).await.unwrap();

    let pending = log.capture(store.pending_events(10)).await.1;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let args = ["0".into(), "1000000".into(), "10".into()];
    let p = plan(&mut conn, &pending[0], &args).await;
    assert_indexed("pending_events", &p, &["flowstate_events_pending_idx"]);

    let cause = log.capture(store.run_cause(RunId::generate())).await.1;
    assert_eq!(cause.len(), 1, "{cause:?}");
    let p = plan(
        &mut conn,
        &cause[0],
        &[lit("00000000-0000-7000-9000-000000012345"), "1".into()],
    )
    .await;
    assert_indexed("run_cause", &p, &["flowstate_event_deliveries_run_key"]);

    // A duplicate: its third statement reads the holder of the key.
    let event =
        NewEvent::new("app", "scope5", "app.tick", serde_json::json!({})).with_dedupe_key("key-5");
    let (out, sent) = log.capture(store.emit(event, Dispatch::Now)).await;
    assert!(out.unwrap().duplicate);
    let holder = sent
        .iter()
        .find(|s| s.starts_with("SELECT") && s.contains("dedupe_key"))
        .expect("the holder's read");
    let args = [lit("app"), lit("scope5"), lit("app.tick"), lit("key-5")];
    let p = plan(&mut conn, holder, &args).await;
    assert_indexed("emit duplicate", &p, &["flowstate_events_dedupe_key"]);
}

/// 100k pending events (matched, no deliveries), due in the order of their
/// number.
const LOAD_PENDING: &str = "
INSERT INTO flowstate_events (id, app_id, scope_id, event_type, data, context, authorization_snapshot,
    occurred_at, matched, attempts, dispatch_after)
SELECT '00000000-0000-7000-8000-' || lpad(g::text, 12, '0'), 'app', 's', 'app.tick', '{}'::jsonb, '{}'::jsonb,
       '{}'::jsonb, g, 1, 0, g % 1000
FROM generate_series(1, 100000) AS g;
ANALYZE;
";

#[tokio::test]
async fn dispatch_next_takes_from_the_pending_index_without_sorting() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(LOAD_PENDING).await.unwrap();

    let pick = &pick_of_dispatch_next(&store, &log).await;
    let p = plan(&mut conn, pick, &["0".into(), "1000000".into(), "1".into()]).await;
    assert_indexed("dispatch_next", &p, &["flowstate_events_pending_idx"]);
    assert!(
        !p.contains("Sort"),
        "dispatch_next sorts the pending events:\n{p}"
    );

    // A batch's pick is the same statement with a larger bound limit, and
    // walks the same index for its 64.
    let (answers, sent) = log.capture(store.dispatch_next_batch(64)).await;
    assert_eq!(answers.unwrap().len(), 64);
    let batch_pick = sent
        .iter()
        .find(|s| s.contains("FOR UPDATE SKIP LOCKED"))
        .expect("the batch's pick");
    assert_eq!(batch_pick, pick, "one statement for one event and a batch");
    let p = plan(
        &mut conn,
        batch_pick,
        &["0".into(), "1000000".into(), "64".into()],
    )
    .await;
    assert_indexed("dispatch_next_batch", &p, &["flowstate_events_pending_idx"]);
    assert!(
        !p.contains("Sort"),
        "dispatch_next_batch sorts the pending events:\n{p}"
    );
}
