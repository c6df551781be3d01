//! The ports of events: [`EventStore`] (record
//! an event once, or a batch of them in one transaction, pin its deliveries, materialise them into runs, and the
//! dispatch bookkeeping `flowstate-events` drives), and [`EventQueueStore`]
//! (take the next free pending event and dispatch it, for many dispatchers
//! at once). Their definitions are
//! [`DefinitionStore`](crate::ports::DefinitionStore)'s.
//!
//! New traits rather than methods on [`RunStore`](crate::ports::RunStore), so a
//! backend without events keeps compiling. Like every port, each method is
//! one atomic unit of work, checks its input with the backend's
//! [`InputLimits`](crate::InputLimits) first (writing nothing if it is
//! refused), and answers unknown ids with typed errors.

use std::future::Future;

use crate::backoff::EventDispatchOutcome;
use crate::error::Result;
use crate::events::{
    Dispatch, Emission, Event, EventFilter, NewEvent, NextDispatch, PendingEvent, RunCause,
    check_dispatch_batch, check_emit_batch,
};
use crate::ids::{EventId, RunId};
use crate::limits::Dismantle;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::error::Error;
#[allow(unused_imports)]
use crate::events::{encode_emit_batch, first_of_key};

/// Events: recorded once, their deliveries pinned, materialised into runs
/// exactly once.
pub trait EventStore: Send + Sync {
    /// Records `event` and pins its deliveries, in one transaction.
    ///
    /// An event whose (app, scope, type, dedupe key) was already recorded
    /// (however many race) records nothing and answers the first event with
    /// the runs it has started, `duplicate: true`. A dedupe key protects
    /// for as long as its event is kept: once the event is pruned
    /// ([`RetentionStore`](crate::ports::RetentionStore), dispatched events
    /// past the events window, dead letters past theirs) an emit with the
    /// key records a new event. Otherwise the deliveries
    /// are exactly the activations that
    /// [`Activation::matches`](crate::Activation::matches) the event now,
    /// and they never change afterwards. An event that matched nothing is
    /// marked dispatched at once. With [`Dispatch::Now`] and a match, the
    /// runs are materialised in the same transaction and answered in
    /// delivery order (by activation id); with [`Dispatch::Deferred`] they
    /// wait for [`EventStore::dispatch_event`].
    ///
    /// Materialising a delivery creates an ordinary run
    /// ([`Delivery::new_run`](crate::Delivery::new_run): the event's data
    /// as input, idempotency key `event:{event}:{activation}`) whose cause
    /// [`EventStore::run_cause`] reads.
    fn emit(
        &self,
        event: NewEvent,
        dispatch: Dispatch,
    ) -> impl Future<Output = Result<Emission>> + Send;

    /// Records `events` in one transaction, each with exactly
    /// [`EventStore::emit`]'s guarantees, all with `dispatch`: the batched
    /// form of `emit`, as
    /// [`EventQueueStore::dispatch_next_batch`] is of a dispatch, so the
    /// transaction, the read of the matching activations and the inserts
    /// of the events and of their deliveries are paid once per batch
    /// rather than once per event.
    ///
    /// Answers one [`Emission`] per event, in input order. Each event is
    /// deduplicated by (app, scope, type, dedupe key) against the stored
    /// events, however many emits race, and within the batch: an event
    /// whose key an earlier event of the batch carries records nothing and
    /// answers that event (or the stored one it repeats) with its runs,
    /// `duplicate: true` ([`first_of_key`]). Each recorded event's
    /// deliveries are the activations that match it now, pinned; one that
    /// matched nothing is marked dispatched at once; with
    /// [`Dispatch::Now`] the runs of each recorded event are materialised
    /// in the same transaction and answered in delivery order.
    ///
    /// The whole batch is checked before anything is written: its size (at
    /// most [`MAX_EMIT_BATCH`](crate::events::MAX_EMIT_BATCH), else
    /// [`InvalidInput::OutOfRange`](crate::error::InvalidInput::OutOfRange),
    /// [`check_emit_batch`]) and then every event as `emit` checks one, so
    /// one bad event (JSON too large or too deep, a hostile key) refuses
    /// the batch with the error `emit` gives for it, and no event of the
    /// batch is recorded ([`encode_emit_batch`]). A failure of the
    /// transaction records none of them. An empty batch answers an empty
    /// `Vec` and sends nothing.
    ///
    /// The default body checks the size and then calls `emit` once per
    /// event, each its own transaction, stopping at the first error, which
    /// it answers: each event still has `emit`'s guarantees (a key repeated
    /// in the batch answers the event recorded just before), but the batch
    /// is neither one transaction nor all or nothing, since the backend's
    /// limits are not known here: the events before a refused one stay
    /// recorded. Correct, not batched; a backend overrides it for both,
    /// and a wrapper forwards it.
    fn emit_batch(
        &self,
        events: Vec<NewEvent>,
        dispatch: Dispatch,
    ) -> impl Future<Output = Result<Vec<Emission>>> + Send {
        async move {
            if let Err(error) = check_emit_batch(events.len()) {
                events.dismantle();
                return Err(error);
            }
            let mut answers = Vec::with_capacity(events.len());
            let mut rest = events.into_iter();
            while let Some(event) = rest.next() {
                match self.emit(event, dispatch).await {
                    Ok(answer) => answers.push(answer),
                    Err(error) => {
                        // Unchecked, so dropped without recursion.
                        rest.for_each(Dismantle::dismantle);
                        return Err(error);
                    }
                }
            }
            Ok(answers)
        }
    }

    /// Reads one event; an unknown id is [`Error::EventNotFound`].
    fn get_event(&self, id: EventId) -> impl Future<Output = Result<Event>> + Send;

    /// Up to `limit` events a dispatcher may take now
    /// ([`Event::is_pending`](crate::Event::is_pending)), the longest due
    /// first. A scan: taking one is [`EventStore::dispatch_event`]'s job.
    fn pending_events(&self, limit: u32) -> impl Future<Output = Result<Vec<PendingEvent>>> + Send;

    /// Materialises one pending event, in one transaction: locks the event
    /// (`FOR UPDATE SKIP LOCKED`, or the database's single writer), creates
    /// the run of every delivery, marks it dispatched (attempts + 1, error
    /// cleared). Answers the runs, or `None` if the event was no longer
    /// pending or another dispatcher holds it. However many dispatchers race
    /// over one event, each delivery gets exactly one run. A failure rolls
    /// back the runs, never the event.
    fn dispatch_event(
        &self,
        id: EventId,
    ) -> impl Future<Output = Result<Option<Vec<RunId>>>> + Send;

    /// Records a failed dispatch attempt of an event that had `attempts`
    /// attempts when it was taken: attempts + 1, `error` kept, cut to
    /// 2,000 bytes on a char boundary
    /// ([`checks::dispatch_error`](super::checks::dispatch_error)), and per
    /// `outcome` either due again after the delay or dead-lettered now.
    /// Guarded by `attempts`, so of two dispatchers reporting the same
    /// attempt one writes; answers whether this one did.
    fn record_dispatch_failure(
        &self,
        id: EventId,
        attempts: u32,
        error: &str,
        outcome: EventDispatchOutcome,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Events that matched nothing, wait to be dispatched, retry, or were
    /// dead-lettered ([`Event::is_undispatched`](crate::Event::is_undispatched)),
    /// oldest occurrence first, one page.
    fn list_undispatched(
        &self,
        filter: &EventFilter,
        limit: u32,
        offset: u32,
    ) -> impl Future<Output = Result<Vec<Event>>> + Send;

    /// Puts a dead-lettered event back in line: attempts back to 0, due
    /// now. Answers whether it was dead-lettered; an unknown id is
    /// [`Error::EventNotFound`].
    fn redrive(&self, id: EventId) -> impl Future<Output = Result<bool>> + Send;

    /// Why `run` started, if an event started it.
    fn run_cause(&self, run: RunId) -> impl Future<Output = Result<Option<RunCause>>> + Send;

    /// The runs `event`'s deliveries started, each with why
    /// ([`EventStore::run_cause`] of each), in delivery order (by
    /// activation id): none before the event is dispatched or when it
    /// matched nothing, one per delivery after, and none for a run since
    /// deleted. The inverse of `run_cause`, for an operator asking what an
    /// event did. An unknown id is [`Error::EventNotFound`].
    fn event_runs(&self, event: EventId) -> impl Future<Output = Result<Vec<RunCause>>> + Send;
}

/// Dispatching without a listing first: each call takes the next pending
/// event no other dispatcher holds, so any number of dispatchers share the
/// queue without visiting one another's events.
///
/// [`EventStore::pending_events`] then [`EventStore::dispatch_event`] is a
/// scan followed by a lock: dispatchers that scan at once list the same
/// oldest events and each tries every one of them, so N dispatchers do
/// about N times the work of one. Here the pick and the lock are one step
/// (`FOR UPDATE SKIP LOCKED` in the pick, or the database's single
/// writer). A trait of its own, so a backend with [`EventStore`] alone
/// keeps compiling.
pub trait EventQueueStore: EventStore {
    /// Takes the longest-due pending event
    /// ([`Event::is_pending`](crate::Event::is_pending)) that no other
    /// dispatcher holds and dispatches it in one transaction, exactly as
    /// [`EventStore::dispatch_event`] does: creates the run of every
    /// delivery and marks it dispatched (attempts + 1, error cleared).
    ///
    /// [`NextDispatch::Idle`] when no pending event is free. However many
    /// dispatchers call it at once, each event is taken by one of them at a
    /// time, each delivery gets exactly one run, and an event is dispatched
    /// once. A failure after the event was taken rolls back its runs, never
    /// the event, and answers [`NextDispatch::Failed`] with the attempts it
    /// had; a failure before (no connection, say) is an `Err`.
    fn dispatch_next(&self) -> impl Future<Output = Result<NextDispatch>> + Send;

    /// Takes up to `n` pending events that no other dispatcher holds, the
    /// longest due first, and dispatches them all in one transaction: the
    /// batched form of [`EventQueueStore::dispatch_next`], as
    /// [`BatchStepStore::claim_batch`](crate::ports::BatchStepStore::claim_batch)
    /// is of a claim, so the transaction, the pick, the read of the
    /// deliveries and the mark are paid once per batch rather than once per
    /// event.
    ///
    /// Answers one [`NextDispatch`] per event taken, in the taking order,
    /// never [`NextDispatch::Idle`]; no event free is an empty `Vec`, and
    /// fewer than `n` free answers those. The guarantees are
    /// `dispatch_next`'s, however many dispatchers race with either method
    /// or [`EventStore::dispatch_event`]: each event is taken by one of them
    /// at a time and dispatched once, and each delivery gets exactly one
    /// run.
    ///
    /// A failure rolls back the runs, never the event, and never takes the
    /// other events of the batch down with it: when the batch's
    /// transaction fails after it took its events, the backend dispatches
    /// them again one at a time, each in its own transaction, so a bad
    /// event answers [`NextDispatch::Failed`] with the attempts it had and
    /// the others are dispatched (one another dispatcher took meanwhile is
    /// left out of the answer). A failure before any event was taken (no
    /// connection, say) is an `Err`.
    ///
    /// `n` from 1 to [`MAX_DISPATCH_BATCH`](crate::events::MAX_DISPATCH_BATCH); anything else is refused with
    /// [`InvalidInput::OutOfRange`](crate::error::InvalidInput::OutOfRange)
    /// before anything is taken ([`check_dispatch_batch`]).
    ///
    /// The default body calls `dispatch_next` up to `n` times, each its
    /// own transaction, stopping at the first [`NextDispatch::Idle`] or
    /// [`NextDispatch::Failed`] (a failed event is still pending, so a
    /// further call could take it again before its failure is recorded):
    /// correct, not batched. A backend overrides it to batch.
    fn dispatch_next_batch(
        &self,
        n: u32,
    ) -> impl Future<Output = Result<Vec<NextDispatch>>> + Send {
        async move {
            check_dispatch_batch(n)?;
            let mut answers = Vec::new();
            for _ in 0..n {
                match self.dispatch_next().await {
                    Ok(NextDispatch::Idle) => break,
                    Ok(failed @ NextDispatch::Failed { .. }) => {
                        answers.push(failed);
                        break;
                    }
                    Ok(dispatched) => answers.push(dispatched),
                    // What was dispatched stays dispatched: answer it, and
                    // let the next call meet the failure afresh.
                    Err(error) if answers.is_empty() => return Err(error),
                    Err(_) => break,
                }
            }
            Ok(answers)
        }
    }
}
