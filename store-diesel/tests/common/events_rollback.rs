//! A dispatch whose runs the database refuses rolls back its runs, never
//! the event: the event stays pending, its failure is recorded on it, and
//! the next dispatch once the database accepts the runs starts them once.
//! The refusal is real (a trigger on SQLite, a CHECK on the servers), so
//! this is the dispatch transaction failing, not a stand-in. Written once,
//! run on every dialect, through `dispatch_event`, `dispatch_next` and
//! `dispatch_next_batch` (where the bad event fails alone).

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

/// The same in a batch ([`EventQueueStore::dispatch_next_batch`]): of
/// three events, the second for workflow `doomed`, whose runs the database
/// refuses, the batch's transaction fails and the store takes each again
/// on its own: the first and third are dispatched with their runs, the
/// second answered failed with the attempts it had, its run rolled back
/// and the event still pending; once its failure is recorded and its runs
/// are let in, the next batch dispatches it.
pub async fn a_failed_event_of_a_batch_fails_alone(dialect: Dialect) {
    let db = TestDb::migrated(dialect).await;
    let clock = Arc::new(ManualClock::new());
    let store = db.store(StoreConfig::default().clock(clock.clone())).await;
    let (good, _) = listening(&store, "wf").await;
    let (doomed, _) = listening(&store, "doomed").await;
    let mut emitted = Vec::new();
    for target in [good, doomed, good] {
        let event = NewEvent::new("app", "s", "app.tick", json!({})).with_target(target);
        emitted.push(store.emit(event, Dispatch::Deferred).await.unwrap().event);
        clock.advance(Duration::from_millis(1));
    }
    let (refuse, allow) = sabotage(dialect);
    db.execute(refuse).await;

    let answers = store.dispatch_next_batch(10).await.unwrap();
    assert_eq!(answers.len(), 3, "{answers:?}");
    for (answer, event) in answers.iter().zip(&emitted) {
        match answer {
            NextDispatch::Dispatched { event: taken, runs } if *event != emitted[1] => {
                assert_eq!((taken, runs.len()), (event, 1));
            }
            NextDispatch::Failed {
                event: taken,
                error,
            } if *event == emitted[1] => {
                let kept = PendingEvent {
                    id: *event,
                    attempts: 0,
                };
                assert_eq!(*taken, kept);
                assert!(!error.to_string().is_empty());
            }
            other => panic!("event {event}: {other:?}"),
        }
    }
    let kept = store.get_event(emitted[1]).await.unwrap();
    assert_eq!((kept.attempts, kept.dispatched_at), (0, None));
    let runs = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(runs.len(), 2, "the doomed run rolled back: {runs:?}");
    assert!(runs.iter().all(|run| run.workflow == "wf"));
    for event in [emitted[0], emitted[2]] {
        let done = store.get_event(event).await.unwrap();
        assert_eq!((done.attempts, done.last_error), (1, None));
    }

    let outcome = EventDispatchOutcome::RetryAfter(Duration::from_secs(1));
    let recorded = store.record_dispatch_failure(emitted[1], 0, "refused", outcome);
    assert!(recorded.await.unwrap());
    assert!(
        store.dispatch_next_batch(10).await.unwrap().is_empty(),
        "backing off"
    );
    db.execute(allow).await;
    clock.advance(Duration::from_secs(1));
    let answers = store.dispatch_next_batch(10).await.unwrap();
    match answers.as_slice() {
        [NextDispatch::Dispatched { event, runs }] => {
            assert_eq!((*event, runs.len()), (emitted[1], 1));
        }
        other => panic!("the runs are allowed again, yet: {other:?}"),
    }
    let done = store.get_event(emitted[1]).await.unwrap();
    assert_eq!((done.attempts, done.last_error), (2, None));
    drop(store);
    db.drop_database().await;
}
