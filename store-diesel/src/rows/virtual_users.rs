//! The rows of the virtual-user tables (schedules, runs, transcript
//! entries) and their conversion to core's records, as `rows.rs` does for
//! the core tables.

use diesel::prelude::*;

use flowstate_core::backend::decode_json;
use flowstate_core::schedule::Interval;
use flowstate_core::{
    Error, RunBudget, RunTally, Schedule, StopReason, Timestamp, TranscriptEntry, VirtualUserRun,
    VirtualUserRunStatus,
};

use crate::rows::parse_id;
use crate::schema::{
    JsonText, flowstate_virtual_user_runs, flowstate_virtual_user_schedules,
    flowstate_virtual_user_transcript,
};

/// The stored text of `running`, the one status a run is settled or
/// appended to from.
pub(crate) const RUNNING: &str = VirtualUserRunStatus::Running.as_str();

/// A row of `flowstate_virtual_user_schedules`.
#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_virtual_user_schedules)]
pub(crate) struct ScheduleRow {
    pub persona: String,
    pub enabled: bool,
    pub min_interval_ms: i64,
    pub max_interval_ms: i64,
    pub next_run_at: i64,
    pub last_run_id: Option<String>,
    pub updated_at: i64,
    pub last_run_at: Option<i64>,
    pub goals: Option<JsonText>,
    pub budget_max_duration_ms: Option<i64>,
    pub budget_max_turns: Option<i64>,
    pub budget_max_spend: Option<i64>,
}

/// What a [`SchedulePatch`](flowstate_core::SchedulePatch) writes: each
/// `None` leaves its column out of the `UPDATE`; a budget limit is
/// `Some(None)` to clear it.
#[derive(Debug, AsChangeset)]
#[diesel(table_name = flowstate_virtual_user_schedules)]
// `Some(None)` is how diesel's changeset says "set NULL".
#[allow(clippy::option_option)]
pub(crate) struct ScheduleChanges {
    pub enabled: Option<bool>,
    pub min_interval_ms: Option<i64>,
    pub max_interval_ms: Option<i64>,
    pub next_run_at: Option<i64>,
    pub goals: Option<JsonText>,
    pub budget_max_duration_ms: Option<Option<i64>>,
    pub budget_max_turns: Option<Option<i64>>,
    pub budget_max_spend: Option<Option<i64>>,
    pub updated_at: i64,
}

/// A stored budget limit as `T`, or [`Error::Corrupt`] naming it.
fn limit<T: TryFrom<i64>>(
    what: &'static str,
    row: &str,
    n: Option<i64>,
) -> Result<Option<T>, Error> {
    n.map(|n| {
        T::try_from(n).map_err(|_| Error::Corrupt {
            what,
            row: row.to_owned(),
            detail: format!("{n} is out of range"),
        })
    })
    .transpose()
}

impl TryFrom<ScheduleRow> for Schedule {
    type Error = Error;

    fn try_from(row: ScheduleRow) -> Result<Self, Error> {
        let last_run = row
            .last_run_id
            .as_deref()
            .map(|id| parse_id("schedule last run id", &row.persona, id))
            .transpose()?;
        let key = row.persona.as_str();
        let goals = row
            .goals
            .map(|g| {
                let value = decode_json("schedule goals", &key, &g.0)?;
                serde_json::from_value::<Vec<String>>(value).map_err(|err| Error::Corrupt {
                    what: "schedule goals",
                    row: key.to_owned(),
                    detail: err.to_string(),
                })
            })
            .transpose()?
            .unwrap_or_default();
        let budget = RunBudget {
            max_duration: limit::<u64>("schedule budget", key, row.budget_max_duration_ms)?
                .map(std::time::Duration::from_millis),
            max_turns: limit("schedule budget", key, row.budget_max_turns)?,
            max_spend: limit("schedule budget", key, row.budget_max_spend)?,
        };
        Ok(Self {
            last_run_at: row.last_run_at.map(Timestamp::from_micros),
            goals,
            budget,
            enabled: row.enabled,
            interval: Interval {
                min_ms: row.min_interval_ms,
                max_ms: row.max_interval_ms,
            },
            next_run_at: Timestamp::from_micros(row.next_run_at),
            last_run,
            updated_at: Timestamp::from_micros(row.updated_at),
            persona: row.persona,
        })
    }
}

/// A row of `flowstate_virtual_user_runs`.
#[derive(Debug, Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = flowstate_virtual_user_runs)]
pub(crate) struct VirtualUserRunRow {
    pub id: String,
    pub persona: String,
    pub status: String,
    pub findings: Option<JsonText>,
    pub failure: Option<String>,
    pub transcript_len: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub goals: Option<JsonText>,
    pub seed: Option<i64>,
    pub started_by: Option<String>,
    pub tally_turns: i64,
    pub tally_tokens: i64,
    pub tally_cost: i64,
    pub memory: Option<JsonText>,
    pub intents: Option<JsonText>,
    pub stop_reason: Option<String>,
}

impl VirtualUserRunRow {
    /// The row of a run about to be inserted, its goals already encoded
    /// (`None` when it has none).
    pub fn new(run: &VirtualUserRun, goals: Option<String>) -> Self {
        Self {
            id: run.id.to_string(),
            persona: run.persona.clone(),
            status: run.status.as_str().to_owned(),
            findings: None,
            failure: None,
            transcript_len: 0,
            created_at: run.created_at.as_micros(),
            updated_at: run.updated_at.as_micros(),
            goals: goals.map(JsonText),
            seed: run.seed.map(seed_bits),
            started_by: run.started_by.clone(),
            tally_turns: 0,
            tally_tokens: 0,
            tally_cost: 0,
            memory: None,
            intents: None,
            stop_reason: None,
        }
    }
}

/// A seed as stored: the `i64` of the same 64 bits, so every `u64` is kept.
#[allow(clippy::cast_possible_wrap)]
pub(crate) const fn seed_bits(seed: u64) -> i64 {
    seed as i64
}

/// A stored seed read back: the `u64` of the same 64 bits.
#[allow(clippy::cast_sign_loss)]
const fn seed_of(bits: i64) -> u64 {
    bits as u64
}

/// A stored JSON array of strings (a run's goals or intents) read back;
/// NULL reads as empty.
fn strings(what: &'static str, row: &str, text: Option<JsonText>) -> Result<Vec<String>, Error> {
    text.map(|t| {
        let value = decode_json(what, &row, &t.0)?;
        serde_json::from_value::<Vec<String>>(value).map_err(|err| Error::Corrupt {
            what,
            row: row.to_owned(),
            detail: err.to_string(),
        })
    })
    .transpose()
    .map(Option::unwrap_or_default)
}

/// A stored tally read back, or [`Error::Corrupt`] naming the row.
pub(crate) fn tally(row: &str, (turns, tokens, cost): (i64, i64, i64)) -> Result<RunTally, Error> {
    let what = "virtual-user run tally";
    Ok(RunTally {
        turns: position(what, row, turns)?,
        tokens: position(what, row, tokens)?,
        cost: position(what, row, cost)?,
    })
}

/// The status stored in `row`, or [`Error::Corrupt`] naming it.
pub(crate) fn run_status(row: &str, text: &str) -> Result<VirtualUserRunStatus, Error> {
    VirtualUserRunStatus::parse(text).ok_or_else(|| Error::Corrupt {
        what: "virtual-user run status",
        row: row.to_owned(),
        detail: format!("unknown status {text:?}"),
    })
}

/// A stored count or position as a `u64`, or [`Error::Corrupt`].
pub(crate) fn position(what: &'static str, row: &str, n: i64) -> Result<u64, Error> {
    u64::try_from(n).map_err(|_| Error::Corrupt {
        what,
        row: row.to_owned(),
        detail: format!("{n} is negative"),
    })
}

impl TryFrom<VirtualUserRunRow> for VirtualUserRun {
    type Error = Error;

    fn try_from(row: VirtualUserRunRow) -> Result<Self, Error> {
        let key = row.id.clone();
        let stop_reason = row
            .stop_reason
            .as_deref()
            .map(|text| {
                StopReason::parse(text).ok_or_else(|| Error::Corrupt {
                    what: "virtual-user run stop reason",
                    row: key.clone(),
                    detail: format!("unknown stop reason {text:?}"),
                })
            })
            .transpose()?;
        Ok(Self {
            id: parse_id("virtual-user run id", &key, &row.id)?,
            status: run_status(&key, &row.status)?,
            findings: row
                .findings
                .map(|f| decode_json("virtual-user run findings", &key, &f.0))
                .transpose()?,
            transcript_len: position("virtual-user transcript length", &key, row.transcript_len)?,
            goals: strings("virtual-user run goals", &key, row.goals)?,
            seed: row.seed.map(seed_of),
            started_by: row.started_by,
            tally: tally(&key, (row.tally_turns, row.tally_tokens, row.tally_cost))?,
            memory: row
                .memory
                .map(|m| decode_json("virtual-user run memory", &key, &m.0))
                .transpose()?,
            intents: strings("virtual-user run intents", &key, row.intents)?,
            stop_reason,
            persona: row.persona,
            failure: row.failure,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
        })
    }
}

/// A row of `flowstate_virtual_user_transcript`. No column is optional, so
/// none is sent as `DEFAULT`: SQLite takes a chunk's rows as one
/// multi-row `INSERT` too.
#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_virtual_user_transcript)]
#[diesel(treat_none_as_default_value = false)]
pub(crate) struct TranscriptRow {
    pub run_id: String,
    pub seq: i64,
    pub entry: JsonText,
    pub at: i64,
}

/// Run `id` if it is running: the one row a transcript chunk is admitted
/// to. Every dialect's append is `UPDATE` of it, setting
/// [`chunk_admitted`].
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn running_run<'a>(id: &'a str) -> _ {
    let running: &'static str = RUNNING;
    flowstate_virtual_user_runs::table
        .filter(flowstate_virtual_user_runs::id.eq(id))
        .filter(flowstate_virtual_user_runs::status.eq(running))
}

/// The tally add of `turns`, `tokens` and `cost` to run `id` at `now`:
/// each counter raised in place, the run matched only while running and
/// while every counter has room, in one guarded `UPDATE`. Each amount is
/// at most `i64::MAX` (checked), so each room is at least 0. The run's
/// guard is [`running_run`]'s, spelled out (an `auto_type` function names
/// another's type only through its alias).
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn tally_add<'a>(id: &'a str, turns: i64, tokens: i64, cost: i64, now: i64) -> _ {
    let running: &'static str = RUNNING;
    let turns_room: i64 = i64::MAX - turns;
    let tokens_room: i64 = i64::MAX - tokens;
    let cost_room: i64 = i64::MAX - cost;
    diesel::dsl::update(
        flowstate_virtual_user_runs::table
            .filter(flowstate_virtual_user_runs::id.eq(id))
            .filter(flowstate_virtual_user_runs::status.eq(running))
            .filter(flowstate_virtual_user_runs::tally_turns.le(turns_room))
            .filter(flowstate_virtual_user_runs::tally_tokens.le(tokens_room))
            .filter(flowstate_virtual_user_runs::tally_cost.le(cost_room)),
    )
    .set((
        flowstate_virtual_user_runs::tally_turns
            .eq(flowstate_virtual_user_runs::tally_turns + turns),
        flowstate_virtual_user_runs::tally_tokens
            .eq(flowstate_virtual_user_runs::tally_tokens + tokens),
        flowstate_virtual_user_runs::tally_cost.eq(flowstate_virtual_user_runs::tally_cost + cost),
        flowstate_virtual_user_runs::updated_at.eq(now),
    ))
}

/// What a schedule upsert replaces on a stored row: every column of `row`
/// but the key and the last run, bound.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn schedule_replaced(row: &ScheduleRow) -> _ {
    let enabled: bool = row.enabled;
    let min_interval_ms: i64 = row.min_interval_ms;
    let max_interval_ms: i64 = row.max_interval_ms;
    let next_run_at: i64 = row.next_run_at;
    let updated_at: i64 = row.updated_at;
    (
        flowstate_virtual_user_schedules::enabled.eq(enabled),
        flowstate_virtual_user_schedules::min_interval_ms.eq(min_interval_ms),
        flowstate_virtual_user_schedules::max_interval_ms.eq(max_interval_ms),
        flowstate_virtual_user_schedules::next_run_at.eq(next_run_at),
        flowstate_virtual_user_schedules::updated_at.eq(updated_at),
    )
}

/// The changes that admit a chunk of `n` entries at `now`: the length
/// raised by `n` (the positions the chunk takes, read back after as the
/// new length: `RETURNING` on PostgreSQL and SQLite, a read of the locked
/// row on MySQL).
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn chunk_admitted(n: i64, now: i64) -> _ {
    (
        flowstate_virtual_user_runs::transcript_len
            .eq(flowstate_virtual_user_runs::transcript_len + n),
        flowstate_virtual_user_runs::updated_at.eq(now),
    )
}

/// The rows of a transcript chunk appended to run `run` at `now`: `entries`
/// (JSON text) numbered below `len`, the length the admitting `UPDATE`
/// answered.
pub(crate) fn transcript_rows(
    run: &str,
    entries: &[String],
    len: i64,
    now: i64,
) -> Vec<TranscriptRow> {
    let n = entries.len() as i64;
    entries
        .iter()
        .zip(len - n..)
        .map(|(entry, seq)| TranscriptRow {
            run_id: run.to_owned(),
            seq,
            entry: JsonText(entry.clone()),
            at: now,
        })
        .collect()
}

/// One transcript entry read back, by its run's id (for errors).
pub(crate) fn transcript_entry(
    run: &str,
    (seq, entry, at): (i64, JsonText, i64),
) -> Result<TranscriptEntry, Error> {
    let row = format!("{run}/{seq}");
    Ok(TranscriptEntry {
        seq: position("virtual-user transcript position", &row, seq)?,
        entry: decode_json("virtual-user transcript entry", &row, &entry.0)?,
        at: Timestamp::from_micros(at),
    })
}
