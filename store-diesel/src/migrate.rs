//! The embedded migrations, one set per dialect, and the calls that apply,
//! revert and list them. `cargo xtask migrate` drives these same calls, so
//! the CLI and the library can never disagree about the schema.
//!
//! Migrations run on a blocking thread with a connection of their own, so
//! they work on any tokio runtime flavour.

use diesel::migration::MigrationSource;
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
    Ok(versions(run(url, Action::Up).await?))
}

/// Reverts the last `steps` applied migrations (all of them if `steps` is
/// larger); returns the versions reverted, newest first.
pub async fn down(url: &str, steps: usize) -> Result<Vec<String>> {
    Ok(versions(run(url, Action::Down(steps)).await?))
}

/// Every embedded migration, oldest first, and whether it is applied.
pub async fn status(url: &str) -> Result<Vec<MigrationState>> {
    run(url, Action::Status).await
}

/// The versions of what an action touched.
/// Fails unless every migration this library has is applied on `url` and
/// none it lacks is: what [`DieselStore::open`](crate::DieselStore::open)
/// checks, so a store never meets a schema it was not written for.
pub(crate) async fn check(url: &str) -> Result<()> {
    let dialect = DatabaseUrl::parse(url)?.dialect;
    let states = run(url, Action::Check).await?;
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
        return Err(Error::SchemaAhead { dialect, unknown });
    }
    if !pending.is_empty() {
        return Err(Error::NotMigrated { dialect, pending });
    }
    Ok(())
}

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

async fn run(url: &str, action: Action) -> Result<Outcome> {
    let parsed = DatabaseUrl::parse(url)?;
    let dialect = parsed.dialect;
    let target = parsed.target;
    let task = tokio::task::spawn_blocking(move || -> Result<Outcome> {
        match dialect {
            #[cfg(feature = "postgres")]
            Dialect::Postgres => apply::<Blocking<diesel_async::AsyncPgConnection>>(
                dialect, &target, &POSTGRES, action,
            ),
            #[cfg(feature = "mysql")]
            Dialect::Mysql => apply::<Blocking<diesel_async::AsyncMysqlConnection>>(
                dialect, &target, &MYSQL, action,
            ),
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => {
                crate::url::create_parent_dir(&target)?;
                apply::<diesel::SqliteConnection>(dialect, &target, &SQLITE, action)
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

fn apply<C>(
    dialect: Dialect,
    target: &str,
    source: &'static EmbeddedMigrations,
    action: Action,
) -> Result<Outcome>
where
    C: diesel::Connection + MigrationHarness<C::Backend>,
    EmbeddedMigrations: MigrationSource<C::Backend>,
{
    // `EmbeddedMigrations` is neither `Copy` nor `Clone`; each call borrows
    // the static set through this tiny adapter.
    let source = StaticSource(source);
    let fail =
        |source: Box<dyn std::error::Error + Send + Sync>| Error::Migration { dialect, source };
    let mut conn = C::establish(target).map_err(|err| Error::Connect {
        dialect,
        source: Box::new(err),
    })?;
    if dialect == Dialect::Sqlite {
        // Wait on a file another process is writing instead of failing at
        // once with SQLITE_BUSY (several workers may start together).
        conn.batch_execute("PRAGMA busy_timeout = 10000;")
            .map_err(|err| fail(Box::new(err)))?;
    }
    match action {
        Action::Up => {
            let applied = conn.run_pending_migrations(source).map_err(fail)?;
            Ok(applied
                .iter()
                .map(|v| touched(v.to_string(), true))
                .collect())
        }
        Action::Down(steps) => {
            let mut reverted = Vec::new();
            for _ in 0..steps {
                if conn.applied_migrations().map_err(fail)?.is_empty() {
                    break;
                }
                let version = conn.revert_last_migration(source).map_err(fail)?;
                reverted.push(touched(version.to_string(), false));
            }
            Ok(reverted)
        }
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
