//! Events under real concurrency: many emits of one dedupe key record one
//! event and one run per activation; many dispatchers of the same events
//! materialise each delivery exactly once.

use std::collections::BTreeSet;

use flowstate_core::backoff::EventDispatchBackoff;
use flowstate_core::ports::{EventStore, RunStore};
use flowstate_core::{Dispatch, RunQuery};
use serde_json::json;

use crate::Harness;
use crate::cases::support::events::{EventBackend, activate, listening, tick};
use crate::cases::support::race;

/// `n` concurrent emits of one dedupe key, against two activations.
async fn emit_race<H: Harness>(h: &H, n: usize, dispatch: Dispatch)
where
    H::Store: EventBackend,
{
    let f = listening(h, "app", "s", "wf").await;
    activate(
        h,
        &f.workflow,
        &f.version,
        crate::cases::support::events::TICK,
    )
    .await;
    let outcomes = race(h.store(), n, |store, i| async move {
        let event = tick("app", "s", json!({"i": i})).with_dedupe_key("slot");
        store.emit(event, dispatch).await
    })
    .await;
    let outcomes: Vec<_> = outcomes.into_iter().map(|o| o.expect("emit")).collect();
    let first: Vec<_> = outcomes.iter().filter(|o| !o.duplicate).collect();
    assert_eq!(first.len(), 1, "{} emits recorded the event", first.len());
    let first = first[0].clone();
    for outcome in &outcomes {
        assert_eq!(outcome.event, first.event);
        if dispatch == Dispatch::Now {
            assert_eq!(outcome.runs, first.runs, "a duplicate sees the first runs");
        }
    }
    let store = h.store();
    if dispatch == Dispatch::Deferred {
        assert!(first.runs.is_empty());
        store
            .dispatch_event(first.event)
            .await
            .unwrap()
            .expect("pending");
    }
    let runs = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(runs.len(), 2, "one run per activation");
    let stored = store.get_event(first.event).await.unwrap();
    assert_eq!(stored.matched, 2);
}

/// 8 concurrent `Now` emits of one dedupe key.
pub async fn emit_race_8_same_dedupe_key<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    emit_race(h, 8, Dispatch::Now).await;
}

/// 32 concurrent `Now` emits of one dedupe key.
pub async fn emit_race_32_same_dedupe_key<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    emit_race(h, 32, Dispatch::Now).await;
}

/// 16 concurrent `Deferred` emits of one dedupe key, then one dispatch.
pub async fn emit_race_16_deferred_same_dedupe_key<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    emit_race(h, 16, Dispatch::Deferred).await;
}

/// 16 concurrent dispatches of one event with two deliveries: exactly one
/// materialises, and there is exactly one run per delivery.
pub async fn dispatch_race_16_one_event<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let f = listening(h, "app", "s", "wf").await;
    activate(
        h,
        &f.workflow,
        &f.version,
        crate::cases::support::events::TICK,
    )
    .await;
    let store = h.store();
    let emitted = store
        .emit(tick("app", "s", json!({})), Dispatch::Deferred)
        .await
        .unwrap();
    let event = emitted.event;
    let outcomes = race(store, 16, |store, _| async move {
        store.dispatch_event(event).await
    })
    .await;
    let won: Vec<_> = outcomes
        .into_iter()
        .filter_map(|o| o.expect("dispatch_event"))
        .collect();
    assert_eq!(won.len(), 1, "{} dispatches materialised", won.len());
    assert_eq!(won[0].len(), 2);
    let runs = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(runs.len(), 2);
    let stored = store.get_event(event).await.unwrap();
    assert_eq!(stored.attempts, 1);
}

/// 4 concurrent `dispatch_pending` loops over 200 pending events: every
/// event dispatched once, one run each.
pub async fn dispatchers_race_4_over_200_events<H: Harness>(h: &H)
where
    H::Store: EventBackend,
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
    let reports = race(store, 4, |store, _| async move {
        let mut total = flowstate_events::DispatchReport::default();
        loop {
            let report =
                flowstate_events::dispatch_pending(&*store, EventDispatchBackoff::default(), 25)
                    .await
                    .expect("dispatch_pending");
            total.dispatched += report.dispatched;
            total.failed += report.failed;
            total.skipped += report.skipped;
            if report.dispatched + report.skipped == 0 {
                break total;
            }
        }
    })
    .await;
    let dispatched: u32 = reports.iter().map(|r| r.dispatched).sum();
    assert_eq!(dispatched, 200);
    assert!(reports.iter().all(|r| r.failed == 0));
    let query = RunQuery {
        limit: RunQuery::MAX_LIMIT,
        ..RunQuery::default()
    };
    let runs = store.list_runs(&query).await.unwrap().items;
    assert_eq!(runs.len(), 200);
    let mut caused = BTreeSet::new();
    for run in &runs {
        let cause = store.run_cause(run.id).await.unwrap().expect("a cause");
        caused.insert(cause.event);
    }
    assert_eq!(caused, events);
    assert!(store.pending_events(10).await.unwrap().is_empty());
}
