//! [`EventStore::event_runs`]: what an event did, read from the event (the
//! inverse of [`EventStore::run_cause`]): one run per materialised
//! delivery, in activation order, none before the dispatch or for an event
//! that matched nothing, none for a run since deleted; an unknown event is
//! typed.

use flowstate_core::ports::{EventStore, RunStore};
use flowstate_core::{Dispatch, Error, EventId, NewEvent};
use serde_json::json;

use crate::Harness;
use crate::cases::support::assert_err;
use crate::cases::support::events::{EventBackend, emit, listening, tick};

/// Two listening workflows: nothing before the dispatch, then both runs,
/// each with the cause `run_cause` reads from the run; a deleted run drops
/// out; an event that matched nothing started none.
pub async fn event_runs_lists_the_runs_its_deliveries_started<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "a").await;
    listening(h, "app", "s", "b").await;
    let emitted = emit(h, tick("app", "s", json!({"n": 1})), Dispatch::Deferred).await;
    assert_eq!(store.event_runs(emitted.event).await.unwrap(), vec![]);

    let runs = store
        .dispatch_event(emitted.event)
        .await
        .unwrap()
        .expect("dispatched");
    assert_eq!(runs.len(), 2);
    let causes = store.event_runs(emitted.event).await.unwrap();
    let mut expected = Vec::new();
    for run in &runs {
        expected.push(store.run_cause(*run).await.unwrap().expect("a cause"));
    }
    expected.sort_by_key(|c| c.activation);
    assert_eq!(causes, expected, "each run once, by activation id");
    assert!(causes.iter().all(|c| c.event == emitted.event));

    store.delete_run(causes[0].run).await.unwrap();
    assert_eq!(
        store.event_runs(emitted.event).await.unwrap(),
        vec![causes[1].clone()],
        "a deleted run is not listed"
    );

    let unmatched = emit(
        h,
        NewEvent::new("app", "s", "app.none", json!({})),
        Dispatch::Now,
    )
    .await;
    assert_eq!(store.event_runs(unmatched.event).await.unwrap(), vec![]);
}

/// An event never recorded is `EventNotFound`, not an empty list.
pub async fn event_runs_of_an_unknown_event_is_typed<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let e = EventId::generate();
    assert_err!(store.event_runs(e).await, Error::EventNotFound(id) if id == e);
}
