//! [`EventStore::emit_batch`](flowstate_core::ports::EventStore::emit_batch)
//! for [`DieselStore`], written once over the dialects: the whole batch
//! checked first, then one transaction whose statements do not grow with
//! the batch but for the runs `Dispatch::Now` creates.
//!
//! In the transaction: the activations matching any event of the batch in
//! one `SELECT` (type, app and scope each `IN` the batch's, the exact
//! match made here per event, as `emit`'s `WHERE` makes it); the events
//! in one multi-row insert that skips a taken dedupe key
//! ([`Connection::insert_events`]: `ON CONFLICT DO NOTHING`, MySQL's
//! `INSERT IGNORE`), so exclusion is the unique key's, however many
//! batches and emits race; only when a keyed event may have been skipped
//! (the insert affected fewer rows than it was given, or MySQL, whose
//! count cannot tell), one read of the holders of the batch's keys and
//! their runs; the deliveries of the events recorded in one multi-row
//! insert ([`Connection::insert_deliveries`]); and with `Now` the runs
//! of every delivery, by the keyed multi-row insert `emit` sends
//! ([`Connection::insert_keyed_runs`]). The events are inserted in
//! key order, so two batches sharing keys take the keys' locks in the
//! same order.
//!
//! An event whose key an earlier event of the batch carries is not sent
//! at all ([`first_of_key`]): it answers that event.

use std::collections::{BTreeSet, HashMap};

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::events::{encode_emit_batch, first_of_key};
use flowstate_core::limits::checked;
use flowstate_core::{
    Dispatch, Emission, Error, Event, EventId, NewEvent, Result, RunId, Timestamp,
};

use super::events::pinned_runs;
use crate::backend::in_transaction;
use crate::dialect::Connection;
use crate::error::TxError;
use crate::rows::events::{DeliveryRow, EventRow};
use crate::rows::parse_id;
use crate::schema::{
    JsonText, flowstate_activations as activations, flowstate_event_deliveries as deliveries,
    flowstate_events as events, flowstate_published_versions as versions, flowstate_runs as runs,
    flowstate_workflows as workflows,
};
use crate::store::DieselStore;

/// The most deliveries one insert carries (eight columns: 8,000 binds),
/// far below every dialect's placeholder limit; a batch of many events
/// with many matches each is inserted in several.
pub(super) const DELIVERIES_PER_INSERT: usize = 1_000;

/// An activation the batch's read found: activation, workflow, workflow
/// name, version, version hash, authorization snapshot, then the event
/// type, app and scope it matches.
type Found = (
    String,
    String,
    String,
    String,
    String,
    JsonText,
    String,
    String,
    String,
);

/// A dedupe key: app, scope, type, key.
type Key = (String, String, String, String);

/// A holder of a key as the read-back answers it: its key, its id, and
/// one of its runs (none when it has none yet).
type Holder = (
    String,
    String,
    String,
    Option<String>,
    String,
    Option<String>,
);

/// What the transaction did with one event sent (the first of its key).
enum Outcome {
    /// Recorded, with the runs created now.
    Recorded(Vec<RunId>),
    /// Its key was taken: the holder and its runs that exist.
    Duplicate(EventId, Vec<RunId>),
}

/// One event sent, as the transaction builds it.
struct Sent {
    /// The event as recorded (stamped).
    record: Event,
    /// Whether its runs start in this transaction.
    now_dispatch: bool,
    /// Its deliveries, in delivery order.
    pinned: Vec<DeliveryRow>,
}

/// The key of `event`, if it has one.
fn key_of(event: &Event) -> Option<Key> {
    event.dedupe_key.as_ref().map(|key| {
        (
            event.app_id.clone(),
            event.scope_id.clone(),
            event.event_type.clone(),
            key.clone(),
        )
    })
}

/// The deliveries `found` gives `event`: each activation of its type, app
/// and scope (and of its target workflow, if it names one), in activation
/// order, each with the run it will start.
fn pin(event: &Event, found: &[Found]) -> Vec<DeliveryRow> {
    let id = event.id.to_string();
    let target = event.target_workflow.map(|t| t.to_string());
    found
        .iter()
        .filter(|(_, workflow, _, _, _, _, ty, app, scope)| {
            *ty == event.event_type
                && *app == event.app_id
                && *scope == event.scope_id
                && target.as_ref().is_none_or(|t| t == workflow)
        })
        .map(
            |(activation, workflow, name, version, hash, auth, ..)| DeliveryRow {
                event_id: id.clone(),
                activation_id: activation.clone(),
                workflow_id: workflow.clone(),
                workflow_name: name.clone(),
                version_id: version.clone(),
                version_hash: hash.clone(),
                authorization_snapshot: auth.clone(),
                run_id: RunId::generate().to_string(),
            },
        )
        .collect()
}

/// The holders of the read-back by key: each one's id and runs, in
/// delivery order.
fn holders(rows: Vec<Holder>) -> HashMap<Key, (String, Vec<String>)> {
    let mut by_key: HashMap<Key, (String, Vec<String>)> = HashMap::new();
    for (app, scope, ty, key, id, run) in rows {
        let Some(key) = key else { continue };
        let entry = by_key
            .entry((app, scope, ty, key))
            .or_insert_with(|| (id, Vec::new()));
        entry.1.extend(run);
    }
    by_key
}

impl DieselStore {
    /// [`EventStore::emit_batch`](flowstate_core::ports::EventStore::emit_batch)
    /// (see the module doc).
    pub(super) async fn record_batch(
        &self,
        events: Vec<NewEvent>,
        dispatch: Dispatch,
    ) -> Result<Vec<Emission>> {
        let limits = self.config.limits;
        let (events, encoded) = checked(events, |events| encode_emit_batch(&limits, events))?;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let first = first_of_key(&events);
        let now = Timestamp::from_micros(self.now());
        let bases: Vec<Event> = events
            .into_iter()
            .map(|event| event.into_event(EventId::generate(), now))
            .collect();
        let sent: Vec<usize> = (0..bases.len()).filter(|&i| first[i] == i).collect();
        let distinct = |f: fn(&Event) -> &String| -> Vec<&String> {
            let set: BTreeSet<&String> = sent.iter().map(|&i| f(&bases[i])).collect();
            set.into_iter().collect()
        };
        let (types, apps, scopes) = (
            distinct(|e| &e.event_type),
            distinct(|e| &e.app_id),
            distinct(|e| &e.scope_id),
        );
        let keyed: Vec<Key> = sent.iter().filter_map(|&i| key_of(&bases[i])).collect();
        let key_values: Vec<&String> = keyed.iter().map(|k| &k.3).collect();
        let tells_skips = self.inserts_tell_skips();
        let outcomes = in_transaction!(self, "emit_batch", |conn| {
            let found: Vec<Found> = activations::table
                .inner_join(
                    workflows::table.on(workflows::id
                        .eq(activations::workflow_id)
                        .and(workflows::active_version_id.eq(activations::version_id.nullable()))),
                )
                .inner_join(versions::table.on(versions::id.eq(activations::version_id)))
                .filter(activations::enabled.eq(true))
                .filter(activations::event_type.eq_any(&types))
                .filter(workflows::app_id.eq_any(&apps))
                .filter(workflows::scope_id.eq_any(&scopes))
                .select((
                    activations::id,
                    activations::workflow_id,
                    workflows::name,
                    activations::version_id,
                    versions::hash,
                    activations::authorization_snapshot,
                    activations::event_type,
                    workflows::app_id,
                    workflows::scope_id,
                ))
                .order(activations::id)
                .load(conn)
                .await?;
            let mut batch: Vec<Sent> = Vec::with_capacity(sent.len());
            let mut rows: Vec<EventRow> = Vec::with_capacity(sent.len());
            for &i in &sent {
                let mut record = bases[i].clone();
                let pinned = pin(&record, &found);
                let now_dispatch = record.stamp_emitted(pinned.len(), dispatch, now);
                rows.push(EventRow::new(&record, encoded[i].clone()));
                batch.push(Sent {
                    record,
                    now_dispatch,
                    pinned,
                });
            }
            rows.sort_by(|a, b| {
                (&a.app_id, &a.scope_id, &a.event_type, &a.dedupe_key).cmp(&(
                    &b.app_id,
                    &b.scope_id,
                    &b.event_type,
                    &b.dedupe_key,
                ))
            });
            let written = conn.insert_events(&rows).await?;
            // Every row written (a count that tells skips, all counted): no
            // key was taken, nothing to read.
            let all_written = tells_skips && written == rows.len();
            let read_back = !keyed.is_empty() && !all_written;
            let mut held = HashMap::new();
            if read_back {
                let read: Vec<Holder> = events::table
                    .left_join(deliveries::table.on(deliveries::event_id.eq(events::id)))
                    .left_join(
                        runs::table.on(runs::id.nullable().eq(deliveries::run_id.nullable())),
                    )
                    .filter(events::app_id.eq_any(&apps))
                    .filter(events::scope_id.eq_any(&scopes))
                    .filter(events::event_type.eq_any(&types))
                    .filter(events::dedupe_key.eq_any(&key_values))
                    .select((
                        events::app_id,
                        events::scope_id,
                        events::event_type,
                        events::dedupe_key,
                        events::id,
                        runs::id.nullable(),
                    ))
                    .order((events::id, deliveries::activation_id.nullable()))
                    .load(conn)
                    .await?;
                held = holders(read);
            }
            let mut outcomes = Vec::with_capacity(batch.len());
            let mut recorded = Vec::with_capacity(batch.len());
            for one in &batch {
                let mine = one.record.id.to_string();
                let holder = key_of(&one.record).and_then(|key| held.get(&key));
                match holder {
                    Some((id, runs)) if *id != mine => {
                        let event = parse_id("event id", id, id)?;
                        let runs = runs
                            .iter()
                            .map(|run| parse_id("run id", id, run))
                            .collect::<Result<_>>()?;
                        outcomes.push(Some(Outcome::Duplicate(event, runs)));
                    }
                    None if read_back && one.record.dedupe_key.is_some() => {
                        return Err(TxError::from(Error::backend(
                            "emit_batch",
                            true,
                            "the event holding this dedupe key could not be read",
                        )));
                    }
                    _ => {
                        outcomes.push(None);
                        recorded.push(one);
                    }
                }
            }
            let pins: Vec<DeliveryRow> = recorded
                .iter()
                .flat_map(|one| one.pinned.iter().cloned())
                .collect();
            for chunk in pins.chunks(DELIVERIES_PER_INSERT) {
                conn.insert_deliveries(chunk).await?;
            }
            let mut recorded = recorded.into_iter();
            let mut started = Vec::new();
            for outcome in &mut outcomes {
                if outcome.is_some() {
                    continue;
                }
                let Some(one) = recorded.next() else { break };
                let runs = if one.now_dispatch {
                    pinned_runs(limits, &one.pinned, &one.record, now, &mut started)?
                } else {
                    Vec::new()
                };
                *outcome = Some(Outcome::Recorded(runs));
            }
            // Every `Now` event's runs in one insert, in the events' order.
            conn.insert_keyed_runs(started).await?;
            Ok::<_, TxError>(outcomes)
        })?;
        let mut answers: Vec<Emission> = Vec::with_capacity(bases.len());
        let mut outcomes = outcomes.into_iter();
        for (i, base) in bases.iter().enumerate() {
            let answer = if first[i] == i {
                match outcomes.next().flatten() {
                    Some(Outcome::Recorded(runs)) => Emission {
                        event: base.id,
                        runs,
                        duplicate: false,
                    },
                    Some(Outcome::Duplicate(event, runs)) => Emission {
                        event,
                        runs,
                        duplicate: true,
                    },
                    None => {
                        return Err(Error::backend(
                            "emit_batch",
                            false,
                            "the batch answered fewer events than it sent",
                        ));
                    }
                }
            } else {
                Emission {
                    duplicate: true,
                    ..answers[first[i]].clone()
                }
            };
            answers.push(answer);
        }
        tracing::debug!(events = answers.len(), "event batch emitted");
        Ok(answers)
    }
}
