//! A dispatch whose runs the database refuses rolls back its runs, never
//! the event: the event stays pending, its failure is recorded on it, and
//! the next dispatch once the database accepts the runs starts them once.
//! The refusal is real (a trigger on SQLite, a CHECK on the servers), so
//! this is the dispatch transaction failing, not a stand-in. Written once,
//! run on every dialect, through `dispatch_event` and `dispatch_next`.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::backoff::EventDispatchOutcome;
use flowstate_core::ports::{EventQueueStore, EventStore, RunStore};
use flowstate_core::{Dispatch, EventId, NewEvent, NextDispatch, PendingEvent, RunQuery};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};
use flowstate_testkit::ManualClock;
use serde_json::json;

use super::db::TestDb;
use super::records::listening;

/// Refuses every run of workflow `doomed`, and the statement undoing it.
fn sabotage(dialect: Dialect) -> (&'static str, &'static str) {
    match dialect {
        Dialect::Sqlite => (
            "CREATE TRIGGER flowstate_test_refuse BEFORE INSERT ON flowstate_runs \
             WHEN NEW.workflow = 'doomed' BEGIN SELECT RAISE(ABORT, 'refused'); END",
            "DROP TRIGGER flowstate_test_refuse",
        ),
        _ => (
            "ALTER TABLE flowstate_runs ADD CONSTRAINT flowstate_test_refuse \
             CHECK (workflow <> 'doomed')",
            "ALTER TABLE flowstate_runs DROP CONSTRAINT flowstate_test_refuse",
        ),
    }
}

/// A store on a fresh `dialect` database with one deferred event for
/// workflow `doomed`, whose runs the database now refuses; the statement
/// that lets them in again.
async fn doomed_event(
    dialect: Dialect,
) -> (TestDb, Arc<ManualClock>, DieselStore, EventId, &'static str) {
    let db = TestDb::migrated(dialect).await;
    let clock = Arc::new(ManualClock::new());
    let store = db.store(StoreConfig::default().clock(clock.clone())).await;
    listening(&store, "doomed").await;
    let event = NewEvent::new("app", "s", "app.tick", json!({}));
    let emitted = store.emit(event, Dispatch::Deferred).await.unwrap();
    let (refuse, allow) = sabotage(dialect);
    db.execute(refuse).await;
    (db, clock, store, emitted.event, allow)
}

/// See the module doc.
pub async fn a_failed_dispatch_keeps_the_event(dialect: Dialect) {
    let (db, clock, store, event, allow) = doomed_event(dialect).await;
    let failed = store.dispatch_event(event).await;
    assert!(failed.is_err(), "the database refused the run: {failed:?}");
    let kept = store.get_event(event).await.unwrap();
    assert_eq!(
        (kept.matched, kept.attempts, kept.dispatched_at),
        (1, 0, None)
    );
    let runs = store.list_runs(&RunQuery::default()).await.unwrap();
    assert!(runs.items.is_empty(), "the runs rolled back");
    let outcome = EventDispatchOutcome::RetryAfter(Duration::from_secs(1));
    assert!(
        store
            .record_dispatch_failure(event, 0, "refused", outcome)
            .await
            .unwrap()
    );
    assert!(
        store.pending_events(10).await.unwrap().is_empty(),
        "backing off"
    );

    db.execute(allow).await;
    clock.advance(Duration::from_secs(1));
    let runs = store.dispatch_event(event).await.unwrap().unwrap();
    assert_eq!(runs.len(), 1);
    let done = store.get_event(event).await.unwrap();
    assert_eq!((done.attempts, done.last_error), (2, None));
    assert_eq!(
        store
            .list_runs(&RunQuery::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    drop(store);
    db.drop_database().await;
}

/// The same through [`EventQueueStore::dispatch_next`]: the refused
/// dispatch answers the event it took with the attempts it had, its runs
/// rolled back and the event still pending; once the runs are let in, the
/// next take dispatches it.
pub async fn a_failed_queued_dispatch_names_the_event(dialect: Dialect) {
    let (db, _clock, store, event, allow) = doomed_event(dialect).await;
    match store.dispatch_next().await.unwrap() {
        NextDispatch::Failed {
            event: taken,
            error,
        } => {
            assert_eq!(
                taken,
                PendingEvent {
                    id: event,
                    attempts: 0
                }
            );
            assert!(!error.to_string().is_empty());
        }
        other => panic!("the database refused the run, yet: {other:?}"),
    }
    let kept = store.get_event(event).await.unwrap();
    assert_eq!((kept.attempts, kept.dispatched_at), (0, None));
    let runs = store.list_runs(&RunQuery::default()).await.unwrap();
    assert!(runs.items.is_empty(), "the runs rolled back");

    db.execute(allow).await;
    match store.dispatch_next().await.unwrap() {
        NextDispatch::Dispatched { event: taken, runs } => {
            assert_eq!((taken, runs.len()), (event, 1));
        }
        other => panic!("the runs are allowed again, yet: {other:?}"),
    }
    drop(store);
    db.drop_database().await;
}
