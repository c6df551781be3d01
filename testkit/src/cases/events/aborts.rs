//! The event lock whose transaction dies after it locked its event and
//! wrote its runs, before the event is marked dispatched
//! ([`Hooks::abort_after_pick`]), as a Galera node's dispatch does when
//! another node's commit aborts it: the dispatch answers a retryable
//! error (`dispatch_next`: the event, failed) and leaves the event pending
//! with no run, or (run again by the store) dispatches it; either way
//! each event ends dispatched once, with one run. A batch
//! (`dispatch_next_batch`) aborted so answers each of its events
//! dispatched or failed (taken again on its own), or a retryable error,
//! and ends the same way.

use std::collections::BTreeSet;
use std::time::Duration;

use flowstate_core::ports::{EventQueueStore, EventStore, RunStore};
use flowstate_core::{Dispatch, EventId, NextDispatch, RunQuery};
use serde_json::json;

use crate::cases::support::after_abort;
use crate::cases::support::events::{EventQueueBackend, emit, listening, tick};
use crate::{Hooks, Pick};

/// Checks that `event` is still pending, never dispatched, and that no
/// run but the `runs` before it exists.
async fn still_pending<H: Hooks>(h: &H, event: EventId, runs: usize, what: &str)
where
    H::Store: EventQueueBackend,
{
    let stored = h.store().get_event(event).await.expect("get_event");
    assert_eq!(
        (stored.dispatched_at, stored.attempts),
        (None, 0),
        "{what}, aborted after its lock, marked the event"
    );
    let listed = h.store().list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(
        listed.items.len(),
        runs,
        "{what}, aborted after its lock, kept a run"
    );
}

/// Two deferred events, each matching one activation. `dispatch_event`
/// aborted after its lock answers a retryable error, leaving the event
/// pending and runless, or dispatches it; the next call dispatches what is
/// left and the one after finds it dispatched. `dispatch_next`, the same
/// way with the second event. Two runs in all, one per event, and each
/// event dispatched on its first attempt.
pub async fn a_dispatch_aborted_after_its_lock_dispatches_once<H: Hooks>(h: &H)
where
    H::Store: EventQueueBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let first = emit(h, tick("app", "s", json!({"n": 1})), Dispatch::Deferred).await;
    h.abort_after_pick(Some(Pick::Events)).await;
    let aborted = store.dispatch_event(first.event).await;
    h.abort_after_pick(None).await;
    let runs = if let Some(runs) = after_abort("dispatch_event", aborted).flatten() {
        runs
    } else {
        still_pending(h, first.event, 0, "dispatch_event").await;
        store
            .dispatch_event(first.event)
            .await
            .expect("dispatch_event")
            .expect("the event is still pending")
    };
    assert_eq!(runs.len(), 1, "one run per delivery");
    let twice = store.dispatch_event(first.event).await.unwrap();
    assert!(twice.is_none(), "dispatched twice: {twice:?}");

    let second = emit(h, tick("app", "s", json!({"n": 2})), Dispatch::Deferred).await;
    h.abort_after_pick(Some(Pick::Events)).await;
    let aborted = store.dispatch_next().await;
    h.abort_after_pick(None).await;
    let dispatched = match after_abort("dispatch_next", aborted) {
        Some(NextDispatch::Dispatched { event, runs }) => Some((event, runs.len())),
        Some(NextDispatch::Failed { event, error }) => {
            assert_eq!((event.id, event.attempts), (second.event, 0));
            assert!(
                error.is_retryable(),
                "dispatch_next, aborted after its lock, failed for good: {error:?}"
            );
            None
        }
        Some(NextDispatch::Idle) => panic!("a pending event was not taken"),
        None => None,
    };
    let dispatched = if let Some(dispatched) = dispatched {
        dispatched
    } else {
        still_pending(h, second.event, 1, "dispatch_next").await;
        match store.dispatch_next().await.expect("dispatch_next") {
            NextDispatch::Dispatched { event, runs } => (event, runs.len()),
            other => panic!("the pending event was not dispatched: {other:?}"),
        }
    };
    assert_eq!(dispatched, (second.event, 1));
    let idle = store.dispatch_next().await.expect("dispatch_next");
    assert!(matches!(idle, NextDispatch::Idle), "{idle:?}");

    for (emitted, n) in [(&first, 1), (&second, 2)] {
        let stored = store.get_event(emitted.event).await.unwrap();
        assert_eq!(
            stored.attempts, 1,
            "event {n} dispatched on its first attempt"
        );
        assert!(stored.dispatched_at.is_some());
    }
    let listed = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(listed.len(), 2, "one run per event: {listed:?}");
    for n in [1, 2] {
        assert!(listed.iter().any(|r| r.input == json!({"n": n})));
    }
}

/// Three deferred events, each matching one activation. A batch aborted
/// after its lock answers a retryable error, or each event it took
/// dispatched with its run or failed (retryable, with the attempts it had,
/// still pending); once the fault ends, batches dispatch what is left.
/// Each event ends dispatched once, on its first attempt, with one run.
pub async fn a_batch_aborted_after_its_lock_dispatches_once<H: Hooks>(h: &H)
where
    H::Store: EventQueueBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let mut emitted = BTreeSet::new();
    for n in 0..3 {
        let event = emit(h, tick("app", "s", json!({"n": n})), Dispatch::Deferred).await;
        emitted.insert(event.event);
        h.clock().advance(Duration::from_millis(1));
    }
    h.abort_after_pick(Some(Pick::Events)).await;
    let aborted = store.dispatch_next_batch(10).await;
    h.abort_after_pick(None).await;
    let mut done = BTreeSet::new();
    let mut take = |answers: Vec<NextDispatch>, what: &str| {
        for answer in answers {
            match answer {
                NextDispatch::Dispatched { event, runs } => {
                    assert_eq!(runs.len(), 1, "{what}: one run per delivery");
                    assert!(done.insert(event), "{what}: {event} dispatched twice");
                }
                NextDispatch::Failed { event, error } => {
                    assert_eq!(event.attempts, 0, "{what}: {event:?}");
                    assert!(
                        error.is_retryable(),
                        "{what}, aborted after its lock, failed for good: {error:?}"
                    );
                }
                NextDispatch::Idle => panic!("{what} answered Idle inside a batch"),
            }
        }
    };
    if let Some(answers) = after_abort("dispatch_next_batch", aborted) {
        take(answers, "the aborted batch");
    }
    loop {
        let answers = store.dispatch_next_batch(10).await.expect("a batch");
        if answers.is_empty() {
            break;
        }
        take(answers, "a batch after the fault");
    }
    assert_eq!(done, emitted, "every event dispatched");
    for event in &emitted {
        let stored = store.get_event(*event).await.unwrap();
        assert_eq!(stored.attempts, 1, "dispatched on its first attempt");
    }
    let listed = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(listed.len(), 3, "one run per event: {listed:?}");
}
