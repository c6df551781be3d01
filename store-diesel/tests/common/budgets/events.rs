//! The statement budgets of the event operations, in the shape of
//! [`super`]: the one [`table`](super::table) lists, per operation, the
//! first word of every statement it sends, and [`every_operation_sends_its_budget`] runs one
//! scenario through a logged store and compares exactly. DESIGN.md's
//! budget: "record an event + pin its deliveries: 1 transaction".
//!
//! `dispatch_pending` of one event is `pending_events` (the scan) then
//! `dispatch_event` (its transaction); `dispatch_next` is the same
//! transaction with the pick as its lock; `dispatch_queued` sends
//! `dispatch_next_batch`, one transaction for many events, whose pick, read
//! of deliveries and mark are paid once: per event, only its runs'
//! inserts. `emit_batch` is the same for the emit: one transaction of
//! multi-row inserts, whose statements do not grow with the batch but for
//! the runs `Now` creates; a read of the holders only when a key may have
//! been taken; nothing for an empty or refused batch.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::backoff::EventDispatchOutcome;
use flowstate_core::ports::{EventQueueStore, EventStore};
use flowstate_core::{Dispatch, NewEvent, NextDispatch};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog};
use serde_json::json;

use super::{Sent, check_scenario, recorder, table};
use crate::common::records::{activate, listening};

/// Runs the event scenario on a fresh `dialect` database and asserts that
/// every operation sent exactly the statements `table` lists for it, and
/// that the table names every operation the scenario runs.
pub async fn every_operation_sends_its_budget(dialect: Dialect) {
    check_scenario(dialect, "event", &table::EVENTS.rows(dialect), scenario).await;
}

/// A workflow with two activations of `app.tick`, then every event
/// operation with a budget, each captured on its own.
async fn scenario(store: &DieselStore, log: &Arc<StatementLog>) -> Sent {
    let mut sent = Vec::new();
    recorder!($, sent, log);
    let (workflow, version) = listening(store, "wf").await;
    activate(store, workflow, version).await;
    let tick = || NewEvent::new("app", "s", "app.tick", json!({"n": 1}));

    let none = NewEvent::new("app", "s", "app.nobody", json!({}));
    let out = capture!("emit no match", store.emit(none, Dispatch::Now));
    assert!(out.runs.is_empty());
    let out = capture!("emit now, 2 matches", store.emit(tick(), Dispatch::Now));
    assert_eq!(out.runs.len(), 2);
    let keyed = || tick().with_dedupe_key("slot");
    let first = capture!(
        "emit now keyed, 2 matches",
        store.emit(keyed(), Dispatch::Now)
    );
    let dup = capture!("emit duplicate", store.emit(keyed(), Dispatch::Now));
    assert!(dup.duplicate && dup.runs == first.runs);
    let deferred = capture!(
        "emit deferred, 2 matches",
        store.emit(tick(), Dispatch::Deferred)
    );
    let pending = capture!("pending_events", store.pending_events(10));
    assert_eq!(pending.len(), 1);
    let runs = capture!(
        "dispatch_event, 2 deliveries",
        store.dispatch_event(deferred.event)
    );
    assert_eq!(runs.map(|r| r.len()), Some(2));
    let again = capture!("dispatch_event taken", store.dispatch_event(deferred.event));
    assert_eq!(again, None);
    let failing = store.emit(tick(), Dispatch::Deferred).await.expect("emit");
    let outcome = EventDispatchOutcome::RetryAfter(Duration::from_secs(1));
    let wrote = capture!(
        "record_dispatch_failure",
        store.record_dispatch_failure(failing.event, 0, "boom", outcome)
    );
    assert!(wrote);
    // The failing event backs off: the queue holds this one alone.
    let queued = store.emit(tick(), Dispatch::Deferred).await.expect("emit");
    let next = capture!("dispatch_next, 2 deliveries", store.dispatch_next());
    assert!(
        matches!(&next, NextDispatch::Dispatched { event, runs } if *event == queued.event && runs.len() == 2),
        "{next:?}"
    );
    let idle = capture!("dispatch_next idle", store.dispatch_next());
    assert!(matches!(idle, NextDispatch::Idle), "{idle:?}");
    for _ in 0..3 {
        store.emit(tick(), Dispatch::Deferred).await.expect("emit");
    }
    let batch = capture!(
        "dispatch_next_batch, 3 events of 2 deliveries",
        store.dispatch_next_batch(10)
    );
    assert_eq!(batch.len(), 3, "{batch:?}");
    assert!(
        batch
            .iter()
            .all(|next| matches!(next, NextDispatch::Dispatched { runs, .. } if runs.len() == 2)),
        "{batch:?}"
    );
    let idle = capture!("dispatch_next_batch idle", store.dispatch_next_batch(10));
    assert!(idle.is_empty(), "{idle:?}");
    capture!("get_event", store.get_event(failing.event));
    capture!("run_cause", store.run_cause(first.runs[0]));
    let started = capture!("event_runs, 2 runs", store.event_runs(first.event));
    assert_eq!(started.len(), 2);
    let none = capture!("event_runs, none", store.event_runs(failing.event));
    assert!(none.is_empty());
    emit_batches(store, log, &mut sent).await;
    sent
}

/// `emit_batch`'s budgets, on the scenario's store (two activations of
/// `app.tick`): three deferred events, two keyed `Now` events and a repeat
/// of the first key, then two of those keys again with a new one, an empty
/// batch and a refused one.
async fn emit_batches(store: &DieselStore, log: &Arc<StatementLog>, sent: &mut Sent) {
    recorder!($, sent, log);
    let tick = |n: u32| NewEvent::new("app", "s", "app.tick", json!({"n": n}));
    let keyed = |key: &str| tick(0).with_dedupe_key(key);
    let deferred = capture!(
        "emit_batch deferred, 3 events of 2 deliveries",
        store.emit_batch((0..3).map(tick).collect(), Dispatch::Deferred)
    );
    assert!(deferred.iter().all(|e| !e.duplicate && e.runs.is_empty()));
    let batch = vec![keyed("b1"), keyed("b2"), keyed("b1")];
    let now = capture!(
        "emit_batch now keyed, 2 events of 2 deliveries and a repeat",
        store.emit_batch(batch, Dispatch::Now)
    );
    let dups: Vec<bool> = now.iter().map(|e| e.duplicate).collect();
    assert_eq!(dups, [false, false, true]);
    assert!(now.iter().all(|e| e.runs.len() == 2), "{now:?}");
    let batch = vec![keyed("b1"), keyed("b2"), keyed("b3")];
    let again = capture!(
        "emit_batch now keyed, 2 stored duplicates and 1 new",
        store.emit_batch(batch, Dispatch::Now)
    );
    let dups: Vec<bool> = again.iter().map(|e| e.duplicate).collect();
    assert_eq!(dups, [true, true, false]);
    assert_eq!(
        (again[0].event, &again[0].runs),
        (now[0].event, &now[0].runs)
    );
    let empty = capture!(
        "emit_batch empty",
        store.emit_batch(Vec::new(), Dispatch::Now)
    );
    assert!(empty.is_empty());
    refused!(
        "emit_batch refused",
        store.emit_batch(vec![keyed("b4"), keyed("")], Dispatch::Now)
    );
}
