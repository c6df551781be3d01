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
///
/// Beside where it stands and what it found, a run keeps what a person
/// reviewing it asks for: the goals it set out with, the seed its
/// randomness was drawn from (so a finding can be replayed), who or what
/// started it, its [`RunTally`], its memory and intents as they last
/// stood, and why it stopped. A run started with
/// [`VirtualUserRunStore::start_virtual_user_run`](crate::ports::VirtualUserRunStore::start_virtual_user_run)
/// (or stored before these fields existed) has no goals, no seed, no
/// starter, a zero tally, no memory, no intents and, until it settles, no
/// stop reason.
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
    /// What it set out to do, in order, as given at its start
    /// ([`NewVirtualUserRun::with_goals`], or a schedule's goals through
    /// [`NewVirtualUserRun::for_schedule`]); empty if none was given.
    pub goals: Vec<String>,
    /// The seed its randomness was drawn from, if its starter said: what a
    /// replay of a finding starts from.
    pub seed: Option<u64>,
    /// Who or what started it (`"schedule"`, a person's name), if its
    /// starter said.
    pub started_by: Option<String>,
    /// What it has spent so far, raised by
    /// [`VirtualUserRunStore::add_to_tally`](crate::ports::VirtualUserRunStore::add_to_tally);
    /// zero at its start.
    pub tally: RunTally,
    /// What the persona carries between turns, as last written by
    /// [`VirtualUserRunStore::set_memory`](crate::ports::VirtualUserRunStore::set_memory):
    /// a JSON document of the persona's own shape; `None` until written.
    pub memory: Option<Value>,
    /// What it meant to do next, as last written by
    /// [`VirtualUserRunStore::set_intents`](crate::ports::VirtualUserRunStore::set_intents);
    /// empty until written.
    pub intents: Vec<String>,
    /// Why it stopped, once settled: the reason its complete or fail gave
    /// ([`StopReason::Finished`] and [`StopReason::Failed`] when it gave
    /// none); `None` while running, and for a run settled before stop
    /// reasons were stored.
    pub stop_reason: Option<StopReason>,
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
            goals: Vec::new(),
            seed: None,
            started_by: None,
            tally: RunTally::ZERO,
            memory: None,
            intents: Vec::new(),
            stop_reason: None,
        }
    }

    /// The run `new` describes as a store starts it: running, no
    /// transcript, a zero tally, its goals, seed and starter as given.
    pub fn started_from(id: VirtualUserRunId, new: &NewVirtualUserRun, now: Timestamp) -> Self {
        Self {
            goals: new.goals.clone(),
            seed: new.seed,
            started_by: new.started_by.clone(),
            ..Self::started(id, new.persona.clone(), now)
        }
    }
}

/// A virtual-user run to start: the persona, and optionally the goals it
/// sets out with, the seed of its randomness and who or what started it.
/// [`Self::new`] gives none of them (what
/// [`VirtualUserRunStore::start_virtual_user_run`](crate::ports::VirtualUserRunStore::start_virtual_user_run)
/// starts); the `with_` methods add each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewVirtualUserRun {
    /// The persona it plays.
    pub persona: String,
    /// What it sets out to do, in order (at most [`MAX_GOALS`], each text);
    /// empty by default.
    pub goals: Vec<String>,
    /// The seed its randomness is drawn from; `None` by default. Every
    /// `u64` is kept exactly.
    pub seed: Option<u64>,
    /// Who or what started it (checked like a name: not empty, no NUL, at
    /// most [`InputLimits::max_key_bytes`]); `None` by default.
    pub started_by: Option<String>,
}

impl NewVirtualUserRun {
    /// A run of `persona` with no goals, no seed and no starter.
    pub fn new(persona: impl Into<String>) -> Self {
        Self {
            persona: persona.into(),
            goals: Vec::new(),
            seed: None,
            started_by: None,
        }
    }

    /// A run of `schedule`'s persona, setting out with its goals, started
    /// by [`Self::SCHEDULE`]: what a tick's dispatch starts.
    pub fn for_schedule(schedule: &Schedule) -> Self {
        Self::new(schedule.persona.clone())
            .with_goals(schedule.goals.iter().cloned())
            .with_started_by(Self::SCHEDULE)
    }

    /// The starter [`Self::for_schedule`] names: `schedule`.
    pub const SCHEDULE: &'static str = "schedule";

    /// The same run, setting out with `goals`.
    #[must_use]
    pub fn with_goals<I, G>(mut self, goals: I) -> Self
    where
        I: IntoIterator<Item = G>,
        G: Into<String>,
    {
        self.goals = goals.into_iter().map(Into::into).collect();
        self
    }

    /// The same run, its randomness drawn from `seed`.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The same run, started by `who`.
    #[must_use]
    pub fn with_started_by(mut self, who: impl Into<String>) -> Self {
        self.started_by = Some(who.into());
        self
    }
}

/// What a virtual-user run has spent: typed counters, each only ever
/// raised, by
/// [`VirtualUserRunStore::add_to_tally`](crate::ports::VirtualUserRunStore::add_to_tally),
/// which takes the amounts to add as a `RunTally` too. A store keeps each
/// counter within `i64::MAX`; an add that would pass it is refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunTally {
    /// Turns taken (compare [`RunBudget::max_turns`]).
    pub turns: u64,
    /// Model tokens spent, input and output together.
    pub tokens: u64,
    /// Money spent, in the caller's smallest unit of cost (micro-dollars,
    /// say): the unit of [`RunBudget::max_spend`].
    pub cost: u64,
}

impl RunTally {
    /// Nothing spent: a run's tally at its start.
    pub const ZERO: Self = Self {
        turns: 0,
        tokens: 0,
        cost: 0,
    };

    /// An amount of `turns` turns, nothing else.
    pub const fn turns(turns: u64) -> Self {
        Self {
            turns,
            tokens: 0,
            cost: 0,
        }
    }

    /// The same amount, with `tokens` tokens.
    #[must_use]
    pub const fn with_tokens(mut self, tokens: u64) -> Self {
        self.tokens = tokens;
        self
    }

    /// The same amount, with a cost of `cost`.
    #[must_use]
    pub const fn with_cost(mut self, cost: u64) -> Self {
        self.cost = cost;
        self
    }

    /// `self` raised by `delta`, or `None` if a counter would pass
    /// `i64::MAX` (the most a store keeps).
    pub fn checked_add(self, delta: Self) -> Option<Self> {
        let add = |a: u64, b: u64| a.checked_add(b).filter(|n| i64::try_from(*n).is_ok());
        Some(Self {
            turns: add(self.turns, delta.turns)?,
            tokens: add(self.tokens, delta.tokens)?,
            cost: add(self.cost, delta.cost)?,
        })
    }
}

/// Which limit of a [`RunBudget`] a run exhausted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BudgetLimit {
    /// [`RunBudget::max_duration`].
    Duration,
    /// [`RunBudget::max_turns`].
    Turns,
    /// [`RunBudget::max_spend`].
    Spend,
}

/// Why a virtual-user run stopped, given when it is settled
/// ([`VirtualUserRunStore::complete_virtual_user_run_with_reason`](crate::ports::VirtualUserRunStore::complete_virtual_user_run_with_reason),
/// [`VirtualUserRunStore::fail_virtual_user_run_with_reason`](crate::ports::VirtualUserRunStore::fail_virtual_user_run_with_reason))
/// and stored as text ([`Self::as_str`]). Any reason may go with either
/// status: a run that ran out of budget may complete with what it found or
/// fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StopReason {
    /// It ran to its end, no more said: what
    /// [`complete_virtual_user_run`](crate::ports::VirtualUserRunStore::complete_virtual_user_run)
    /// records.
    Finished,
    /// It did what it set out to do.
    GoalsMet,
    /// It spent one limit of its budget.
    BudgetExhausted {
        /// Which.
        which: BudgetLimit,
    },
    /// It ran past a deadline of its own (a turn or a call that timed out).
    TimedOut,
    /// A person or the host stopped it (cancelled).
    Stopped,
    /// An error ended it: what
    /// [`fail_virtual_user_run`](crate::ports::VirtualUserRunStore::fail_virtual_user_run)
    /// records.
    Failed,
    /// It was left running and reaped by a tick.
    Abandoned,
}

impl StopReason {
    /// The text a store keeps: `finished`, `goals-met`,
    /// `budget-exhausted:duration`, `budget-exhausted:turns`,
    /// `budget-exhausted:spend`, `timed-out`, `stopped`, `failed`,
    /// `abandoned`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Finished => "finished",
            Self::GoalsMet => "goals-met",
            Self::BudgetExhausted {
                which: BudgetLimit::Duration,
            } => "budget-exhausted:duration",
            Self::BudgetExhausted {
                which: BudgetLimit::Turns,
            } => "budget-exhausted:turns",
            Self::BudgetExhausted {
                which: BudgetLimit::Spend,
            } => "budget-exhausted:spend",
            Self::TimedOut => "timed-out",
            Self::Stopped => "stopped",
            Self::Failed => "failed",
            Self::Abandoned => "abandoned",
        }
    }

    /// Every reason, in declaration order.
    pub const ALL: [Self; 9] = [
        Self::Finished,
        Self::GoalsMet,
        Self::BudgetExhausted {
            which: BudgetLimit::Duration,
        },
        Self::BudgetExhausted {
            which: BudgetLimit::Turns,
        },
        Self::BudgetExhausted {
            which: BudgetLimit::Spend,
        },
        Self::TimedOut,
        Self::Stopped,
        Self::Failed,
        Self::Abandoned,
    ];

    /// The reason stored as `text` ([`Self::as_str`]), or `None`.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The most intents a run keeps at once.
pub const MAX_INTENTS: usize = 100;

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

/// The error an add to run `run`'s tally answers when a counter would
/// pass `i64::MAX`: the run is left as it was.
pub fn tally_overflow(run: VirtualUserRunId, tally: RunTally, delta: RunTally) -> Error {
    InvalidInput::OutOfRange {
        field: field::TALLY,
        detail: format!(
            "run {run}: adding {delta:?} to {tally:?} passes {}",
            i64::MAX
        ),
    }
    .into()
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

    /// Checks a list of strings kept as one JSON array (a run's goals or
    /// intents): at most `max` entries, each text ([`Self::check_text`]),
    /// the whole within [`Self::max_value_bytes`]; answers its JSON text.
    fn encode_strings(
        &self,
        field: &'static str,
        items: &[String],
        max: usize,
    ) -> Result<String, Error> {
        if items.len() > max {
            return Err(InvalidInput::OutOfRange {
                field,
                detail: format!("{} entries, over the limit of {max}", items.len()),
            }
            .into());
        }
        for item in items {
            self.check_text(field, item)?;
        }
        self.encode(field, &Value::from(items.to_vec()))
    }

    /// Checks a run to start (its persona and starter as names, its goals
    /// like a schedule's) and answers its goals as JSON text, `None` when
    /// it has none.
    pub fn encode_new_virtual_user_run(
        &self,
        run: &NewVirtualUserRun,
    ) -> Result<Option<String>, Error> {
        self.check_persona(&run.persona)?;
        if let Some(who) = &run.started_by {
            self.check_key(field::STARTED_BY, who)?;
        }
        if run.goals.is_empty() {
            return Ok(None);
        }
        self.encode_strings(field::GOALS, &run.goals, MAX_GOALS)
            .map(Some)
    }

    /// Checks a run's intents (at most [`MAX_INTENTS`], each text, the
    /// whole within the value limit) and answers them as JSON text.
    pub fn encode_intents(&self, intents: &[String]) -> Result<String, Error> {
        self.encode_strings(field::INTENTS, intents, MAX_INTENTS)
    }

    /// Checks an amount to add to a run's tally: each counter at most
    /// `i64::MAX`, the most a store keeps.
    pub fn check_tally_delta(&self, delta: &RunTally) -> Result<(), Error> {
        for (what, n) in [
            ("turns", delta.turns),
            ("tokens", delta.tokens),
            ("cost", delta.cost),
        ] {
            if i64::try_from(n).is_err() {
                return Err(InvalidInput::OutOfRange {
                    field: field::TALLY,
                    detail: format!("{what} {n} over {}", i64::MAX),
                }
                .into());
            }
        }
        Ok(())
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
    fn stop_reasons_read_back_from_their_text() {
        for reason in StopReason::ALL {
            assert_eq!(StopReason::parse(reason.as_str()), Some(reason));
        }
        assert_eq!(StopReason::parse("nope"), None);
    }

    #[test]
    fn a_tally_stops_short_of_what_a_store_keeps() {
        let max = i64::MAX as u64;
        let tally = RunTally::turns(max - 1);
        assert_eq!(
            tally.checked_add(RunTally::turns(1)),
            Some(RunTally::turns(max))
        );
        assert_eq!(tally.checked_add(RunTally::turns(2)), None);
        let limits = InputLimits::default();
        assert!(limits.check_tally_delta(&RunTally::turns(max)).is_ok());
        assert!(
            limits
                .check_tally_delta(&RunTally::ZERO.with_cost(max + 1))
                .is_err()
        );
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
