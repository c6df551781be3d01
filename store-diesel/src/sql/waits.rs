//! The one SQL spelling of "this run is awake" (and of "this run may be
//! leased", which includes it), shared by the dialects' claims, so a claim
//! and a wait can never disagree about who may run.

use flowstate_core::wait::CHILDREN;

use crate::sql::status_in;

/// The condition, on a row of `flowstate_runs`, that the run is not asleep
/// or waiting at time `now` (an SQL expression read once): its time has
/// come, or it neither sleeps nor waits, or the signal it waits on is
/// there, or it waits on its children ([`CHILDREN`], a name no signal has)
/// and none of them is unsettled. A `NULL` `wake_at` never compares true,
/// and `name = NULL` matches no signal, so each case needs no more than
/// this.
pub(crate) fn awake(now: &str) -> String {
    let unsettled = status_in("c.status", &crate::sql::leasable_texts());
    format!(
        "(wake_at <= {now} OR (waiting_on IS NULL AND wake_at IS NULL) OR EXISTS \
         (SELECT 1 FROM flowstate_run_signals s WHERE s.run_id = flowstate_runs.id \
         AND s.name = flowstate_runs.waiting_on) OR (waiting_on = '{CHILDREN}' AND NOT EXISTS \
         (SELECT 1 FROM flowstate_runs c WHERE c.parent_id = flowstate_runs.id \
         AND {unsettled})))"
    )
}

/// The condition, on a row of `flowstate_runs`, that the run may be leased
/// at time `now` (an SQL expression, read twice): unsettled, its lease free
/// or run out, and [`awake`]. The text of `store::runnable!`, for the
/// hand-written run claims' guards; their picks read its three parts apart
/// ([`free_sql`], [`due_sql`], [`run_out_sql`]), each from an index that
/// holds no run under a live lease and no run asleep.
pub(crate) fn runnable_sql(now: &str) -> String {
    format!(
        "{} AND (lease_expires_at IS NULL OR lease_expires_at <= {now}) AND {}",
        status_in("status", &crate::sql::leasable_texts()),
        awake(now)
    )
}

/// The part of [`runnable_sql`] a claim reads first: the run is
/// unsettled, holds no lease, does not sleep (see [`SLEEPS`]), and is
/// [`awake`] at `now` (read once). The predicate of the free-runs index
/// (`flowstate_runs_free_idx` on PostgreSQL and SQLite, the
/// `sleep_until IS NULL AND lease_expires_at IS NULL` ref of
/// `flowstate_runs_leasable` on MySQL), so a claim walks free runs only,
/// oldest first. A run waiting on a signal or its children stays in it:
/// what wakes it is another row, not a write to the run.
pub(crate) fn free_sql(now: &str) -> String {
    format!(
        "{} AND lease_expires_at IS NULL AND {DOES_NOT_SLEEP} AND {}",
        status_in("status", &crate::sql::leasable_texts()),
        awake(now)
    )
}

/// The condition, on a row of `flowstate_runs`, that the run sleeps: it
/// has a time to wake and waits on nothing else (no signal, no children),
/// so its time alone wakes it. Such a run is in no claim range until that
/// time ([`due_sql`]): a claim reads no sleeping run however many an
/// engine has put to sleep. MySQL's virtual `sleep_until` column is
/// `wake_at` where this holds, `NULL` elsewhere.
pub(crate) const SLEEPS: &str = "(wake_at IS NOT NULL AND waiting_on IS NULL)";

/// [`SLEEPS`] negated, spelt as the free-runs index's predicate spells it
/// (a planner matches a partial index's terms by their text).
pub(crate) const DOES_NOT_SLEEP: &str = "(wake_at IS NULL OR waiting_on IS NOT NULL)";

/// The third part of [`runnable_sql`]: the run is unsettled, holds no
/// lease, [sleeps](SLEEPS), and its time has come at `now` (read once).
/// A range of the sleeping-runs index (`flowstate_runs_sleeping_idx` on
/// PostgreSQL and SQLite, `flowstate_runs_leasable`'s `sleep_until` on
/// MySQL) that ends at the clock, first to wake first.
pub(crate) fn due_sql(now: &str) -> String {
    format!(
        "{} AND lease_expires_at IS NULL AND {SLEEPS} AND wake_at <= {now}",
        status_in("status", &crate::sql::leasable_texts()),
    )
}

/// The last part of [`runnable_sql`]: the run is unsettled, its lease ran
/// out at `now` (read twice: the lease, then [`awake`]). A range of the
/// lease-expiry index that ends at the clock, so a claim reads no lease
/// still held, however many there are.
pub(crate) fn run_out_sql(now: &str) -> String {
    format!(
        "{} AND lease_expires_at IS NOT NULL AND lease_expires_at <= {now} AND {}",
        status_in("status", &crate::sql::leasable_texts()),
        awake(now)
    )
}

/// How a dialect's wake sweep finds the waits whose time has come
/// (`RunWaitStore::wake_expired`), each from an index of waiting runs
/// (migration 000022) so that it never reads the other unsettled runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WakeSweep {
    /// PostgreSQL: the planner chooses among partial indexes by cost, and
    /// an index of every wait would compete with the claim's sleeping
    /// index for its pick of due sleepers. So the sweep reads two
    /// disjoint ranges: the free sleepers from `flowstate_runs_sleeping_idx`
    /// (the claim's own, `due_sql`), and every other wait from
    /// `flowstate_runs_wake_idx`, whose predicate ([`NOT_FREE_SLEEP`]) no
    /// claim implies. `$1`, the lease clock offset, is read by both, and
    /// by the `UPDATE`'s own re-check of the row.
    Split,
    /// SQLite: one index of every wait, named (`INDEXED BY`): the planner,
    /// with no statistics, would take the status index instead.
    Indexed,
    /// MySQL: one index of every wait (`NULL`, for the runs that do not
    /// wait, sorts first, outside the range).
    Plain,
}

/// The condition of `flowstate_runs_wake_idx` on PostgreSQL beside
/// `wake_at IS NOT NULL`: the wait is not a free sleeper's (it waits on a
/// signal or children, has a cancel requested, or the run is leased), the
/// negation of the sleeping index's own terms, so the two indexes hold
/// every wait between them and no claim can take this one for its pick.
pub(crate) const NOT_FREE_SLEEP: &str =
    "(waiting_on IS NOT NULL OR cancel_requested OR lease_expires_at IS NOT NULL)";

/// The wake sweep's statement in `form`, `now_us` being the dialect's
/// clock SQL and the lease clock offset its one bind (`$1` on PostgreSQL,
/// read twice; `?` elsewhere): ends every wait of an unsettled run whose
/// time has come, clearing it. Its count of affected rows is the
/// sweep's answer.
pub(crate) fn wake_sweep_sql(form: WakeSweep, now_us: &str) -> String {
    let unsettled = status_in("status", &crate::sql::leasable_texts());
    let set = "UPDATE flowstate_runs SET wake_at = NULL, waiting_on = NULL";
    match form {
        WakeSweep::Split => {
            let now = format!("({now_us} + $1)");
            // The due condition again on the row itself: the picks are a
            // subquery, which READ COMMITTED does not read again when the
            // row it picked changed under it, so only this re-check keeps
            // a wait begun meanwhile (not due) from being ended.
            format!(
                "{set} WHERE {unsettled} AND wake_at <= {now} AND id IN \
                 (SELECT id FROM flowstate_runs WHERE {} AND NOT cancel_requested \
                 UNION ALL SELECT id FROM flowstate_runs WHERE {unsettled} AND {NOT_FREE_SLEEP} \
                 AND wake_at <= {now})",
                due_sql(&now)
            )
        }
        WakeSweep::Indexed => format!(
            "{set} WHERE id IN (SELECT id FROM flowstate_runs INDEXED BY flowstate_runs_wake_idx \
             WHERE {unsettled} AND wake_at <= ({now_us} + ?))"
        ),
        WakeSweep::Plain => format!("{set} WHERE {unsettled} AND wake_at <= ({now_us} + ?)"),
    }
}

/// The type of [`awake_at`] (and of any condition that is text around one
/// bound offset).
pub(crate) type AwakeAt = crate::sql::bound::BoundSql<diesel::sql_types::Bool>;

/// [`awake`] at the database's time plus `offset` (bound), for the typed
/// queries of any dialect: `now_us` is its clock SQL
/// ([`crate::dialect::Connection::NOW_US`]).
pub(crate) fn awake_at(now_us: &str, offset: i64) -> AwakeAt {
    let text = awake(&format!("({now_us} + \u{0})"));
    let (before, after) = text.split_once('\u{0}').expect("one time in the condition");
    crate::sql::bound::BoundSql::text(before.to_owned())
        .bind(offset)
        .sql(after.to_owned())
}
