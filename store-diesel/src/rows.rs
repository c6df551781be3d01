//! The rows every dialect reads back, and their conversion into core records.
//!
//! Every dialect stores ids as 36-character text, timestamps as `BIGINT`
//! microseconds since the epoch (UTC), counts as `BIGINT` and JSON as text on
//! the wire (PostgreSQL selects its `jsonb` columns with `::text`), so one set
//! of `QueryableByName` structs serves all three backends and a value read
//! back is the value written, to the microsecond.

use std::str::FromStr;
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text};
use serde_json::{Map, Value};

use flowstate_core::ports::decode_json;
use flowstate_core::{
    Error, HistoryId, RetryPolicy, Run, RunId, RunStatus, Step, StepAttempt, StepId, StepStatus,
    Timestamp, VersionId, WorkflowVersion,
};

/// A row of `flowstate_runs`.
#[derive(Debug, QueryableByName)]
pub struct RunRow {
    /// `id`
    #[diesel(sql_type = Text)]
    pub id: String,
    /// `workflow`
    #[diesel(sql_type = Text)]
    pub workflow: String,
    /// `status`
    #[diesel(sql_type = Text)]
    pub status: String,
    /// `input`, JSON text
    #[diesel(sql_type = Text)]
    pub input: String,
    /// `graph_hash`
    #[diesel(sql_type = Nullable<Text>)]
    pub graph_hash: Option<String>,
    /// `parent_id`
    #[diesel(sql_type = Nullable<Text>)]
    pub parent_id: Option<String>,
    /// `idempotency_key`
    #[diesel(sql_type = Nullable<Text>)]
    pub idempotency_key: Option<String>,
    /// `created_at`, microseconds
    #[diesel(sql_type = BigInt)]
    pub created_at: i64,
    /// `updated_at`, microseconds
    #[diesel(sql_type = BigInt)]
    pub updated_at: i64,
}

impl TryFrom<RunRow> for Run {
    type Error = Error;

    fn try_from(row: RunRow) -> Result<Self, Error> {
        let id: RunId = parse_id("run id", &row.id, &row.id)?;
        Ok(Self {
            status: parse_status::<RunStatus>(&row.id, &row.status)?,
            input: decode_json("run input", &row.id, &row.input)?,
            parent: row
                .parent_id
                .as_deref()
                .map(|p| parse_id("run parent id", &row.id, p))
                .transpose()?,
            workflow: row.workflow,
            graph_hash: row.graph_hash,
            idempotency_key: row.idempotency_key,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
            id,
        })
    }
}

/// A row of `flowstate_steps`.
#[derive(Debug, QueryableByName)]
pub struct StepRow {
    /// `id`
    #[diesel(sql_type = Text)]
    pub id: String,
    /// `run_id`
    #[diesel(sql_type = Text)]
    pub run_id: String,
    /// `name`
    #[diesel(sql_type = Text)]
    pub name: String,
    /// `function_name`
    #[diesel(sql_type = Nullable<Text>)]
    pub function_name: Option<String>,
    /// `status`
    #[diesel(sql_type = Text)]
    pub status: String,
    /// `input`, JSON text
    #[diesel(sql_type = Text)]
    pub input: String,
    /// `result`, JSON text
    #[diesel(sql_type = Nullable<Text>)]
    pub result: Option<String>,
    /// `error`, JSON text
    #[diesel(sql_type = Nullable<Text>)]
    pub error: Option<String>,
    /// `current_attempt`
    #[diesel(sql_type = BigInt)]
    pub current_attempt: i64,
    /// `retries`
    #[diesel(sql_type = BigInt)]
    pub retries: i64,
    /// `retry_delay_ms`
    #[diesel(sql_type = Nullable<BigInt>)]
    pub retry_delay_ms: Option<i64>,
    /// `branch_taken`
    #[diesel(sql_type = Nullable<Text>)]
    pub branch_taken: Option<String>,
    /// `created_at`, microseconds
    #[diesel(sql_type = BigInt)]
    pub created_at: i64,
    /// `updated_at`, microseconds
    #[diesel(sql_type = BigInt)]
    pub updated_at: i64,
}

impl TryFrom<StepRow> for Step {
    type Error = Error;

    fn try_from(row: StepRow) -> Result<Self, Error> {
        let key = row.id.clone();
        Ok(Self {
            id: parse_id("step id", &key, &row.id)?,
            run: parse_id("step run id", &key, &row.run_id)?,
            status: parse_status::<StepStatus>(&key, &row.status)?,
            input: decode_json("step input", &key, &row.input)?,
            result: decode_opt("step result", &key, row.result.as_deref())?,
            error: decode_opt("step error", &key, row.error.as_deref())?,
            attempt: to_u32("step attempt", &key, row.current_attempt)?,
            retry: RetryPolicy {
                retries: to_u32("step retries", &key, row.retries)?,
                retry_delay: row
                    .retry_delay_ms
                    .map(|ms| {
                        to_u32("step retry delay", &key, ms)
                            .map(|_| Duration::from_millis(ms as u64))
                    })
                    .transpose()?,
            },
            name: row.name,
            function: row.function_name,
            branch: row.branch_taken,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
        })
    }
}

/// A row of `flowstate_step_history` joined with its step's name.
#[derive(Debug, QueryableByName)]
pub struct AttemptRow {
    /// `id`
    #[diesel(sql_type = Text)]
    pub id: String,
    /// `step_id`
    #[diesel(sql_type = Text)]
    pub step_id: String,
    /// The step's `name`, selected as `step_name`.
    #[diesel(sql_type = Text)]
    pub step_name: String,
    /// `attempt`
    #[diesel(sql_type = BigInt)]
    pub attempt: i64,
    /// `status`
    #[diesel(sql_type = Text)]
    pub status: String,
    /// `result`, JSON text
    #[diesel(sql_type = Nullable<Text>)]
    pub result: Option<String>,
    /// `error`, JSON text
    #[diesel(sql_type = Nullable<Text>)]
    pub error: Option<String>,
    /// `created_at`, microseconds
    #[diesel(sql_type = BigInt)]
    pub created_at: i64,
    /// `scheduled_at`, microseconds
    #[diesel(sql_type = Nullable<BigInt>)]
    pub scheduled_at: Option<i64>,
    /// `running_at`, microseconds
    #[diesel(sql_type = Nullable<BigInt>)]
    pub running_at: Option<i64>,
    /// `succeeded_at`, microseconds
    #[diesel(sql_type = Nullable<BigInt>)]
    pub succeeded_at: Option<i64>,
    /// `failed_at`, microseconds
    #[diesel(sql_type = Nullable<BigInt>)]
    pub failed_at: Option<i64>,
}

impl TryFrom<AttemptRow> for StepAttempt {
    type Error = Error;

    fn try_from(row: AttemptRow) -> Result<Self, Error> {
        let key = row.id.clone();
        let ts = |v: Option<i64>| v.map(Timestamp::from_micros);
        Ok(Self {
            id: parse_id::<HistoryId>("history id", &key, &row.id)?,
            step: parse_id::<StepId>("history step id", &key, &row.step_id)?,
            attempt: to_u32("history attempt", &key, row.attempt)?,
            status: parse_status::<StepStatus>(&key, &row.status)?,
            result: decode_opt("history result", &key, row.result.as_deref())?,
            error: decode_opt("history error", &key, row.error.as_deref())?,
            step_name: row.step_name,
            created_at: Timestamp::from_micros(row.created_at),
            scheduled_at: ts(row.scheduled_at),
            running_at: ts(row.running_at),
            succeeded_at: ts(row.succeeded_at),
            failed_at: ts(row.failed_at),
        })
    }
}

/// A row of `flowstate_workflow_versions`.
#[derive(Debug, QueryableByName)]
pub struct VersionRow {
    /// `id`
    #[diesel(sql_type = Text)]
    pub id: String,
    /// `workflow`
    #[diesel(sql_type = Text)]
    pub workflow: String,
    /// `graph_hash`
    #[diesel(sql_type = Text)]
    pub graph_hash: String,
    /// `graph`, JSON text
    #[diesel(sql_type = Text)]
    pub graph: String,
    /// `created_at`, microseconds
    #[diesel(sql_type = BigInt)]
    pub created_at: i64,
}

impl TryFrom<VersionRow> for WorkflowVersion {
    type Error = Error;

    fn try_from(row: VersionRow) -> Result<Self, Error> {
        Ok(Self {
            id: parse_id::<VersionId>("version id", &row.id, &row.id)?,
            graph: decode_json("workflow graph", &row.id, &row.graph)?,
            workflow: row.workflow,
            graph_hash: row.graph_hash,
            created_at: Timestamp::from_micros(row.created_at),
        })
    }
}

/// A row of `flowstate_run_state`.
#[derive(Debug, QueryableByName)]
pub struct StateRow {
    /// `state_key`
    #[diesel(sql_type = Text)]
    pub state_key: String,
    /// `value`, JSON text
    #[diesel(sql_type = Text)]
    pub value: String,
}

/// A status and a count, for `count_children`.
#[derive(Debug, QueryableByName)]
pub struct StatusCountRow {
    /// `status`
    #[diesel(sql_type = Text)]
    pub status: String,
    /// `n`
    #[diesel(sql_type = BigInt)]
    pub n: i64,
}

/// One status column, for reading why a guarded write matched nothing.
#[derive(Debug, QueryableByName)]
pub struct StatusRow {
    /// `status`
    #[diesel(sql_type = Text)]
    pub status: String,
}

/// Parses an id column of row `row`.
pub fn parse_id<T: FromStr>(what: &'static str, row: &str, text: &str) -> Result<T, Error>
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
pub fn parse_status<S: FromStr<Err = flowstate_core::status::UnknownStatus>>(
    row: &str,
    text: &str,
) -> Result<S, Error> {
    text.parse()
        .map_err(|err| Error::corrupt_status(&row, &err))
}

fn decode_opt(what: &'static str, row: &str, text: Option<&str>) -> Result<Option<Value>, Error> {
    text.map(|t| decode_json(what, &row, t)).transpose()
}

fn to_u32(what: &'static str, row: &str, n: i64) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::Corrupt {
        what,
        row: row.to_owned(),
        detail: format!("{n} is out of range"),
    })
}

/// The rows of a read that left-joins a table to run `run` (its steps, its
/// history, its state), in one statement: no row at all means there is no
/// such run; a `None` row is the run with nothing joined to it.
pub fn joined_to_run<R>(run: RunId, rows: Vec<Option<R>>) -> Result<Vec<R>, Error> {
    if rows.is_empty() {
        return Err(Error::RunNotFound(run));
    }
    Ok(rows.into_iter().flatten().collect())
}

/// A run's state from its rows, each value decoded (a corrupt one named
/// `run/key`).
pub fn state_map(run: RunId, rows: Vec<StateRow>) -> Result<Map<String, Value>, Error> {
    rows.into_iter()
        .map(|row| {
            let value = decode_json(
                "run state value",
                &format!("{run}/{}", row.state_key),
                &row.value,
            )?;
            Ok((row.state_key, value))
        })
        .collect()
}

/// Converts rows, stopping at the first corrupt one.
pub fn convert<R, T: TryFrom<R, Error = Error>>(rows: Vec<R>) -> Result<Vec<T>, Error> {
    rows.into_iter().map(T::try_from).collect()
}
