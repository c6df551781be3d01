//! The rows of the event tables (workflows, published versions,
//! activations, events, deliveries) and their conversion to and from
//! core's records, in the shape of [`crate::rows`].

use diesel::prelude::*;
use serde_json::Value;

use flowstate_core::backend::decode_json;
use flowstate_core::{Activation, Delivery, Error, Event, PublishedVersion, Timestamp, Workflow};

use crate::rows::parse_id;
use crate::schema::{
    JsonText, flowstate_activations, flowstate_event_deliveries, flowstate_events,
    flowstate_published_versions, flowstate_workflows,
};

/// A row of `flowstate_workflows`.
#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_workflows)]
pub(crate) struct WorkflowRow {
    pub id: String,
    pub app_id: String,
    pub scope_id: String,
    pub name: String,
    pub enabled: bool,
    pub active_version_id: Option<String>,
    pub created_at: i64,
}

impl TryFrom<WorkflowRow> for Workflow {
    type Error = Error;

    fn try_from(row: WorkflowRow) -> Result<Self, Error> {
        let key = row.id.clone();
        Ok(Self {
            id: parse_id("workflow id", &key, &row.id)?,
            active_version: row
                .active_version_id
                .as_deref()
                .map(|v| parse_id("workflow active version", &key, v))
                .transpose()?,
            app_id: row.app_id,
            scope_id: row.scope_id,
            name: row.name,
            enabled: row.enabled,
            created_at: Timestamp::from_micros(row.created_at),
        })
    }
}

/// A row of `flowstate_published_versions`.
#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_published_versions)]
pub(crate) struct PublishedVersionRow {
    pub id: String,
    pub workflow_id: String,
    pub hash: String,
    pub definition: JsonText,
    pub created_at: i64,
}

impl TryFrom<PublishedVersionRow> for PublishedVersion {
    type Error = Error;

    fn try_from(row: PublishedVersionRow) -> Result<Self, Error> {
        let key = row.id.clone();
        Ok(Self {
            id: parse_id("version id", &key, &row.id)?,
            workflow: parse_id("version workflow id", &key, &row.workflow_id)?,
            definition: decode_json("workflow definition", &key, &row.definition.0)?,
            hash: row.hash,
            created_at: Timestamp::from_micros(row.created_at),
        })
    }
}

/// A row of `flowstate_activations`.
#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_activations)]
pub(crate) struct ActivationRow {
    pub id: String,
    pub workflow_id: String,
    pub version_id: String,
    pub event_type: String,
    pub enabled: bool,
    pub authorization_snapshot: JsonText,
    pub created_at: i64,
}

impl TryFrom<ActivationRow> for Activation {
    type Error = Error;

    fn try_from(row: ActivationRow) -> Result<Self, Error> {
        let key = row.id.clone();
        Ok(Self {
            id: parse_id("activation id", &key, &row.id)?,
            workflow: parse_id("activation workflow id", &key, &row.workflow_id)?,
            version: parse_id("activation version id", &key, &row.version_id)?,
            authorization: decode_json("authorization", &key, &row.authorization_snapshot.0)?,
            event_type: row.event_type,
            enabled: row.enabled,
            created_at: Timestamp::from_micros(row.created_at),
        })
    }
}

/// A row of `flowstate_events`. A `None` is bound as `NULL`, not sent as
/// `DEFAULT` (every nullable column defaults to `NULL`, so the row is the
/// same): diesel writes a multi-row insert (`emit_batch`'s) on SQLite as
/// one statement only when no value is `DEFAULT`, SQLite taking no
/// `DEFAULT` in `VALUES`.
#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_events, treat_none_as_default_value = false)]
pub(crate) struct EventRow {
    pub id: String,
    pub app_id: String,
    pub scope_id: String,
    pub event_type: String,
    pub data: JsonText,
    pub context: JsonText,
    pub authorization_snapshot: JsonText,
    pub target_workflow_id: Option<String>,
    pub dedupe_key: Option<String>,
    pub occurred_at: i64,
    pub matched: i64,
    pub dispatched_at: Option<i64>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub dispatch_after: i64,
    pub dead_lettered_at: Option<i64>,
}

impl EventRow {
    /// The row of an event about to be recorded, its JSON already encoded
    /// by core.
    pub fn new(event: &Event, encoded: flowstate_core::events::EncodedEvent) -> Self {
        let ts = |t: Option<Timestamp>| t.map(Timestamp::as_micros);
        Self {
            id: event.id.to_string(),
            app_id: event.app_id.clone(),
            scope_id: event.scope_id.clone(),
            event_type: event.event_type.clone(),
            data: JsonText(encoded.data),
            context: JsonText(encoded.context),
            authorization_snapshot: JsonText(encoded.authorization),
            target_workflow_id: event.target_workflow.map(|w| w.to_string()),
            dedupe_key: event.dedupe_key.clone(),
            occurred_at: event.occurred_at.as_micros(),
            matched: i64::from(event.matched),
            dispatched_at: ts(event.dispatched_at),
            attempts: i64::from(event.attempts),
            last_error: event.last_error.clone(),
            dispatch_after: event.dispatch_after.as_micros(),
            dead_lettered_at: ts(event.dead_lettered_at),
        }
    }
}

impl TryFrom<EventRow> for Event {
    type Error = Error;

    fn try_from(row: EventRow) -> Result<Self, Error> {
        let key = row.id.clone();
        let json =
            |what, text: &JsonText| -> Result<Value, Error> { decode_json(what, &key, &text.0) };
        let ts = |t: Option<i64>| t.map(Timestamp::from_micros);
        Ok(Self {
            id: parse_id("event id", &key, &row.id)?,
            data: json("event data", &row.data)?,
            context: json("event context", &row.context)?,
            authorization: json("authorization", &row.authorization_snapshot)?,
            target_workflow: row
                .target_workflow_id
                .as_deref()
                .map(|w| parse_id("event target workflow", &key, w))
                .transpose()?,
            matched: count("event matched", &key, row.matched)?,
            attempts: count("event attempts", &key, row.attempts)?,
            app_id: row.app_id,
            scope_id: row.scope_id,
            event_type: row.event_type,
            dedupe_key: row.dedupe_key,
            occurred_at: Timestamp::from_micros(row.occurred_at),
            dispatched_at: ts(row.dispatched_at),
            last_error: row.last_error,
            dispatch_after: Timestamp::from_micros(row.dispatch_after),
            dead_lettered_at: ts(row.dead_lettered_at),
        })
    }
}

/// A row of `flowstate_event_deliveries`. No column is ever `DEFAULT`, so
/// diesel writes a multi-row insert of them on SQLite as one statement
/// (`emit_batch`), not one a row under a savepoint.
#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_event_deliveries, treat_none_as_default_value = false)]
pub(crate) struct DeliveryRow {
    pub event_id: String,
    pub activation_id: String,
    pub workflow_id: String,
    pub workflow_name: String,
    pub version_id: String,
    pub version_hash: String,
    pub authorization_snapshot: JsonText,
    pub run_id: String,
}

impl TryFrom<DeliveryRow> for Delivery {
    type Error = Error;

    fn try_from(row: DeliveryRow) -> Result<Self, Error> {
        let key = format!("{}/{}", row.event_id, row.activation_id);
        Ok(Self {
            event: parse_id("delivery event id", &key, &row.event_id)?,
            activation: parse_id("delivery activation id", &key, &row.activation_id)?,
            workflow: parse_id("delivery workflow id", &key, &row.workflow_id)?,
            version: parse_id("delivery version id", &key, &row.version_id)?,
            run: parse_id("delivery run id", &key, &row.run_id)?,
            authorization: decode_json("authorization", &key, &row.authorization_snapshot.0)?,
            workflow_name: row.workflow_name,
            version_hash: row.version_hash,
        })
    }
}

fn count(what: &'static str, row: &str, n: i64) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::Corrupt {
        what,
        row: row.to_owned(),
        detail: format!("{n} is out of range"),
    })
}
