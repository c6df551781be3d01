//! [`EventStore::emit`]: recorded once per dedupe key, deliveries pinned to
//! exactly the matching activations, runs materialised with the event's
//! data, context and authorization, and their cause readable from the run.

use flowstate_core::ports::{DefinitionStore, EventStore, RunStore};
use flowstate_core::{Clock, Dispatch, Error, EventFilter, EventId, NewEvent, NewRun, Timestamp};
use serde_json::json;

use crate::Harness;
use crate::cases::support::assert_err;
use crate::cases::support::events::{EventBackend, TICK, activate, emit, listening, publish, tick};

/// `Now` answers the runs, one per matching activation, each an ordinary
/// run keyed `event:{event}:{activation}` with the event's data as input,
/// and its cause names the event, context, authorization and occurrence.
pub async fn emit_now_returns_the_runs<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let f = listening(h, "app", "s", "wf").await;
    let at = Timestamp::from_millis(1_000);
    let event = tick("app", "s", json!({"n": 1}))
        .with_context(json!({"row": 7}))
        .with_authorization(json!({"as": "ann"}))
        .occurred_at(at);
    let emitted = emit(h, event, Dispatch::Now).await;
    assert!(!emitted.duplicate);
    assert_eq!(emitted.runs.len(), 1);
    let run = store.get_run(emitted.runs[0]).await.unwrap();
    assert_eq!(run.workflow, "wf");
    assert_eq!(run.input, json!({"n": 1}));
    assert_eq!(run.graph_hash.as_deref(), Some("h1"));
    let key = format!("event:{}:{}", emitted.event, f.activation.id);
    assert_eq!(run.idempotency_key, Some(key));
    let cause = store.run_cause(run.id).await.unwrap().expect("a cause");
    assert_eq!(
        (cause.run, cause.event, cause.activation),
        (run.id, emitted.event, f.activation.id)
    );
    assert_eq!(
        (cause.workflow, cause.version),
        (f.workflow.id, f.version.id)
    );
    assert_eq!(cause.context, json!({"row": 7}));
    assert_eq!(cause.authorization, json!({"as": "ann"}));
    assert_eq!(cause.occurred_at, at);
    let stored = store.get_event(emitted.event).await.unwrap();
    assert_eq!((stored.matched, stored.attempts), (1, 1));
    assert_eq!(stored.dispatched_at, Some(h.clock().now()));
    assert!(!stored.is_undispatched());
}

/// `Deferred` records and pins but starts nothing until dispatched; the
/// event is pending and listed as undispatched meanwhile.
pub async fn emit_deferred_waits_for_dispatch<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    assert!(emitted.runs.is_empty());
    let stored = store.get_event(emitted.event).await.unwrap();
    assert_eq!(
        (stored.matched, stored.attempts, stored.dispatched_at),
        (1, 0, None)
    );
    assert_eq!(stored.occurred_at, h.clock().now());
    let pending = store.pending_events(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!((pending[0].id, pending[0].attempts), (emitted.event, 0));
    let listed = store
        .list_undispatched(&EventFilter::default(), 10, 0)
        .await
        .unwrap();
    assert_eq!(listed, vec![stored]);
    let runs = store
        .dispatch_event(emitted.event)
        .await
        .unwrap()
        .expect("dispatched");
    assert_eq!(runs.len(), 1);
    assert_eq!(store.dispatch_event(emitted.event).await.unwrap(), None);
    assert!(store.pending_events(10).await.unwrap().is_empty());
    let again = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    assert_ne!(again.event, emitted.event, "no dedupe key, two events");
}

/// An event that matched nothing is dispatched at once, never pending, and
/// stays listable.
pub async fn emit_matching_nothing_is_dispatched_at_once<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let emitted = emit(
        h,
        NewEvent::new("app", "s", "app.none", json!({})),
        Dispatch::Now,
    )
    .await;
    assert!(emitted.runs.is_empty());
    let stored = store.get_event(emitted.event).await.unwrap();
    assert_eq!(stored.matched, 0);
    assert_eq!(stored.dispatched_at, Some(h.clock().now()));
    assert!(store.pending_events(10).await.unwrap().is_empty());
    let listed = store
        .list_undispatched(&EventFilter::default(), 10, 0)
        .await
        .unwrap();
    assert_eq!(listed, vec![stored]);
}

/// A second emit of one (app, scope, type, dedupe key) records nothing and
/// answers the first event's runs; any part differing is a new event.
pub async fn emit_duplicate_answers_the_first_runs<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let f = listening(h, "app", "s", "wf").await;
    activate(h, &f.workflow, &f.version, "app.other").await;
    listening(h, "app", "s2", "wf").await;
    let keyed = |app: &str, scope: &str, ty: &str, key: &str| {
        NewEvent::new(app, scope, ty, json!({"k": key})).with_dedupe_key(key)
    };
    let first = emit(h, keyed("app", "s", TICK, "slot-1"), Dispatch::Now).await;
    assert_eq!(first.runs.len(), 1);
    for dispatch in [Dispatch::Now, Dispatch::Deferred] {
        let again = emit(h, keyed("app", "s", TICK, "slot-1"), dispatch).await;
        assert!(again.duplicate);
        assert_eq!((again.event, &again.runs), (first.event, &first.runs));
    }
    for other in [
        keyed("app", "s", TICK, "slot-2"),
        keyed("app", "s2", TICK, "slot-1"),
        keyed("app", "s", "app.other", "slot-1"),
    ] {
        let emitted = emit(h, other, Dispatch::Now).await;
        assert!(!emitted.duplicate);
        assert_eq!(emitted.runs.len(), 1);
        assert_ne!(emitted.event, first.event);
    }
    let runs = store
        .list_runs(&flowstate_core::RunQuery::default())
        .await
        .unwrap();
    assert_eq!(runs.items.len(), 4);
    let deferred = emit(h, keyed("app", "s", TICK, "slot-9"), Dispatch::Deferred).await;
    let dup = emit(h, keyed("app", "s", TICK, "slot-9"), Dispatch::Now).await;
    assert!(
        dup.duplicate && dup.runs.is_empty(),
        "deferred: no runs yet"
    );
    let runs = store.dispatch_event(deferred.event).await.unwrap().unwrap();
    let dup = emit(h, keyed("app", "s", TICK, "slot-9"), Dispatch::Now).await;
    assert_eq!(dup.runs, runs);
}

/// Deliveries are pinned when the event is recorded: disabling the
/// activation or publishing a new version afterwards changes nothing for
/// it, while a new event sees the change.
pub async fn deliveries_are_pinned<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let f = listening(h, "app", "s", "wf").await;
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    store
        .set_activation_enabled(f.activation.id, false)
        .await
        .unwrap();
    publish(h, &f.workflow, "h2").await;
    let late = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    assert_eq!(store.get_event(late.event).await.unwrap().matched, 0);
    let runs = store.dispatch_event(emitted.event).await.unwrap().unwrap();
    assert_eq!(runs.len(), 1);
    let run = store.get_run(runs[0]).await.unwrap();
    assert_eq!(run.graph_hash.as_deref(), Some("h1"), "the pinned version");
    let cause = store.run_cause(run.id).await.unwrap().unwrap();
    assert_eq!(
        (cause.activation, cause.version),
        (f.activation.id, f.version.id)
    );
}

/// A target workflow narrows matching to its activations.
pub async fn target_workflow_narrows_matching<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let a = listening(h, "app", "s", "a").await;
    listening(h, "app", "s", "b").await;
    let all = emit(h, tick("app", "s", json!({})), Dispatch::Now).await;
    assert_eq!(all.runs.len(), 2);
    let one = emit(
        h,
        tick("app", "s", json!({})).with_target(a.workflow.id),
        Dispatch::Now,
    )
    .await;
    assert_eq!(one.runs.len(), 1);
    let cause = store.run_cause(one.runs[0]).await.unwrap().unwrap();
    assert_eq!(cause.workflow, a.workflow.id);
}

/// Disabled activations, activations of a version that is no longer
/// active, and workflows of another app or scope do not match.
pub async fn only_live_activations_in_scope_match<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let disabled = listening(h, "app", "s", "disabled").await;
    store
        .set_activation_enabled(disabled.activation.id, false)
        .await
        .unwrap();
    let stale = listening(h, "app", "s", "stale").await;
    publish(h, &stale.workflow, "h2").await;
    listening(h, "other-app", "s", "elsewhere").await;
    listening(h, "app", "other-scope", "elsewhere").await;
    let live = listening(h, "app", "s", "live").await;
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Now).await;
    assert_eq!(emitted.runs.len(), 1);
    let cause = store.run_cause(emitted.runs[0]).await.unwrap().unwrap();
    assert_eq!(cause.activation, live.activation.id);
}

/// An event naming nobody (`{}` or `null`) acts as each activation's
/// snapshot.
pub async fn empty_authorization_falls_back_to_the_snapshot<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    for empty in [json!({}), json!(null)] {
        let emitted = emit(
            h,
            tick("app", "s", json!({})).with_authorization(empty),
            Dispatch::Now,
        )
        .await;
        let cause = store.run_cause(emitted.runs[0]).await.unwrap().unwrap();
        assert_eq!(cause.authorization, json!({"as": "system"}));
    }
}

/// A run created by hand has no cause; an unknown run neither.
pub async fn ordinary_runs_have_no_cause<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let run = store
        .create_run(NewRun::new("wf", json!({})))
        .await
        .unwrap()
        .record;
    assert_eq!(store.run_cause(run.id).await.unwrap(), None);
    assert_eq!(
        store
            .run_cause(flowstate_core::RunId::generate())
            .await
            .unwrap(),
        None
    );
}

/// The undispatched listing filters by app and scope, orders by
/// occurrence, and pages.
pub async fn list_undispatched_filters_and_pages<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let mut ids = Vec::new();
    for (i, scope) in ["s", "s", "t", "s"].iter().enumerate() {
        let at = Timestamp::from_millis(10_000 - i as i64);
        let e = emit(
            h,
            tick("app", scope, json!({})).occurred_at(at),
            Dispatch::Deferred,
        )
        .await;
        ids.push(e.event);
    }
    emit(h, tick("app2", "s", json!({})), Dispatch::Deferred).await;
    let filter = EventFilter {
        app_id: Some("app".into()),
        scope_id: Some("s".into()),
    };
    let listed: Vec<_> = store
        .list_undispatched(&filter, 10, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(listed, vec![ids[3], ids[1], ids[0]]);
    let page: Vec<_> = store
        .list_undispatched(&filter, 1, 1)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(page, vec![ids[1]]);
    let all = store
        .list_undispatched(&EventFilter::default(), 100, 0)
        .await
        .unwrap();
    assert_eq!(all.len(), 5);
}

/// Bad event input is refused before anything is recorded.
pub async fn bad_event_input_is_refused<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let bad = [
        NewEvent::new("app", "s", "", json!({})),
        NewEvent::new("", "s", TICK, json!({})),
        tick("app", "s", json!({})).with_dedupe_key(""),
        tick("app", "s", json!({"nul": "a\u{0}b"})),
    ];
    for event in bad {
        assert_err!(
            store.emit(event, Dispatch::Now).await,
            Error::InvalidInput(_)
        );
    }
    assert!(
        store
            .list_undispatched(&EventFilter::default(), 10, 0)
            .await
            .unwrap()
            .is_empty()
    );
    let runs = store
        .list_runs(&flowstate_core::RunQuery::default())
        .await
        .unwrap();
    assert!(runs.items.is_empty());
}

/// Unknown events are typed errors, read or redriven.
pub async fn unknown_event_ids_are_typed<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let e = EventId::generate();
    assert_err!(store.get_event(e).await, Error::EventNotFound(id) if id == e);
    assert_err!(store.redrive(e).await, Error::EventNotFound(id) if id == e);
}
