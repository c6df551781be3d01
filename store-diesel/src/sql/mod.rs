//! The scaffold of every hand-written statement, shared by the dialects:
//! what a status move writes ([`StepMove`]: target, guard, stamp and
//! payload columns), the status-guarded `UPDATE`s built from core's
//! tables, the claim's guard and assignments, and the shape of the history
//! upsert. A dialect module only wraps these fragments in its own
//! statement form (a CTE on PostgreSQL, a transaction on MySQL and SQLite)
//! and names its placeholders.
//!
//! Only status literals from core's enums and column names are spliced;
//! every value is bound. Placeholders are passed in as text (`$1`, `?1`,
//! `?`), so each fragment is written once whatever the dialect's syntax; a
//! caller using positional `?` binds in the order the placeholders appear.
//!
//! Beside it: `in_list.rs` (MySQL's and SQLite's batch statements over an
//! `IN` list of steps), `waits.rs` (the one SQL spelling of "this run is
//! awake"), `typed.rs` (the fragments written in the diesel DSL rather
//! than as text) and `bound.rs` (the text fragments those hold, in a form
//! the statement cache keeps).

use std::fmt::Write as _;

use diesel::backend::Backend;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, HasSqlType, Nullable, Text};

use flowstate_core::lease::leasable_statuses;
use flowstate_core::step_claim::claimed_targets;
use flowstate_core::{BatchClaim, ClaimDecision, RetryStart, RunStatus, StepStatus};

use crate::rows::StepRow;
use crate::schema::{Json, JsonText};

pub(crate) mod bound;
#[cfg(any(feature = "mysql", feature = "sqlite"))]
pub(crate) mod in_list;
pub(crate) mod retention;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) mod returning;
pub(crate) mod typed;
pub(crate) mod waits;

/// The stored texts of [`leasable_statuses`], for `IN` guards.
pub(crate) fn leasable_texts() -> Vec<&'static str> {
    leasable_statuses()
        .into_iter()
        .map(RunStatus::as_str)
        .collect()
}

/// `column IN ('a', 'b')` for `statuses`, or a guard that matches nothing
/// when there are none. The literals come from the status enums' `Display`,
/// never from input.
pub(crate) fn status_in<S: std::fmt::Display>(column: &str, statuses: &[S]) -> String {
    match literal_list(statuses) {
        Some(list) => format!("{column} IN {list}"),
        None => "1 = 0".to_owned(),
    }
}

/// `('a', 'b')` for `statuses`, or `None` when there are none: the list of
/// [`status_in`] and of the typed [`bound::literal_in`]. Each literal must
/// be a plain name (a status's stored text), so no input can reach the
/// text.
pub(crate) fn literal_list<S: std::fmt::Display>(statuses: &[S]) -> Option<String> {
    if statuses.is_empty() {
        return None;
    }
    let quoted: Vec<String> = statuses
        .iter()
        .map(|status| {
            let text = status.to_string();
            assert!(
                text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "a status literal is a plain name: {text:?}"
            );
            format!("'{text}'")
        })
        .collect();
    Some(format!("({})", quoted.join(", ")))
}

/// [`RetryPolicy::has_attempts_left`](flowstate_core::RetryPolicy::has_attempts_left)
/// in SQL: `attempt < retries + 1`, saturating where core's `u32` does, so
/// no dialect can raise an attempt past what a record can hold.
pub(crate) const ATTEMPTS_LEFT: &str =
    "current_attempt < retries + 1 AND current_attempt < 4294967295";

/// The history column a move to `to` stamps with the time, if any.
pub(crate) const fn stamp_column(to: StepStatus) -> Option<&'static str> {
    match to {
        StepStatus::Pending => None,
        StepStatus::Scheduled => Some("scheduled_at"),
        StepStatus::Running => Some("running_at"),
        StepStatus::Succeeded => Some("succeeded_at"),
        StepStatus::Failed => Some("failed_at"),
    }
}

/// The column a move to `to` writes its JSON payload to, if any.
pub(crate) const fn payload_column(to: StepStatus) -> Option<&'static str> {
    match to {
        StepStatus::Succeeded => Some("result"),
        StepStatus::Failed => Some("error"),
        StepStatus::Pending | StepStatus::Scheduled | StepStatus::Running => None,
    }
}

/// How a dialect spells "on a duplicate `(step_id, attempt)`, update".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Upsert {
    /// `ON CONFLICT (step_id, attempt) DO UPDATE SET c = EXCLUDED.c`
    /// (PostgreSQL, SQLite).
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    OnConflict,
    /// `ON DUPLICATE KEY UPDATE c = VALUES(c)` (MySQL, MariaDB).
    #[cfg(feature = "mysql")]
    OnDuplicateKey,
}

/// Where a history upsert copies the step's id, attempt and payload from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HistorySource<'a> {
    /// The `FROM ...` clause naming one step row.
    pub from: &'a str,
    /// The prefix of that row's columns (`"m."`, or `""`).
    pub prefix: &'a str,
    /// The placeholder of the new history row's id.
    pub id: &'a str,
    /// The placeholder of the time, for `created_at` and the stamp.
    pub now: &'a str,
}

/// A status-guarded move of a step, as the ports ask for one: a
/// transition to a status, the next attempt of a failed step, or a
/// claimer's move of the attempt it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Move {
    /// [`StepStore::transition_step`](flowstate_core::ports::StepStore::transition_step) to this status.
    Transition(StepStatus),
    /// [`StepStore::create_retry_attempt`](flowstate_core::ports::StepStore::create_retry_attempt) starting here.
    Retry(RetryStart),
    /// [`StepStore::transition_claimed`](flowstate_core::ports::StepStore::transition_claimed)
    /// to this status: guarded by the claim's attempt as well.
    Claimed(StepStatus),
}

impl Move {
    /// Every move, for statement tables built once.
    pub fn all() -> Vec<Self> {
        let transitions = StepStatus::ALL.iter().map(|&to| Self::Transition(to));
        let claimed = StepStatus::ALL.iter().map(|&to| Self::Claimed(to));
        transitions
            .chain(RetryStart::ALL.iter().map(|&start| Self::Retry(start)))
            .chain(claimed)
            .collect()
    }

    /// The port method it carries out, for errors and traces.
    pub const fn operation(self) -> &'static str {
        match self {
            Self::Transition(_) => "transition_step",
            Self::Retry(_) => "create_retry_attempt",
            Self::Claimed(_) => "transition_claimed",
        }
    }

    /// The status the step moves to.
    pub const fn target(self) -> StepStatus {
        match self {
            Self::Transition(to) | Self::Claimed(to) => to,
            Self::Retry(start) => start.status(),
        }
    }
}

/// How a dialect spells a new claim deadline: the lease clock's now (the
/// database's clock expression, [`crate::lease_clock`], plus the bound
/// offset) plus the step's own claim timeout or the bound default, in
/// microseconds. Placeholders appear in the order `offset`, `default_us`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline<'a> {
    /// The dialect's "now in microseconds" on the database's clock.
    pub now_us: &'a str,
    /// The placeholder of the lease clock offset (microseconds).
    pub offset: &'a str,
    /// The placeholder of the store's default claim timeout (microseconds).
    pub default_us: &'a str,
}

impl Deadline<'_> {
    /// The deadline expression, over the step row being written.
    pub fn expr(&self) -> String {
        format!(
            "{} + {} + COALESCE(claim_timeout_ms * 1000, {})",
            self.now_us, self.offset, self.default_us
        )
    }
}

/// The placeholders of a guarded move's `UPDATE` (see
/// [`StepMove::update_where`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MoveBinds<'a> {
    /// The time stamped on the row.
    pub now: &'a str,
    /// The payload, for a move that carries one.
    pub payload: &'a str,
    /// The claim deadline, for a move to running.
    pub deadline: Deadline<'a>,
    /// The claim's attempt, for a fenced move.
    pub attempt: &'a str,
}

/// What a [`Move`] writes: where it goes, from where, and what its history
/// row records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StepMove {
    /// The status the step moves to.
    pub to: StepStatus,
    /// The statuses it may move from (empty: none may).
    pub sources: Vec<StepStatus>,
    /// Whether it starts the next attempt.
    pub retry: bool,
    /// Whether it is guarded by the attempt a claim holds, too.
    pub fenced: bool,
}

impl StepMove {
    /// A transition to `to` is guarded by [`StepStatus::sources_of`]; a
    /// retry by the statuses a claim retries; a claimer's move by its
    /// attempt, from running, to where running may go
    /// ([`claimed_targets`]: any other target is guarded by nothing).
    pub fn of(step_move: Move) -> Self {
        match step_move {
            Move::Transition(to) => Self {
                to,
                sources: StepStatus::sources_of(to),
                retry: false,
                fenced: false,
            },
            Move::Retry(start) => Self {
                to: start.status(),
                sources: ClaimDecision::ClaimRetry.statuses(),
                retry: true,
                fenced: false,
            },
            Move::Claimed(to) => Self {
                to,
                sources: if claimed_targets().contains(&to) {
                    vec![StepStatus::Running]
                } else {
                    Vec::new()
                },
                retry: false,
                fenced: true,
            },
        }
    }

    /// A transition to `to`.
    pub fn transition(to: StepStatus) -> Self {
        Self::of(Move::Transition(to))
    }

    /// Whether the move sets a claim deadline: it moves the step to
    /// running. Every other move clears the deadline.
    pub fn sets_deadline(&self) -> bool {
        self.to == StepStatus::Running
    }

    /// The status-guarded `UPDATE` of step `id` (see [`Self::update_where`]).
    /// Placeholders appear in the order `now`, `payload`, the deadline's,
    /// `id`, `attempt`.
    pub fn update(&self, binds: MoveBinds<'_>, id: &str) -> String {
        self.update_where(binds, "", &format!("id = {id}"))
    }

    /// [`Self::update`] that also stamps [`MOVE_HISTORY_ID`] with
    /// `history_id`, first, as [`claim_update`] does: MySQL's move trigger
    /// writes the attempt's history row from that column. Placeholders
    /// appear in the order `history_id`, then as [`Self::update`]'s.
    pub fn update_stamping(&self, binds: MoveBinds<'_>, id: &str, history_id: &str) -> String {
        self.guarded_update(binds, Some(history_id), "", &format!("id = {id}"))
    }

    /// The status-guarded `UPDATE` of the steps `target` names (`id = ...`,
    /// `id IN (...)`), joined to `from` (a `FROM ...` clause, or empty) for
    /// PostgreSQL's `UPDATE ... FROM`: `status`, `updated_at`, the payload
    /// column when the move has one (a retry clears result and error and
    /// raises the attempt instead), the claim deadline (set on a move to
    /// running, cleared on every other); guarded by the statuses it may
    /// leave and, when fenced, by the claim's attempt. Placeholders appear
    /// in the order `now`, `payload`, the deadline's, the target's,
    /// `attempt`, only those the move uses.
    pub fn update_where(&self, binds: MoveBinds<'_>, from: &str, target: &str) -> String {
        self.guarded_update(binds, None, from, target)
    }

    /// [`Self::update_where`], stamping `history_id` first when given
    /// ([`Self::update_stamping`]).
    fn guarded_update(
        &self,
        binds: MoveBinds<'_>,
        history_id: Option<&str>,
        from: &str,
        target: &str,
    ) -> String {
        let mut set = format!(
            "status = '{}', updated_at = {}",
            self.to.as_str(),
            binds.now
        );
        if self.retry {
            set.push_str(", current_attempt = current_attempt + 1, result = NULL, error = NULL");
        } else if let Some(col) = payload_column(self.to) {
            set = format!("{set}, {col} = {}", binds.payload);
        }
        if self.sets_deadline() {
            set = format!("{set}, claimed_until = {}", binds.deadline.expr());
        } else {
            set.push_str(", claimed_until = NULL");
        }
        let from = if from.is_empty() {
            String::new()
        } else {
            format!(" {from}")
        };
        let fence = if self.fenced {
            format!(" AND current_attempt = {}", binds.attempt)
        } else {
            String::new()
        };
        format!(
            "{UPDATE_STEPS_SET}{}{set}{from} WHERE {target} AND {}{fence}",
            history_stamp(history_id),
            status_in("status", &self.sources)
        )
    }

    /// What the move writes on its attempt's history row, as `(column,
    /// value)`: the status first, then the stamp and the payload the step
    /// row (columns prefixed `prefix`) now holds, for the moves that have
    /// them. [`Self::history_upsert`] and PostgreSQL's history update of a
    /// batch both write exactly these.
    pub fn history_settles(&self, prefix: &str, now: &str) -> Vec<(&'static str, String)> {
        let mut settles = vec![("status", format!("'{}'", self.to.as_str()))];
        if let Some(col) = stamp_column(self.to) {
            settles.push((col, now.to_owned()));
        }
        if let Some(col) = payload_column(self.to) {
            settles.push((col, format!("{prefix}{col}")));
        }
        settles
    }

    /// The upsert of the history row `(step, current_attempt)` after the
    /// move: a missing row is created (begun `now`), an existing one takes
    /// the status, the stamp and the payload. It reads the step row just
    /// written, so the live attempt's row moves with the step.
    pub fn history_upsert(&self, source: HistorySource<'_>, upsert: Upsert) -> String {
        let HistorySource {
            from,
            prefix: p,
            id,
            now,
        } = source;
        let settles = self.history_settles(p, now);
        let (status, rest) = settles
            .split_first()
            .expect("a move always writes its status");
        let mut columns = vec!["id", "step_id", "attempt", status.0, "created_at"];
        let mut values = vec![
            id.to_owned(),
            format!("{p}id"),
            format!("{p}current_attempt"),
            status.1.clone(),
            now.to_owned(),
        ];
        for (col, value) in rest {
            columns.push(col);
            values.push(value.clone());
        }
        let updated = settles.iter().map(|(col, _)| col);
        let updates: Vec<String> = updated
            .map(|col| match upsert {
                #[cfg(any(feature = "postgres", feature = "sqlite"))]
                Upsert::OnConflict => format!("{col} = EXCLUDED.{col}"),
                #[cfg(feature = "mysql")]
                Upsert::OnDuplicateKey => format!("{col} = VALUES({col})"),
            })
            .collect();
        let conflict = match upsert {
            #[cfg(any(feature = "postgres", feature = "sqlite"))]
            Upsert::OnConflict => "ON CONFLICT (step_id, attempt) DO UPDATE SET",
            #[cfg(feature = "mysql")]
            Upsert::OnDuplicateKey => "ON DUPLICATE KEY UPDATE",
        };
        format!(
            "INSERT INTO flowstate_step_history ({}) SELECT {} {from} {conflict} {}",
            columns.join(", "),
            values.join(", "),
            updates.join(", ")
        )
    }
}

/// The column every per-step move on MySQL (a claim, a transition, a
/// retry, a claimer's move) stamps with a fresh history id, which the
/// trigger of migration `2026-12-06-000019_move_history` watches.
pub(crate) const MOVE_HISTORY_ID: &str = "move_history_id";

/// How every single-step `UPDATE` of the steps begins.
const UPDATE_STEPS_SET: &str = "UPDATE flowstate_steps SET ";

/// The assignment stamping [`MOVE_HISTORY_ID`] with `history_id`, with its
/// separator; empty without one.
fn history_stamp(history_id: Option<&str>) -> String {
    history_id.map_or(String::new(), |id| format!("{MOVE_HISTORY_ID} = {id}, "))
}

/// The claim's `UPDATE` of step (run, name), guarded exactly as
/// [`ClaimDecision`] decides: the function matches or the step is not
/// pinned, the step is fresh, or retryable with attempts left, and its run
/// is not settled ([`run_unsettled`]). A retry raises the attempt and
/// clears result and error; the claim deadline is set. `status` is
/// assigned last: MySQL evaluates single-table `SET` assignments left to
/// right, so every `CASE` reads the status the step had (PostgreSQL and
/// SQLite read the old row whatever the order). With `history_id`, the
/// claim also stamps `move_history_id` with it, first: MySQL's trigger
/// writes the attempt's history row from that column (migration
/// `2026-12-06-000019_move_history`). Placeholders appear in the order
/// `history_id` (when given), `now`, the deadline's, `run`, `name`,
/// `function`.
pub(crate) fn claim_update(
    history_id: Option<&str>,
    now: &str,
    deadline: Deadline<'_>,
    run: &str,
    name: &str,
    function: &str,
) -> String {
    let fresh = status_in("status", &ClaimDecision::ClaimFresh.statuses());
    let retry = status_in("status", &ClaimDecision::ClaimRetry.statuses());
    let stamp = history_stamp(history_id);
    format!(
        "{UPDATE_STEPS_SET}{stamp}{} \
         WHERE run_id = {run} AND name = {name} \
         AND (function_name IS NULL OR function_name = {function}) \
         AND ({fresh} OR ({retry} AND {ATTEMPTS_LEFT})) AND {}",
        claim_set(now, deadline),
        run_unsettled("flowstate_steps.run_id"),
    )
}

/// The assignments of a won claim, for one step or a batch: a retry raises
/// the attempt and clears result and error; `status` comes after every
/// `CASE` that reads it (see [`claim_update`]); the claim deadline is set.
/// Placeholders appear in the order `now`, the deadline's.
pub(crate) fn claim_set(now: &str, deadline: Deadline<'_>) -> String {
    let retry = status_in("status", &ClaimDecision::ClaimRetry.statuses());
    let running = StepStatus::Running.as_str();
    format!(
        "current_attempt = CASE WHEN {retry} THEN current_attempt + 1 ELSE current_attempt END, \
         result = CASE WHEN {retry} THEN NULL ELSE result END, \
         error = CASE WHEN {retry} THEN NULL ELSE error END, \
         status = '{running}', updated_at = {now}, claimed_until = {}",
        deadline.expr()
    )
}

/// The test that the run `run_column` names is not settled (its status is
/// one of [`leasable_statuses`]), as a correlated `EXISTS` over the run's
/// primary key: what a claim, a batch claim's pick, a step insert and a
/// state write add to their guard. Status literals only, no binds.
pub(crate) fn run_unsettled(run_column: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM flowstate_runs AS unsettled_run \
         WHERE unsettled_run.id = {run_column} AND {})",
        status_in("unsettled_run.status", &leasable_statuses())
    )
}

/// The `claimable` column's test, which leads a batch claim's `WHERE` on
/// PostgreSQL and MySQL. Both keep `claimable` beside `status`, 1 for the
/// statuses of [`BatchClaim::statuses`] and NULL for every other (a stored
/// generated column on PostgreSQL since migration 000010, a virtual one on
/// MySQL since 000005), and index the claimable steps by it: PostgreSQL's
/// partial indexes name it instead of `status`, so a completion, which
/// leaves it NULL, changes no indexed value and can be a HOT update.
/// SQLite's partial indexes are on `status` itself.
const CLAIMABLE_COLUMN: &str = "claimable = 1";

/// [`BatchClaim::takes`](flowstate_core::BatchClaim::takes) in SQL, for a
/// `WHERE`, led by the `claimable` column's test if the dialect has it
/// (`claimable_column`, `Connection::CLAIMABLE_COLUMN`): a step in a fresh status of
/// [`BatchClaim::statuses`] (pending), or in a retry status with attempts
/// left whose retry delay has passed since it failed (`updated_at` plus the
/// delay, both microseconds). Placeholders appear in the order `function`
/// (when given), `now`.
pub(crate) fn batch_claimable(claimable_column: bool, now: &str, function: Option<&str>) -> String {
    let (before, after) = batch_claimable_around_now(claimable_column, function);
    format!("{before}{now}{after}")
}

/// [`batch_claimable`] as the text before and after its `now`, for a
/// query that binds the time in the DSL (`sql(before).bind(now).sql(after)`).
pub(crate) fn batch_claimable_around_now(
    claimable_column: bool,
    function: Option<&str>,
) -> (String, String) {
    let statuses = BatchClaim::statuses();
    let all = status_in("status", &statuses);
    let retry_statuses = ClaimDecision::ClaimRetry.statuses();
    let (retry, fresh): (Vec<StepStatus>, Vec<StepStatus>) = statuses
        .into_iter()
        .partition(|s| retry_statuses.contains(s));
    let fresh = status_in("status", &fresh);
    let retry = status_in("status", &retry);
    let pinned = function.map_or(String::new(), |f| format!(" AND function_name = {f}"));
    // The leading test is the predicate of the partial index the batch
    // claim walks (or, on MySQL, the first column of its index), stated as
    // is so every planner sees it applies.
    let leading = if claimable_column {
        format!("{CLAIMABLE_COLUMN} AND {all}")
    } else {
        all
    };
    (
        format!(
            "{leading}{pinned} AND ({fresh} OR ({retry} AND {ATTEMPTS_LEFT} \
             AND updated_at + COALESCE(retry_delay_ms, 0) * 1000 <= "
        ),
        "))".to_owned(),
    )
}

/// A lease a write into a run must be made under: the token's
/// placeholder, and the lease clock's now (the dialect's clock expression
/// and the offset's placeholder), for [`RunGuard`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeaseFence<'a> {
    /// The fencing token.
    pub token: &'a str,
    /// The dialect's "now in microseconds" on the database's clock.
    pub now_us: &'a str,
    /// The lease clock offset.
    pub offset: &'a str,
}

/// What a write into a run requires of the run, as a `WHERE` over a row of
/// `flowstate_runs` named `alias`: it is the run `run`, not settled, and,
/// with a fence, the token holds its lease, unexpired on the lease clock
/// (as `RunLeaseStore::renew` checks it). Placeholders appear in the order
/// `run`, then the fence's `token`, `offset`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunGuard<'a> {
    /// The run's placeholder.
    pub run: &'a str,
    /// The lease the write is fenced by, if any.
    pub fence: Option<LeaseFence<'a>>,
}

impl RunGuard<'_> {
    /// The guard over `alias`.
    pub fn over(&self, alias: &str) -> String {
        let mut guard = format!(
            "{alias}.id = {} AND {}",
            self.run,
            status_in(&format!("{alias}.status"), &leasable_statuses())
        );
        if let Some(fence) = self.fence {
            let _ = write!(
                guard,
                " AND {alias}.lease_token = {} AND {alias}.lease_owner IS NOT NULL \
                 AND {alias}.lease_expires_at > {} + {}",
                fence.token, fence.now_us, fence.offset
            );
        }
        guard
    }
}

/// A new step inserted only into a run `guard` admits (one statement: a
/// step is never inserted into a settled run, or under a lost lease), as
/// `INSERT ... SELECT ... FROM flowstate_runs`; the dialect appends its
/// skip-a-taken-name clause. `values` are the placeholders of, in order:
/// id, run, name, function, input, retries, retry delay, created (and
/// updated) at, claim timeout; the guard's follow them.
pub(crate) fn insert_step_guarded(values: [&str; 9], guard: RunGuard<'_>) -> String {
    let [id, run, name, function, input, retries, delay, now, timeout] = values;
    let pending = StepStatus::Pending.as_str();
    format!(
        "INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, \
         current_attempt, retries, retry_delay_ms, created_at, updated_at, claim_timeout_ms) \
         SELECT {id}, {run}, {name}, {function}, '{pending}', {input}, 1, {retries}, {delay}, \
         {now}, {now}, {timeout} FROM flowstate_runs AS guard_run WHERE {}",
        guard.over("guard_run")
    )
}

/// The move a won claim makes, for its history upsert.
pub(crate) fn claim_move() -> StepMove {
    StepMove::transition(StepStatus::Running)
}

/// A prepared statement (or anything built) per [`Move`], built once: a
/// dialect's table of guarded-move statements, keyed by move.
#[derive(Debug)]
pub(crate) struct ByMove<T> {
    entries: Vec<(Move, T)>,
}

impl<T> ByMove<T> {
    /// `build(m)` for every move `m` ([`Move::all`]).
    pub fn new(build: impl Fn(Move) -> T) -> Self {
        Self {
            entries: Move::all().into_iter().map(|m| (m, build(m))).collect(),
        }
    }

    /// The entry of `step_move`.
    pub fn get(&self, step_move: Move) -> &T {
        match self.entries.iter().find(|(m, _)| *m == step_move) {
            Some((_, entry)) => entry,
            None => unreachable!("every move has its entry: {step_move:?}"),
        }
    }
}

/// Binds the columns every dialect's step insert (`INSERT_STEP`) starts
/// with, in its order: id, run id, name, function, input, retries, retry
/// delay, created at. Each dialect binds what its statement adds after.
pub(crate) fn bind_new_step<'f, DB>(
    query: BoxedSqlQuery<'f, DB, SqlQuery>,
    row: &'f StepRow,
) -> BoxedSqlQuery<'f, DB, SqlQuery>
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt> + HasSqlType<Json>,
    String: ToSql<Text, DB>,
    str: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
    JsonText: ToSql<Json, DB>,
{
    query
        .bind::<Text, _>(&row.id)
        .bind::<Text, _>(&row.run_id)
        .bind::<Text, _>(&row.name)
        .bind::<Nullable<Text>, _>(row.function_name.as_deref())
        .bind::<Json, _>(&row.input)
        .bind::<BigInt, _>(row.retries)
        .bind::<Nullable<BigInt>, _>(row.retry_delay_ms)
        .bind::<BigInt, _>(row.created_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claim's guard names exactly the statuses core's decision claims,
    /// read from `ClaimDecision` here and checked against fixed text, so a
    /// change in either is seen.
    /// A deadline with visible placeholders.
    const DEADLINE: Deadline<'static> = Deadline {
        now_us: "NOW_US",
        offset: "$off",
        default_us: "$def",
    };

    /// Placeholders named after what they bind.
    const BINDS: MoveBinds<'static> = MoveBinds {
        now: "$now",
        payload: "$payload",
        deadline: DEADLINE,
        attempt: "$attempt",
    };

    #[test]
    fn the_claim_guard_is_the_claim_decision() {
        let sql = claim_update(None, "?", DEADLINE, "?", "?", "?");
        assert!(sql.contains(
            "AND (status IN ('pending', 'scheduled') OR (status IN ('failed') \
             AND current_attempt < retries + 1 AND current_attempt < 4294967295)) \
             AND EXISTS (SELECT 1 FROM flowstate_runs AS unsettled_run \
             WHERE unsettled_run.id = flowstate_steps.run_id \
             AND unsettled_run.status IN ('running', 'suspended'))"
        ));
        let status_at = sql.find("status = 'running'").unwrap();
        assert!(sql.rfind("CASE WHEN status").unwrap() < status_at);
        assert!(sql.contains(
            "updated_at = ?, claimed_until = NOW_US + $off + COALESCE(claim_timeout_ms * 1000, $def) WHERE"
        ));
    }

    #[test]
    fn a_move_to_running_sets_the_deadline_and_every_other_clears_it() {
        for &to in StepStatus::ALL {
            let sql = StepMove::transition(to).update(BINDS, "$id");
            let sets = sql.contains("claimed_until = NOW_US + $off + COALESCE(");
            assert_eq!(sets, to == StepStatus::Running, "{to}: {sql}");
            assert_eq!(sql.contains("claimed_until = NULL"), !sets, "{to}: {sql}");
        }
        let retry = StepMove::of(Move::Retry(RetryStart::Running)).update(BINDS, "$id");
        assert!(retry.contains("claimed_until = NOW_US"), "{retry}");
        let retry = StepMove::of(Move::Retry(RetryStart::Pending)).update(BINDS, "$id");
        assert!(retry.contains("claimed_until = NULL"), "{retry}");
    }

    #[test]
    fn a_claimers_move_is_fenced_by_its_attempt_from_running() {
        let sql = StepMove::of(Move::Claimed(StepStatus::Succeeded)).update(BINDS, "$id");
        assert!(
            sql.ends_with(
                "result = $payload, claimed_until = NULL WHERE id = $id \
                 AND status IN ('running') AND current_attempt = $attempt"
            ),
            "{sql}"
        );
        for to in [StepStatus::Pending, StepStatus::Running] {
            let sql = StepMove::of(Move::Claimed(to)).update(BINDS, "$id");
            assert!(sql.contains("AND 1 = 0 AND current_attempt"), "{to}: {sql}");
        }
        assert!(
            !StepMove::transition(StepStatus::Failed)
                .update(BINDS, "$id")
                .contains("$attempt")
        );
    }

    #[test]
    fn moves_guard_on_the_transition_table() {
        let rows = [
            (
                StepStatus::Succeeded,
                "status IN ('running')",
                Some("result = $3"),
            ),
            (
                StepStatus::Failed,
                "status IN ('pending', 'scheduled', 'running')",
                Some("error = $3"),
            ),
            (
                StepStatus::Scheduled,
                "status IN ('pending', 'running')",
                None,
            ),
            (StepStatus::Pending, "1 = 0", None),
        ];
        let binds = MoveBinds {
            now: "$2",
            payload: "$3",
            ..BINDS
        };
        for (to, guard, payload) in rows {
            let sql = StepMove::transition(to).update(binds, "$1");
            assert!(sql.ends_with(guard), "{to}: {sql}");
            assert_eq!(sql.contains("$3"), payload.is_some(), "{to}: {sql}");
            if let Some(payload) = payload {
                assert!(sql.contains(payload), "{to}: {sql}");
            }
        }
        let retry = StepMove::of(Move::Retry(RetryStart::Running)).update(BINDS, "?");
        assert!(retry.contains("current_attempt = current_attempt + 1, result = NULL"));
        assert!(retry.ends_with("status IN ('failed')"), "{retry}");
    }

    #[test]
    fn the_claimable_test_leads_with_what_each_dialects_index_names() {
        // PostgreSQL and MySQL (`Connection::CLAIMABLE_COLUMN`).
        let sql = batch_claimable(true, "?", None);
        assert!(sql.starts_with("claimable = 1 AND status IN ("), "{sql}");
        let sqlite = batch_claimable(false, "?", Some("?"));
        assert!(sqlite.starts_with("status IN ("), "{sqlite}");
        assert!(sqlite.contains(") AND function_name = ? AND ("), "{sqlite}");
    }

    #[test]
    fn history_upserts_stamp_and_copy_what_the_move_writes() {
        let source = HistorySource {
            from: "FROM flowstate_steps WHERE id = ?",
            prefix: "",
            id: "?",
            now: "?",
        };
        let failed = StepMove::transition(StepStatus::Failed);
        let mysql = failed.history_upsert(source, Upsert::OnDuplicateKey);
        assert_eq!(
            mysql,
            "INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at, \
             failed_at, error) SELECT ?, id, current_attempt, 'failed', ?, ?, error \
             FROM flowstate_steps WHERE id = ? ON DUPLICATE KEY UPDATE status = VALUES(status), \
             failed_at = VALUES(failed_at), error = VALUES(error)"
        );
        let pending = StepMove::of(Move::Retry(RetryStart::Pending));
        let sqlite = pending.history_upsert(source, Upsert::OnConflict);
        assert!(
            sqlite.ends_with("DO UPDATE SET status = EXCLUDED.status"),
            "{sqlite}"
        );
    }
}

#[cfg(test)]
mod cache_tests;
