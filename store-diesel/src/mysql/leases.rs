//! The run claim on MySQL 8 / MariaDB 10.6+: one transaction.
//!
//! MySQL has no `UPDATE ... RETURNING` and cannot `UPDATE` a table it
//! selects from in a subquery, so the runs are taken first:
//! `SELECT id, lease_token ... FOR UPDATE SKIP LOCKED` over the runnable
//! runs (forced onto `flowstate_runs_leasable`, on a virtual column of the
//! leasable statuses and the lease's end, see [`pick_sql`]), which locks
//! what it answers and skips what other claims hold. The runs to lease are
//! three picks in one statement (`UNION ALL`): free runs that do not
//! sleep, oldest first, sleeping runs whose time has come, first to wake
//! first, and run-out leases, first run out first, each a range of the
//! index that no run under a live lease and no run asleep is in, so the
//! pick reads and locks no held or sleeping run however many there are
//! (one range of every unsettled run made it lock all of them: at
//! 1,000,000 held, lock heaps filled the buffer pool and InnoDB aborted
//! the server); the oldest `n` of the three are taken. Then
//! the `UPDATE` of exactly those runs,
//! and the runs read back, in the same transaction. Runs with a cancel
//! requested are taken and settled the same way, before. Runs waiting on
//! a signal or their children are left out by
//! [`crate::sql::waits::awake`]. The time is
//! the server's ([`crate::lease_clock`]).
//!
//! The pick's lock is not what decides. On Galera a row lock is local to
//! its node: another node's claim of the same run commits, and this
//! transaction is aborted by it, perhaps between two of its statements.
//! So each `UPDATE` repeats the pick's predicate and compares each run's
//! `lease_token` with the one its pick read (a compare-and-set: every claim
//! raises the token), and must match every run it names; the read-back
//! must show this caller's owner and token on every run. Anything else is
//! a lost race ([`crate::conflict::lost_race`]): the transaction rolls
//! back and runs again, so a lease is never handed out twice and never
//! answered half-written. On one server the lock holds and the guards
//! always match: the statements are the ones they were.
//!
//! On a node with a slot (`mysql/spread.rs`) a pick that reads the windows
//! before its own reads them without a lock and then locks only the runs
//! it takes: a lock on a run it read and left would be brute-force aborted
//! by another node's claim of that run.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::lease::lease_micros;
use flowstate_core::{Result, RunStatus};

use super::spread::{RUN_WINDOW, Spread};
use super::{Pool, transaction};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::conflict::lost_race;
use crate::dialect::Connection;
use crate::error::backend;
use crate::rows::leases::LeasedRunRow;
use crate::schema::flowstate_runs as runs;

/// What one claim binds.
struct Claim<'a> {
    worker: &'a str,
    n: i64,
    offset: i64,
    until: i64,
    now: i64,
}

/// A run the pick took, with the fencing token it read.
#[derive(Debug, QueryableByName)]
struct Picked {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = BigInt)]
    lease_token: i64,
}

/// [`RunLeaseStore::claim_runs`](flowstate_core::ports::RunLeaseStore::claim_runs),
/// its input already checked: the runs it leased, as written.
pub(super) async fn claim_runs(
    pool: &Pool,
    config: &StoreConfig,
    worker: &str,
    n: u32,
    lease_for: Duration,
) -> Result<Vec<LeasedRunRow>> {
    let offset = config.lease_offset_us();
    let claim = Claim {
        worker,
        n: i64::from(n),
        offset,
        until: offset.saturating_add(lease_micros(lease_for)),
        now: config.clock.now().as_micros(),
    };
    // How many times the claim's transaction has started: a retry after a
    // conflict spreads its pick at random (mysql/spread.rs).
    let attempts = AtomicU32::new(0);
    transaction!(pool, "claim_run", |conn| {
        // Where this node's claimers start (mysql/spread.rs): the oldest
        // on one server. Cancels are few: their pick is not spread.
        let n = usize::try_from(claim.n).unwrap_or(usize::MAX);
        let attempt = attempts.fetch_add(1, Ordering::Relaxed);
        let spread = Spread::again(
            crate::health::pick_slot(conn),
            n,
            RUN_WINDOW,
            attempt,
            crate::conflict::random(),
        );
        let cancelled = pick(conn, &claim, Spread::of(None, n, n), true).await?;
        if !cancelled.is_empty() {
            let moved = guarded(
                &cancel_sql(listed(cancelled.len())),
                &claim,
                &cancelled,
                true,
            )
            .cached()
            .execute(conn)
            .await?;
            if moved != cancelled.len() {
                return Err(lost_race("claim_run"));
            }
        }
        let picked = pick(conn, &claim, spread, false).await?;
        if picked.is_empty() {
            return Ok(Vec::new());
        }
        #[cfg(feature = "test-support")]
        interleave::run(claim.worker, interleave::Stage::BeforeUpdate, conn).await;
        let moved = guarded(&lease_sql(listed(picked.len())), &claim, &picked, false)
            .cached()
            .execute(conn)
            .await?;
        if moved != picked.len() {
            return Err(lost_race("claim_run"));
        }
        #[cfg(feature = "test-support")]
        interleave::run(claim.worker, interleave::Stage::BeforeReadBack, conn).await;
        let ids: Vec<&str> = padded(&picked).map(|p| p.id.as_str()).collect();
        let leased: Vec<LeasedRunRow> = runs::table
            .filter(runs::id.eq_any(&ids))
            .select(LeasedRunRow::as_select())
            .cached()
            .load(conn)
            .await?;
        if !shows_this_claim(&leased, &picked, claim.worker) {
            return Err(lost_race("claim_run"));
        }
        Ok(leased)
    })
    .map_err(|err| backend("claim_run", err))
}

/// Whether the read-back is this claim's write: every picked run, each
/// held by `worker` with the token one above the one its pick read.
fn shows_this_claim(leased: &[LeasedRunRow], picked: &[Picked], worker: &str) -> bool {
    leased.len() == picked.len()
        && picked.iter().all(|p| {
            leased.iter().any(|row| {
                row.run.id == p.id
                    && row.lease.lease_token == p.lease_token.saturating_add(1)
                    && row.lease.lease_owner.as_deref() == Some(worker)
                    && row.lease.lease_expires_at.is_some()
            })
        })
}

/// The pick's predicate, with (`1`) or without (`0`) a cancel requested,
/// its lease clock's offset bound twice.
fn pick_where(cancel: u8) -> String {
    let now = <AsyncMysqlConnection as Connection>::NOW_US;
    format!(
        "leasable = 1 AND cancel_requested = {cancel} AND {runnable}",
        runnable = crate::sql::waits::runnable_sql(&format!("{now} + ?")),
    )
}

/// The pick of up to `n` runnable runs with (`1`) or without (`0`) a
/// cancel requested, locked, with the token each holds.
///
/// With a cancel requested: one range, oldest first. Binds: the lease
/// clock offset (twice), how many. Without: the free runs (no lease) that
/// do not sleep, oldest first, the sleeping runs whose time has come,
/// first to wake first, and the run-out leases, first run out first, each
/// its own range of the index, `UNION ALL`, the oldest `n` of the three.
/// Binds: the offset, how many; the offset, how many; the offset (twice),
/// how many; how many. The runs a part locked and the `LIMIT` left out
/// stay locked until the claim commits (at most `2n` more).
///
/// `FORCE INDEX` names `flowstate_runs_leasable` (migrations
/// `2026-12-01-000007_lease_claim`, `2026-12-06-000020_free_runs_claim`
/// and `2026-12-07-000021_sleeping_runs_claim`: the virtual column
/// `leasable`, 1 for the leasable statuses, the cancel flag, the lease's
/// end, the virtual `sleep_until`, then creation order): otherwise MariaDB walks
/// `flowstate_runs_created`, the `ORDER BY`'s own index, and reads and
/// locks every settled run older than the first runnable one (SCHEMA.md,
/// Decisions, "MySQL's run claim index"). The DSL has no index hint, so
/// this pick is written out.
fn pick_sql(cancel: u8) -> String {
    let now = <AsyncMysqlConnection as Connection>::NOW_US;
    let at = format!("{now} + ?");
    let part = |wher: &str, order: &str| {
        format!(
            "SELECT id, lease_token, created_at FROM flowstate_runs \
             FORCE INDEX (flowstate_runs_leasable) WHERE {wher} ORDER BY {order} LIMIT ? \
             FOR UPDATE SKIP LOCKED"
        )
    };
    if cancel == 1 {
        return part(&pick_where(1), "created_at, id");
    }
    let free = format!(
        "leasable = 1 AND cancel_requested = 0 AND sleep_until IS NULL AND {}",
        crate::sql::waits::free_sql(&at)
    );
    // `sleep_until` is `wake_at` where the run sleeps (migration 000021),
    // so this is `due_sql` in the index's own column: a range of it.
    let due = format!(
        "leasable = 1 AND cancel_requested = 0 AND lease_expires_at IS NULL \
         AND sleep_until <= {at}"
    );
    let run_out = format!(
        "leasable = 1 AND cancel_requested = 0 AND {}",
        crate::sql::waits::run_out_sql(&at)
    );
    // Each part's `ORDER BY` is its range's index order, so none sorts:
    // a leased run never sleeps (a claim clears the wait), so its
    // `sleep_until` is `NULL` and the run-out order is the lease's end,
    // then creation.
    format!(
        "({}) UNION ALL ({}) UNION ALL ({}) ORDER BY created_at, id LIMIT ?",
        part(&free, "created_at, id"),
        part(&due, "sleep_until, created_at, id"),
        part(&run_out, "lease_expires_at, sleep_until, created_at, id"),
    )
}

/// How many runs a statement over `n` picked runs lists: `n` rounded up
/// to a power of two, so each connection keeps at most eleven prepared
/// texts of each listed statement (one per size up to
/// [`flowstate_core::lease::MAX_CLAIM_BATCH`]) instead of preparing a
/// new one for each batch size.
fn listed(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// The picked runs, the last repeated up to [`listed`] of them: a run
/// listed twice in an `IN` is matched, updated and read once.
fn padded(picked: &[Picked]) -> impl Iterator<Item = &Picked> {
    let fill = listed(picked.len()) - picked.len();
    picked
        .iter()
        .chain(picked.last().into_iter().cycle().take(fill))
}

/// `id IN (?, ...) AND (id, lease_token) IN ((?, ?), ...)` over `n` runs:
/// the primary key's ranges for the plan, and each run's token as its pick
/// read it. Binds: the ids, then each id and its token.
fn as_picked(n: usize) -> String {
    let ids = vec!["?"; n].join(", ");
    let pairs = vec!["(?, ?)"; n].join(", ");
    format!("id IN ({ids}) AND (id, lease_token) IN ({pairs})")
}

/// The lease of `n` picked runs, guarded by the pick's predicate and
/// tokens. Binds: owner, lease end offset, then [`guarded`]'s.
fn lease_sql(n: usize) -> String {
    let now = <AsyncMysqlConnection as Connection>::NOW_US;
    format!(
        "UPDATE flowstate_runs SET lease_token = lease_token + 1, lease_owner = ?, \
         lease_expires_at = {now} + ?, wake_at = NULL, waiting_on = NULL \
         WHERE {} AND {}",
        pick_where(0),
        as_picked(n)
    )
}

/// The settling of `n` picked runs whose cancel was requested, guarded as
/// [`lease_sql`]. Binds: now, then [`guarded`]'s.
fn cancel_sql(n: usize) -> String {
    format!(
        "UPDATE flowstate_runs SET status = '{cancelled}', updated_at = ?, \
         lease_token = lease_token + 1, lease_owner = NULL, lease_expires_at = NULL, \
         cancel_requested = 0, wake_at = NULL, waiting_on = NULL WHERE {} AND {}",
        pick_where(1),
        as_picked(n),
        cancelled = RunStatus::Cancelled.as_str(),
    )
}

/// `sql` ([`lease_sql`] or, `cancel`, [`cancel_sql`]) with its binds: the
/// assignments', the pick predicate's offset twice, the picked runs.
fn guarded<'a>(
    sql: &str,
    claim: &'a Claim<'a>,
    picked: &'a [Picked],
    cancel: bool,
) -> diesel::query_builder::BoxedSqlQuery<'a, diesel::mysql::Mysql, diesel::query_builder::SqlQuery>
{
    let mut query = diesel::sql_query(sql.to_owned()).into_boxed();
    query = if cancel {
        query.bind::<BigInt, _>(claim.now)
    } else {
        query
            .bind::<Text, _>(claim.worker)
            .bind::<BigInt, _>(claim.until)
    };
    query = query
        .bind::<BigInt, _>(claim.offset)
        .bind::<BigInt, _>(claim.offset);
    for p in padded(picked) {
        query = query.bind::<Text, _>(p.id.as_str());
    }
    for p in padded(picked) {
        query = query
            .bind::<Text, _>(p.id.as_str())
            .bind::<BigInt, _>(p.lease_token);
    }
    query
}

/// The picks without and with a cancel requested.
static PICKS: LazyLock<[String; 2]> = LazyLock::new(|| [pick_sql(0), pick_sql(1)]);

/// The pick of runs without a cancel requested, reading without a lock: a
/// spread pick's candidates ([`Spread::reads_beyond_its_rows`]).
static PEEK: LazyLock<String> =
    LazyLock::new(|| pick_sql(0).replace(" FOR UPDATE SKIP LOCKED", ""));

/// The lock of `n` runs a spread pick took, by primary key, where they
/// are still runnable, skipping those another claim of this node holds.
/// Binds: the lease clock offset (twice), the ids.
fn lock_taken_sql(n: usize) -> String {
    format!(
        "SELECT id, lease_token FROM flowstate_runs WHERE {} AND id IN ({}) \
         ORDER BY created_at, id FOR UPDATE SKIP LOCKED",
        pick_where(0),
        vec!["?"; n].join(", ")
    )
}

/// Up to `n` runnable runs with (or without) a cancel requested, locked,
/// taken where `spread` says out of those the pick answered. A spread pick
/// that reads beyond the rows it takes reads without locking, then locks
/// only those; when a claimer of this node holds every one of them, the
/// claim lost the race (it runs again, from a random start).
async fn pick(
    conn: &mut AsyncMysqlConnection,
    claim: &Claim<'_>,
    spread: Spread,
    cancel: bool,
) -> QueryResult<Vec<Picked>> {
    let peek = !cancel && spread.reads_beyond_its_rows();
    let sql = if peek {
        PEEK.as_str()
    } else {
        PICKS[usize::from(cancel)].as_str()
    };
    let picked: Vec<Picked> = if cancel {
        diesel::sql_query(sql)
            .bind::<BigInt, _>(claim.offset)
            .bind::<BigInt, _>(claim.offset)
            .bind::<BigInt, _>(spread.limit())
            .cached()
            .load(conn)
            .await?
    } else {
        diesel::sql_query(sql)
            .bind::<BigInt, _>(claim.offset)
            .bind::<BigInt, _>(spread.limit())
            .bind::<BigInt, _>(claim.offset)
            .bind::<BigInt, _>(spread.limit())
            .bind::<BigInt, _>(claim.offset)
            .bind::<BigInt, _>(claim.offset)
            .bind::<BigInt, _>(spread.limit())
            .bind::<BigInt, _>(spread.limit())
            .cached()
            .load(conn)
            .await?
    };
    let picked = spread.take(picked);
    if !peek || picked.is_empty() {
        return Ok(picked);
    }
    let mut lock = diesel::sql_query(lock_taken_sql(picked.len()))
        .into_boxed()
        .bind::<BigInt, _>(claim.offset)
        .bind::<BigInt, _>(claim.offset);
    for p in &picked {
        lock = lock.bind::<Text, _>(p.id.clone());
    }
    let locked: Vec<Picked> = lock.load(conn).await?;
    if locked.is_empty() {
        return Err(lost_race("claim_run"));
    }
    Ok(locked)
}

/// Test support: work run inside a run claim between its statements, on
/// the claim's own connection, for the claims of one worker name: what a
/// test needs to make the claim lose its rows the way Galera can (roll its
/// transaction back, then let another writer commit) and see it answer no
/// lease rather than a duplicate.
#[cfg(feature = "test-support")]
pub mod interleave {
    use std::sync::Mutex;

    use diesel_async::AsyncMysqlConnection;
    use futures_util::future::BoxFuture;

    /// Where in the claim the work runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Stage {
        /// After the pick of the runs to lease, before their `UPDATE`.
        BeforeUpdate,
        /// After the `UPDATE`, before the runs are read back.
        BeforeReadBack,
    }

    /// The work: given the claim's connection.
    type Work = Box<dyn for<'c> FnOnce(&'c mut AsyncMysqlConnection) -> BoxFuture<'c, ()> + Send>;

    /// Work waiting for a claim, by worker name and stage.
    static WAITING: Mutex<Vec<(String, Stage, Work)>> = Mutex::new(Vec::new());

    /// Runs `work` once, inside the next run claim by `worker` that reaches
    /// `stage`, on that claim's connection.
    pub fn once<F>(worker: &str, stage: Stage, work: F)
    where
        F: for<'c> FnOnce(&'c mut AsyncMysqlConnection) -> BoxFuture<'c, ()> + Send + 'static,
    {
        WAITING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((worker.to_owned(), stage, Box::new(work)));
    }

    /// Runs the work waiting for `worker` at `stage`, if any.
    pub(super) async fn run(worker: &str, stage: Stage, conn: &mut AsyncMysqlConnection) {
        let work = {
            let mut waiting = WAITING
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            waiting
                .iter()
                .position(|(w, s, _)| w == worker && *s == stage)
                .map(|at| waiting.remove(at).2)
        };
        if let Some(work) = work {
            work(conn).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pick_names_its_index_and_skips_locked_runs() {
        let cancels = &PICKS[1];
        assert!(cancels.starts_with(
            "SELECT id, lease_token, created_at FROM flowstate_runs \
             FORCE INDEX (flowstate_runs_leasable) \
             WHERE leasable = 1 AND cancel_requested = 1 AND status IN ("
        ));
        assert!(cancels.ends_with("ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED"));
        assert_eq!(
            cancels.matches("UTC_TIMESTAMP(6)) + ?").count(),
            2,
            "{cancels}"
        );

        let leases = &PICKS[0];
        let parts: Vec<&str> = leases.split(") UNION ALL (").collect();
        let [free, due, run_out] = parts[..] else {
            panic!("three parts: {leases}");
        };
        assert!(free.starts_with(
            "(SELECT id, lease_token, created_at FROM flowstate_runs \
             FORCE INDEX (flowstate_runs_leasable) \
             WHERE leasable = 1 AND cancel_requested = 0 AND sleep_until IS NULL AND status IN ("
        ));
        assert!(free.contains("AND lease_expires_at IS NULL AND"), "{free}");
        assert!(free.ends_with("ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED"));
        assert_eq!(free.matches("UTC_TIMESTAMP(6)) + ?").count(), 1, "{free}");
        assert!(
            due.contains(
                "WHERE leasable = 1 AND cancel_requested = 0 AND lease_expires_at IS NULL \
                 AND sleep_until <= TIMESTAMPDIFF("
            ),
            "{due}"
        );
        assert!(
            due.ends_with("ORDER BY sleep_until, created_at, id LIMIT ? FOR UPDATE SKIP LOCKED"),
            "{due}"
        );
        assert_eq!(due.matches("UTC_TIMESTAMP(6)) + ?").count(), 1, "{due}");
        assert!(
            run_out.contains("AND lease_expires_at <= TIMESTAMPDIFF("),
            "{run_out}"
        );
        assert!(run_out.ends_with(
            "ORDER BY lease_expires_at, sleep_until, created_at, id LIMIT ? \
             FOR UPDATE SKIP LOCKED) ORDER BY created_at, id LIMIT ?"
        ));
        assert_eq!(
            run_out.matches("UTC_TIMESTAMP(6)) + ?").count(),
            2,
            "{run_out}"
        );
        assert_eq!(
            *PEEK,
            PICKS[0].replace(" FOR UPDATE SKIP LOCKED", ""),
            "the spread pick's read is the pick without its locks"
        );
        assert!(!PEEK.contains("FOR UPDATE"), "{}", *PEEK);
        let lock = lock_taken_sql(2);
        assert!(lock.contains(&pick_where(0)), "{lock}");
        assert!(
            lock.ends_with("AND id IN (?, ?) ORDER BY created_at, id FOR UPDATE SKIP LOCKED"),
            "{lock}"
        );
    }
}
