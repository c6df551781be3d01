//! The outside world the demo's steps act on: two tables of the demo's own
//! (`demo_effects`, one row each time a side effect is really performed,
//! and `demo_executions`, one row each time a step body starts an attempt),
//! on a connection of their own, outside every flowstate transaction, as a
//! payment provider or a mail server would be.
//!
//! Nothing here is unique-keyed on purpose: an effect performed twice is
//! two rows, so "effects repeated" and "double executions" are counted in
//! the database after the run ([`super::verify`]), never trusted from
//! memory. What keeps them at zero is flowstate: the step claim (one
//! executor per attempt, `StepStore::claim_step`) and the effect journal
//! (one `EffectBegin::Started` per key, `EffectJournal::begin_effect`).

use std::fmt::Write as _;

use anyhow::{Context, Result};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::{RunId, Timestamp};
use flowstate_store_diesel::{DatabaseUrl, Dialect};
use serde_json::{Value, json};

/// One connection to the demo's tables, on the dialect of the store.
pub struct Provider {
    conn: Conn,
    session: String,
    /// Where the provider's tables are, seen from this connection.
    prefix: &'static str,
}

/// The SQLite file of the provider's tables, beside the store's `target`.
pub fn provider_file(target: &str) -> String {
    let stem = target.strip_suffix(".db").unwrap_or(target);
    format!("{stem}-provider.db")
}

enum Conn {
    #[cfg(feature = "postgres")]
    Postgres(Box<diesel_async::AsyncPgConnection>),
    #[cfg(feature = "mysql")]
    Mysql(diesel_async::AsyncMysqlConnection),
    #[cfg(feature = "sqlite")]
    Sqlite(diesel_async::sync_connection_wrapper::SyncConnectionWrapper<diesel::SqliteConnection>),
}

/// Runs the same diesel-async code on whichever connection `$provider`
/// holds, binding it to `$conn`.
macro_rules! on_conn {
    ($provider:expr, |$conn:ident| $body:expr) => {
        match &mut $provider.conn {
            #[cfg(feature = "postgres")]
            Conn::Postgres($conn) => {
                let $conn = &mut **$conn;
                $body
            }
            #[cfg(feature = "mysql")]
            Conn::Mysql($conn) => $body,
            #[cfg(feature = "sqlite")]
            Conn::Sqlite($conn) => $body,
        }
    };
}

/// One number read back.
#[derive(QueryableByName)]
pub struct Count {
    /// The number.
    #[diesel(sql_type = BigInt)]
    pub n: i64,
}

/// Several numbers read back in one row: the columns `n0`, `n1`, ... of
/// a statement, in order, each a `COUNT` (a `BIGINT` on every dialect).
pub struct Counts(pub Vec<i64>);

impl<DB: diesel::backend::Backend> QueryableByName<DB> for Counts
where
    i64: diesel::deserialize::FromSql<BigInt, DB>,
{
    fn build<'a>(row: &impl diesel::row::NamedRow<'a, DB>) -> diesel::deserialize::Result<Self> {
        (0..row.field_count())
            .map(|i| diesel::row::NamedRow::get::<BigInt, i64>(row, &format!("n{i}")))
            .collect::<diesel::deserialize::Result<Vec<_>>>()
            .map(Self)
    }
}

/// Who ran one attempt of one step.
#[derive(QueryableByName)]
pub struct Execution {
    /// The step's name.
    #[diesel(sql_type = Text)]
    pub step: String,
    /// The attempt.
    #[diesel(sql_type = BigInt)]
    pub attempt: i64,
    /// The worker.
    #[diesel(sql_type = Text)]
    pub worker: String,
}

#[derive(QueryableByName)]
struct Performed {
    #[diesel(sql_type = Text)]
    worker: String,
    #[diesel(sql_type = BigInt)]
    at: i64,
}

impl Provider {
    /// Connects to the provider's tables for demo session `session`: on a
    /// server, in the database `url` names; on SQLite, in a file of their
    /// own beside it ([`provider_file`]), since the outside world is another
    /// system (and its writes then never stall the store's).
    pub async fn connect(url: &str, session: &str) -> Result<Self> {
        Self::open(url, session, false).await
    }

    /// Connects for the checks: the store's database, with the provider's
    /// tables reachable beside flowstate's (on SQLite, their file attached
    /// as `provider`).
    pub async fn connect_checker(url: &str, session: &str) -> Result<Self> {
        Self::open(url, session, true).await
    }

    async fn open(url: &str, session: &str, checker: bool) -> Result<Self> {
        let parsed = DatabaseUrl::parse(url).context("the demo's database url")?;
        let mut prefix = "";
        let conn = match parsed.dialect {
            #[cfg(feature = "postgres")]
            Dialect::Postgres => Conn::Postgres(Box::new(
                diesel_async::AsyncPgConnection::establish(&parsed.target)
                    .await
                    .context("the demo's own connection")?,
            )),
            #[cfg(feature = "mysql")]
            Dialect::Mysql => Conn::Mysql(
                diesel_async::AsyncMysqlConnection::establish(&parsed.target)
                    .await
                    .context("the demo's own connection")?,
            ),
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => {
                let file = provider_file(&parsed.target);
                let target = if checker {
                    parsed.target.clone()
                } else {
                    file.clone()
                };
                let mut conn = diesel_async::sync_connection_wrapper::SyncConnectionWrapper::<
                    diesel::SqliteConnection,
                >::establish(&target)
                .await
                .context("the demo's own connection")?;
                // Writers beside others: queue, never fail busy; and commit
                // as the store's connections do (WAL, no sync per commit).
                conn.batch_execute(
                    "PRAGMA busy_timeout = 30000; PRAGMA journal_mode = WAL; \
                     PRAGMA synchronous = NORMAL",
                )
                .await
                .context("the demo's own connection")?;
                if checker {
                    let quoted = file.replace('\'', "''");
                    conn.batch_execute(&format!("ATTACH DATABASE '{quoted}' AS provider"))
                        .await
                        .context("attaching the provider's file")?;
                    prefix = "provider.";
                }
                Conn::Sqlite(conn)
            }
            #[allow(unreachable_patterns)]
            other => anyhow::bail!("this xtask build has no {} driver", other.name()),
        };
        Ok(Self {
            conn,
            session: session.to_owned(),
            prefix,
        })
    }

    /// The statement text for this dialect: PostgreSQL numbers its
    /// placeholders (`$1`), the others take `?`.
    fn sql(&self, text: &str) -> String {
        let text = &text.replace("demo_", &format!("{}demo_", self.prefix));
        match self.conn {
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => {
                let mut out = String::with_capacity(text.len() + 8);
                let mut n = 0;
                for c in text.chars() {
                    if c == '?' {
                        n += 1;
                        let _ = write!(out, "${n}");
                    } else {
                        out.push(c);
                    }
                }
                out
            }
            #[allow(unreachable_patterns)]
            _ => text.to_owned(),
        }
    }

    /// Creates the demo's tables if they are missing (the same columns on
    /// every dialect; only the index syntax differs).
    pub async fn create_tables(&mut self) -> Result<()> {
        let tables = "\
            CREATE TABLE IF NOT EXISTS demo_effects (\
              session VARCHAR(64) NOT NULL, run_id VARCHAR(36) NOT NULL, \
              step VARCHAR(64) NOT NULL, effect_key VARCHAR(128) NOT NULL, \
              worker VARCHAR(64) NOT NULL, at BIGINT NOT NULL); \
            CREATE TABLE IF NOT EXISTS demo_executions (\
              session VARCHAR(64) NOT NULL, run_id VARCHAR(36) NOT NULL, \
              step VARCHAR(64) NOT NULL, attempt BIGINT NOT NULL, \
              worker VARCHAR(64) NOT NULL, at BIGINT NOT NULL);";
        on_conn!(self, |c| c.batch_execute(tables).await).context("creating the demo's tables")?;
        let indexes = [
            ("demo_effects_run", "demo_effects (run_id, effect_key)"),
            ("demo_effects_session", "demo_effects (session)"),
            ("demo_executions_run", "demo_executions (run_id)"),
            ("demo_executions_session", "demo_executions (session)"),
        ];
        for (name, on) in indexes {
            // MySQL has no CREATE INDEX IF NOT EXISTS (MariaDB has): an
            // index already there is the one error to let pass.
            let result = on_conn!(self, |c| c
                .batch_execute(&format!("CREATE INDEX {name} ON {on}"))
                .await);
            if let Err(err) = result {
                let text = err.to_string().to_lowercase();
                if !(text.contains("already exists") || text.contains("duplicate key name")) {
                    return Err(err).context("creating the demo's indexes");
                }
            }
        }
        Ok(())
    }

    /// Notes that `worker` starts `attempt` of step `step` of `run`.
    pub async fn record_execution(
        &mut self,
        run: RunId,
        step: &str,
        attempt: u32,
        worker: &str,
    ) -> Result<()> {
        let sql = self.sql(
            "INSERT INTO demo_executions (session, run_id, step, attempt, worker, at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        );
        let session = self.session.clone();
        on_conn!(self, |c| diesel::sql_query(&sql)
            .bind::<Text, _>(&session)
            .bind::<Text, _>(run.to_string())
            .bind::<Text, _>(step)
            .bind::<BigInt, _>(i64::from(attempt))
            .bind::<Text, _>(worker)
            .bind::<BigInt, _>(now_micros())
            .execute(c)
            .await)
        .context("recording an execution")?;
        Ok(())
    }

    /// Performs side effect `key` of step `step` of `run` (one row in
    /// `demo_effects`) and answers its receipt.
    pub async fn perform(
        &mut self,
        run: RunId,
        step: &str,
        key: &str,
        worker: &str,
    ) -> Result<Value> {
        let sql = self.sql(
            "INSERT INTO demo_effects (session, run_id, step, effect_key, worker, at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        );
        let session = self.session.clone();
        let at = now_micros();
        on_conn!(self, |c| diesel::sql_query(&sql)
            .bind::<Text, _>(&session)
            .bind::<Text, _>(run.to_string())
            .bind::<Text, _>(step)
            .bind::<Text, _>(key)
            .bind::<Text, _>(worker)
            .bind::<BigInt, _>(at)
            .execute(c)
            .await)
        .context("performing a side effect")?;
        Ok(receipt(key, worker, at))
    }

    /// The receipt of effect `key` of `run` if it was performed: what a
    /// provider answers when asked about an idempotency key.
    pub async fn lookup(&mut self, run: RunId, key: &str) -> Result<Option<Value>> {
        let sql = self.sql(
            "SELECT worker, at FROM demo_effects WHERE run_id = ? AND effect_key = ? \
             ORDER BY at LIMIT 1",
        );
        let rows: Vec<Performed> = on_conn!(self, |c| diesel::sql_query(&sql)
            .bind::<Text, _>(run.to_string())
            .bind::<Text, _>(key)
            .load(c)
            .await)
        .context("looking a side effect up")?;
        Ok(rows
            .into_iter()
            .next()
            .map(|p| receipt(key, &p.worker, p.at)))
    }

    /// Who ran each attempt of each step of `run`.
    pub async fn executions(&mut self, run: RunId) -> Result<Vec<Execution>> {
        let sql = self.sql(
            "SELECT step, attempt, worker FROM demo_executions WHERE run_id = ? \
             ORDER BY at",
        );
        on_conn!(self, |c| diesel::sql_query(&sql)
            .bind::<Text, _>(run.to_string())
            .load(c)
            .await)
        .context("reading executions back")
    }

    /// A count: `text` with `?` for each of `binds` (all text), in order.
    pub async fn count(&mut self, text: &str, binds: &[&str]) -> Result<i64> {
        let sql = self.sql(text);
        let rows: Vec<Count> = on_conn!(self, |c| {
            let mut query = diesel::sql_query(&sql).into_boxed();
            for bind in binds {
                query = query.bind::<Text, _>(bind.to_string());
            }
            query.load(c).await
        })
        .with_context(|| format!("reading back: {text}"))?;
        Ok(rows.into_iter().next().map_or(0, |row| row.n))
    }

    /// Several counts in one statement: `text` selects one row of columns
    /// `n0`, `n1`, ... (each a `COUNT`), with `?` for each of `binds`.
    pub async fn counts(&mut self, text: &str, binds: &[&str]) -> Result<Vec<i64>> {
        let sql = self.sql(text);
        let rows: Vec<Counts> = on_conn!(self, |c| {
            let mut query = diesel::sql_query(&sql).into_boxed();
            for bind in binds {
                query = query.bind::<Text, _>(bind.to_string());
            }
            query.load(c).await
        })
        .with_context(|| format!("reading back: {text}"))?;
        rows.into_iter()
            .next()
            .map(|row| row.0)
            .with_context(|| format!("no row read back: {text}"))
    }

    /// Whether this connection is to SQLite (whose planner, without
    /// statistics, is told which index to take).
    pub fn is_sqlite(&self) -> bool {
        #[cfg(feature = "sqlite")]
        if matches!(self.conn, Conn::Sqlite(_)) {
            return true;
        }
        false
    }

    /// The demo session these rows belong to.
    pub fn session(&self) -> &str {
        &self.session
    }
}

fn receipt(key: &str, worker: &str, at: i64) -> Value {
    json!({ "effect": key, "performed_by": worker, "at_us": at })
}

fn now_micros() -> i64 {
    Timestamp::from_system_time(std::time::SystemTime::now()).as_micros()
}
