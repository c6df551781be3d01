//! [`SharedDb`]: a fresh, migrated database of a scenario's own on the
//! machine's shared servers (`FLOWSTATE_PG_URL`, `FLOWSTATE_MYSQL_URL`, by
//! default 127.0.0.1:5432 and :3306) or an SQLite file in a temp directory,
//! with the ledger's tables, dropped when the scenario is done (on a panic
//! too). Only scenarios that neither kill nor restart anything use it; the
//! shared servers are never reconfigured.
//!
//! Adapted from store-diesel's test helper `tests/common/db.rs` (test code
//! of another crate, which cannot be imported).

use anyhow::{Context as _, Result};
use diesel_async::{AsyncConnection as _, SimpleAsyncConnection as _};
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};

use crate::process::ScratchDir;

/// One scenario's database; dropping it drops the database.
#[derive(Debug)]
pub struct SharedDb {
    /// Its dialect.
    pub dialect: Dialect,
    /// Its name (`fst_<32 hex>`).
    pub name: String,
    /// Its URL, as `DieselStore::open` takes it.
    pub url: String,
    /// The directory holding an SQLite database.
    _dir: Option<ScratchDir>,
}

/// The shared server's URL (no database) for a server dialect.
pub fn server_url(dialect: Dialect) -> String {
    let (var, default) = match dialect {
        Dialect::Postgres => ("FLOWSTATE_PG_URL", "postgres://postgres@127.0.0.1:5432"),
        Dialect::Mysql => ("FLOWSTATE_MYSQL_URL", "mysql://root@127.0.0.1:3306"),
        Dialect::Sqlite => unreachable!("SQLite has no server"),
    };
    let url = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    let (scheme, rest) = url.split_once("://").unwrap_or(("", &url));
    let host = rest.split(['/', '?']).next().unwrap_or(rest);
    format!("{scheme}://{host}")
}

impl SharedDb {
    /// A new database with flowstate's schema and the ledger's tables.
    pub async fn migrated(dialect: Dialect) -> Result<Self> {
        let db = Self::empty(dialect).await?;
        flowstate_store_diesel::migrate::up(&db.url)
            .await
            .with_context(|| format!("migrate {}", db.url))?;
        crate::ledger::create(&db.url).await?;
        Ok(db)
    }

    /// A new database with no table at all: for scenarios that migrate it
    /// themselves.
    pub async fn empty(dialect: Dialect) -> Result<Self> {
        let name = format!("fst_{}", uuid::Uuid::now_v7().simple());
        let (url, dir) = match dialect {
            Dialect::Sqlite => {
                let dir = ScratchDir::new("sqlite", None)?;
                let url = format!(
                    "sqlite://{}",
                    dir.path().join(format!("{name}.db")).display()
                );
                (url, Some(dir))
            }
            server => {
                admin_execute(server, &format!("CREATE DATABASE {name}")).await?;
                (format!("{}/{name}", server_url(server)), None)
            }
        };
        Ok(Self {
            dialect,
            name,
            url,
            _dir: dir,
        })
    }

    /// A store on it.
    pub async fn store(&self, config: StoreConfig) -> Result<DieselStore> {
        DieselStore::open(&self.url, config)
            .await
            .with_context(|| format!("open {}", self.url))
    }
}

impl Drop for SharedDb {
    fn drop(&mut self) {
        let sql = match self.dialect {
            // The scratch directory goes with the file.
            Dialect::Sqlite => return,
            Dialect::Postgres => format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            Dialect::Mysql => format!("DROP DATABASE IF EXISTS {}", self.name),
        };
        let dialect = self.dialect;
        // Drop runs inside the test's runtime: a thread of its own with a
        // runtime of its own does the async drop.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(admin_execute(dialect, &sql))
        })
        .join();
        if let Ok(Err(err)) = dropped {
            eprintln!("cannot drop {}: {err:#}", self.name);
        }
    }
}

/// Runs `sql` on the shared server's admin database.
async fn admin_execute(dialect: Dialect, sql: &str) -> Result<()> {
    let server = server_url(dialect);
    let hint = "start it, or point FLOWSTATE_PG_URL / FLOWSTATE_MYSQL_URL at a server";
    match dialect {
        Dialect::Postgres => {
            let url = format!("{server}/postgres");
            let mut conn = AsyncPgConnection::establish(&url)
                .await
                .with_context(|| format!("cannot reach PostgreSQL at {url}: {hint}"))?;
            conn.batch_execute(sql).await.context(sql.to_owned())
        }
        Dialect::Mysql => {
            let mut conn = AsyncMysqlConnection::establish(&server)
                .await
                .with_context(|| format!("cannot reach MySQL at {server}: {hint}"))?;
            conn.batch_execute(sql).await.context(sql.to_owned())
        }
        Dialect::Sqlite => unreachable!("SQLite has no server"),
    }
}
