//! [`Throwaway`]: either throw-away server behind one face, so a scenario
//! is written once for PostgreSQL and MariaDB: start, a database with
//! flowstate's schema and the ledger, crash, restart, and ending every
//! session of a database from the server side.

use std::time::Duration;

use anyhow::{Result, bail};
use flowstate_store_diesel::Dialect;

use crate::mariadb::ThrowawayMariadb;
use crate::postgres::ThrowawayPostgres;
use crate::sql::RawConn;

/// A throw-away server of a server dialect.
#[derive(Debug)]
pub enum Throwaway {
    /// PostgreSQL.
    Postgres(ThrowawayPostgres),
    /// MariaDB.
    Mariadb(ThrowawayMariadb),
}

impl Throwaway {
    /// Starts one for `dialect` (not SQLite, which has no server).
    pub async fn start(dialect: Dialect) -> Result<Self> {
        Ok(match dialect {
            Dialect::Postgres => Self::Postgres(ThrowawayPostgres::start().await?),
            Dialect::Mysql => Self::Mariadb(ThrowawayMariadb::start().await?),
            Dialect::Sqlite => bail!("SQLite has no server to throw away"),
        })
    }

    /// Its dialect.
    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Postgres(_) => Dialect::Postgres,
            Self::Mariadb(_) => Dialect::Mysql,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        match self {
            Self::Postgres(server) => server.port(),
            Self::Mariadb(server) => server.port(),
        }
    }

    /// Creates database `name` with flowstate's schema and the ledger's
    /// tables; answers its URL.
    pub async fn migrated_database(&self, name: &str) -> Result<String> {
        let url = match self {
            Self::Postgres(server) => server.create_database(name).await?,
            Self::Mariadb(server) => server.create_database(name).await?,
        };
        flowstate_store_diesel::migrate::up(&url).await?;
        crate::ledger::create(&url).await?;
        Ok(url)
    }

    /// `url` with its port replaced by `port` (a proxy's).
    pub fn via_port(&self, url: &str, port: u16) -> String {
        url.replacen(&format!(":{}/", self.port()), &format!(":{port}/"), 1)
    }

    /// A crash: SIGKILL of the server.
    pub async fn kill(&mut self) {
        match self {
            Self::Postgres(server) => server.kill().await,
            Self::Mariadb(server) => server.kill().await,
        }
    }

    /// Starts it again on the same port and data; answers how long it took
    /// to accept connections.
    pub async fn restart(&mut self) -> Result<Duration> {
        match self {
            Self::Postgres(server) => server.restart().await,
            Self::Mariadb(server) => server.restart().await,
        }
    }

    /// Its temp directory.
    pub fn dir(&self) -> &std::path::Path {
        match self {
            Self::Postgres(server) => server.dir(),
            Self::Mariadb(server) => server.dir(),
        }
    }

    /// The server's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Self::Postgres(server) => server.pid(),
            Self::Mariadb(server) => server.pid(),
        }
    }

    /// The last lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        match self {
            Self::Postgres(server) => server.log_tail(lines),
            Self::Mariadb(server) => server.log_tail(lines),
        }
    }

    /// Ends every session connected to database `name` from the server
    /// side, as an administrator would (`pg_terminate_backend`, `KILL`);
    /// answers how many.
    pub async fn kill_sessions(&self, name: &str) -> Result<u64> {
        crate::sql::check_identifier(name)?;
        match self {
            Self::Postgres(server) => {
                let mut admin = RawConn::connect(&server.url("postgres")).await?;
                admin
                    .count(&format!(
                        "SELECT COUNT(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
                         WHERE datname = '{name}' AND pid <> pg_backend_pid()"
                    ))
                    .await
            }
            Self::Mariadb(server) => {
                let mut admin = RawConn::connect(&server.url("")).await?;
                let ids = admin
                    .numbers(&format!(
                        "SELECT CAST(id AS SIGNED) AS n FROM information_schema.processlist \
                         WHERE db = '{name}' AND id <> CONNECTION_ID()"
                    ))
                    .await?;
                let mut killed = 0;
                for id in ids {
                    // A session that ended on its own meanwhile is no error.
                    if admin.run_sql(&format!("KILL {id}")).await.is_ok() {
                        killed += 1;
                    }
                }
                Ok(killed)
            }
        }
    }
}
