//! [`EventStore`] for [`MemoryStore`]: events and their pinned deliveries
//! (the definitions they match are in `definitions.rs`), with every rule
//! asked of core ([`Activation::matches`], [`Delivery::new_run`],
//! [`Delivery::cause`], [`Event::is_pending`]), and [`EventQueueStore`]
//! over the same tables: the oldest pending event, taken under the one
//! lock.

use std::collections::HashMap;

use flowstate_core::backoff::EventDispatchOutcome;
use flowstate_core::events::{check_dispatch_batch, encode_emit_batch};
use flowstate_core::limits::checked;
use flowstate_core::ports::{EventQueueStore, EventStore, checks};
use flowstate_core::{
    Activation, ActivationId, Delivery, Dispatch, Emission, Error, Event, EventFilter, EventId,
    NewEvent, NextDispatch, PendingEvent, PublishedVersion, PublishedVersionId, Result, RunCause,
    RunId, Timestamp, Workflow, WorkflowId,
};

use super::{MemoryStore, Tables};
use crate::harness::Pick;

/// The event tables, a field of [`Tables`].
#[derive(Debug, Default)]
pub(super) struct EventTables {
    pub(super) workflows: HashMap<WorkflowId, Workflow>,
    pub(super) workflow_by_name: HashMap<(String, String, String), WorkflowId>,
    pub(super) versions: HashMap<PublishedVersionId, PublishedVersion>,
    pub(super) activations: HashMap<ActivationId, Activation>,
    pub(super) events: HashMap<EventId, Event>,
    pub(super) event_by_dedupe: HashMap<(String, String, String, String), EventId>,
    /// Per event, its deliveries by activation id.
    pub(super) deliveries: HashMap<EventId, Vec<Delivery>>,
    pub(super) delivery_of_run: HashMap<RunId, (EventId, ActivationId)>,
}

impl EventTables {
    pub(super) fn workflow_mut(&mut self, id: WorkflowId) -> Result<&mut Workflow> {
        self.workflows
            .get_mut(&id)
            .ok_or(Error::WorkflowNotFound(id))
    }

    fn event(&self, id: EventId) -> Result<&Event> {
        self.events.get(&id).ok_or(Error::EventNotFound(id))
    }

    /// The events a dispatcher may take at `now`, the longest due first.
    fn pending(&self, now: Timestamp) -> Vec<&Event> {
        let mut due: Vec<&Event> = self.events.values().filter(|e| e.is_pending(now)).collect();
        due.sort_by_key(|e| (e.dispatch_after, e.occurred_at, e.id));
        due
    }
}

impl Tables {
    /// Records checked `event` at `now` as [`EventStore::emit`] does, or
    /// answers the event already holding its dedupe key.
    fn emit(&mut self, event: NewEvent, dispatch: Dispatch, now: Timestamp) -> Emission {
        let dedupe = event.dedupe_key.clone().map(|key| {
            (
                event.app_id.clone(),
                event.scope_id.clone(),
                event.event_type.clone(),
                key,
            )
        });
        if let Some(first) = dedupe
            .as_ref()
            .and_then(|k| self.events.event_by_dedupe.get(k))
        {
            let first = *first;
            return Emission {
                event: first,
                runs: self.runs_of(first),
                duplicate: true,
            };
        }
        let mut stored = event.into_event(EventId::generate(), now);
        let t = &mut self.events;
        let mut deliveries: Vec<Delivery> = t
            .activations
            .values()
            .filter(|a| a.matches(&t.workflows[&a.workflow], &stored))
            .map(|a| Delivery {
                event: stored.id,
                activation: a.id,
                workflow: a.workflow,
                workflow_name: t.workflows[&a.workflow].name.clone(),
                version: a.version,
                version_hash: t.versions[&a.version].hash.clone(),
                authorization: a.authorization.clone(),
                run: RunId::generate(),
            })
            .collect();
        deliveries.sort_by_key(|d| d.activation);
        let now_dispatch = stored.stamp_emitted(deliveries.len(), dispatch, now);
        let id = stored.id;
        for d in &deliveries {
            t.delivery_of_run.insert(d.run, (id, d.activation));
        }
        t.deliveries.insert(id, deliveries);
        t.events.insert(id, stored);
        if let Some(key) = dedupe {
            t.event_by_dedupe.insert(key, id);
        }
        let runs = if now_dispatch {
            self.materialise(id, now)
        } else {
            Vec::new()
        };
        Emission {
            event: id,
            runs,
            duplicate: false,
        }
    }

    /// Materialises pending event `id` and marks it dispatched.
    fn dispatch(&mut self, id: EventId, now: Timestamp) -> Vec<RunId> {
        let runs = self.materialise(id, now);
        let event = self.events.events.get_mut(&id).expect("a pending event");
        event.dispatched_at = Some(now);
        event.attempts += 1;
        event.last_error = None;
        runs
    }

    /// The runs of `event`'s deliveries that exist, in delivery order.
    fn runs_of(&self, event: EventId) -> Vec<RunId> {
        self.events.deliveries[&event]
            .iter()
            .map(|d| d.run)
            .filter(|run| self.runs.contains_key(run))
            .collect()
    }

    /// Creates the run of every delivery of `event` that has none yet (by
    /// its key), and answers them all.
    fn materialise(&mut self, event: EventId, now: Timestamp) -> Vec<RunId> {
        let stored = self.events.events[&event].clone();
        for delivery in self.events.deliveries[&event].clone() {
            let run = delivery.new_run(&stored);
            let key = run.idempotency_key.clone().unwrap_or_default();
            if !self.run_by_key.contains_key(&key) {
                self.insert_run(run.into_run(delivery.run, now));
            }
        }
        self.runs_of(event)
    }
}

impl EventStore for MemoryStore {
    async fn emit(&self, event: NewEvent, dispatch: Dispatch) -> Result<Emission> {
        let (event, _) = checked(event, |event| checks::emit(&self.limits, event))?;
        let now = self.now();
        Ok(self.lock().emit(event, dispatch, now))
    }

    /// Every event checked first, then all recorded under the one lock, in
    /// input order: a key repeated in the batch meets the event recorded
    /// just before it, as a SQL batch's first of the key.
    async fn emit_batch(&self, events: Vec<NewEvent>, dispatch: Dispatch) -> Result<Vec<Emission>> {
        let (events, _) = checked(events, |events| encode_emit_batch(&self.limits, events))?;
        let now = self.now();
        let mut tables = self.lock();
        Ok(events
            .into_iter()
            .map(|event| tables.emit(event, dispatch, now))
            .collect())
    }

    async fn get_event(&self, id: EventId) -> Result<Event> {
        self.lock().events.event(id).cloned()
    }

    async fn pending_events(&self, limit: u32) -> Result<Vec<PendingEvent>> {
        let now = self.now();
        let tables = self.lock();
        Ok(tables
            .events
            .pending(now)
            .into_iter()
            .take(limit as usize)
            .map(|e| PendingEvent {
                id: e.id,
                attempts: e.attempts,
            })
            .collect())
    }

    async fn dispatch_event(&self, id: EventId) -> Result<Option<Vec<RunId>>> {
        let now = self.now();
        let mut tables = self.lock();
        if !tables.events.event(id)?.is_pending(now) {
            return Ok(None);
        }
        tables.strike_after_pick(Pick::Events, "dispatch_event")?;
        Ok(Some(tables.dispatch(id, now)))
    }

    async fn record_dispatch_failure(
        &self,
        id: EventId,
        attempts: u32,
        error: &str,
        outcome: EventDispatchOutcome,
    ) -> Result<bool> {
        let now = self.now();
        let mut tables = self.lock();
        let event = tables
            .events
            .events
            .get_mut(&id)
            .ok_or(Error::EventNotFound(id))?;
        if event.attempts != attempts
            || event.dispatched_at.is_some()
            || event.dead_lettered_at.is_some()
        {
            return Ok(false);
        }
        event.attempts += 1;
        event.last_error = Some(checks::dispatch_error(error));
        match outcome {
            EventDispatchOutcome::RetryAfter(delay) => event.dispatch_after = now.plus(delay),
            EventDispatchOutcome::DeadLetter => event.dead_lettered_at = Some(now),
        }
        Ok(true)
    }

    async fn list_undispatched(
        &self,
        filter: &EventFilter,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<Event>> {
        let tables = self.lock();
        let mut out: Vec<Event> = tables
            .events
            .events
            .values()
            .filter(|e| e.is_undispatched() && filter.admits(e))
            .cloned()
            .collect();
        out.sort_by_key(|e| (e.occurred_at, e.id));
        Ok(out
            .into_iter()
            .skip(offset as usize)
            .take(limit as usize)
            .collect())
    }

    async fn redrive(&self, id: EventId) -> Result<bool> {
        let now = self.now();
        let mut tables = self.lock();
        let event = tables
            .events
            .events
            .get_mut(&id)
            .ok_or(Error::EventNotFound(id))?;
        if event.dead_lettered_at.is_none() || event.dispatched_at.is_some() {
            return Ok(false);
        }
        event.dead_lettered_at = None;
        event.attempts = 0;
        event.dispatch_after = now;
        Ok(true)
    }

    async fn run_cause(&self, run: RunId) -> Result<Option<RunCause>> {
        let tables = self.lock();
        if !tables.runs.contains_key(&run) {
            return Ok(None);
        }
        let t = &tables.events;
        Ok(t.delivery_of_run.get(&run).map(|(event, activation)| {
            let delivery = t.deliveries[event]
                .iter()
                .find(|d| d.activation == *activation)
                .expect("a delivery is never removed");
            delivery.cause(&t.events[event])
        }))
    }

    async fn event_runs(&self, event: EventId) -> Result<Vec<RunCause>> {
        let tables = self.lock();
        let t = &tables.events;
        let recorded = t.events.get(&event).ok_or(Error::EventNotFound(event))?;
        // A delivery's run is named when it is pinned; it exists once the
        // delivery is materialised (and until it is deleted).
        let mut causes: Vec<RunCause> = t
            .deliveries
            .get(&event)
            .into_iter()
            .flatten()
            .filter(|d| tables.runs.contains_key(&d.run))
            .map(|d| d.cause(recorded))
            .collect();
        causes.sort_by_key(|c| c.activation);
        Ok(causes)
    }
}

impl EventQueueStore for MemoryStore {
    async fn dispatch_next(&self) -> Result<NextDispatch> {
        let now = self.now();
        let mut tables = self.lock();
        let Some((id, attempts)) = tables
            .events
            .pending(now)
            .first()
            .map(|e| (e.id, e.attempts))
        else {
            return Ok(NextDispatch::Idle);
        };
        if let Err(error) = tables.strike_after_pick(Pick::Events, "dispatch_next") {
            let event = PendingEvent { id, attempts };
            return Ok(NextDispatch::Failed { event, error });
        }
        let runs = tables.dispatch(id, now);
        Ok(NextDispatch::Dispatched { event: id, runs })
    }

    /// Under the one lock, as `dispatch_next`: the first `n` pending
    /// events, the longest due first, dispatched together. A batch that
    /// meets an abort after its pick ([`Pick::Events`]) dispatches nothing
    /// together and takes each event again on its own, as a SQL backend
    /// whose batch transaction failed does.
    async fn dispatch_next_batch(&self, n: u32) -> Result<Vec<NextDispatch>> {
        check_dispatch_batch(n)?;
        let now = self.now();
        let mut tables = self.lock();
        let taken: Vec<PendingEvent> = tables
            .events
            .pending(now)
            .into_iter()
            .take(n as usize)
            .map(|e| PendingEvent {
                id: e.id,
                attempts: e.attempts,
            })
            .collect();
        if taken.is_empty() {
            return Ok(Vec::new());
        }
        let together = tables
            .strike_after_pick(Pick::Events, "dispatch_next_batch")
            .is_ok();
        let mut answers = Vec::with_capacity(taken.len());
        for event in taken {
            if !together && let Err(error) = tables.strike_after_pick(Pick::Events, "dispatch_next")
            {
                answers.push(NextDispatch::Failed { event, error });
                continue;
            }
            let runs = tables.dispatch(event.id, now);
            answers.push(NextDispatch::Dispatched {
                event: event.id,
                runs,
            });
        }
        Ok(answers)
    }
}
