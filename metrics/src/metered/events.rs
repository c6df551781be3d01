//! [`EventStore`] and [`EventQueueStore`] for [`Metered`]: events emitted
//! (one at a time or in a batch) or deduplicated, dispatched, failed (as recorded), dead-lettered and
//! redriven, and each batched dispatch timed. Counted at the port, so
//! `flowstate-events`' dispatchers over a `Metered` store are counted with
//! no code of their own.

use flowstate_core::backoff::EventDispatchOutcome;
use flowstate_core::ports::{EventQueueStore, EventStore};
use flowstate_core::{
    Dispatch, Emission, Event, EventFilter, EventId, NewEvent, NextDispatch, PendingEvent, Result,
    RunCause, RunId,
};

use super::Metered;
use crate::names;
use crate::record::{count, timed};

impl<S: EventStore> EventStore for Metered<S> {
    async fn emit(&self, event: NewEvent, dispatch: Dispatch) -> Result<Emission> {
        let answer = self.inner.emit(event, dispatch).await;
        if let Ok(emission) = &answer {
            if emission.duplicate {
                count(names::EVENTS_DEDUPLICATED, 1);
            } else {
                count(names::EVENTS_EMITTED, 1);
                // Dispatched in the emit itself.
                if dispatch == Dispatch::Now && !emission.runs.is_empty() {
                    count(names::EVENTS_DISPATCHED, 1);
                }
            }
        }
        answer
    }

    async fn emit_batch(&self, events: Vec<NewEvent>, dispatch: Dispatch) -> Result<Vec<Emission>> {
        // Forwarded, so the inner store's batch (one transaction, all or
        // nothing) is what runs, never the port's default body; each
        // emission counted as `emit` counts one.
        let answer = self.inner.emit_batch(events, dispatch).await;
        if let Ok(emissions) = &answer {
            let duplicates = emissions.iter().filter(|e| e.duplicate).count() as u64;
            let recorded = emissions.len() as u64 - duplicates;
            let dispatched = emissions
                .iter()
                .filter(|e| !e.duplicate && dispatch == Dispatch::Now && !e.runs.is_empty())
                .count() as u64;
            count(names::EVENTS_DEDUPLICATED, duplicates);
            count(names::EVENTS_EMITTED, recorded);
            count(names::EVENTS_DISPATCHED, dispatched);
        }
        answer
    }

    async fn get_event(&self, id: EventId) -> Result<Event> {
        self.inner.get_event(id).await
    }

    async fn pending_events(&self, limit: u32) -> Result<Vec<PendingEvent>> {
        self.inner.pending_events(limit).await
    }

    async fn dispatch_event(&self, id: EventId) -> Result<Option<Vec<RunId>>> {
        let answer = self.inner.dispatch_event(id).await;
        if let Ok(Some(_)) = &answer {
            count(names::EVENTS_DISPATCHED, 1);
        }
        answer
    }

    async fn record_dispatch_failure(
        &self,
        id: EventId,
        attempts: u32,
        error: &str,
        outcome: EventDispatchOutcome,
    ) -> Result<bool> {
        let answer = self
            .inner
            .record_dispatch_failure(id, attempts, error, outcome)
            .await;
        if let Ok(true) = answer {
            count(names::EVENTS_FAILED, 1);
            if outcome == EventDispatchOutcome::DeadLetter {
                count(names::EVENTS_DEAD_LETTERED, 1);
            }
        }
        answer
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
        let answer = self.inner.redrive(id).await;
        if let Ok(true) = answer {
            count(names::EVENTS_REDRIVEN, 1);
        }
        answer
    }

    async fn run_cause(&self, run: RunId) -> Result<Option<RunCause>> {
        self.inner.run_cause(run).await
    }

    async fn event_runs(&self, event: EventId) -> Result<Vec<RunCause>> {
        self.inner.event_runs(event).await
    }
}

impl<S: EventQueueStore> EventQueueStore for Metered<S> {
    async fn dispatch_next(&self) -> Result<NextDispatch> {
        let answer = self.inner.dispatch_next().await;
        if let Ok(NextDispatch::Dispatched { .. }) = &answer {
            count(names::EVENTS_DISPATCHED, 1);
        }
        answer
    }

    async fn dispatch_next_batch(&self, n: u32) -> Result<Vec<NextDispatch>> {
        let answer = timed(
            names::DISPATCH_BATCH_SECONDS,
            self.inner.dispatch_next_batch(n),
        )
        .await;
        if let Ok(answers) = &answer {
            let dispatched = answers
                .iter()
                .filter(|a| matches!(a, NextDispatch::Dispatched { .. }))
                .count();
            count(names::EVENTS_DISPATCHED, dispatched as u64);
        }
        answer
    }
}
