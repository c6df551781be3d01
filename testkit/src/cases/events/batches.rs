//! [`EventQueueStore::dispatch_next_batch`]: up to n free pending events
//! taken the longest due first and dispatched together, each once; fewer
//! when the queue holds fewer, none when it is idle; a size out of range
//! refused; racing batches and single takes giving each delivery exactly
//! one run; and `flowstate-events`' `dispatch_queued` over batches,
//! recording the failed event of a batch while the rest are dispatched.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::backoff::{EventDispatchBackoff, EventDispatchOutcome};
use flowstate_core::error::InvalidInput;
use flowstate_core::events::MAX_DISPATCH_BATCH;
use flowstate_core::ports::{EventQueueStore, EventStore, RunStore};
use flowstate_core::{
    Clock, Dispatch, Emission, Error, Event, EventFilter, EventId, NewEvent, NextDispatch,
    PendingEvent, Result, RunCause, RunId, RunQuery,
};
use flowstate_events::{DispatchReport, dispatch_queued};
use serde_json::json;

use crate::Harness;
use crate::cases::support::events::{EventQueueBackend, TICK, activate, emit, listening, tick};
use crate::cases::support::race;

/// The events and run counts of a batch's answers; panics on anything but
/// `Dispatched`.
fn dispatched(answers: Vec<NextDispatch>) -> Vec<(EventId, usize)> {
    answers
        .into_iter()
        .map(|answer| match answer {
            NextDispatch::Dispatched { event, runs } => (event, runs.len()),
            other => panic!("expected a dispatched event, got {other:?}"),
        })
        .collect()
}

/// Five deferred events due one after another: a batch of 3 takes the
/// first three in the order they fell due, each with its run, attempts 1
/// and dispatched now; a batch of 10 takes the two left; the next is
/// empty, and so is a batch over an idle queue from the start.
pub async fn dispatch_next_batch_takes_the_longest_due_once<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    let store = h.store();
    assert!(
        store.dispatch_next_batch(5).await.unwrap().is_empty(),
        "an empty queue answers no event"
    );
    listening(h, "app", "s", "wf").await;
    let mut emitted = Vec::new();
    for n in 0..5 {
        emitted.push(emit(h, tick("app", "s", json!({"n": n})), Dispatch::Deferred).await);
        h.clock().advance(Duration::from_millis(1));
    }
    let first = dispatched(store.dispatch_next_batch(3).await.unwrap());
    let expected: Vec<_> = emitted[..3].iter().map(|e| (e.event, 1)).collect();
    assert_eq!(first, expected, "the three longest due, in order");
    let rest = dispatched(store.dispatch_next_batch(10).await.unwrap());
    let expected: Vec<_> = emitted[3..].iter().map(|e| (e.event, 1)).collect();
    assert_eq!(
        rest, expected,
        "a batch larger than the queue takes what is left"
    );
    assert!(store.dispatch_next_batch(10).await.unwrap().is_empty());
    assert!(matches!(
        store.dispatch_next().await.unwrap(),
        NextDispatch::Idle
    ));
    for e in &emitted {
        let stored = store.get_event(e.event).await.unwrap();
        assert_eq!(
            (stored.attempts, stored.dispatched_at, stored.last_error),
            (1, Some(h.clock().now()), None),
            "dispatched once"
        );
        assert_eq!(store.event_runs(e.event).await.unwrap().len(), 1);
    }
    let runs = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(runs.len(), 5);
}

/// A batch of 0 or of more than [`MAX_DISPATCH_BATCH`] is refused as out
/// of range and takes nothing; the largest batch is accepted.
pub async fn dispatch_next_batch_refuses_a_size_out_of_range<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    for n in [0, MAX_DISPATCH_BATCH + 1, u32::MAX] {
        let refused = store.dispatch_next_batch(n).await;
        assert!(
            matches!(
                refused,
                Err(Error::InvalidInput(InvalidInput::OutOfRange { .. }))
            ),
            "a batch of {n}: {refused:?}"
        );
    }
    let stored = store.get_event(emitted.event).await.unwrap();
    assert_eq!((stored.attempts, stored.dispatched_at), (0, None));
    let taken = dispatched(store.dispatch_next_batch(MAX_DISPATCH_BATCH).await.unwrap());
    assert_eq!(taken, vec![(emitted.event, 1)]);
}

/// An event backing off, one dead-lettered and one that matched nothing
/// are left by a batch, which takes only the event that is due.
pub async fn dispatch_next_batch_leaves_what_is_not_pending<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let waiting = emit(h, tick("app", "s", json!({"w": 1})), Dispatch::Deferred).await;
    let dead = emit(h, tick("app", "s", json!({"d": 1})), Dispatch::Deferred).await;
    let nobody = NewEvent::new("app", "s", "app.nobody", json!({}));
    emit(h, nobody, Dispatch::Deferred).await;
    let due = emit(h, tick("app", "s", json!({"due": 1})), Dispatch::Deferred).await;
    let retry = EventDispatchOutcome::RetryAfter(Duration::from_secs(5));
    let failures = [
        (waiting.event, retry),
        (dead.event, EventDispatchOutcome::DeadLetter),
    ];
    for (event, outcome) in failures {
        let wrote = store.record_dispatch_failure(event, 0, "boom", outcome);
        assert!(wrote.await.unwrap());
    }
    let taken = dispatched(store.dispatch_next_batch(10).await.unwrap());
    assert_eq!(taken, vec![(due.event, 1)]);
    h.clock().advance(Duration::from_secs(5));
    let taken = dispatched(store.dispatch_next_batch(10).await.unwrap());
    assert_eq!(taken, vec![(waiting.event, 1)], "due again after its delay");
    let stored = store.get_event(dead.event).await.unwrap();
    assert_eq!(
        stored.dispatched_at, None,
        "dead-lettered stays undispatched"
    );
}

/// Twelve tasks over 150 pending events of two deliveries each, at once:
/// eight take batches of 7 ([`EventQueueStore::dispatch_next_batch`]),
/// four take one event at a time ([`EventQueueStore::dispatch_next`]),
/// until the queue is idle. Each event is taken by exactly one of them and
/// dispatched once, each delivery has exactly one run, nothing failed,
/// nothing is left.
pub async fn dispatch_next_batch_race_12_over_150_events<H: Harness>(h: &H)
where
    H::Store: EventQueueBackend,
{
    const EVENTS: usize = 150;
    let fixture = listening(h, "app", "s", "wf").await;
    activate(h, &fixture.workflow, &fixture.version, TICK).await;
    let store = h.store();
    let mut events = BTreeSet::new();
    for i in 0..EVENTS {
        let emitted = store
            .emit(tick("app", "s", json!({"i": i})), Dispatch::Deferred)
            .await
            .unwrap();
        events.insert(emitted.event);
    }
    let taken = race(store, 12, |store, task| async move {
        let mut mine: Vec<(EventId, Vec<RunId>)> = Vec::new();
        loop {
            let answers = if task < 8 {
                store.dispatch_next_batch(7).await.expect("a batch")
            } else {
                match store.dispatch_next().await.expect("dispatch_next") {
                    NextDispatch::Idle => Vec::new(),
                    one => vec![one],
                }
            };
            if answers.is_empty() {
                break mine;
            }
            for answer in answers {
                match answer {
                    NextDispatch::Dispatched { event, runs } => mine.push((event, runs)),
                    other => panic!("task {task}: {other:?}"),
                }
            }
        }
    })
    .await;
    let all: Vec<_> = taken.into_iter().flatten().collect();
    assert_eq!(all.len(), EVENTS, "each event taken exactly once");
    let mut per_event: BTreeMap<EventId, usize> = BTreeMap::new();
    for (event, _) in &all {
        *per_event.entry(*event).or_default() += 1;
    }
    assert!(per_event.values().all(|&n| n == 1), "{per_event:?}");
    assert_eq!(per_event.keys().copied().collect::<BTreeSet<_>>(), events);
    let run_ids: BTreeSet<RunId> = all.iter().flat_map(|(_, runs)| runs.clone()).collect();
    assert_eq!(run_ids.len(), 2 * EVENTS, "one run per delivery");
    let query = RunQuery {
        limit: RunQuery::MAX_LIMIT,
        ..RunQuery::default()
    };
    let runs = store.list_runs(&query).await.unwrap().items;
    assert_eq!(runs.len(), 2 * EVENTS, "no run but the deliveries'");
    for event in &events {
        let stored = store.get_event(*event).await.unwrap();
        assert_eq!(stored.attempts, 1, "dispatched once");
        assert_eq!(store.event_runs(*event).await.unwrap().len(), 2);
    }
    assert!(store.pending_events(10).await.unwrap().is_empty());
}

/// `dispatch_queued` over a store whose batches answer one event failed
/// (as a store whose batch transaction failed answers the bad event once
/// it has taken each again on its own) records that failure on the event
/// with core's backoff, counts the others dispatched, and takes the failed
/// event again only once it is due.
pub async fn dispatch_queued_records_the_failed_event_of_a_batch<H: Harness>(h: &H)
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
    let bad = emitted[1].event;
    let store_failing_one = FailingOne {
        inner: Arc::clone(store),
        bad,
    };
    let backoff = EventDispatchBackoff::default();
    let report = dispatch_queued(&store_failing_one, backoff, 10)
        .await
        .unwrap();
    assert_eq!(
        report,
        DispatchReport {
            dispatched: 2,
            failed: 1,
            ..DispatchReport::default()
        }
    );
    let stored = store.get_event(bad).await.unwrap();
    assert_eq!((stored.attempts, stored.dispatched_at), (1, None));
    assert!(
        stored
            .last_error
            .unwrap()
            .contains("materialisation refused")
    );
    let EventDispatchOutcome::RetryAfter(delay) = backoff.after_failure(1) else {
        panic!("the first failure dead-lettered");
    };
    assert_eq!(stored.dispatch_after, h.clock().now().plus(delay));
    for good in [emitted[0].event, emitted[2].event] {
        let stored = store.get_event(good).await.unwrap();
        assert_eq!((stored.attempts, stored.last_error), (1, None));
        assert!(stored.dispatched_at.is_some());
    }
    let report = dispatch_queued(&**store, backoff, 10).await.unwrap();
    assert_eq!(report, DispatchReport::default(), "backing off");
    h.clock().advance(delay);
    let report = dispatch_queued(&**store, backoff, 10).await.unwrap();
    assert_eq!(report.dispatched, 1);
    let runs = store.list_runs(&RunQuery::default()).await.unwrap().items;
    assert_eq!(runs.len(), 3, "one run per event");
}

/// A store whose batches take the pending events one at a time and fail
/// `bad` as a materialisation that cannot be written would, dispatching
/// the others; the rest goes to the store inside.
#[derive(Debug)]
struct FailingOne<S> {
    inner: Arc<S>,
    bad: EventId,
}

impl<S: EventStore> EventStore for FailingOne<S> {
    async fn emit(&self, event: NewEvent, dispatch: Dispatch) -> Result<Emission> {
        self.inner.emit(event, dispatch).await
    }

    async fn get_event(&self, id: EventId) -> Result<Event> {
        self.inner.get_event(id).await
    }

    async fn pending_events(&self, limit: u32) -> Result<Vec<PendingEvent>> {
        self.inner.pending_events(limit).await
    }

    async fn dispatch_event(&self, id: EventId) -> Result<Option<Vec<RunId>>> {
        self.inner.dispatch_event(id).await
    }

    async fn record_dispatch_failure(
        &self,
        id: EventId,
        attempts: u32,
        error: &str,
        outcome: EventDispatchOutcome,
    ) -> Result<bool> {
        self.inner
            .record_dispatch_failure(id, attempts, error, outcome)
            .await
    }

    async fn list_undispatched(
        &self,
        filter: &EventFilter,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<Event>> {
        self.inner.list_undispatched(filter, limit, offset).await
    }

    async fn redrive(&self, id: EventId) -> Result<bool> {
        self.inner.redrive(id).await
    }

    async fn run_cause(&self, run: RunId) -> Result<Option<RunCause>> {
        self.inner.run_cause(run).await
    }

    async fn event_runs(&self, event: EventId) -> Result<Vec<RunCause>> {
        self.inner.event_runs(event).await
    }
}

impl<S: EventStore> EventQueueStore for FailingOne<S> {
    async fn dispatch_next(&self) -> Result<NextDispatch> {
        unreachable!("dispatch_queued takes batches")
    }

    async fn dispatch_next_batch(&self, n: u32) -> Result<Vec<NextDispatch>> {
        let mut answers = Vec::new();
        for event in self.inner.pending_events(n).await? {
            if event.id == self.bad {
                let error = Error::backend("dispatch_next_batch", true, "materialisation refused");
                answers.push(NextDispatch::Failed { event, error });
            } else if let Some(runs) = self.inner.dispatch_event(event.id).await? {
                answers.push(NextDispatch::Dispatched {
                    event: event.id,
                    runs,
                });
            }
        }
        Ok(answers)
    }
}
