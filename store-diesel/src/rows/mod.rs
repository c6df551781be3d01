//! The rows of [`crate::schema`], and their conversion to and from core's
//! records.
//!
//! Each row struct is `Selectable` and `Queryable` for the typed queries and
//! `QueryableByName` (its SQL types read from the schema) for the few
//! hand-written statements, so one struct per table serves every dialect and
//! every query. A value read back is the value written, to the microsecond.

pub(crate) mod effects;
pub(crate) mod events;
pub(crate) mod leases;
pub(crate) mod signals;
pub(crate) mod virtual_users;

use std::str::FromStr;
use std::time::Duration;

use diesel::prelude::*;
use serde_json::{Map, Value};

use flowstate_core::backend::decode_json;
use flowstate_core::{
    Error, ExpiredClaim, HistoryId, RetryPolicy, Run, RunId, RunStatus, Step, StepAttempt, StepId,
    StepStatus, Timestamp, VersionId, VersionStatus, WorkflowVersion,
};

use diesel::sql_types::{BigInt, Text};

use crate::schema::{
    JsonText, flowstate_run_state, flowstate_runs, flowstate_step_history, flowstate_steps,
    flowstate_workflow_versions,
};

/// A row of `flowstate_runs`. A `None` is bound as NULL, not sent as
/// `DEFAULT` (every nullable column of the table defaults to NULL, so the
/// row written is the same): diesel writes a multi-row insert of them on
/// SQLite (the runs a dispatch batch materialises) as one statement only
/// when no value is `DEFAULT`, and every insert of a run has one text.
#[derive(Debug, Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = flowstate_runs, treat_none_as_default_value = false)]
pub(crate) struct RunRow {
    pub id: String,
    pub workflow: String,
    pub status: String,
    pub input: JsonText,
    pub graph_hash: Option<String>,
    pub parent_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub output: Option<JsonText>,
}

impl RunRow {
    /// The row of a run about to be inserted, its input already encoded.
    pub fn new(run: &Run, input: String) -> Self {
        Self {
            id: run.id.to_string(),
            workflow: run.workflow.clone(),
            status: run.status.as_str().to_owned(),
            input: JsonText(input),
            graph_hash: run.graph_hash.clone(),
            parent_id: run.parent.map(|p| p.to_string()),
            idempotency_key: run.idempotency_key.clone(),
            created_at: run.created_at.as_micros(),
            updated_at: run.updated_at.as_micros(),
            // A new run has answered nothing yet.
            output: None,
        }
    }
}

impl TryFrom<RunRow> for Run {
    type Error = Error;

    fn try_from(row: RunRow) -> Result<Self, Error> {
        let key = row.id.clone();
        Ok(Self {
            id: parse_id("run id", &key, &row.id)?,
            status: parse_status::<RunStatus>(&key, &row.status)?,
            input: decode_json("run input", &key, &row.input.0)?,
            output: decode_opt("run output", &key, row.output.as_ref())?,
            parent: row
                .parent_id
                .as_deref()
                .map(|p| parse_id("run parent id", &key, p))
                .transpose()?,
            workflow: row.workflow,
            graph_hash: row.graph_hash,
            idempotency_key: row.idempotency_key,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
        })
    }
}

/// A row of `flowstate_steps`.
#[derive(Clone, Debug, Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = flowstate_steps)]
pub(crate) struct StepRow {
    pub id: String,
    pub run_id: String,
    pub name: String,
    pub function_name: Option<String>,
    pub status: String,
    pub input: JsonText,
    pub result: Option<JsonText>,
    pub error: Option<JsonText>,
    pub current_attempt: i64,
    pub retries: i64,
    pub retry_delay_ms: Option<i64>,
    pub branch_taken: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub claim_timeout_ms: Option<i64>,
    pub claimed_until: Option<i64>,
}

impl StepRow {
    /// The row of a step about to be inserted (status pending, attempt 1),
    /// its input and delay already checked by core.
    pub fn new(step: &Step, input: String, retry_delay_ms: Option<u32>) -> Self {
        Self {
            id: step.id.to_string(),
            run_id: step.run.to_string(),
            name: step.name.clone(),
            function_name: step.function.clone(),
            status: step.status.as_str().to_owned(),
            input: JsonText(input),
            result: None,
            error: None,
            current_attempt: i64::from(step.attempt),
            retries: i64::from(step.retry.retries),
            retry_delay_ms: retry_delay_ms.map(i64::from),
            branch_taken: None,
            created_at: step.created_at.as_micros(),
            updated_at: step.updated_at.as_micros(),
            claim_timeout_ms: step
                .claim_timeout
                .map(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX)),
            claimed_until: None,
        }
    }
}

impl TryFrom<StepRow> for Step {
    type Error = Error;

    fn try_from(row: StepRow) -> Result<Self, Error> {
        let key = row.id.clone();
        Ok(Self {
            id: parse_id("step id", &key, &row.id)?,
            run: parse_id("step run id", &key, &row.run_id)?,
            status: parse_status::<StepStatus>(&key, &row.status)?,
            input: decode_json("step input", &key, &row.input.0)?,
            result: decode_opt("step result", &key, row.result.as_ref())?,
            error: decode_opt("step error", &key, row.error.as_ref())?,
            attempt: to_u32("step attempt", &key, row.current_attempt)?,
            retry: RetryPolicy {
                retries: to_u32("step retries", &key, row.retries)?,
                retry_delay: row
                    .retry_delay_ms
                    .map(|ms| to_u32("step retry delay", &key, ms))
                    .transpose()?
                    .map(|ms| Duration::from_millis(u64::from(ms))),
            },
            claim_timeout: row
                .claim_timeout_ms
                .map(|ms| {
                    u64::try_from(ms).map_err(|_| Error::Corrupt {
                        what: "step claim timeout",
                        row: key.clone(),
                        detail: format!("{ms} ms"),
                    })
                })
                .transpose()?
                .map(Duration::from_millis),
            claimed_until: row.claimed_until.map(Timestamp::from_micros),
            name: row.name,
            function: row.function_name,
            branch: row.branch_taken,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
        })
    }
}

/// A row of `flowstate_step_history`.
#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = flowstate_step_history)]
pub(crate) struct HistoryRow {
    pub id: String,
    pub step_id: String,
    pub attempt: i64,
    pub status: String,
    pub result: Option<JsonText>,
    pub error: Option<JsonText>,
    pub created_at: i64,
    pub scheduled_at: Option<i64>,
    pub running_at: Option<i64>,
    pub succeeded_at: Option<i64>,
    pub failed_at: Option<i64>,
}

/// The id a raw statement answers (`SELECT id`, `RETURNING id`):
/// PostgreSQL's and SQLite's hand-written statements.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
#[derive(Debug, QueryableByName)]
pub(crate) struct IdRow {
    /// The row's id.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub id: String,
}

/// A history row with its step's name.
#[derive(Debug, Queryable, Selectable)]
pub(crate) struct AttemptRow {
    #[diesel(embed)]
    pub history: HistoryRow,
    #[diesel(select_expression = flowstate_steps::name)]
    #[diesel(select_expression_type = flowstate_steps::name)]
    pub step_name: String,
}

impl TryFrom<AttemptRow> for StepAttempt {
    type Error = Error;

    fn try_from(
        AttemptRow {
            history: row,
            step_name,
        }: AttemptRow,
    ) -> Result<Self, Error> {
        let key = row.id.clone();
        let ts = |v: Option<i64>| v.map(Timestamp::from_micros);
        Ok(Self {
            id: parse_id::<HistoryId>("history id", &key, &row.id)?,
            step: parse_id::<StepId>("history step id", &key, &row.step_id)?,
            attempt: to_u32("history attempt", &key, row.attempt)?,
            status: parse_status::<StepStatus>(&key, &row.status)?,
            result: decode_opt("history result", &key, row.result.as_ref())?,
            error: decode_opt("history error", &key, row.error.as_ref())?,
            step_name,
            created_at: Timestamp::from_micros(row.created_at),
            scheduled_at: ts(row.scheduled_at),
            running_at: ts(row.running_at),
            succeeded_at: ts(row.succeeded_at),
            failed_at: ts(row.failed_at),
        })
    }
}

/// A row of `flowstate_workflow_versions`.
#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_workflow_versions)]
pub(crate) struct VersionRow {
    pub id: String,
    pub workflow: String,
    pub graph_hash: String,
    pub graph: JsonText,
    pub created_at: i64,
    pub source: Option<String>,
    pub status: String,
}

impl TryFrom<VersionRow> for WorkflowVersion {
    type Error = Error;

    fn try_from(row: VersionRow) -> Result<Self, Error> {
        Ok(Self {
            id: parse_id::<VersionId>("version id", &row.id, &row.id)?,
            graph: decode_json("workflow graph", &row.id, &row.graph.0)?,
            status: VersionStatus::parse(&row.status).ok_or_else(|| Error::Corrupt {
                what: "workflow version status",
                row: row.id.clone(),
                detail: format!("unknown status {:?}", row.status),
            })?,
            source: row.source,
            workflow: row.workflow,
            graph_hash: row.graph_hash,
            created_at: Timestamp::from_micros(row.created_at),
        })
    }
}

/// A row of `flowstate_run_state`.
#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_run_state)]
pub(crate) struct StateRow {
    pub run_id: String,
    pub state_key: String,
    pub value: JsonText,
}

/// Parses an id column of row `row`.
pub(crate) fn parse_id<T: FromStr>(what: &'static str, row: &str, text: &str) -> Result<T, Error>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|err: T::Err| Error::Corrupt {
        what,
        row: row.to_owned(),
        detail: format!("{text:?}: {err}"),
    })
}

/// Parses a status column of row `row`.
pub(crate) fn parse_status<S: FromStr<Err = flowstate_core::status::UnknownStatus>>(
    row: &str,
    text: &str,
) -> Result<S, Error> {
    text.parse()
        .map_err(|err| Error::corrupt_status(&row, &err))
}

fn decode_opt(
    what: &'static str,
    row: &str,
    text: Option<&JsonText>,
) -> Result<Option<Value>, Error> {
    text.map(|t| decode_json(what, &row, &t.0)).transpose()
}

pub(crate) fn to_u32(what: &'static str, row: &str, n: i64) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::Corrupt {
        what,
        row: row.to_owned(),
        detail: format!("{n} is out of range"),
    })
}

/// The rows of a read that left-joins a table to run `run` (its steps, its
/// history, its state), in one statement: no row at all means there is no
/// such run; a `None` row is the run with nothing joined to it.
pub(crate) fn joined_to_run<R>(run: RunId, rows: Vec<Option<R>>) -> Result<Vec<R>, Error> {
    if rows.is_empty() {
        return Err(Error::RunNotFound(run));
    }
    Ok(rows.into_iter().flatten().collect())
}

/// A run's state from its rows, each value decoded (a corrupt one named
/// `run/key`).
pub(crate) fn state_map(
    run: RunId,
    rows: Vec<(String, JsonText)>,
) -> Result<Map<String, Value>, Error> {
    rows.into_iter()
        .map(|(key, value)| {
            let value = decode_json("run state value", &format!("{run}/{key}"), &value.0)?;
            Ok((key, value))
        })
        .collect()
}

/// Converts rows, stopping at the first corrupt one.
pub(crate) fn convert<R, T: TryFrom<R, Error = Error>>(rows: Vec<R>) -> Result<Vec<T>, Error> {
    rows.into_iter().map(T::try_from).collect()
}

/// One completion as a dialect writes it: checked, encoded, its step named
/// by no earlier item of the batch, fenced by its claim's attempt.
#[derive(Clone, Debug)]
pub(crate) struct BatchItem {
    /// The step.
    pub id: StepId,
    /// The attempt the completing claim holds.
    pub attempt: u32,
    /// The status it moves to.
    pub to: StepStatus,
    /// The result or error, as JSON text.
    pub payload: String,
}

/// A step whose claim a dialect's expiry took back, as it read it: the
/// step, its run and name, the attempt that failed, its retries and when
/// the claim had run out.
#[derive(Debug, diesel::QueryableByName, Queryable)]
pub(crate) struct ExpiredRow {
    #[diesel(sql_type = Text)]
    pub id: String,
    #[diesel(sql_type = Text)]
    pub run_id: String,
    #[diesel(sql_type = Text)]
    pub name: String,
    #[diesel(sql_type = BigInt)]
    pub current_attempt: i64,
    #[diesel(sql_type = BigInt)]
    pub retries: i64,
    #[diesel(sql_type = BigInt)]
    pub expired_at: i64,
}

impl TryFrom<ExpiredRow> for ExpiredClaim {
    type Error = Error;

    fn try_from(row: ExpiredRow) -> Result<Self, Error> {
        let key = row.id.clone();
        let attempt = to_u32("step attempt", &key, row.current_attempt)?;
        let retries = to_u32("step retries", &key, row.retries)?;
        Ok(Self {
            run: parse_id("step run id", &key, &row.run_id)?,
            step: parse_id("step id", &key, &row.id)?,
            name: row.name,
            attempt,
            claimed_until: Timestamp::from_micros(row.expired_at),
            retrying: RetryPolicy::with_retries(retries).has_attempts_left(attempt),
        })
    }
}
