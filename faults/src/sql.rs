//! [`RawConn`]: one plain connection of any of the three dialects, outside
//! every store's pool, for what the suite writes and reads behind the
//! store's back (the ledger, the verdicts, killing sessions).

use anyhow::{Context as _, Result, bail};
use diesel::SqliteConnection;
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, AsyncPgConnection};
use diesel_async::{RunQueryDsl as _, SimpleAsyncConnection as _};
use flowstate_store_diesel::{DatabaseUrl, Dialect};

/// A connection of the dialect a URL names.
// A handful live at a time, for a whole scenario: their sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum RawConn {
    /// PostgreSQL.
    Postgres(AsyncPgConnection),
    /// MySQL or MariaDB.
    Mysql(AsyncMysqlConnection),
    /// SQLite (a file, shared with the store's processes).
    Sqlite(SyncConnectionWrapper<SqliteConnection>),
}

impl std::fmt::Debug for RawConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawConn({})", self.dialect())
    }
}

/// Runs `$body` with `$conn` bound to the connection inside a [`RawConn`],
/// whatever its dialect: the same diesel code compiled for each.
macro_rules! each_conn {
    ($raw:expr, |$conn:ident| $body:expr) => {
        match $raw {
            $crate::sql::RawConn::Postgres($conn) => $body,
            $crate::sql::RawConn::Mysql($conn) => $body,
            $crate::sql::RawConn::Sqlite($conn) => $body,
        }
    };
}
pub(crate) use each_conn;

/// One `BIGINT` column `n`.
#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

impl RawConn {
    /// Connects to `url` (as [`flowstate_store_diesel::DieselStore::open`]
    /// reads it); SQLite waits up to ten seconds on a locked file.
    pub async fn connect(url: &str) -> Result<Self> {
        let parsed = DatabaseUrl::parse(url)?;
        let conn = match parsed.dialect {
            Dialect::Postgres => Self::Postgres(
                AsyncPgConnection::establish(&parsed.target)
                    .await
                    .with_context(|| format!("connect to {}", parsed.target))?,
            ),
            Dialect::Mysql => Self::Mysql(
                AsyncMysqlConnection::establish(&parsed.target)
                    .await
                    .with_context(|| format!("connect to {}", parsed.target))?,
            ),
            Dialect::Sqlite => {
                let mut conn = SyncConnectionWrapper::<SqliteConnection>::establish(&parsed.target)
                    .await
                    .with_context(|| format!("open {}", parsed.target))?;
                conn.batch_execute("PRAGMA busy_timeout = 10000")
                    .await
                    .context("set the busy timeout")?;
                Self::Sqlite(conn)
            }
        };
        Ok(conn)
    }

    /// Its dialect.
    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Postgres(_) => Dialect::Postgres,
            Self::Mysql(_) => Dialect::Mysql,
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Runs SQL text with no binds.
    pub async fn run_sql(&mut self, sql: &str) -> diesel::QueryResult<()> {
        each_conn!(self, |conn| conn.batch_execute(sql).await)
    }

    /// Runs `sql`, a query answering one `BIGINT` column `n` in one row
    /// (`SELECT COUNT(*) AS n ...`).
    pub async fn count(&mut self, sql: &str) -> Result<u64> {
        let query = diesel::sql_query(sql);
        let counted: Count = each_conn!(self, |conn| query.get_result(conn).await)
            .with_context(|| format!("count: {sql}"))?;
        Ok(u64::try_from(counted.n)?)
    }

    /// Runs `sql`, a query answering one `BIGINT` column `n` per row.
    pub async fn numbers(&mut self, sql: &str) -> Result<Vec<i64>> {
        let query = diesel::sql_query(sql);
        let rows: Vec<Count> = each_conn!(self, |conn| query.load(conn).await)
            .with_context(|| format!("query: {sql}"))?;
        Ok(rows.into_iter().map(|row| row.n).collect())
    }
}

/// Refuses a database name that is not `[a-z0-9_]+` (names are spliced
/// into `CREATE DATABASE`).
pub fn check_identifier(name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        bail!("{name:?} is not a plain lower-case identifier");
    }
    Ok(())
}
