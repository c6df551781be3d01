//! Pruning events: dispatched events go with their deliveries once past
//! the window, freeing their dedupe keys (which suppress until then);
//! pending events stay; dead letters stay until their own longer window,
//! a redriven one goes as a dispatched event.

use std::time::Duration;

use flowstate_core::backoff::EventDispatchOutcome;
use flowstate_core::ports::{EventStore, RetentionStore};
use flowstate_core::{Dispatch, Error, EventId, PruneKind};
use serde_json::json;

use super::{PAST_WINDOW, RetentionBackend, WINDOW, exists, prunable, prune};
use crate::LeaseHarness;
use crate::cases::support::assert_err;
use crate::cases::support::events::{emit, listening, tick};

/// Whether event `id` can still be read.
async fn event_exists<H: LeaseHarness>(h: &H, id: EventId) -> bool
where
    H::Store: RetentionBackend,
{
    match h.store().get_event(id).await {
        Ok(_) => true,
        Err(Error::EventNotFound(missing)) if missing == id => false,
        Err(err) => panic!("get_event {id}: {err}"),
    }
}

/// A dispatched event older than the window is pruned with its
/// deliveries; its dedupe key suppresses a second emit until then (the
/// event old, not yet pruned) and records a new event after. The run it
/// started is a run like any other: still running, it stays. A pending
/// event, however old, stays.
pub async fn dispatched_events_are_pruned_and_free_their_dedupe_keys<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    listening(h, "app", "scope", "wf").await;
    let first = emit(
        h,
        tick("app", "scope", json!({"n": 1})).with_dedupe_key("k"),
        Dispatch::Now,
    )
    .await;
    assert!(!first.duplicate);
    assert_eq!(first.runs.len(), 1);
    let pending = emit(h, tick("app", "scope", json!({"n": 2})), Dispatch::Deferred).await;
    h.clock().advance(PAST_WINDOW);
    let again = emit(
        h,
        tick("app", "scope", json!({"n": 3})).with_dedupe_key("k"),
        Dispatch::Now,
    )
    .await;
    assert!(
        again.duplicate,
        "an old event not yet pruned still suppresses"
    );
    assert_eq!(again.event, first.event);

    assert_eq!(prunable(h, PruneKind::Events).await, 1);
    assert_eq!(prunable(h, PruneKind::DeadLetters).await, 0);
    assert_eq!(prune(h, PruneKind::Events, 100).await, 1);
    assert_eq!(prune(h, PruneKind::Events, 100).await, 0);
    assert!(!event_exists(h, first.event).await);
    assert_err!(
        h.store().event_runs(first.event).await,
        Error::EventNotFound(id) if id == first.event
    );
    assert!(event_exists(h, pending.event).await);
    assert!(
        exists(h, first.runs[0]).await,
        "the event's run is the runs' to prune"
    );

    let after = emit(
        h,
        tick("app", "scope", json!({"n": 4})).with_dedupe_key("k"),
        Dispatch::Now,
    )
    .await;
    assert!(!after.duplicate, "the key is free once its event is pruned");
    assert_ne!(after.event, first.event);
    assert_eq!(after.runs.len(), 1);
}

/// A dead letter is kept past the events window, counted and pruned only
/// as a dead letter past its own window; one redriven and dispatched is a
/// dispatched event, pruned by the events window from its dispatch.
pub async fn dead_letters_are_kept_until_their_longer_window<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    listening(h, "app", "scope", "wf").await;
    let dead = emit(h, tick("app", "scope", json!({"n": 1})), Dispatch::Deferred).await;
    let redriven = emit(h, tick("app", "scope", json!({"n": 2})), Dispatch::Deferred).await;
    for id in [dead.event, redriven.event] {
        assert!(
            h.store()
                .record_dispatch_failure(id, 0, "boom", EventDispatchOutcome::DeadLetter)
                .await
                .unwrap()
        );
    }
    h.clock().advance(PAST_WINDOW);
    assert_eq!(prunable(h, PruneKind::Events).await, 0);
    assert_eq!(prune(h, PruneKind::Events, 100).await, 0);
    let longer = WINDOW * 3;
    assert_eq!(
        h.store()
            .count_prunable(PruneKind::DeadLetters, longer)
            .await
            .unwrap(),
        0
    );
    assert!(event_exists(h, dead.event).await);

    assert!(h.store().redrive(redriven.event).await.unwrap());
    let runs = h.store().dispatch_event(redriven.event).await.unwrap();
    assert_eq!(runs.map(|r| r.len()), Some(1));
    h.clock().advance(PAST_WINDOW);
    // Dead-lettered 4 h ago, past the 3 h window; the redriven event was
    // dispatched 2 h ago, past the 1 h events window.
    assert_eq!(
        h.store()
            .count_prunable(PruneKind::DeadLetters, longer)
            .await
            .unwrap(),
        1
    );
    assert_eq!(prunable(h, PruneKind::Events).await, 1);
    assert_eq!(
        h.store()
            .prune(PruneKind::DeadLetters, longer, 100)
            .await
            .unwrap(),
        1
    );
    assert!(!event_exists(h, dead.event).await);
    assert!(event_exists(h, redriven.event).await);
    assert_eq!(prune(h, PruneKind::Events, 100).await, 1);
    assert!(!event_exists(h, redriven.event).await);
    assert_eq!(
        h.store()
            .prune(PruneKind::DeadLetters, Duration::ZERO, 100)
            .await
            .unwrap(),
        0
    );
}
