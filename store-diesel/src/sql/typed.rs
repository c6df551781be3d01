//! The typed query fragments shared by the ports and the dialects, each the
//! diesel DSL written once: the lease guards ([`held`], [`runnable`]), the
//! database's time ([`db_time`]), the typed expiry and reap of MySQL and
//! SQLite ([`expired_claims`], [`expired`], [`expired_first`]) and the
//! pending events ([`pending`]), the holder of a step's name
//! ([`step_holder`]), a run's move ([`move_run`]), the assignments of a
//! release and of `lease_run`, the claim deadline, and the whole typed
//! `UPDATE`s of the expiry and the reap ([`fail_expired`],
//! [`free_leases`]) are functions (`#[auto_type]` where the type is the
//! DSL's own), none generic over a backend and none a macro. A fragment
//! that reads the lease clock takes its SQL text, `now_us`, which a caller
//! reads off its connection with [`now_sql`] ([`LeaseClock`]) or
//! `Connection::NOW_US`.

use diesel::dsl::{case_when, exists};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};

use flowstate_core::RunStatus;
#[cfg(any(feature = "mysql", feature = "sqlite"))]
use flowstate_core::StepStatus;
#[cfg(any(feature = "mysql", feature = "sqlite"))]
use flowstate_core::step_claim::claim_expired_error;

use crate::rows::signals::SignalRow;
use crate::rows::{StateRow, StepRow};
use crate::schema::flowstate_steps as steps;
use crate::schema::{Json, JsonText, flowstate_events, flowstate_runs as runs};
use crate::sql::bound::{BoundSql, LiteralIn, literal_in};
use crate::sql::leasable_texts;
use crate::sql::waits::{AwakeAt, awake_at};

/// What the fragments read the lease clock's SQL from: a dialect's pooled
/// connection (through its `crate::dialect::Connection::NOW_US`), or
/// SQLite's plain connection inside its blocking hop
/// (`sqlite/connection.rs`).
pub(crate) trait LeaseClock {
    /// "Now on the database's clock, in microseconds since the epoch", as
    /// SQL text with no binds.
    const NOW_US: &'static str;
}

/// The lease clock's SQL of connection `C`.
pub(crate) fn now_sql<C: LeaseClock>(_conn: &C) -> &'static str {
    C::NOW_US
}

/// The wake sweep's statement on connection `C`
/// ([`wake_sweep_sql`](crate::sql::waits::wake_sweep_sql)).
pub(crate) fn wake_sweep<C: crate::dialect::Connection>(_conn: &C) -> String {
    crate::sql::waits::wake_sweep_sql(C::WAKE_SWEEP, C::NOW_US)
}

/// The type of [`db_time`].
pub(crate) type DbTime = BoundSql<Nullable<BigInt>>;

/// The database's time (`now_us`, the connection's [`LeaseClock`] SQL)
/// plus `plus` microseconds (bound), as a nullable `BIGINT` expression
/// the statement cache keeps ([`BoundSql`]).
pub(crate) fn db_time(now_us: &'static str, plus: i64) -> DbTime {
    clock_plus(now_us, plus).sql(")")
}

/// `(<now_us> + ?`, `plus` bound: the open start of [`db_time`] and of
/// [`claim_deadline`].
fn clock_plus<ST>(now_us: &'static str, plus: i64) -> BoundSql<ST> {
    BoundSql::text("(").sql(now_us).sql(" + ").bind(plus)
}

/// The type of [`unsettled`].
pub(crate) type Unsettled = LiteralIn<runs::status>;

/// The run is not settled: its status is one a lease may be held in, as
/// literals (`eq_any` of a list is never cached where it renders `IN`).
pub(crate) fn unsettled() -> Unsettled {
    literal_in(runs::status, &leasable_texts())
}

/// The row of run `id` if `token` holds its lease now (the lease clock
/// `now_us` plus `offset`): the token matches, a holder is set, the run is
/// not settled and the lease has not run out.
#[diesel::dsl::auto_type]
pub(crate) fn held<'a>(now_us: &'static str, id: &'a str, token: i64, offset: i64) -> _ {
    let statuses: Unsettled = unsettled();
    let now: DbTime = db_time(now_us, offset);
    runs::table
        .filter(runs::id.eq(id))
        .filter(runs::lease_token.eq(token))
        .filter(runs::lease_owner.is_not_null())
        .filter(statuses)
        .filter(runs::lease_expires_at.gt(now))
}

/// The row of run `id` if it takes a write: not settled.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn unsettled_run<'a>(id: &'a str) -> _ {
    let statuses: Unsettled = unsettled();
    runs::table.filter(runs::id.eq(id)).filter(statuses)
}

/// The type of [`claim_deadline`].
pub(crate) type ClaimDeadline = BoundSql<Nullable<BigInt>>;

/// A new claim deadline for a step row: the database's time (`now_us`)
/// plus the lease clock offset `offset`, plus the step's own claim timeout
/// or `default_us` (all microseconds), as a nullable `BIGINT` expression:
/// [`crate::sql::Deadline`] in the DSL.
pub(crate) fn claim_deadline(now_us: &'static str, offset: i64, default_us: i64) -> ClaimDeadline {
    clock_plus(now_us, offset)
        .sql(" + COALESCE(claim_timeout_ms * 1000, ")
        .bind(default_us)
        .sql("))")
}

diesel::define_sql_function! {
    /// `COALESCE(given, stored)` over JSON: a move that carries an output
    /// writes it, one that carries none (`NULL` bound) keeps the stored
    /// one, so every move is the same statement text.
    #[sql_name = "COALESCE"]
    fn json_or_stored(given: diesel::sql_types::Nullable<crate::schema::Json>, stored: diesel::sql_types::Nullable<crate::schema::Json>) -> diesel::sql_types::Nullable<crate::schema::Json>;
}

/// The type of [`run_sources`].
type RunSources = LiteralIn<runs::status>;

/// The run's status is one core's table lets it move to `to` from.
fn run_sources(to: RunStatus) -> RunSources {
    let sources: Vec<&'static str> = RunStatus::sources_of(to)
        .into_iter()
        .map(RunStatus::as_str)
        .collect();
    literal_in(runs::status, &sources)
}

/// The assignments of a run's move to `to` at `now`, writing `output` or,
/// if `None`, keeping the stored one.
#[diesel::dsl::auto_type]
fn run_move_set<'a>(to: RunStatus, now: i64, output: Option<&'a JsonText>) -> _ {
    let target: &'static str = to.as_str();
    let written: json_or_stored<Option<&'a JsonText>, runs::output> =
        json_or_stored(output, runs::output);
    (
        runs::status.eq(target),
        runs::updated_at.eq(now),
        runs::output.eq(written),
    )
}

/// The status-guarded `UPDATE` moving run `id` to `to` (see
/// [`run_move_set`]), from the statuses core's table allows.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn move_run<'a>(
    id: &'a str,
    to: RunStatus,
    now: i64,
    output: Option<&'a JsonText>,
) -> _ {
    let sources: RunSources = run_sources(to);
    let set: run_move_set<'a> = run_move_set(to, now, output);
    diesel::dsl::update(runs::table.filter(runs::id.eq(id)).filter(sources)).set(set)
}

/// [`move_run`], fenced: only while `token` holds the run's lease,
/// unexpired on the lease clock (`now_us` plus `offset`), the guard
/// `RunLeaseStore::renew` writes under.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn move_run_fenced<'a>(
    now_us: &'static str,
    id: &'a str,
    to: RunStatus,
    now: i64,
    output: Option<&'a JsonText>,
    token: i64,
    offset: i64,
) -> _ {
    let sources: RunSources = run_sources(to);
    let set: run_move_set<'a> = run_move_set(to, now, output);
    let lease_now: DbTime = db_time(now_us, offset);
    diesel::dsl::update(
        runs::table
            .filter(runs::id.eq(id))
            .filter(sources)
            .filter(runs::lease_token.eq(token))
            .filter(runs::lease_owner.is_not_null())
            .filter(runs::lease_expires_at.gt(lease_now)),
    )
    .set(set)
}

/// The type of the status a failed release writes ([`failure_release`]).
type FailStatus = BoundSql<Text>;

/// The type of the stamp a failed release writes ([`failure_release`]).
type FailStamp = BoundSql<BigInt>;

/// The assignments of a failed attempt's release: `fails_run` in SQL (the
/// failures after this one reach `limit`: the run fails, stamped `now`),
/// the failures up by one, `reason` recorded, the lease freed. Status
/// first: MySQL assigns left to right, so it must see the old count.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn failure_release<'a>(reason: &'a str, limit: i64, now: i64) -> _ {
    let status: FailStatus = BoundSql::text("CASE WHEN failures + 1 >= ")
        .bind(limit)
        .sql(format!(
            " THEN '{}' ELSE status END",
            RunStatus::Failed.as_str()
        ));
    let stamp: FailStamp = BoundSql::text("CASE WHEN failures + 1 >= ")
        .bind(limit)
        .sql(" THEN ")
        .bind(now)
        .sql(" ELSE updated_at END");
    let no_owner: Option<String> = None;
    let no_expiry: Option<i64> = None;
    (
        runs::status.eq(status),
        runs::updated_at.eq(stamp),
        runs::failures.eq(runs::failures + 1_i64),
        runs::failure_reason.eq(reason),
        runs::lease_owner.eq(no_owner),
        runs::lease_expires_at.eq(no_expiry),
    )
}

/// The assignments of a release after progress: the failures back to
/// zero, the lease freed.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn yield_release() -> _ {
    let no_failures: i64 = 0;
    let no_owner: Option<String> = None;
    let no_expiry: Option<i64> = None;
    (
        runs::failures.eq(no_failures),
        runs::lease_owner.eq(no_owner),
        runs::lease_expires_at.eq(no_expiry),
    )
}

/// The assignments of a won `lease_run`, the run claim's two outcomes in
/// one `UPDATE`: a run with a cancel requested is settled as cancelled
/// (stamped `now`, lease cleared), any other is leased to `worker` until
/// the database's time (`now_us`) plus `until`; either way the token rises
/// and the wait ends. `cancel_requested` is assigned last: MySQL evaluates
/// single-table `SET` assignments left to right, so every `CASE` reads the
/// flag the run had (PostgreSQL and SQLite read the old row whatever the
/// order).
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn lease_set<'a>(now_us: &'static str, now: i64, worker: &'a str, until: i64) -> _ {
    let cancelled: &'static str = RunStatus::Cancelled.as_str();
    let no_owner: Option<String> = None;
    let holder: Option<&'a str> = Some(worker);
    let no_expiry: Option<i64> = None;
    let expiry: DbTime = db_time(now_us, until);
    let no_wake: Option<i64> = None;
    let no_wait: Option<String> = None;
    (
        runs::status.eq(
            case_when(runs::cancel_requested, cancelled.into_sql::<Text>()).otherwise(runs::status),
        ),
        runs::updated_at
            .eq(case_when(runs::cancel_requested, now.into_sql::<BigInt>())
                .otherwise(runs::updated_at)),
        runs::lease_token.eq(runs::lease_token + 1_i64),
        runs::lease_owner.eq(case_when(
            runs::cancel_requested,
            no_owner.into_sql::<Nullable<Text>>(),
        )
        .otherwise(holder.into_sql::<Nullable<Text>>())),
        runs::lease_expires_at.eq(case_when(
            runs::cancel_requested,
            no_expiry.into_sql::<Nullable<BigInt>>(),
        )
        .otherwise(expiry)),
        runs::wake_at.eq(no_wake),
        runs::waiting_on.eq(no_wait),
        runs::cancel_requested.eq(false),
    )
}

/// The run and values signal `row` is inserted from: its run's row if the
/// run is not settled ([`unsettled_run`]'s guard, spelled out), with the
/// signal's name, payload and time bound.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn signal_source<'a>(row: &'a SignalRow) -> _ {
    let statuses: Unsettled = unsettled();
    let id: &'a str = row.run_id.as_str();
    let name: &'a str = row.name.as_str();
    let payload: &'a JsonText = &row.payload;
    let sent_at: i64 = row.sent_at;
    runs::table
        .filter(runs::id.eq(id))
        .filter(statuses)
        .select((
            runs::id,
            name.into_sql::<Text>(),
            payload.into_sql::<Json>(),
            sent_at.into_sql::<BigInt>(),
        ))
}

/// The values a state upsert of `row` selects beside its run's id: the
/// key and the value, bound.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn state_values<'a>(row: &'a StateRow) -> _ {
    let key: &'a str = row.state_key.as_str();
    let value: &'a JsonText = &row.value;
    (runs::id, key.into_sql::<Text>(), value.into_sql::<Json>())
}

/// Whether a run may be leased now, on a row of `flowstate_runs`, at the
/// lease clock `now_us` plus `offset`: not settled, its lease free or run
/// out on the database's clock, and awake ([`crate::sql::waits::awake`]).
/// The runnable predicate of MySQL's claim and of `lease_run` on every
/// dialect, spelled once (PostgreSQL's and SQLite's claims state the same
/// terms in their hand-written text).
#[diesel::dsl::auto_type]
pub(crate) fn runnable(now_us: &'static str, offset: i64) -> _ {
    let statuses: Unsettled = unsettled();
    let now: DbTime = db_time(now_us, offset);
    let awake: AwakeAt = awake_at(now_us, offset);
    statuses
        .and(
            runs::lease_expires_at
                .is_null()
                .or(runs::lease_expires_at.le(now)),
        )
        .and(awake)
}

/// The step holding `row`'s name in its run, if the run still admits the
/// insert (not settled): an insert that skipped a taken name answers its
/// holder only under the same guard it was written under. The caller
/// selects `StepRow::as_select()`, which names its backend.
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn step_holder<'a>(row: &'a StepRow) -> _ {
    let run_id: &'a str = row.run_id.as_str();
    let name: &'a str = row.name.as_str();
    let statuses: Unsettled = unsettled();
    steps::table
        .filter(steps::run_id.eq(run_id))
        .filter(steps::name.eq(name))
        .filter(exists(
            runs::table
                .filter(runs::id.eq(run_id))
                .filter(statuses)
                .select(runs::id),
        ))
}

/// [`step_holder`] for an insert fenced by lease `token`: the run's lease
/// still held by the token at the lease clock (`now_us` plus `offset`).
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn step_holder_fenced<'a>(
    now_us: &'static str,
    row: &'a StepRow,
    token: i64,
    offset: i64,
) -> _ {
    let run_id: &'a str = row.run_id.as_str();
    let name: &'a str = row.name.as_str();
    let lease: held<'a> = held(now_us, run_id, token, offset);
    steps::table
        .filter(steps::run_id.eq(run_id))
        .filter(steps::name.eq(name))
        .filter(exists(lease.select(runs::id)))
}

/// The typed expiry's pick (MySQL, SQLite): at most `limit` running steps
/// whose claim ran out on the lease clock `now_us` plus `offset`, first
/// expired first (by the deadline index), as
/// [`ExpiredRow`](crate::rows::ExpiredRow)s. MySQL adds its row locks to it.
#[cfg(any(feature = "mysql", feature = "sqlite"))]
#[diesel::dsl::auto_type]
pub(crate) fn expired_claims(now_us: &'static str, offset: i64, limit: u32) -> _ {
    let now: DbTime = db_time(now_us, offset);
    let limit: i64 = i64::from(limit);
    let expired_at: BoundSql<BigInt> = BoundSql::text("claimed_until");
    steps::table
        .filter(steps::claimed_until.is_not_null())
        .filter(steps::claimed_until.le(now))
        .order((steps::claimed_until, steps::id))
        .limit(limit)
        .select((
            steps::id,
            steps::run_id,
            steps::name,
            steps::current_attempt,
            steps::retries,
            expired_at,
        ))
}

/// The typed expiry's write (MySQL, SQLite): the picked steps `ids`, still
/// running, fail with core's claim-expired error stamped `now`, their
/// deadline cleared; the history upsert follows.
#[cfg(any(feature = "mysql", feature = "sqlite"))]
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn fail_expired<'a>(ids: &'a [String], now: i64) -> _ {
    let running: &'static str = StepStatus::Running.as_str();
    let failed: &'static str = StepStatus::Failed.as_str();
    let error: Option<JsonText> = Some(JsonText(claim_expired_error().to_string()));
    let no_deadline: Option<i64> = None;
    diesel::dsl::update(
        steps::table
            .filter(steps::id.eq_any(ids))
            .filter(steps::status.eq(running)),
    )
    .set((
        steps::status.eq(failed),
        steps::error.eq(error),
        steps::updated_at.eq(now),
        steps::claimed_until.eq(no_deadline),
    ))
}

/// The lease-expiry guard of the reaper on a row of `flowstate_runs`, for
/// the dialects whose reap is typed (MySQL, SQLite): a lease is held (the
/// predicate of the expiry index, stated as is so every planner sees it
/// applies) and ran out on the lease clock `now_us` plus `offset`. A
/// settled run still holding one (settled by `set_run_status` under its
/// lease) is freed too: the lease has run out like any other.
#[cfg(any(feature = "mysql", feature = "sqlite"))]
#[diesel::dsl::auto_type]
pub(crate) fn expired(now_us: &'static str, offset: i64) -> _ {
    let now: DbTime = db_time(now_us, offset);
    runs::table
        .filter(runs::lease_expires_at.is_not_null())
        .filter(runs::lease_expires_at.le(now))
}

/// The typed reapers' pick (MySQL, SQLite): at most `limit` expired leases
/// ([`expired`]), first expired first (by the expiry index), each run's id
/// with the expiry the answer reports. MySQL adds its row locks to it.
#[cfg(any(feature = "mysql", feature = "sqlite"))]
#[diesel::dsl::auto_type]
pub(crate) fn expired_first(now_us: &'static str, offset: i64, limit: u32) -> _ {
    let leases: expired = expired(now_us, offset);
    let limit: i64 = i64::from(limit);
    leases
        .order((runs::lease_expires_at, runs::id))
        .limit(limit)
        .select((runs::id, runs::lease_expires_at))
}

/// The typed reapers' `UPDATE` (MySQL, SQLite): frees the leases of the
/// runs `ids` the pick answered.
#[cfg(any(feature = "mysql", feature = "sqlite"))]
#[diesel::dsl::auto_type(no_type_alias)]
pub(crate) fn free_leases<'a>(ids: Vec<&'a String>) -> _ {
    let no_owner: Option<String> = None;
    let no_expiry: Option<i64> = None;
    diesel::dsl::update(runs::table.filter(runs::id.eq_any(ids))).set((
        runs::lease_owner.eq(no_owner),
        runs::lease_expires_at.eq(no_expiry),
    ))
}

#[cfg(any(feature = "mysql", feature = "sqlite"))]
/// The typed reapers' answer from what their pick read: each run and its
/// old expiry (never null: the pick takes held leases only).
pub(crate) fn reaped(picked: Vec<(String, Option<i64>)>) -> Vec<(String, i64)> {
    picked
        .into_iter()
        .map(|(id, at)| (id, at.unwrap_or_default()))
        .collect()
}

/// The pending events at `now`, guarded as
/// [`flowstate_core::Event::is_pending`] says; each dialect's lock filters
/// it to one id and adds its locking clause.
#[diesel::dsl::auto_type]
pub(crate) fn pending(now: i64) -> _ {
    let zero: i64 = 0;
    flowstate_events::table
        .filter(flowstate_events::dispatched_at.is_null())
        .filter(flowstate_events::dead_lettered_at.is_null())
        .filter(flowstate_events::matched.gt(zero))
        .filter(flowstate_events::dispatch_after.le(now))
}

/// The order dispatchers take pending events in: the longest due first
/// ([`flowstate_core::ports::EventStore::pending_events`] lists them in it too).
pub(crate) const DUE_ORDER: (
    flowstate_events::dispatch_after,
    flowstate_events::occurred_at,
    flowstate_events::id,
) = (
    flowstate_events::dispatch_after,
    flowstate_events::occurred_at,
    flowstate_events::id,
);
