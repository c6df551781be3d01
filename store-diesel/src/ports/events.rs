//! [`EventStore`] for [`DieselStore`], written once in the diesel DSL: an
//! emit is one transaction (match, record, pin, and with `Now` create the
//! runs), a dispatch another (lock the event, create its runs, mark it).
//!
//! [`EventQueueStore`](flowstate_core::ports::EventQueueStore) (`event_queue.rs`)
//! takes the same transaction with the next free event's lock in front, and
//! `emit_batch` (`emit_batch.rs`) records many events in one transaction of
//! multi-row inserts.
//!
//! Only the lock differs per dialect
//! ([`Connection::lock_pending`](crate::dialect::Connection::lock_pending),
//! in each dialect's `connection.rs`): `FOR UPDATE SKIP LOCKED` on
//! PostgreSQL and MySQL, and on SQLite nothing, since the dispatch's `BEGIN
//! IMMEDIATE` already makes it the only writer. Runs are inserted with the
//! skip `create_run`'s insert has
//! ([`Connection::insert_keyed_run`](crate::dialect::Connection::insert_keyed_run)),
//! in the event's transaction, all of a transaction's runs in one
//! multi-row insert
//! ([`Connection::insert_keyed_runs`](crate::dialect::Connection::insert_keyed_runs)).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::backoff::EventDispatchOutcome;
use flowstate_core::limits::checked;
use flowstate_core::ports::{EventStore, checks};
use flowstate_core::{
    Delivery, Dispatch, Emission, Error, Event, EventFilter, EventId, InputLimits, NewEvent,
    PendingEvent, Result, RunCause, RunId, Timestamp,
};

use crate::backend::{in_transaction, on_connection};
use crate::dialect::Connection;
use crate::error::TxError;
use crate::rows::events::{DeliveryRow, EventRow};
use crate::rows::{RunRow, parse_id};
use crate::schema::{
    JsonText, flowstate_activations as activations, flowstate_event_deliveries as deliveries,
    flowstate_events as events, flowstate_published_versions as versions, flowstate_runs as runs,
    flowstate_workflows as workflows,
};
use crate::sql::typed::{DUE_ORDER, pending};
use crate::store::DieselStore;

/// What an emit's transaction did.
enum Emitted {
    /// Recorded, with the runs created now.
    Recorded(Vec<RunId>),
    /// A duplicate: the first event's id, and its runs that exist.
    Duplicate(Vec<(String, Option<String>)>),
}

/// The run row a delivery of `event` creates, built by core's rule and
/// checked by core's limits, as `create_run` builds its own.
pub(super) fn run_row(
    limits: InputLimits,
    row: &DeliveryRow,
    event: &Event,
    now: Timestamp,
) -> Result<RunRow> {
    let delivery = Delivery::try_from(row.clone())?;
    let run = delivery.new_run(event);
    let input = limits.encode_run(&run)?;
    Ok(RunRow::new(&run.into_run(delivery.run, now), input))
}

/// The run rows of `pinned` for `event` (pushed onto `rows`, in delivery
/// order) and their ids: what [`materialise!`] inserts, or a dispatch
/// batch gathers for all its events.
pub(super) fn pinned_runs<'a>(
    limits: InputLimits,
    pinned: impl IntoIterator<Item = &'a DeliveryRow>,
    event: &Event,
    now: Timestamp,
    rows: &mut Vec<RunRow>,
) -> Result<Vec<RunId>> {
    pinned
        .into_iter()
        .map(|row| {
            rows.push(run_row(limits, row, event, now)?);
            parse_id("delivery run id", &row.event_id, &row.run_id)
        })
        .collect()
}

/// Creates the runs of `pinned` for `event` in the caller's transaction
/// ([`Connection::insert_keyed_runs`]) and answers their ids, in delivery
/// order.
macro_rules! materialise {
    ($conn:expr, $limits:expr, $pinned:expr, $event:expr, $now:expr) => {{
        let mut rows = Vec::new();
        let ids = pinned_runs($limits, $pinned, $event, $now, &mut rows)?;
        $conn.insert_keyed_runs(rows).await?;
        Ok::<_, TxError>(ids)
    }};
}
pub(super) use materialise;

/// Dispatches `$event`, which the caller's transaction on `$conn` has
/// locked pending: creates the run of each of its pinned deliveries and
/// marks it dispatched (attempts + 1, error cleared). Evaluates to
/// `Result<Vec<RunId>, TxError>`, the runs in delivery order.
macro_rules! dispatch_locked {
    ($conn:expr, $limits:expr, $event:expr, $now:expr) => {{
        use $crate::cached::CacheExt as _;
        let event: &Event = $event;
        let id_text = event.id.to_string();
        let pinned: Vec<DeliveryRow> = deliveries::table
            .filter(deliveries::event_id.eq(&id_text))
            .order(deliveries::activation_id)
            .select(DeliveryRow::as_select())
            .load($conn)
            .await?;
        let ids = materialise!($conn, $limits, &pinned, event, Timestamp::from_micros($now))?;
        diesel::update(events::table.find(&id_text))
            .set((
                events::dispatched_at.eq(Some($now)),
                events::attempts.eq(events::attempts + 1_i64),
                events::last_error.eq(None::<String>),
            ))
            .cached()
            .execute($conn)
            .await?;
        Ok::<_, TxError>(ids)
    }};
}
pub(super) use dispatch_locked;

impl EventStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(event_type = %event.event_type))]
    async fn emit(&self, event: NewEvent, dispatch: Dispatch) -> Result<Emission> {
        let limits = self.config.limits;
        let (event, encoded) = checked(event, |event| checks::emit(&limits, event))?;
        let now = Timestamp::from_micros(self.now());
        let base = event.into_event(EventId::generate(), now);
        let target = base.target_workflow.map(|t| t.to_string());
        let tells_skips = self.inserts_tell_skips();
        let emitted = in_transaction!(self, "emit", |conn| {
            let mut matching = activations::table
                .inner_join(
                    workflows::table.on(workflows::id
                        .eq(activations::workflow_id)
                        .and(workflows::active_version_id.eq(activations::version_id.nullable()))),
                )
                .inner_join(versions::table.on(versions::id.eq(activations::version_id)))
                .filter(activations::enabled.eq(true))
                .filter(activations::event_type.eq(&base.event_type))
                .filter(workflows::app_id.eq(&base.app_id))
                .filter(workflows::scope_id.eq(&base.scope_id))
                .select((
                    activations::id,
                    activations::workflow_id,
                    workflows::name,
                    activations::version_id,
                    versions::hash,
                    activations::authorization_snapshot,
                ))
                .order(activations::id)
                .into_boxed();
            if let Some(target) = &target {
                matching = matching.filter(activations::workflow_id.eq(target));
            }
            let matches: Vec<(String, String, String, String, String, JsonText)> =
                matching.load(conn).await?;
            let mut record = base.clone();
            let now_dispatch = record.stamp_emitted(matches.len(), dispatch, now);
            let row = EventRow::new(&record, encoded.clone());
            // `INSERT IGNORE` on MySQL: no foreign key on this table, so it
            // hides nothing but the taken key.
            let written = diesel::insert_into(events::table)
                .values(&row)
                .on_conflict_do_nothing()
                .execute(conn)
                .await?;
            let wrote = tells_skips.then_some(written == 1);
            if wrote != Some(true) && base.dedupe_key.is_some() {
                let first: Vec<(String, Option<String>)> = events::table
                    .left_join(deliveries::table.on(deliveries::event_id.eq(events::id)))
                    .left_join(
                        runs::table.on(runs::id.nullable().eq(deliveries::run_id.nullable())),
                    )
                    .filter(events::app_id.eq(&base.app_id))
                    .filter(events::scope_id.eq(&base.scope_id))
                    .filter(events::event_type.eq(&base.event_type))
                    .filter(events::dedupe_key.eq(&base.dedupe_key))
                    .select((events::id, runs::id.nullable()))
                    .order(deliveries::activation_id.nullable())
                    .load(conn)
                    .await?;
                if <[_]>::first(&first).is_none_or(|(holder, _)| *holder != row.id) {
                    return Ok(Emitted::Duplicate(first));
                }
            }
            let id = record.id.to_string();
            let pinned: Vec<DeliveryRow> = matches
                .into_iter()
                .map(
                    |(activation, workflow, name, version, hash, auth)| DeliveryRow {
                        event_id: id.clone(),
                        activation_id: activation,
                        workflow_id: workflow,
                        workflow_name: name,
                        version_id: version,
                        version_hash: hash,
                        authorization_snapshot: auth,
                        run_id: RunId::generate().to_string(),
                    },
                )
                .collect();
            // The pins in multi-row inserts, chunked as `emit_batch`'s.
            for chunk in pinned.chunks(super::emit_batch::DELIVERIES_PER_INSERT) {
                conn.insert_deliveries(chunk).await?;
            }
            if !now_dispatch {
                return Ok(Emitted::Recorded(Vec::new()));
            }
            let ids = materialise!(conn, limits, &pinned, &record, now)?;
            Ok(Emitted::Recorded(ids))
        })?;
        match emitted {
            Emitted::Recorded(runs) => Ok(Emission {
                event: base.id,
                runs,
                duplicate: false,
            }),
            Emitted::Duplicate(rows) => {
                let Some((first, _)) = <[_]>::first(&rows) else {
                    return Err(Error::backend(
                        "emit",
                        true,
                        "the event holding this dedupe key could not be read",
                    ));
                };
                let event = parse_id("event id", first, first)?;
                let runs = rows
                    .iter()
                    .filter_map(|(_, run)| run.as_deref())
                    .map(|run| parse_id("run id", first, run))
                    .collect::<Result<_>>()?;
                Ok(Emission {
                    event,
                    runs,
                    duplicate: true,
                })
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(events = events.len()))]
    async fn emit_batch(&self, events: Vec<NewEvent>, dispatch: Dispatch) -> Result<Vec<Emission>> {
        self.record_batch(events, dispatch).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(event = %id))]
    async fn get_event(&self, id: EventId) -> Result<Event> {
        let id_text = id.to_string();
        let row: Option<EventRow> = on_connection!(self, "get_event", |conn| events::table
            .find(&id_text)
            .select(EventRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map_or(Err(Error::EventNotFound(id)), Event::try_from)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn pending_events(&self, limit: u32) -> Result<Vec<PendingEvent>> {
        let now = self.now();
        let rows: Vec<(String, i64)> = on_connection!(self, "pending_events", |conn| pending(now)
            .select((events::id, events::attempts))
            .order(DUE_ORDER)
            .limit(i64::from(limit))
            .load(conn)
            .await)?;
        rows.into_iter()
            .map(|(id, attempts)| {
                Ok(PendingEvent {
                    id: parse_id("event id", &id, &id)?,
                    attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(event = %id))]
    async fn dispatch_event(&self, id: EventId) -> Result<Option<Vec<RunId>>> {
        let limits = self.config.limits;
        let id_text = id.to_string();
        let now = self.now();
        in_transaction!(self, "dispatch_event", |conn| {
            let Some(row) = conn.lock_pending(&id_text, now).await? else {
                return Ok(None);
            };
            let event = Event::try_from(row)?;
            dispatch_locked!(conn, limits, &event, now).map(Some)
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(event = %id, attempts))]
    async fn record_dispatch_failure(
        &self,
        id: EventId,
        attempts: u32,
        error: &str,
        outcome: EventDispatchOutcome,
    ) -> Result<bool> {
        let op = "record_dispatch_failure";
        let id_text = id.to_string();
        let now = Timestamp::from_micros(self.now());
        let error = checks::dispatch_error(error);
        let seen = i64::from(attempts);
        let (after, dead) = match outcome {
            EventDispatchOutcome::RetryAfter(delay) => (now.plus(delay), None),
            EventDispatchOutcome::DeadLetter => (now, Some(now.as_micros())),
        };
        let wrote = on_connection!(self, op, |conn| diesel::update(
            events::table
                .filter(events::id.eq(&id_text))
                .filter(events::attempts.eq(seen))
                .filter(events::dispatched_at.is_null())
                .filter(events::dead_lettered_at.is_null())
        )
        .set((
            events::attempts.eq(seen + 1),
            events::last_error.eq(Some(&error)),
            events::dispatch_after.eq(after.as_micros()),
            events::dead_lettered_at.eq(dead),
        ))
        .execute(conn)
        .await)?;
        if wrote == 0 {
            self.get_event(id).await?;
        }
        Ok(wrote == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_undispatched(
        &self,
        filter: &EventFilter,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<Event>> {
        let rows: Vec<EventRow> = on_connection!(self, "list_undispatched", |conn| {
            let mut listing = events::table
                .filter(
                    events::matched
                        .eq(0_i64)
                        .or(events::dispatched_at.is_null()),
                )
                .select(EventRow::as_select())
                .into_boxed();
            if let Some(app) = &filter.app_id {
                listing = listing.filter(events::app_id.eq(app));
            }
            if let Some(scope) = &filter.scope_id {
                listing = listing.filter(events::scope_id.eq(scope));
            }
            listing
                .order((events::occurred_at, events::id))
                .limit(i64::from(limit))
                .offset(i64::from(offset))
                .load(conn)
                .await
        })?;
        crate::rows::convert(rows)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(event = %id))]
    async fn redrive(&self, id: EventId) -> Result<bool> {
        let id_text = id.to_string();
        let now = self.now();
        let wrote = on_connection!(self, "redrive", |conn| diesel::update(
            events::table
                .filter(events::id.eq(&id_text))
                .filter(events::dead_lettered_at.is_not_null())
                .filter(events::dispatched_at.is_null())
        )
        .set((
            events::dead_lettered_at.eq(None::<i64>),
            events::attempts.eq(0_i64),
            events::dispatch_after.eq(now),
        ))
        .execute(conn)
        .await)?;
        if wrote == 0 {
            self.get_event(id).await?;
        }
        Ok(wrote == 1)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    async fn run_cause(&self, run: RunId) -> Result<Option<RunCause>> {
        let run_text = run.to_string();
        let row: Option<(DeliveryRow, EventRow)> = on_connection!(self, "run_cause", |conn| {
            deliveries::table
                .inner_join(events::table)
                .inner_join(runs::table.on(runs::id.eq(deliveries::run_id)))
                .filter(deliveries::run_id.eq(&run_text))
                .select((DeliveryRow::as_select(), EventRow::as_select()))
                .first(conn)
                .await
                .optional()
        })?;
        let Some((delivery, event)) = row else {
            return Ok(None);
        };
        let delivery = Delivery::try_from(delivery)?;
        Ok(Some(delivery.cause(&Event::try_from(event)?)))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(%event))]
    async fn event_runs(&self, event: EventId) -> Result<Vec<RunCause>> {
        let event_text = event.to_string();
        let rows: Vec<(DeliveryRow, EventRow)> = on_connection!(self, "event_runs", |conn| {
            deliveries::table
                .inner_join(events::table)
                .inner_join(runs::table.on(runs::id.eq(deliveries::run_id)))
                .filter(deliveries::event_id.eq(&event_text))
                .order(deliveries::activation_id.asc())
                .select((DeliveryRow::as_select(), EventRow::as_select()))
                .load(conn)
                .await
        })?;
        if rows.is_empty() {
            // No run: an unknown event, or one that started none (yet).
            self.get_event(event).await?;
        }
        rows.into_iter()
            .map(|(delivery, event)| {
                Ok(Delivery::try_from(delivery)?.cause(&Event::try_from(event)?))
            })
            .collect()
    }
}
