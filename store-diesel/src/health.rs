//! Connections that heal after the server restarts or kills sessions,
//! without a ping before each statement.
//!
//! The pool hands a connection out unchecked: no statement budget allows a
//! `SELECT 1` before each operation. What heals it is a [`Watch`] on every
//! pooled connection of a server dialect (its diesel instrumentation,
//! which passes every event on to the statement log), and a recycle hook
//! that acts on what the watches saw:
//! - A statement that fails with an error meaning the connection is lost,
//!   or serves a server that will not write ([`Retry::Reconnect`] in the
//!   error table), marks its connection, which is dropped without a check
//!   when it comes back out of the pool, and notes the time in the pool's
//!   [`Health`]: every connection last handed out before it is checked
//!   (`SELECT 1`, bounded in time) before it is handed out again, and
//!   dropped if the check fails, so the pool takes the next one or opens a
//!   new one.
//! - A connection that comes back with a statement started and never
//!   reported ended is checked too. That is how a loss is found when its
//!   error never reaches the watch: diesel-async's MySQL connection first
//!   closes the statement an uncached query left open, and returns that
//!   failure before it reports the query ended. (A caller that dropped its
//!   call mid-statement leaves the same trace, and costs one check.) The
//!   check fails and notes the loss like any statement would. The pool
//!   hands out the connection given back last (`Lifo`), so the one that
//!   just failed is looked at before any connection idle since before the
//!   loss.
//! - On PostgreSQL the check also fails on a server that takes no writes
//!   (`pg_is_in_recovery()`: a demoted primary, now a standby; or
//!   `transaction_read_only`), with 25006, so the first write a demoted
//!   primary refuses drops every connection to it, not one per refused
//!   write: the pool opens new ones, which a multi-host URL
//!   (`target_session_attrs=read-write`) or a retargeted PgBouncer takes
//!   to the new primary.
//!
//! - A connection of a pool whose URL lists several servers (MySQL's
//!   nodes, `mysql/nodes.rs`) carries its [`Placement`]: a loss tells it
//!   (the node is skipped by new connections for a while), and a
//!   connection on a node it should leave (one listed before it is back,
//!   or it holds more of the pool's connections than another that
//!   answers) is dropped when it comes out of the pool, so the pool opens
//!   one where it belongs. Deciding sends nothing.
//!
//! So after a restart or killed sessions, a call on a dead connection
//! fails with a retryable error and the next call finds every other dead
//! connection by its check and opens a new one. In steady state nothing is
//! checked: no statement is added, and the statement log counts what it
//! always counted. PostgreSQL's driver also notices a closed connection on
//! its own (diesel-async's `is_broken`); MySQL's does not. SQLite has no
//! server to lose and is not watched.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deadpool::managed::{HookError, HookFuture, Metrics};
use diesel::connection::{Instrumentation, InstrumentationEvent};
use diesel::result::Error as DieselError;
use diesel_async::AsyncConnection;
use diesel_async::pooled_connection::PoolError;

use crate::database::Dialect;
use crate::error::{Retry, row_for};

/// The longest a check of a pooled connection may take (shorter if the
/// acquire timeout is).
const CHECK_BOUND: Duration = Duration::from_secs(2);

/// The statement that checks a pooled connection, unless its type has its
/// own ([`Watched::CHECK`]).
const CHECK: &str = "SELECT 1";

/// A pooled connection type, and whether its pool watches for lost
/// connections.
pub(crate) trait Watched: AsyncConnection + 'static {
    /// Whether the pool watches its connections ([`Watch`]) and checks
    /// them after a loss.
    const WATCHED: bool;

    /// The statement that checks one of its connections after a loss: it
    /// fails on a connection that cannot serve the store.
    const CHECK: &'static str = CHECK;
}

/// Where one pooled connection runs, for a pool that chooses among several
/// servers; kept in the connection's [`Watch`], dropped with it.
pub(crate) trait Placement: Send + 'static {
    /// A statement on the connection lost it, or its check failed: its
    /// server is suspect.
    fn lost(&self);

    /// Whether the connection should give way to a new one on another
    /// server (decided from shared counters, sending nothing).
    fn should_move(&self) -> bool;

    /// Where picks of the oldest claimable rows on this connection start,
    /// counted in windows ([`pick_slot`]): `None` (the oldest) unless the
    /// server is one of several that take writes and whose row locks do
    /// not see each other's.
    fn slot(&self) -> Option<usize>;
}

/// The [`Placement::slot`] of `conn`: where its picks of the oldest rows
/// start (`None`: at the oldest, as on one server). Read from the
/// connection's watch; sends nothing.
pub(crate) fn pick_slot<C: Watched>(conn: &mut C) -> Option<usize> {
    conn.instrumentation()
        .downcast_mut::<Watch>()?
        .placement
        .as_ref()?
        .slot()
}

/// What one pool knows of its connections' health, shared by their
/// [`Watch`]es and its recycle hook.
#[derive(Debug)]
pub(crate) struct Health {
    /// The dialect, for the logs.
    dialect: Dialect,
    /// When the pool was built: times are kept as nanoseconds since.
    origin: Instant,
    /// When a connection was last found lost, as [`Health::stamp`] keeps
    /// it; zero if never.
    lost_at: AtomicU64,
    /// Whether a statement succeeded since the last loss, so that the
    /// next loss is news worth a warning.
    serving: AtomicBool,
    /// How long a check may take.
    check_within: Duration,
}

/// What the pool does with a connection coming out of it.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Hand it out.
    Keep,
    /// Drop it: a statement on it lost the connection.
    Drop,
    /// Check it first: a connection was lost since it was last handed
    /// out, or a statement on it never reported its end.
    Check,
    /// Drop it: it runs on a server it should leave ([`Placement`]).
    Move,
}

impl Health {
    /// The health of a new pool of `dialect` whose callers wait at most
    /// `acquire_timeout` for a connection.
    pub(crate) fn new(dialect: Dialect, acquire_timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            dialect,
            origin: Instant::now(),
            lost_at: AtomicU64::new(0),
            serving: AtomicBool::new(true),
            check_within: acquire_timeout.min(CHECK_BOUND),
        })
    }

    /// The instrumentation to install on a new connection of this pool,
    /// passing every event on to `next` (the statement log's, or diesel's
    /// default).
    #[cfg(test)]
    pub(crate) fn watch(self: &Arc<Self>, next: Option<Box<dyn Instrumentation>>) -> Watch {
        self.watch_placed(next, None)
    }

    /// [`Health::watch`] for a connection placed on one of several
    /// servers.
    pub(crate) fn watch_placed(
        self: &Arc<Self>,
        next: Option<Box<dyn Instrumentation>>,
        placement: Option<Box<dyn Placement>>,
    ) -> Watch {
        Watch {
            health: Arc::clone(self),
            lost: false,
            unfinished: 0,
            next,
            placement,
        }
    }

    /// `at` as one plus the nanoseconds since the pool was built (one for
    /// any instant before), so that zero can mean never.
    fn stamp(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX - 1) + 1
    }

    /// Notes a statement that failed with `err`: if it means the
    /// connection is lost, every connection handed out before now is
    /// checked before it is handed out again, and the first loss since a
    /// statement last succeeded is logged as a warning. Answers whether it
    /// was such an error.
    fn failed(&self, err: &DieselError) -> bool {
        let Some(row) = row_for(err).filter(|row| row.retry == Retry::Reconnect) else {
            return false;
        };
        self.lost_at
            .fetch_max(self.stamp(Instant::now()), Ordering::AcqRel);
        if self.serving.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                dialect = self.dialect.name(),
                error = %err,
                code = row.code,
                "database connection lost: pooled connections are checked before they are handed out again"
            );
        }
        true
    }

    /// Notes a statement that succeeded.
    fn served(&self) {
        if !self.serving.load(Ordering::Relaxed) {
            self.serving.store(true, Ordering::Relaxed);
        }
    }

    /// What to do with `conn`, coming out of the pool with `metrics`.
    fn verdict<C: Watched>(&self, conn: &mut C, metrics: &Metrics) -> Verdict {
        let (lost, unfinished, moving) =
            conn.instrumentation()
                .downcast_mut::<Watch>()
                .map_or((false, 0, false), |watch| {
                    let lost = std::mem::take(&mut watch.lost);
                    let placement = watch.placement.as_ref();
                    if lost {
                        placement.inspect(|placed| placed.lost());
                    }
                    (
                        lost,
                        std::mem::take(&mut watch.unfinished),
                        !lost && placement.is_some_and(|placed| placed.should_move()),
                    )
                });
        if lost {
            return Verdict::Drop;
        }
        if moving {
            return Verdict::Move;
        }
        let lost_at = self.lost_at.load(Ordering::Acquire);
        let handed_out = self.stamp(metrics.recycled.unwrap_or(metrics.created));
        if unfinished > 0 || (lost_at != 0 && handed_out <= lost_at) {
            Verdict::Check
        } else {
            Verdict::Keep
        }
    }

    /// The pool's recycle hook: hands `conn` out, drops it, or checks it
    /// first (see the module doc). An `Err` makes the pool drop it and try
    /// the next one. Decided without awaiting anything unless a check is
    /// due.
    pub(crate) fn recycle<'c, C: Watched>(
        self: &Arc<Self>,
        conn: &'c mut C,
        metrics: &Metrics,
    ) -> HookFuture<'c, PoolError> {
        match self.verdict(conn, metrics) {
            Verdict::Keep => Box::pin(std::future::ready(Ok(()))),
            Verdict::Drop => {
                tracing::debug!(
                    dialect = self.dialect.name(),
                    "pooled connection dropped: a statement on it lost the connection"
                );
                Box::pin(std::future::ready(Err(HookError::message(
                    "a statement on it lost the connection",
                ))))
            }
            Verdict::Move => {
                tracing::debug!(
                    dialect = self.dialect.name(),
                    "pooled connection dropped: its server is not where the pool's connections belong now"
                );
                Box::pin(std::future::ready(Err(HookError::message(
                    "it runs on a server it should leave",
                ))))
            }
            Verdict::Check => {
                let health = Arc::clone(self);
                Box::pin(async move { health.check(conn).await })
            }
        }
    }

    /// Checks `conn` with its [`Watched::CHECK`] within `check_within`.
    async fn check<C: Watched>(&self, conn: &mut C) -> Result<(), HookError<PoolError>> {
        match tokio::time::timeout(self.check_within, conn.batch_execute(C::CHECK)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => {
                tracing::debug!(
                    dialect = self.dialect.name(),
                    error = %err,
                    "pooled connection dropped: it failed its check"
                );
                if let Some(watch) = conn.instrumentation().downcast_mut::<Watch>()
                    && watch.lost
                {
                    watch.placement.as_ref().inspect(|placed| placed.lost());
                }
                Err(HookError::Backend(PoolError::QueryError(err)))
            }
            Err(_) => {
                tracing::debug!(
                    dialect = self.dialect.name(),
                    within = ?self.check_within,
                    "pooled connection dropped: it did not answer its check"
                );
                if let Some(placed) = conn
                    .instrumentation()
                    .downcast_mut::<Watch>()
                    .and_then(|watch| watch.placement.as_ref())
                {
                    placed.lost();
                }
                Err(HookError::message("no answer to the check"))
            }
        }
    }
}

/// A pooled connection's instrumentation: notes in its pool's [`Health`]
/// how its statements end, remembers whether one lost the connection and
/// how many never reported their end, and passes every event on.
pub(crate) struct Watch {
    /// The pool's health.
    health: Arc<Health>,
    /// Whether a statement on this connection lost it.
    lost: bool,
    /// Statements started and not reported ended.
    unfinished: u32,
    /// Where every event goes next.
    next: Option<Box<dyn Instrumentation>>,
    /// Where the connection runs, if its pool chooses among servers.
    placement: Option<Box<dyn Placement>>,
}

impl Instrumentation for Watch {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        match &event {
            InstrumentationEvent::StartQuery { .. } => {
                self.unfinished = self.unfinished.saturating_add(1);
            }
            InstrumentationEvent::FinishQuery { error, .. } => {
                self.unfinished = self.unfinished.saturating_sub(1);
                match error {
                    None => self.health.served(),
                    Some(err) => self.lost |= self.health.failed(err),
                }
            }
            _ => {}
        }
        if let Some(next) = &mut self.next {
            next.on_connection_event(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use diesel::result::DatabaseErrorKind;
    use diesel_async::{AsyncConnection, SimpleAsyncConnection};
    use tracing::Level;

    use super::*;
    use crate::statement_log::StatementLog;

    /// How many warnings and debug lines were logged.
    #[derive(Debug, Default)]
    struct Logged {
        warnings: AtomicUsize,
        debugs: AtomicUsize,
    }

    /// A subscriber that counts into [`Logged`].
    struct Counter(Arc<Logged>);

    impl tracing::Subscriber for Counter {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let counter = match *event.metadata().level() {
                Level::WARN => &self.0.warnings,
                Level::DEBUG => &self.0.debugs,
                _ => return,
            };
            counter.fetch_add(1, Ordering::SeqCst);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// Runs `f` with a [`Counter`] as the subscriber; answers what it
    /// logged.
    fn logging(f: impl FnOnce()) -> (usize, usize) {
        let logged = Arc::new(Logged::default());
        tracing::subscriber::with_default(Counter(Arc::clone(&logged)), f);
        (
            logged.warnings.load(Ordering::SeqCst),
            logged.debugs.load(Ordering::SeqCst),
        )
    }

    /// A lost connection, as diesel-async reports it on PostgreSQL.
    fn lost() -> DieselError {
        DieselError::DatabaseError(
            DatabaseErrorKind::UnableToSendCommand,
            Box::new(String::from("connection closed")),
        )
    }

    /// A deadlock victim: retryable, but the connection is fine.
    fn deadlock() -> DieselError {
        DieselError::DatabaseError(
            DatabaseErrorKind::Unknown,
            Box::new(String::from("deadlock detected")),
        )
    }

    /// The metrics of a connection made at `created` and last handed out
    /// at `recycled`.
    fn metrics(created: Instant, recycled: Option<Instant>) -> Metrics {
        Metrics {
            created,
            recycled,
            recycle_count: usize::from(recycled.is_some()),
        }
    }

    /// The pooled SQLite connection type (as `sqlite/mod.rs` names it).
    #[cfg(feature = "sqlite")]
    type SqliteConn =
        diesel_async::sync_connection_wrapper::SyncConnectionWrapper<diesel::SqliteConnection>;

    /// An in-memory SQLite connection (it has no server to lose, but is a
    /// real connection to watch) carrying `health`'s watch, reporting on
    /// to `log`.
    async fn watched(health: &Arc<Health>, log: &Arc<StatementLog>) -> SqliteConn {
        let mut conn = SqliteConn::establish(":memory:").await.unwrap();
        conn.set_instrumentation(health.watch(Some(Box::new(log.instrumentation()))));
        conn
    }

    /// `conn`'s watch.
    fn watch_of(conn: &mut SqliteConn) -> &mut Watch {
        conn.instrumentation().downcast_mut::<Watch>().unwrap()
    }

    #[test]
    fn a_loss_is_warned_once_until_a_statement_succeeds() {
        let health = Health::new(Dialect::Postgres, Duration::from_secs(5));
        let (warnings, _) = logging(|| {
            assert!(health.failed(&lost()));
            assert!(health.failed(&lost()));
            assert!(
                !health.failed(&deadlock()),
                "a deadlock loses no connection"
            );
        });
        assert_eq!(warnings, 1);
        assert_ne!(health.lost_at.load(Ordering::SeqCst), 0);

        let (warnings, _) = logging(|| {
            health.served();
            assert!(health.failed(&lost()));
        });
        assert_eq!(warnings, 1, "a loss after a success is news again");
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn only_connections_handed_out_before_a_loss_are_checked() {
        let health = Health::new(Dialect::Postgres, Duration::from_secs(5));
        let log = StatementLog::new();
        let mut conn = watched(&health, &log).await;
        let made = Instant::now();
        let handed_out = Instant::now();
        assert_eq!(
            health.verdict(&mut conn, &metrics(made, None)),
            Verdict::Keep
        );
        assert_eq!(
            health.verdict(&mut conn, &metrics(made, Some(handed_out))),
            Verdict::Keep
        );

        health.failed(&lost());
        assert_eq!(
            health.verdict(&mut conn, &metrics(made, None)),
            Verdict::Check
        );
        assert_eq!(
            health.verdict(&mut conn, &metrics(made, Some(handed_out))),
            Verdict::Check
        );
        let since = Instant::now() + Duration::from_millis(1);
        assert_eq!(
            health.verdict(&mut conn, &metrics(since, None)),
            Verdict::Keep
        );
        assert_eq!(
            health.verdict(&mut conn, &metrics(made, Some(since))),
            Verdict::Keep,
            "handed out (so checked, or used) since the loss"
        );
        assert!(log.statements().is_empty(), "a verdict sends nothing");
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_connection_that_lost_itself_is_dropped_and_an_unfinished_one_checked() {
        let health = Health::new(Dialect::Mysql, Duration::from_secs(5));
        let log = StatementLog::new();
        let mut conn = watched(&health, &log).await;
        let fresh = metrics(Instant::now(), None);

        watch_of(&mut conn).lost = true;
        let (_, debugs) = logging(|| {
            assert_eq!(health.verdict(&mut conn, &fresh), Verdict::Drop);
        });
        assert_eq!(debugs, 0, "the verdict logs nothing, the hook does");
        watch_of(&mut conn).lost = true;
        let (_, debugs) = logging(|| drop(health.recycle(&mut conn, &fresh)));
        assert_eq!(debugs, 1, "one debug line per connection dropped");

        watch_of(&mut conn).unfinished = 1;
        assert_eq!(health.verdict(&mut conn, &fresh), Verdict::Check);
        assert_eq!(health.verdict(&mut conn, &fresh), Verdict::Keep, "once");
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_check_keeps_a_live_connection_and_steady_state_sends_nothing() {
        let health = Health::new(Dialect::Postgres, Duration::from_secs(5));
        let log = StatementLog::new();
        let mut conn = watched(&health, &log).await;
        let made = Instant::now();

        conn.batch_execute("SELECT 2").await.unwrap();
        assert_eq!(watch_of(&mut conn).unfinished, 0);
        health
            .recycle(&mut conn, &metrics(made, Some(Instant::now())))
            .await
            .unwrap();
        assert_eq!(log.statements(), ["SELECT 2"], "no check in steady state");

        health.failed(&lost());
        log.clear();
        health
            .recycle(&mut conn, &metrics(made, None))
            .await
            .expect("a live connection passes its check");
        assert_eq!(
            log.statements(),
            [CHECK],
            "the check is a statement like any"
        );
    }
}
