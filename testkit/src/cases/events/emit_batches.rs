//! [`EventStore::emit_batch`]: many events recorded in one call with
//! [`EventStore::emit`]'s guarantees each: answers in input order; dedupe
//! against the stored events and within the batch; an event that matches
//! nothing dispatched at once; `Now` materialising every recorded event's
//! runs; a size past [`MAX_EMIT_BATCH`] refused and an empty batch
//! answered empty; a bad event refusing the whole batch with nothing
//! written; and racing batches over the same dedupe keys recording each
//! key once, with one run per delivery.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flowstate_core::error::InvalidInput;
use flowstate_core::events::MAX_EMIT_BATCH;
use flowstate_core::ports::{EventStore, RunStore};
use flowstate_core::{
    Clock, Dispatch, Emission, Error, EventFilter, EventId, NewEvent, RunId, RunQuery,
};
use serde_json::{Value, json};

use crate::Harness;
use crate::cases::support::events::{EventBackend, TICK, activate, listening, tick};
use crate::cases::support::{assert_err, race};

/// Every run the store holds (at most [`RunQuery::MAX_LIMIT`]).
async fn all_runs<S: RunStore>(store: &Arc<S>) -> Vec<RunId> {
    let query = RunQuery {
        limit: RunQuery::MAX_LIMIT,
        ..RunQuery::default()
    };
    let page = store.list_runs(&query).await.expect("list_runs");
    page.items.into_iter().map(|run| run.id).collect()
}

/// A [`TICK`] in `app`/`s` with `data` and dedupe key `key`.
fn keyed(key: &str, data: Value) -> NewEvent {
    tick("app", "s", data).with_dedupe_key(key)
}

/// Three deferred events, the middle one of a type nobody listens for:
/// three answers in input order, none a duplicate, each the event of its
/// input (its data); the two ticks pinned one delivery each and waiting
/// for a dispatcher, in the order they were given, and no run yet.
pub async fn emit_batch_answers_in_input_order<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let events = vec![
        tick("app", "s", json!({"n": 0})),
        NewEvent::new("app", "s", "app.nobody", json!({"n": 1})),
        tick("app", "s", json!({"n": 2})),
    ];
    let answers = store.emit_batch(events, Dispatch::Deferred).await.unwrap();
    assert_eq!(answers.len(), 3, "{answers:?}");
    let ids: BTreeSet<EventId> = answers.iter().map(|a| a.event).collect();
    assert_eq!(ids.len(), 3, "three events recorded: {answers:?}");
    for (n, answer) in answers.iter().enumerate() {
        assert!(!answer.duplicate && answer.runs.is_empty(), "{answer:?}");
        let stored = store.get_event(answer.event).await.unwrap();
        assert_eq!(stored.data, json!({"n": n}), "answer {n} is event {n}");
        assert_eq!(stored.matched, u32::from(n != 1), "answer {n}");
    }
    let pending = store.pending_events(10).await.unwrap();
    let pending: Vec<EventId> = pending.iter().map(|p| p.id).collect();
    assert_eq!(pending, vec![answers[0].event, answers[2].event]);
    assert!(all_runs(store).await.is_empty(), "deferred: no run yet");
}

/// An event of a batch that matches nothing is dispatched at once
/// (attempts 0, matched 0) and never pending, beside one that matched.
pub async fn emit_batch_matching_nothing_is_dispatched_at_once<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let events = vec![
        NewEvent::new("app", "s", "app.nobody", json!({})),
        tick("app", "other-scope", json!({})),
        tick("app", "s", json!({})),
    ];
    let answers = store.emit_batch(events, Dispatch::Deferred).await.unwrap();
    for answer in &answers[..2] {
        let stored = store.get_event(answer.event).await.unwrap();
        assert_eq!(
            (stored.matched, stored.dispatched_at, stored.attempts),
            (0, Some(h.clock().now()), 0),
            "matched nothing: dispatched at once"
        );
    }
    let matched = store.get_event(answers[2].event).await.unwrap();
    assert_eq!((matched.matched, matched.dispatched_at), (1, None));
    let pending = store.pending_events(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, answers[2].event);
    let filter = EventFilter::default();
    let listed = store.list_undispatched(&filter, 10, 0);
    assert_eq!(listed.await.unwrap().len(), 3, "all three are undispatched");
}

/// `Now` over two activations: each of three events answers its two runs,
/// in delivery order, as [`EventStore::event_runs`] lists them, each run's
/// cause naming its event; each event dispatched with its first attempt.
pub async fn emit_batch_now_materialises_the_runs<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    let f = listening(h, "app", "s", "wf").await;
    activate(h, &f.workflow, &f.version, TICK).await;
    let events = (0..3).map(|n| tick("app", "s", json!({"n": n}))).collect();
    let answers = store.emit_batch(events, Dispatch::Now).await.unwrap();
    assert_eq!(answers.len(), 3);
    for answer in &answers {
        assert!(!answer.duplicate);
        assert_eq!(answer.runs.len(), 2, "{answer:?}");
        let causes = store.event_runs(answer.event).await.unwrap();
        let runs: Vec<RunId> = causes.iter().map(|c| c.run).collect();
        assert_eq!(runs, answer.runs, "delivery order");
        for run in &answer.runs {
            let cause = store.run_cause(*run).await.unwrap().expect("a cause");
            assert_eq!(cause.event, answer.event);
        }
        let stored = store.get_event(answer.event).await.unwrap();
        assert_eq!(
            (stored.dispatched_at, stored.attempts),
            (Some(h.clock().now()), 1)
        );
    }
    assert_eq!(all_runs(store).await.len(), 6);
    assert!(store.pending_events(10).await.unwrap().is_empty());
}

/// Dedupe against the stored events and within the batch: with `slot-a`
/// recorded before, a batch of `slot-a`, `slot-b`, an unkeyed event,
/// `slot-b` again, `slot-a` again and `slot-b` in another scope answers
/// the stored event twice and the batch's own `slot-b` for its repeat,
/// each with that event's runs and `duplicate: true`, and records three
/// events: four runs in all.
pub async fn emit_batch_dedupes_against_stored_and_within<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    listening(h, "app", "s2", "wf").await;
    let first = store.emit(keyed("slot-a", json!({})), Dispatch::Now);
    let first = first.await.unwrap();
    let events = vec![
        keyed("slot-a", json!({"i": 0})),
        keyed("slot-b", json!({"i": 1})),
        tick("app", "s", json!({"i": 2})),
        keyed("slot-b", json!({"i": 3})),
        keyed("slot-a", json!({"i": 4})),
        tick("app", "s2", json!({"i": 5})).with_dedupe_key("slot-b"),
    ];
    let answers = store.emit_batch(events, Dispatch::Now).await.unwrap();
    let dups: Vec<bool> = answers.iter().map(|a| a.duplicate).collect();
    assert_eq!(dups, [true, false, false, true, true, false], "{answers:?}");
    for stored_dup in [&answers[0], &answers[4]] {
        assert_eq!(
            (stored_dup.event, &stored_dup.runs),
            (first.event, &first.runs)
        );
    }
    assert_eq!(
        (answers[3].event, &answers[3].runs),
        (answers[1].event, &answers[1].runs)
    );
    assert_eq!(answers[1].runs.len(), 1);
    let recorded: BTreeSet<EventId> = answers.iter().map(|a| a.event).collect();
    assert_eq!(
        recorded.len(),
        4,
        "slot-a, slot-b, the unkeyed, slot-b in s2"
    );
    assert_eq!(all_runs(store).await.len(), 4);
    let stored = store.get_event(answers[1].event).await.unwrap();
    assert_eq!(
        stored.data,
        json!({"i": 1}),
        "the first of the batch's slot-b"
    );
    let again = store.emit(keyed("slot-b", json!({})), Dispatch::Now);
    let again = again.await.unwrap();
    assert!(again.duplicate && again.event == answers[1].event);
}

/// More than [`MAX_EMIT_BATCH`] events are refused as out of range and
/// none is recorded; an empty batch answers nothing; the largest batch is
/// recorded whole.
pub async fn emit_batch_refuses_a_size_out_of_range<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let batch =
        |n: usize| -> Vec<NewEvent> { (0..n).map(|i| tick("app", "s", json!({"i": i}))).collect() };
    assert_err!(
        store
            .emit_batch(batch(MAX_EMIT_BATCH + 1), Dispatch::Now)
            .await,
        Error::InvalidInput(InvalidInput::OutOfRange { .. })
    );
    assert!(all_runs(store).await.is_empty(), "nothing recorded");
    assert!(
        store
            .list_undispatched(&EventFilter::default(), 10, 0)
            .await
            .unwrap()
            .is_empty()
    );
    let none = store.emit_batch(Vec::new(), Dispatch::Now).await.unwrap();
    assert!(none.is_empty());
    let all = store.emit_batch(batch(MAX_EMIT_BATCH), Dispatch::Deferred);
    let all = all.await.unwrap();
    assert_eq!(all.len(), MAX_EMIT_BATCH);
    let pending = store.pending_events(1_000).await.unwrap();
    assert_eq!(pending.len(), MAX_EMIT_BATCH);
}

/// JSON `levels` arrays deep.
fn deep(levels: usize) -> Value {
    let mut value = json!(0);
    for _ in 0..levels {
        value = Value::Array(vec![value]);
    }
    value
}

/// One bad event refuses the whole batch with the error `emit` gives it,
/// wherever it stands, and nothing of the batch is written: an empty
/// dedupe key, a NUL in the data, a type too long, and JSON 100,000 levels
/// deep (refused and dropped without overflowing the stack). The good
/// events' key is still free afterwards.
pub async fn emit_batch_with_a_bad_event_writes_nothing<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let bad: [fn() -> NewEvent; 4] = [
        || keyed("", json!({})),
        || tick("app", "s", json!({"nul": "a\u{0}b"})),
        || NewEvent::new("app", "s", "t".repeat(10_000), json!({})),
        || tick("app", "s", deep(100_000)),
    ];
    for (i, make) in bad.into_iter().enumerate() {
        let alone = store.emit(make(), Dispatch::Now).await;
        let Err(Error::InvalidInput(expected)) = alone else {
            panic!("bad event {i} alone: {alone:?}");
        };
        for at in 0..3 {
            let mut events: Vec<NewEvent> = (0..2)
                .map(|n| keyed(&format!("good-{n}"), json!({})))
                .collect();
            events.insert(at, make());
            let refused = store.emit_batch(events, Dispatch::Now).await;
            assert_err!(
                refused,
                Error::InvalidInput(ref got) if *got == expected,
            );
        }
    }
    assert!(all_runs(store).await.is_empty(), "no run");
    let filter = EventFilter::default();
    let listed = store.list_undispatched(&filter, 10, 0);
    assert!(listed.await.unwrap().is_empty(), "no event");
    assert!(store.pending_events(10).await.unwrap().is_empty());
    let good = store.emit(keyed("good-0", json!({})), Dispatch::Now);
    assert!(!good.await.unwrap().duplicate, "the key is still free");
}

/// Eight tasks at once, each a `Now` batch of 24 over two activations:
/// 20 keys of 40 shared with the neighbouring tasks (task `t` takes keys
/// `5t .. 5t + 20`, wrapping), one of them repeated in its own batch, and
/// three unkeyed events. Each key is recorded by exactly one batch and
/// answered as that event everywhere else with its two runs; 40 keyed and
/// 24 unkeyed events, and exactly two runs per recorded event.
pub async fn emit_batch_race_8_overlapping_keys<H: Harness>(h: &H)
where
    H::Store: EventBackend,
{
    const TASKS: usize = 8;
    const KEYS: usize = 40;
    let f = listening(h, "app", "s", "wf").await;
    activate(h, &f.workflow, &f.version, TICK).await;
    let outcomes = race(h.store(), TASKS, |store, t| async move {
        let mut events: Vec<NewEvent> = (0..20)
            .map(|j| keyed(&format!("k{}", (5 * t + j) % KEYS), json!({"t": t, "j": j})))
            .collect();
        events.insert(
            7,
            keyed(&format!("k{}", (5 * t + 3) % KEYS), json!({"t": t})),
        );
        for u in 0..3 {
            events.push(tick("app", "s", json!({"t": t, "u": u})));
        }
        let keys: Vec<Option<String>> = events.iter().map(|e| e.dedupe_key.clone()).collect();
        let answers = store.emit_batch(events, Dispatch::Now).await;
        (keys, answers.expect("emit_batch"))
    })
    .await;
    let mut by_key: BTreeMap<String, Vec<&Emission>> = BTreeMap::new();
    let mut unkeyed: BTreeSet<EventId> = BTreeSet::new();
    for (keys, answers) in &outcomes {
        assert_eq!(keys.len(), answers.len());
        for (key, answer) in keys.iter().zip(answers) {
            assert_eq!(answer.runs.len(), 2, "{answer:?}");
            if let Some(key) = key {
                by_key.entry(key.clone()).or_default().push(answer);
            } else {
                assert!(!answer.duplicate);
                unkeyed.insert(answer.event);
            }
        }
    }
    assert_eq!(by_key.len(), KEYS);
    assert_eq!(unkeyed.len(), 3 * TASKS);
    let mut keyed_events = BTreeSet::new();
    for (key, answers) in &by_key {
        let winners: Vec<_> = answers.iter().filter(|a| !a.duplicate).collect();
        assert_eq!(winners.len(), 1, "{key} recorded {} times", winners.len());
        for answer in answers {
            assert_eq!(
                (answer.event, &answer.runs),
                (winners[0].event, &winners[0].runs),
                "{key}"
            );
        }
        keyed_events.insert(winners[0].event);
    }
    assert_eq!(keyed_events.len(), KEYS);
    let runs: BTreeSet<RunId> = all_runs(h.store()).await.into_iter().collect();
    assert_eq!(runs.len(), 2 * (KEYS + 3 * TASKS), "one run per delivery");
    for answers in by_key.values() {
        assert!(answers[0].runs.iter().all(|r| runs.contains(r)));
    }
}
