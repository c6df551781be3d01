//! The embedded migrations, one set per dialect, and the calls that apply,
//! revert and list them. `cargo xtask migrate` drives these same calls, so
//! the CLI and the library can never disagree about the schema.
//!
//! Migrations run on a blocking thread with a connection of their own, so
//! they work on any tokio runtime flavour. On PostgreSQL behind a
//! transaction-mode pooler (`?pool_mode=transaction` in the URL, or
//! [`StoreConfig::transaction_pooler`](crate::StoreConfig::transaction_pooler)
//! on the store that migrates or checks) that connection is the pooler's
//! kind too, whose statements leave nothing prepared on the server, so
//! `up`, `status` and the check [`DieselStore::open`](crate::DieselStore::open)
//! makes work through PgBouncer.
//!
//! Many processes may migrate one database at once (a fleet whose workers
//! migrate on start): [`up`] and [`down`] serialize on the database itself
//! (a lock of the database's own), so one applies what is pending and the others find
//! nothing left to do. PostgreSQL takes a transaction-scoped advisory lock
//! and applies every pending migration inside that one transaction (each
//! migration's own transaction nests as a savepoint), so it works through
//! a transaction-mode pooler too. MySQL, MariaDB and Galera (where
//! `GET_LOCK` is local to a node) take a lock row in a table of
//! flowstate's own, [`LOCK_TABLE`], made with `CREATE TABLE IF NOT EXISTS`
//! before any migration: the row names its holder and runs out unless the
//! holder renews it, so a migrator that crashed blocks the others for
//! [`LOCK_TTL`] at most. SQLite runs the migrations in one `BEGIN
//! EXCLUSIVE` transaction. Under the lock a process that finds applied
//! versions it does not know refuses with
//! [`Error::SchemaAhead`].

use std::time::Duration;

use diesel::migration::{MigrationSource, MigrationVersion};
#[cfg(any(feature = "postgres", feature = "mysql"))]
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper as Blocking;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness};

use crate::database::Dialect;
use crate::open_error::{Error, Result};
use crate::url::DatabaseUrl;

/// PostgreSQL's migrations.
#[cfg(feature = "postgres")]
pub(crate) static POSTGRES: EmbeddedMigrations =
    diesel_migrations::embed_migrations!("migrations/postgres");
/// MySQL's and MariaDB's migrations.
#[cfg(feature = "mysql")]
pub(crate) static MYSQL: EmbeddedMigrations =
    diesel_migrations::embed_migrations!("migrations/mysql");
/// SQLite's migrations.
#[cfg(feature = "sqlite")]
pub(crate) static SQLITE: EmbeddedMigrations =
    diesel_migrations::embed_migrations!("migrations/sqlite");

/// One migration and whether the database has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationState {
    /// Its version (the folder name's leading timestamp).
    pub version: String,
    /// Its full name.
    pub name: String,
    /// Whether it is applied.
    pub applied: bool,
}

/// What to do to the schema.
#[derive(Clone, Copy, Debug)]
enum Action {
    Up,
    Down(usize),
    Status,
    /// [`Action::Status`], plus every applied version this library lacks
    /// (as states with an empty name).
    Check,
}

/// Applies every pending migration; returns the versions applied (none when
/// the schema is current: running it twice is a no-op).
pub async fn up(url: &str) -> Result<Vec<String>> {
    up_with(url, false).await
}

/// [`up`], through a transaction-mode pooler's kind of connection if
/// `pooler` (or the URL says `pool_mode=transaction`).
pub(crate) async fn up_with(url: &str, pooler: bool) -> Result<Vec<String>> {
    Ok(versions(run(url, Action::Up, pooler).await?))
}

/// Reverts the last `steps` applied migrations (all of them if `steps` is
/// larger); returns the versions reverted, newest first.
pub async fn down(url: &str, steps: usize) -> Result<Vec<String>> {
    Ok(versions(run(url, Action::Down(steps), false).await?))
}

/// Every embedded migration, oldest first, and whether it is applied.
pub async fn status(url: &str) -> Result<Vec<MigrationState>> {
    run(url, Action::Status, false).await
}

/// Fails unless every migration this library has is applied on `url` and
/// none it lacks is: what [`DieselStore::open`](crate::DieselStore::open)
/// checks, so a store never meets a schema it was not written for;
/// through a transaction-mode pooler's kind of connection if `pooler` (or
/// the URL says `pool_mode=transaction`).
pub(crate) async fn check(url: &str, pooler: bool) -> Result<()> {
    let dialect = DatabaseUrl::parse(url)?.dialect;
    let states = run(url, Action::Check, pooler).await?;
    let pending: Vec<String> = states
        .iter()
        .filter(|s| !s.applied)
        .map(|s| s.version.clone())
        .collect();
    let unknown: Vec<String> = states
        .iter()
        .filter(|s| s.applied && s.name.is_empty())
        .map(|s| s.version.clone())
        .collect();
    if !unknown.is_empty() {
        let mut unknown = unknown;
        unknown.sort();
        let newest_known = states
            .iter()
            .filter(|s| !s.name.is_empty())
            .map(|s| s.version.clone())
            .max()
            .unwrap_or_default();
        return Err(Error::SchemaAhead {
            dialect,
            newest_applied: unknown.last().cloned().unwrap_or_default(),
            newest_known,
            unknown,
        });
    }
    if !pending.is_empty() {
        return Err(Error::NotMigrated { dialect, pending });
    }
    Ok(())
}

/// The versions of what an action touched.
fn versions(states: Vec<MigrationState>) -> Vec<String> {
    states.into_iter().map(|s| s.version).collect()
}

/// What an action touched (`Up`, `Down`) or found (`Status`).
type Outcome = Vec<MigrationState>;

/// A migration an action applied or reverted, known by its version.
fn touched(version: String, applied: bool) -> MigrationState {
    MigrationState {
        name: version.clone(),
        version,
        applied,
    }
}

/// Runs `action` on `url` on a blocking thread; `pooler` (or the URL's
/// `pool_mode=transaction`) opens a PostgreSQL connection through
/// `postgres::pooler`.
async fn run(url: &str, action: Action, pooler: bool) -> Result<Outcome> {
    let parsed = DatabaseUrl::parse(url)?;
    let dialect = parsed.dialect;
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    let pooler = pooler || parsed.transaction_pooler;
    let target = parsed.target;
    #[cfg_attr(not(feature = "mysql"), allow(unused_variables))]
    let nodes = parsed.nodes;
    let task = tokio::task::spawn_blocking(move || -> Result<Outcome> {
        match dialect {
            #[cfg(feature = "postgres")]
            Dialect::Postgres => {
                let conn = if pooler {
                    // As the wrapper's own `establish` does: the runtime
                    // this blocking thread belongs to runs the connection.
                    tokio::runtime::Handle::current()
                        .block_on(crate::postgres::pooler::establish(&target))
                        .map(Blocking::from)
                } else {
                    diesel::Connection::establish(&target)
                };
                apply::<Blocking<diesel_async::AsyncPgConnection>>(
                    dialect, &target, &POSTGRES, action, conn,
                )
            }
            #[cfg(feature = "mysql")]
            Dialect::Mysql => {
                // The first node the URL lists that answers.
                let mut tried = nodes.iter();
                let (mut target, mut conn) = (target.clone(), Err(None));
                for node in tried.by_ref() {
                    target.clone_from(node);
                    match diesel::Connection::establish(node) {
                        Ok(found) => {
                            conn = Ok(found);
                            break;
                        }
                        Err(err) => conn = Err(Some(err)),
                    }
                }
                let conn = conn.map_err(|err| {
                    err.unwrap_or_else(|| diesel::ConnectionError::BadConnection("no node".into()))
                });
                apply::<Blocking<diesel_async::AsyncMysqlConnection>>(
                    dialect, &target, &MYSQL, action, conn,
                )
            }
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => {
                crate::url::create_parent_dir(&target)?;
                apply::<diesel::SqliteConnection>(
                    dialect,
                    &target,
                    &SQLITE,
                    action,
                    diesel::Connection::establish(&target),
                )
            }
            #[allow(unreachable_patterns)]
            other => Err(Error::UnsupportedUrl {
                url: format!("{other}://..."),
                reason: "this build leaves that dialect out (enable its feature)",
            }),
        }
    });
    task.await.map_err(|err| Error::Migration {
        dialect,
        source: Box::new(err),
    })?
}

/// A boxed error, as diesel's migration harness answers.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why serialized work failed.
#[derive(Debug)]
pub(crate) enum Failed {
    /// The database has applied versions this library does not know.
    Ahead {
        /// Those versions, oldest first.
        unknown: Vec<String>,
        /// The newest version this library has.
        newest_known: String,
    },
    /// Anything else.
    Other(BoxError),
}

impl From<diesel::result::Error> for Failed {
    fn from(err: diesel::result::Error) -> Self {
        Self::Other(Box::new(err))
    }
}

impl From<BoxError> for Failed {
    fn from(err: BoxError) -> Self {
        Self::Other(err)
    }
}

/// A connection that can run work while no other process migrates the
/// same database (see the module's documentation).
pub(crate) trait Serialized: diesel::Connection + Sized {
    /// Runs `work` holding the database's migration lock; `target` is the
    /// connection's URL, for a connection of its own if the lock needs one.
    fn serialized<T>(
        &mut self,
        target: &str,
        work: impl FnOnce(&mut Self) -> Result<T, Failed>,
    ) -> Result<T, Failed>;
}

/// The key of PostgreSQL's advisory lock: "flowstat" as 8 bytes.
#[cfg(feature = "postgres")]
pub(crate) const ADVISORY_KEY: i64 = 0x666c_6f77_7374_6174;

#[cfg(feature = "postgres")]
impl Serialized for Blocking<diesel_async::AsyncPgConnection> {
    /// One transaction: the advisory lock (released by its commit or
    /// rollback, so a crashed migrator holds nothing), then the work.
    fn serialized<T>(
        &mut self,
        _target: &str,
        work: impl FnOnce(&mut Self) -> Result<T, Failed>,
    ) -> Result<T, Failed> {
        diesel::Connection::transaction(self, |conn| {
            diesel::connection::SimpleConnection::batch_execute(
                conn,
                &format!("SELECT pg_advisory_xact_lock({ADVISORY_KEY})"),
            )?;
            work(conn)
        })
    }
}

#[cfg(feature = "sqlite")]
impl Serialized for diesel::SqliteConnection {
    /// One `BEGIN EXCLUSIVE` transaction.
    fn serialized<T>(
        &mut self,
        _target: &str,
        work: impl FnOnce(&mut Self) -> Result<T, Failed>,
    ) -> Result<T, Failed> {
        self.exclusive_transaction(work)
    }
}

/// MySQL's lock table: one row, its holder and when its hold runs out
/// (microseconds on the database's clock). Not a diesel migration: it must
/// exist before the first one runs, and outlives `down`.
pub const LOCK_TABLE: &str = "flowstate_migration_lock";

/// How long a MySQL migration lock holds without its holder renewing it
/// (the holder renews it every third of that while it migrates): how long
/// a migrator that crashed blocks the others.
pub const LOCK_TTL: Duration = Duration::from_secs(30);

/// How long a MySQL migrator waits for the lock before it gives up.
#[cfg(feature = "mysql")]
const LOCK_WAIT: Duration = Duration::from_secs(600);

#[cfg(feature = "mysql")]
mod mysql_lock {
    //! The lock row of [`LOCK_TABLE`] on MySQL, MariaDB and Galera.

    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use diesel::sql_types::{BigInt, Text};
    use diesel::{Connection, RunQueryDsl};
    use diesel_async::AsyncMysqlConnection;
    use diesel_async::async_connection_wrapper::AsyncConnectionWrapper as Blocking;

    use super::{Failed, LOCK_TABLE, LOCK_TTL, LOCK_WAIT, Serialized};

    /// A blocking MySQL connection.
    type Conn = Blocking<AsyncMysqlConnection>;

    /// The database's clock, in microseconds.
    const NOW: &str = <AsyncMysqlConnection as crate::dialect::Connection>::NOW_US;

    /// The table and its one row; both statements are no-ops once done.
    fn setup(conn: &mut Conn) -> diesel::QueryResult<()> {
        diesel::sql_query(format!(
            "CREATE TABLE IF NOT EXISTS {LOCK_TABLE} (id TINYINT NOT NULL PRIMARY KEY, \
             holder VARBINARY(255) NULL, expires_at BIGINT NULL) ENGINE = InnoDB"
        ))
        .execute(conn)?;
        diesel::sql_query(format!("INSERT IGNORE INTO {LOCK_TABLE} (id) VALUES (1)"))
            .execute(conn)?;
        Ok(())
    }

    /// Takes the row for `holder` if it is free or ran out, or renews it if
    /// `holder` has it: whether `holder` has it now. One autocommit
    /// `UPDATE` decided by its affected rows, so on Galera too only one
    /// node's holder wins (the others fail certification, or match
    /// nothing once the winner's write is applied).
    fn hold(conn: &mut Conn, holder: &str) -> diesel::QueryResult<bool> {
        let ttl = i64::try_from(LOCK_TTL.as_micros()).unwrap_or(i64::MAX);
        diesel::sql_query(format!(
            "UPDATE {LOCK_TABLE} SET holder = ?, expires_at = {NOW} + ? WHERE id = 1 \
             AND (holder IS NULL OR holder = ? OR expires_at <= {NOW})"
        ))
        .bind::<Text, _>(holder)
        .bind::<BigInt, _>(ttl)
        .bind::<Text, _>(holder)
        .execute(conn)
        .map(|n| n == 1)
    }

    /// Frees the row if `holder` still has it.
    fn release(conn: &mut Conn, holder: &str) -> diesel::QueryResult<usize> {
        diesel::sql_query(format!(
            "UPDATE {LOCK_TABLE} SET holder = NULL, expires_at = NULL WHERE id = 1 AND holder = ?"
        ))
        .bind::<Text, _>(holder)
        .execute(conn)
    }

    /// Whether `err` is worth trying again for the lock: a lost conflict
    /// (two nodes of a cluster writing the row at once) or a node not
    /// ready yet.
    fn transient(err: &diesel::result::Error) -> bool {
        crate::conflict::is_conflict(err)
    }

    /// The wait before try `attempt` (1-based): growing by 10 ms a try up
    /// to 200 ms, half of it jittered.
    fn pause(attempt: u32) -> Duration {
        let ceiling = Duration::from_millis(10 * u64::from(attempt.min(20)));
        let jitter = crate::conflict::random() % (ceiling.as_micros() as u64 + 1);
        ceiling / 2 + Duration::from_micros(jitter / 2)
    }

    /// Renews the hold every third of [`LOCK_TTL`] on a connection of its
    /// own, until dropped.
    struct Renewer {
        stop: Option<mpsc::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Renewer {
        fn start(target: &str, holder: &str) -> Self {
            let (stop, stopped) = mpsc::channel::<()>();
            let (target, holder) = (target.to_owned(), holder.to_owned());
            let thread = std::thread::spawn(move || {
                let mut conn: Option<Conn> = None;
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(LOCK_TTL / 3)
                {
                    if conn.is_none() {
                        conn = Conn::establish(&target).ok();
                    }
                    if let Some(c) = conn.as_mut() {
                        match hold(c, &holder) {
                            Ok(true) => {}
                            Ok(false) => tracing::warn!(
                                holder,
                                "the migration lock ran out before it was renewed"
                            ),
                            Err(err) => {
                                tracing::warn!(holder, %err, "cannot renew the migration lock");
                                conn = None;
                            }
                        }
                    }
                }
            });
            Self {
                stop: Some(stop),
                thread: Some(thread),
            }
        }
    }

    impl Drop for Renewer {
        fn drop(&mut self) {
            drop(self.stop.take());
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    impl Serialized for Conn {
        /// The lock row: set up, waited for (polling, growing to 200 ms,
        /// jittered), renewed while `work` runs, freed after.
        fn serialized<T>(
            &mut self,
            target: &str,
            work: impl FnOnce(&mut Self) -> Result<T, Failed>,
        ) -> Result<T, Failed> {
            let holder = format!("{}:{}", std::process::id(), uuid::Uuid::now_v7().simple());
            let started = Instant::now();
            let mut attempt = 0_u32;
            // The table and its row once, then only the guarded `UPDATE`
            // while waiting: on Galera a waiter's `INSERT IGNORE` can fail
            // the holder's release in certification (seen: the release
            // lost, the others waiting out the whole expiry).
            let mut ready = false;
            loop {
                let held = if ready {
                    hold(self, &holder)
                } else {
                    setup(self).and_then(|()| {
                        ready = true;
                        hold(self, &holder)
                    })
                };
                match held {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(err) if transient(&err) => {}
                    Err(err) => return Err(err.into()),
                }
                if started.elapsed() > LOCK_WAIT {
                    return Err(Failed::Other(
                        format!(
                            "waited {} s for the migration lock ({LOCK_TABLE}) in vain",
                            LOCK_WAIT.as_secs()
                        )
                        .into(),
                    ));
                }
                attempt += 1;
                std::thread::sleep(pause(attempt));
            }
            tracing::debug!(
                holder,
                waited_ms = started.elapsed().as_millis() as u64,
                "migration lock taken"
            );
            let renewer = Renewer::start(target, &holder);
            let out = work(self);
            drop(renewer);
            // A release lost to a cluster conflict is tried again: the
            // others would wait out the expiry.
            for attempt in 1..=20 {
                match release(self, &holder) {
                    Ok(_) => break,
                    Err(err) if transient(&err) && attempt < 20 => {
                        std::thread::sleep(pause(attempt));
                    }
                    Err(err) => {
                        // It runs out on its own.
                        tracing::warn!(holder, %err, "cannot free the migration lock");
                        break;
                    }
                }
            }
            out
        }
    }
}

fn apply<C>(
    dialect: Dialect,
    target: &str,
    source: &'static EmbeddedMigrations,
    action: Action,
    conn: diesel::ConnectionResult<C>,
) -> Result<Outcome>
where
    C: Serialized + MigrationHarness<C::Backend>,
    EmbeddedMigrations: MigrationSource<C::Backend>,
{
    // `EmbeddedMigrations` is neither `Copy` nor `Clone`; each call borrows
    // the static set through this tiny adapter.
    let source = StaticSource(source);
    let fail = |source: BoxError| Error::Migration { dialect, source };
    let failed = |failed: Failed| match failed {
        Failed::Ahead {
            unknown,
            newest_known,
        } => Error::SchemaAhead {
            dialect,
            newest_applied: unknown.last().cloned().unwrap_or_default(),
            newest_known,
            unknown,
        },
        Failed::Other(source) => Error::Migration { dialect, source },
    };
    let mut conn = conn.map_err(|err| Error::Connect {
        dialect,
        source: Box::new(err),
    })?;
    if dialect == Dialect::Sqlite {
        // Wait on a file another process is writing instead of failing at
        // once with SQLITE_BUSY (several workers may start together, and
        // one holds the file for its whole migration).
        conn.batch_execute("PRAGMA busy_timeout = 60000;")
            .map_err(|err| fail(Box::new(err)))?;
    }
    match action {
        Action::Up => {
            let applied = conn
                .serialized(target, |conn| {
                    refuse_ahead(conn, source)?;
                    let applied = conn.run_pending_migrations(source)?;
                    Ok(applied.iter().map(ToString::to_string).collect::<Vec<_>>())
                })
                .map_err(failed)?;
            Ok(applied.into_iter().map(|v| touched(v, true)).collect())
        }
        Action::Down(steps) => conn
            .serialized(target, |conn| {
                let mut reverted = Vec::new();
                for _ in 0..steps {
                    if conn.applied_migrations()?.is_empty() {
                        break;
                    }
                    let version = conn.revert_last_migration(source)?;
                    reverted.push(touched(version.to_string(), false));
                }
                Ok(reverted)
            })
            .map_err(failed),
        Action::Status | Action::Check => {
            let applied: Vec<String> = conn
                .applied_migrations()
                .map_err(fail)?
                .iter()
                .map(ToString::to_string)
                .collect();
            let mut states: Vec<MigrationState> = source
                .migrations()
                .map_err(fail)?
                .iter()
                .map(|m| {
                    let name = m.name().to_string();
                    let version = m.name().version().to_string();
                    MigrationState {
                        applied: applied.contains(&version),
                        version,
                        name,
                    }
                })
                .collect();
            if matches!(action, Action::Check) {
                let known: Vec<String> = states.iter().map(|s| s.version.clone()).collect();
                let unknown = applied.into_iter().filter(|v| !known.contains(v));
                states.extend(unknown.map(|version| MigrationState {
                    version,
                    name: String::new(),
                    applied: true,
                }));
            }
            Ok(states)
        }
    }
}

/// Fails with [`Failed::Ahead`] if the database has applied versions
/// `source` does not know: a newer flowstate migrated it, and this one
/// must not write to its schema.
fn refuse_ahead<C>(conn: &mut C, source: StaticSource) -> Result<(), Failed>
where
    C: MigrationHarness<C::Backend> + diesel::Connection,
    EmbeddedMigrations: MigrationSource<C::Backend>,
{
    let known: Vec<String> = MigrationSource::<C::Backend>::migrations(&source)?
        .iter()
        .map(|m| m.name().version().to_string())
        .collect();
    let applied: Vec<MigrationVersion<'static>> = conn.applied_migrations()?;
    let mut unknown: Vec<String> = applied
        .iter()
        .map(ToString::to_string)
        .filter(|v| !known.contains(v))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    unknown.sort();
    Err(Failed::Ahead {
        unknown,
        newest_known: known.iter().max().cloned().unwrap_or_default(),
    })
}

/// A `Copy` handle on a static migration set.
#[derive(Clone, Copy)]
pub(crate) struct StaticSource(pub(crate) &'static EmbeddedMigrations);

impl<DB: diesel::backend::Backend> MigrationSource<DB> for StaticSource
where
    EmbeddedMigrations: MigrationSource<DB>,
{
    fn migrations(
        &self,
    ) -> diesel::migration::Result<Vec<Box<dyn diesel::migration::Migration<DB>>>> {
        self.0.migrations()
    }
}
