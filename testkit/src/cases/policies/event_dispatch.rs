//! Deferred dispatch through `flowstate-events`: due events materialised,
//! failures recorded on the event with core's backoff and dead-lettered at
//! its limit, redrive, and the [`Dispatcher`](flowstate_events::Dispatcher) runner.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::backoff::{EventDispatchBackoff, EventDispatchOutcome};
use flowstate_core::ports::{EventStore, RunStore};
use flowstate_core::{Clock, Dispatch, EventFilter, RunQuery};
use flowstate_events::{DispatchReport, dispatch_pending};
use serde_json::json;

use crate::Harness;
use crate::cases::support::events::{
    EventBackend, FailingDispatch, emit, listening, runs_until_shut_down, tick,
};

/// `dispatch_pending` materialises every due event and reports it; a
/// second call finds nothing.
pub async fn dispatch_pending_materialises_due_events<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let a = emit(h, tick("app", "s", json!({"n": 1})), Dispatch::Deferred).await;
    let b = emit(h, tick("app", "s", json!({"n": 2})), Dispatch::Deferred).await;
    let report = dispatch_pending(&**store, EventDispatchBackoff::default(), 10)
        .await
        .unwrap();
    assert_eq!(
        report,
        DispatchReport {
            dispatched: 2,
            ..DispatchReport::default()
        }
    );
    let runs = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(runs.len(), 2);
    for (event, n) in [(a.event, 1), (b.event, 2)] {
        let stored = store.get_event(event).await.unwrap();
        assert_eq!(
            (stored.attempts, stored.dispatched_at),
            (1, Some(h.clock().now()))
        );
        assert!(runs.iter().any(|r| r.input == json!({"n": n})));
    }
    let report = dispatch_pending(&**store, EventDispatchBackoff::default(), 10)
        .await
        .unwrap();
    assert_eq!(report, DispatchReport::default());
}

/// A failing dispatch is recorded on the event, never rolling it back: the
/// attempts rise, the error is kept, and the event is due again on core's
/// schedule (1 s, 2 s, 4 s, ...); the 8th failure dead-letters it, it is
/// listed, and redrive puts it back in line to be dispatched.
pub async fn failing_dispatch_backs_off_and_dead_letters<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let failing = FailingDispatch(Arc::clone(store));
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    let backoff = EventDispatchBackoff::default();
    for attempt in 1..=8u32 {
        let report = dispatch_pending(&failing, backoff, 10).await.unwrap();
        let stored = store.get_event(emitted.event).await.unwrap();
        assert_eq!(stored.attempts, attempt);
        assert!(
            stored
                .last_error
                .as_deref()
                .unwrap()
                .contains("materialisation refused")
        );
        assert_eq!(stored.dispatched_at, None);
        match backoff.after_failure(attempt) {
            EventDispatchOutcome::RetryAfter(delay) => {
                assert_eq!(
                    report,
                    DispatchReport {
                        failed: 1,
                        ..DispatchReport::default()
                    }
                );
                assert_eq!(stored.dispatch_after, h.clock().now().plus(delay));
                assert_eq!(stored.dead_lettered_at, None);
                assert_eq!(delay, Duration::from_secs(1 << (attempt - 1)));
                h.clock()
                    .advance(delay.checked_sub(Duration::from_micros(1)).unwrap());
                assert!(
                    store.pending_events(10).await.unwrap().is_empty(),
                    "not due yet"
                );
                h.clock().advance(Duration::from_micros(1));
            }
            EventDispatchOutcome::DeadLetter => {
                assert_eq!(attempt, 8);
                let expected = DispatchReport {
                    failed: 1,
                    dead_lettered: 1,
                    ..DispatchReport::default()
                };
                assert_eq!(report, expected);
                assert_eq!(stored.dead_lettered_at, Some(h.clock().now()));
            }
        }
    }
    h.clock().advance(Duration::from_secs(3_600));
    assert!(
        store.pending_events(10).await.unwrap().is_empty(),
        "dead-lettered"
    );
    let listed = store
        .list_undispatched(&EventFilter::default(), 10, 0)
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![emitted.event]
    );
    assert!(store.redrive(emitted.event).await.unwrap());
    assert!(
        !store.redrive(emitted.event).await.unwrap(),
        "no longer dead-lettered"
    );
    let stored = store.get_event(emitted.event).await.unwrap();
    assert_eq!((stored.attempts, stored.dead_lettered_at), (0, None));
    let report = dispatch_pending(&**store, backoff, 10).await.unwrap();
    assert_eq!(report.dispatched, 1);
    let stored = store.get_event(emitted.event).await.unwrap();
    assert_eq!((stored.attempts, stored.last_error), (1, None));
    assert_eq!(
        store
            .list_runs(&RunQuery::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

/// A failure reported against attempts the event no longer has (another
/// dispatcher recorded it first) writes nothing.
pub async fn stale_failure_report_writes_nothing<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    let outcome = EventDispatchOutcome::RetryAfter(Duration::from_secs(1));
    assert!(
        store
            .record_dispatch_failure(emitted.event, 0, "first", outcome)
            .await
            .unwrap()
    );
    assert!(
        !store
            .record_dispatch_failure(emitted.event, 0, "second", outcome)
            .await
            .unwrap()
    );
    let stored = store.get_event(emitted.event).await.unwrap();
    assert_eq!(
        (stored.attempts, stored.last_error.as_deref()),
        (1, Some("first"))
    );
    assert!(
        !store.redrive(emitted.event).await.unwrap(),
        "not dead-lettered"
    );
}

/// A long dispatch error is kept cut to 2,000 bytes on a char boundary,
/// the same on every backend: of 10 kB of `x` then `€` (three bytes each),
/// the first 1,999 bytes, since the 2,000th is inside a `€`.
pub async fn long_dispatch_error_is_cut_on_a_char_boundary<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    let error = format!("x{}", "€".repeat(3_333));
    assert_eq!(error.len(), 10_000);
    let outcome = EventDispatchOutcome::RetryAfter(Duration::from_secs(1));
    assert!(
        store
            .record_dispatch_failure(emitted.event, 0, &error, outcome)
            .await
            .unwrap()
    );
    let stored = store.get_event(emitted.event).await.unwrap();
    let kept = stored.last_error.expect("the error is kept");
    let expected = format!("x{}", "€".repeat(666));
    assert_eq!(expected.len(), 1_999);
    assert_eq!(kept, expected);
}

/// A spawned [`Dispatcher`](flowstate_events::Dispatcher) dispatches what is deferred and stops on
/// shutdown, its counters saying what it did.
pub async fn dispatcher_runs_until_shut_down<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    runs_until_shut_down(h, |dispatcher| dispatcher).await;
}
