//! Query plans of the pending-event picks on SQLite: `pending_events`,
//! `dispatch_next`'s pick and `dispatch_next_batch`'s walk the pending
//! index in the taking order, with no sort of the pending events.

use diesel::sql_types::Text;
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};
use flowstate_core::ports::{EventQueueStore, EventStore};
use flowstate_core::{Dispatch, NewEvent, NextDispatch};
use serde_json::json;

use crate::common::records::listening;
use crate::support::logged_store;

#[derive(QueryableByName)]
struct PlanRow {
    #[diesel(sql_type = Text)]
    detail: String,
}

#[tokio::test]
async fn the_pending_picks_walk_their_index_in_order() {
    let (db, store, log) = logged_store().await;
    listening(&store, "wf").await;
    for n in 0..3 {
        let event = NewEvent::new("app", "s", "app.tick", json!({ "n": n }));
        store.emit(event, Dispatch::Deferred).await.unwrap();
    }
    log.clear();
    store.pending_events(10).await.unwrap();
    let next = store.dispatch_next().await.unwrap();
    assert!(matches!(next, NextDispatch::Dispatched { .. }), "{next:?}");
    let batch = store.dispatch_next_batch(10).await.unwrap();
    assert_eq!(batch.len(), 2, "{batch:?}");

    let picks: Vec<String> = log
        .statements()
        .into_iter()
        .filter(|sql| sql.starts_with("SELECT") && sql.contains("ORDER BY `flowstate_events`"))
        .collect();
    assert_eq!(
        picks.len(),
        3,
        "the listing, the pick and the batch's: {picks:#?}"
    );
    let mut conn = SqliteConnection::establish(&db.target()).unwrap();
    for sql in picks {
        let plan: Vec<String> = sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
            .load::<PlanRow>(&mut conn)
            .unwrap()
            .into_iter()
            .map(|row| row.detail)
            .collect();
        assert!(
            plan.iter()
                .any(|step| step.contains("USING INDEX flowstate_events_pending")),
            "{sql}\n{plan:#?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "sorts the pending events: {sql}\n{plan:#?}"
        );
    }
}
