//! [`EventQueueStore`]: the next free pending event taken and dispatched in
//! one step, the oldest due first; what is not pending is never taken; any
//! number of dispatchers share the queue and each event is dispatched once;
//! `flowstate-events`' `dispatch_queued` and the queued [`Dispatcher`] over
//! it, failures recorded with core's backoff.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::backoff::{EventDispatchBackoff, EventDispatchOutcome};
use flowstate_core::ports::{EventQueueStore, EventStore, RunStore};
use flowstate_core::{Clock, Dispatch, EventId, NextDispatch, RunQuery};
use flowstate_events::{DispatchReport, Dispatcher, dispatch_queued};
use serde_json::json;

use crate::Harness;
use crate::cases::support::events::{
    EventQueueBackend, FailingDispatch, emit, listening, runs_until_shut_down, tick,
};
use crate::cases::support::race;

/// The event `next` dispatched, with its runs; panics on anything else.
fn dispatched(next: NextDispatch) -> (EventId, usize) {
    match next {
        NextDispatch::Dispatched { event, runs } => (event, runs.len()),
        other => panic!("expected a dispatched event, got {other:?}"),
    }
}

/// Three deferred events are taken in the order they fell due, each
/// dispatched with its run (attempts 1, dispatched now), then nothing is
/// left.
pub async fn dispatch_next_takes_the_longest_due_first<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let mut emitted = Vec::new();
    for n in 0..3 {
        emitted.push(emit(h, tick("app", "s", json!({"n": n})), Dispatch::Deferred).await);
        h.clock().advance(Duration::from_millis(1));
    }
    for e in &emitted {
        let (event, runs) = dispatched(store.dispatch_next().await.unwrap());
        assert_eq!((event, runs), (e.event, 1));
        let stored = store.get_event(event).await.unwrap();
        assert_eq!(
            (stored.attempts, stored.dispatched_at),
            (1, Some(h.clock().now()))
        );
    }
    assert!(matches!(
        store.dispatch_next().await.unwrap(),
        NextDispatch::Idle
    ));
    let runs = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(runs.len(), 3);
    for n in 0..3 {
        assert!(runs.iter().any(|r| r.input == json!({"n": n})));
    }
}

/// An event backing off is not taken until its delay has passed; one
/// dead-lettered and one that matched nothing are never taken.
pub async fn dispatch_next_leaves_what_is_not_pending<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let waiting = emit(h, tick("app", "s", json!({"w": 1})), Dispatch::Deferred).await;
    let dead = emit(h, tick("app", "s", json!({"d": 1})), Dispatch::Deferred).await;
    emit(
        h,
        flowstate_core::NewEvent::new("app", "s", "app.nobody", json!({})),
        Dispatch::Deferred,
    )
    .await;
    let delay = Duration::from_secs(5);
    let retry = EventDispatchOutcome::RetryAfter(delay);
    assert!(
        store
            .record_dispatch_failure(waiting.event, 0, "boom", retry)
            .await
            .unwrap()
    );
    let dead_letter = EventDispatchOutcome::DeadLetter;
    assert!(
        store
            .record_dispatch_failure(dead.event, 0, "boom", dead_letter)
            .await
            .unwrap()
    );
    assert!(matches!(
        store.dispatch_next().await.unwrap(),
        NextDispatch::Idle
    ));
    h.clock().advance(delay);
    let (event, runs) = dispatched(store.dispatch_next().await.unwrap());
    assert_eq!((event, runs), (waiting.event, 1));
    let stored = store.get_event(event).await.unwrap();
    assert_eq!((stored.attempts, stored.last_error), (2, None));
    h.clock().advance(Duration::from_secs(3_600));
    assert!(matches!(
        store.dispatch_next().await.unwrap(),
        NextDispatch::Idle
    ));
    let stored = store.get_event(dead.event).await.unwrap();
    assert_eq!(
        stored.dispatched_at, None,
        "dead-lettered stays undispatched"
    );
}

/// `dispatch_queued` records every failed take on the event with core's
/// backoff, is not handed the event again until it is due, and
/// dead-letters it at the 8th failure.
pub async fn dispatch_queued_backs_off_and_dead_letters<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let failing = FailingDispatch(Arc::clone(store));
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    let backoff = EventDispatchBackoff::default();
    for attempt in 1..=8u32 {
        let report = dispatch_queued(&failing, backoff, 10).await.unwrap();
        let dead = u32::from(attempt == 8);
        assert_eq!(
            report,
            DispatchReport {
                failed: 1,
                dead_lettered: dead,
                ..DispatchReport::default()
            },
            "attempt {attempt}: one take, then nothing due"
        );
        let stored = store.get_event(emitted.event).await.unwrap();
        assert_eq!(stored.attempts, attempt);
        assert!(
            stored
                .last_error
                .as_deref()
                .unwrap()
                .contains("materialisation refused")
        );
        match backoff.after_failure(attempt) {
            EventDispatchOutcome::RetryAfter(delay) => {
                assert_eq!(stored.dispatch_after, h.clock().now().plus(delay));
                h.clock().advance(delay);
            }
            EventDispatchOutcome::DeadLetter => {
                assert_eq!(stored.dead_lettered_at, Some(h.clock().now()));
            }
        }
    }
    h.clock().advance(Duration::from_secs(3_600));
    let report = dispatch_queued(&**store, backoff, 10).await.unwrap();
    assert_eq!(report, DispatchReport::default(), "dead-lettered");
    assert!(store.redrive(emitted.event).await.unwrap());
    let report = dispatch_queued(&**store, backoff, 10).await.unwrap();
    assert_eq!(report.dispatched, 1);
    let runs = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(runs.len(), 1);
}

/// 16 concurrent `dispatch_next` loops over 200 pending events: each event
/// taken by exactly one of them, one run per event, nothing failed, nothing
/// left.
pub async fn dispatch_next_race_16_over_200_events<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    listening(h, "app", "s", "wf").await;
    let store = h.store();
    let mut events = BTreeSet::new();
    for i in 0..200 {
        let emitted = store
            .emit(tick("app", "s", json!({"i": i})), Dispatch::Deferred)
            .await
            .unwrap();
        events.insert(emitted.event);
    }
    let taken = race(store, 16, |store, _| async move {
        let mut mine = Vec::new();
        loop {
            match store.dispatch_next().await.expect("dispatch_next") {
                NextDispatch::Idle => break mine,
                NextDispatch::Dispatched { event, runs } => mine.push((event, runs)),
                NextDispatch::Failed { event, error } => {
                    panic!("event {} failed: {error}", event.id)
                }
            }
        }
    })
    .await;
    let all: Vec<_> = taken.into_iter().flatten().collect();
    assert_eq!(all.len(), 200, "each event taken exactly once");
    let distinct: BTreeSet<EventId> = all.iter().map(|(event, _)| *event).collect();
    assert_eq!(distinct, events);
    let run_ids: BTreeSet<_> = all.iter().flat_map(|(_, runs)| runs.clone()).collect();
    assert_eq!(run_ids.len(), 200, "one run per delivery");
    let query = RunQuery {
        limit: RunQuery::MAX_LIMIT,
        ..RunQuery::default()
    };
    let runs = store.list_runs(&query).await.unwrap().items;
    assert_eq!(runs.len(), 200);
    for event in &events {
        let stored = store.get_event(*event).await.unwrap();
        assert_eq!(stored.attempts, 1, "dispatched once");
    }
    assert!(store.pending_events(10).await.unwrap().is_empty());
}

/// A queued [`Dispatcher`] dispatches a deferred event, and nothing after
/// its shutdown.
pub async fn queued_dispatcher_runs_until_shut_down<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    runs_until_shut_down(h, Dispatcher::queued).await;
}
