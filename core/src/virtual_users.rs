//! Virtual users: the records of scheduled synthetic-user runs (a persona's
//! schedule, its runs, a run's transcript) and the pure rules the tick in
//! `flowstate-virtual-users` follows.
//!
//! Nothing here reads a clock or draws a number: `now` and the `Rng` are
//! parameters. When a schedule is due and how its next run is drawn are
//! [`schedule`](crate::schedule)'s `is_due` and `next_run_at`; this module
//! adds what the claim needs on top ([`claimed_next_run_at`]) and the
//! message a reaped run is failed with ([`reap_message`]).

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, InvalidInput};
use crate::field;
use crate::ids::VirtualUserRunId;
use crate::limits::InputLimits;
use crate::schedule::{Interval, next_run_at};
use crate::status::VirtualUserRunStatus;
use crate::time::Timestamp;

/// A persona's schedule to write (insert, or replace the one it has).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSchedule {
    /// The persona: the schedule's key.
    pub persona: String,
    /// Whether the tick acts on it at all.
    pub enabled: bool,
    /// The gap between runs, drawn uniformly from it.
    pub interval: Interval,
    /// When it is next due.
    pub next_run_at: Timestamp,
}

impl NewSchedule {
    /// An enabled schedule for `persona`, first due at [`next_run_at`] drawn
    /// from `interval` at `now`: the default a schedule written without a
    /// first run gets.
    pub fn new<R: Rng + ?Sized>(
        persona: impl Into<String>,
        interval: Interval,
        now: Timestamp,
        rng: &mut R,
    ) -> Self {
        Self {
            persona: persona.into(),
            enabled: true,
            interval,
            next_run_at: next_run_at(interval, now, rng),
        }
    }

    /// The same schedule, next due at `at`.
    #[must_use]
    pub fn with_next_run_at(mut self, at: Timestamp) -> Self {
        self.next_run_at = at;
        self
    }

    /// The same schedule, switched on or off.
    #[must_use]
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }
}

/// A stored schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// The persona.
    pub persona: String,
    /// Whether the tick acts on it.
    pub enabled: bool,
    /// The gap between runs.
    pub interval: Interval,
    /// When it is next due: the value a claim compares and sets.
    pub next_run_at: Timestamp,
    /// The run its last dispatch started, once one has been recorded.
    pub last_run: Option<VirtualUserRunId>,
    /// When a tick last started a run of it: set by a claim that records a
    /// run, kept by every other write; `None` until the first.
    pub last_run_at: Option<Timestamp>,
    /// What the persona sets out to do on each run, in order; empty until
    /// set ([`SchedulePatch::goals`]).
    pub goals: Vec<String>,
    /// What one run may spend; unlimited until set
    /// ([`SchedulePatch::budget`]).
    pub budget: RunBudget,
    /// When it was last written (by an upsert, an update or a claim).
    pub updated_at: Timestamp,
}

/// What one virtual-user run may spend, each limit optional (`None`: no
/// limit). The store keeps it; the runner enforces it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunBudget {
    /// The longest a run may take, to the millisecond.
    pub max_duration: Option<Duration>,
    /// The most turns a run may take.
    pub max_turns: Option<u32>,
    /// The most a run may spend, in the caller's smallest unit of cost
    /// (micro-dollars, say).
    pub max_spend: Option<u64>,
}

impl RunBudget {
    /// No limit on anything: the budget of a schedule never given one.
    pub const UNLIMITED: Self = Self {
        max_duration: None,
        max_turns: None,
        max_spend: None,
    };
}

/// A partial update of a persona's schedule: each field `Some` is written,
/// each `None` keeps what is stored. Build it with [`Self::default`] and
/// the `with_`/field methods.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedulePatch {
    /// Switch it on or off.
    pub enabled: Option<bool>,
    /// A new interval (the next run stays where it is).
    pub interval: Option<Interval>,
    /// Move the next run.
    pub next_run_at: Option<Timestamp>,
    /// Replace its goals (an empty list clears them).
    pub goals: Option<Vec<String>>,
    /// Replace its budget ([`RunBudget::UNLIMITED`] clears it).
    pub budget: Option<RunBudget>,
}

impl SchedulePatch {
    /// The patch that only switches the schedule on or off.
    pub fn enabled(enabled: bool) -> Self {
        Self {
            enabled: Some(enabled),
            ..Self::default()
        }
    }

    /// The same patch, also setting the interval.
    #[must_use]
    pub fn with_interval(mut self, interval: Interval) -> Self {
        self.interval = Some(interval);
        self
    }

    /// The same patch, also moving the next run.
    #[must_use]
    pub fn with_next_run_at(mut self, at: Timestamp) -> Self {
        self.next_run_at = Some(at);
        self
    }

    /// The same patch, also replacing the goals.
    #[must_use]
    pub fn with_goals<I, G>(mut self, goals: I) -> Self
    where
        I: IntoIterator<Item = G>,
        G: Into<String>,
    {
        self.goals = Some(goals.into_iter().map(Into::into).collect());
        self
    }

    /// The same patch, also replacing the budget.
    #[must_use]
    pub fn with_budget(mut self, budget: RunBudget) -> Self {
        self.budget = Some(budget);
        self
    }
}

/// The most goals a schedule keeps.
pub const MAX_GOALS: usize = 100;

impl Schedule {
    /// How many due schedules a listing of `limit` returns: `0` reads as
    /// 100, more than 1000 as 1000.
    pub fn due_limit(limit: u32) -> u32 {
        effective(limit, 100, 1_000)
    }
}

/// A stored virtual-user run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VirtualUserRun {
    /// Its id.
    pub id: VirtualUserRunId,
    /// The persona it plays.
    pub persona: String,
    /// Where it stands.
    pub status: VirtualUserRunStatus,
    /// What it found, once completed.
    pub findings: Option<Value>,
    /// Why it failed, once failed.
    pub failure: Option<String>,
    /// How many transcript entries it has.
    pub transcript_len: u64,
    /// When it started: what staleness is measured from.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

impl VirtualUserRun {
    /// A run of `persona` as a store starts it: running, no transcript.
    pub fn started(id: VirtualUserRunId, persona: String, now: Timestamp) -> Self {
        Self {
            id,
            persona,
            status: VirtualUserRunStatus::Running,
            findings: None,
            failure: None,
            transcript_len: 0,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A listing of virtual-user runs, newest first by `(created_at, id)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VirtualUserRunQuery {
    /// Only this persona's runs.
    pub persona: Option<String>,
    /// Only runs in this status.
    pub status: Option<VirtualUserRunStatus>,
    /// At most this many (`0` reads as [`Self::DEFAULT_LIMIT`], more than
    /// [`Self::MAX_LIMIT`] as that).
    pub limit: u32,
}

impl VirtualUserRunQuery {
    /// The page size when none is given.
    pub const DEFAULT_LIMIT: u32 = 50;
    /// The most a listing returns.
    pub const MAX_LIMIT: u32 = 1_000;

    /// The newest `limit` runs of `persona`.
    pub fn persona(persona: impl Into<String>, limit: u32) -> Self {
        Self {
            persona: Some(persona.into()),
            status: None,
            limit,
        }
    }

    /// The size this listing will use.
    pub fn effective_limit(&self) -> u32 {
        effective(self.limit, Self::DEFAULT_LIMIT, Self::MAX_LIMIT)
    }
}

/// One entry of a run's transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// Its position, from 0, in append order.
    pub seq: u64,
    /// What was recorded.
    pub entry: Value,
    /// When it was appended.
    pub at: Timestamp,
}

/// One page of a transcript.
#[derive(Clone, Debug, PartialEq)]
pub struct TranscriptPage {
    /// The entries, in order.
    pub entries: Vec<TranscriptEntry>,
    /// The `seq` the next page starts from, when this page is full.
    pub next: Option<u64>,
}

impl TranscriptPage {
    /// The page size when none is given.
    pub const DEFAULT_LIMIT: u32 = 100;
    /// The largest page a read returns.
    pub const MAX_LIMIT: u32 = 1_000;

    /// The page size a read of `limit` will use.
    pub fn effective_limit(limit: u32) -> u32 {
        effective(limit, Self::DEFAULT_LIMIT, Self::MAX_LIMIT)
    }

    /// The page of `entries` read with `limit`: `next` is set when it is full.
    pub fn of(entries: Vec<TranscriptEntry>, limit: u32) -> Self {
        let next = (entries.len() == limit as usize)
            .then(|| entries.last().map(|e| e.seq + 1))
            .flatten();
        Self { entries, next }
    }
}

fn effective(limit: u32, default: u32, max: u32) -> u32 {
    match limit {
        0 => default,
        n => n.min(max),
    }
}

/// The most entries one append takes: a chunk, not a whole transcript.
pub const MAX_TRANSCRIPT_CHUNK: usize = 1_000;

/// The `next_run_at` a claim of a schedule due at or before `now` sets:
/// [`next_run_at`] drawn from `interval`, but never earlier than a
/// microsecond after `now`.
///
/// The claim is a compare-and-set on `next_run_at`, so the value it sets
/// must differ from the one it replaces (which is at most `now`): were they
/// equal (a zero interval), a second tick holding the old value would see
/// it still there and claim too. And a schedule claimed at `now` is not due
/// again at `now`, so ticks sharing a clock reading dispatch it once.
pub fn claimed_next_run_at<R: Rng + ?Sized>(
    interval: Interval,
    now: Timestamp,
    rng: &mut R,
) -> Timestamp {
    next_run_at(interval, now, rng).max(now.plus(Duration::from_micros(1)))
}

/// Why a run stranded at `running` was failed: it says how long it ran, in
/// whole hours and minutes.
pub fn reap_message(ran_for: Duration) -> String {
    let minutes = ran_for.as_secs() / 60;
    let (h, m) = (minutes / 60, minutes % 60);
    let took = if h == 0 {
        format!("{m}m")
    } else {
        format!("{h}h {m}m")
    };
    format!(
        "abandoned: still running {took} after it started, which is longer than any budget allows"
    )
}

impl InputLimits {
    /// Checks a schedule patch and answers its goals, if it sets them, as
    /// JSON text (an array of strings): at most [`MAX_GOALS`], each text
    /// ([`Self::check_text`]), the whole within [`Self::max_value_bytes`];
    /// and a budget's duration within what a store keeps (milliseconds in
    /// an `i64`).
    pub fn encode_schedule_patch(&self, patch: &SchedulePatch) -> Result<Option<String>, Error> {
        if let Some(budget) = &patch.budget
            && let Some(d) = budget.max_duration
            && i64::try_from(d.as_millis()).is_err()
        {
            return Err(InvalidInput::OutOfRange {
                field: field::RUN_BUDGET,
                detail: format!("max duration {d:?} is too long"),
            }
            .into());
        }
        if let Some(budget) = &patch.budget
            && budget.max_spend.is_some_and(|s| i64::try_from(s).is_err())
        {
            return Err(InvalidInput::OutOfRange {
                field: field::RUN_BUDGET,
                detail: format!("max spend over {}", i64::MAX),
            }
            .into());
        }
        let Some(goals) = &patch.goals else {
            return Ok(None);
        };
        if goals.len() > MAX_GOALS {
            return Err(InvalidInput::OutOfRange {
                field: field::GOALS,
                detail: format!("{} goals, over the limit of {MAX_GOALS}", goals.len()),
            }
            .into());
        }
        for goal in goals {
            self.check_text(field::GOALS, goal)?;
        }
        self.encode(field::GOALS, &Value::from(goals.clone()))
            .map(Some)
    }

    /// Checks a persona name, like every name: not empty, no NUL, at most
    /// [`Self::max_key_bytes`].
    pub fn check_persona(&self, persona: &str) -> Result<(), Error> {
        self.check_key(field::PERSONA, persona)
    }

    /// Checks a run's failure reason (not empty, no NUL, at most
    /// [`Self::max_value_bytes`]).
    pub fn check_failure_reason(&self, reason: &str) -> Result<(), Error> {
        let field = "failure reason";
        if reason.is_empty() {
            return Err(InvalidInput::Empty { field }.into());
        }
        if reason.len() > self.max_value_bytes {
            return Err(InvalidInput::TooLarge {
                field,
                bytes: reason.len(),
                limit: self.max_value_bytes,
            }
            .into());
        }
        if reason.contains('\0') {
            return Err(InvalidInput::NulCharacter { field }.into());
        }
        Ok(())
    }

    /// Checks a transcript chunk (1 to [`MAX_TRANSCRIPT_CHUNK`] entries, each
    /// within the value limits) and answers its entries as JSON text.
    pub fn encode_transcript(&self, entries: &[Value]) -> Result<Vec<String>, Error> {
        let field = "transcript chunk";
        if entries.is_empty() {
            return Err(InvalidInput::Empty { field }.into());
        }
        if entries.len() > MAX_TRANSCRIPT_CHUNK {
            return Err(InvalidInput::OutOfRange {
                field,
                detail: format!(
                    "{} entries, over the limit of {MAX_TRANSCRIPT_CHUNK}",
                    entries.len()
                ),
            }
            .into());
        }
        entries
            .iter()
            .map(|e| self.encode(field::TRANSCRIPT_ENTRY, e))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use serde_json::json;

    #[test]
    fn a_claim_always_moves_next_run_at_past_now() {
        let now = Timestamp::from_millis(5_000);
        let mut rng = SmallRng::seed_from_u64(1);
        let zero = Interval {
            min_ms: 0,
            max_ms: 0,
        };
        assert_eq!(
            claimed_next_run_at(zero, now, &mut rng),
            now.plus(Duration::from_micros(1))
        );
        let hour = Interval {
            min_ms: 3_600_000,
            max_ms: 3_600_000,
        };
        assert_eq!(
            claimed_next_run_at(hour, now, &mut rng),
            now.plus(Duration::from_secs(3_600))
        );
    }

    #[test]
    fn the_reap_message_says_how_long_it_ran() {
        let rows = [
            (Duration::from_secs(59), "still running 0m after"),
            (Duration::from_secs(45 * 60), "still running 45m after"),
            (Duration::from_secs(2 * 3_600), "still running 2h 0m after"),
            (
                Duration::from_secs(3 * 3_600 + 7 * 60 + 59),
                "still running 3h 7m after",
            ),
        ];
        for (ran_for, expected) in rows {
            let message = reap_message(ran_for);
            assert!(message.contains(expected), "{ran_for:?}: {message}");
        }
    }

    #[test]
    fn a_full_page_points_past_its_last_entry() {
        let entry = |seq| TranscriptEntry {
            seq,
            entry: json!(seq),
            at: Timestamp::EPOCH,
        };
        assert_eq!(
            TranscriptPage::of(vec![entry(3), entry(4)], 2).next,
            Some(5)
        );
        assert_eq!(TranscriptPage::of(vec![entry(3)], 2).next, None);
        assert_eq!(TranscriptPage::of(vec![], 2).next, None);
        assert_eq!(TranscriptPage::effective_limit(0), 100);
        assert_eq!(TranscriptPage::effective_limit(5_000), 1_000);
    }

    #[test]
    fn limits_refuse_bad_transcripts_and_reasons() {
        let limits = InputLimits::default();
        assert!(limits.encode_transcript(&[]).is_err());
        assert!(
            limits
                .encode_transcript(&vec![json!(1); MAX_TRANSCRIPT_CHUNK + 1])
                .is_err()
        );
        assert_eq!(
            limits.encode_transcript(&[json!({"a": 1})]).unwrap(),
            [r#"{"a":1}"#]
        );
        assert!(limits.check_failure_reason("").is_err());
        assert!(limits.check_failure_reason("a\0b").is_err());
        assert!(limits.check_failure_reason("timed out").is_ok());
        assert!(limits.check_persona("").is_err());
    }
}
