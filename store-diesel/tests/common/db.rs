//! [`TestDb`]: a fresh, migrated database of its own for one test, on the
//! servers `FLOWSTATE_PG_URL` and `FLOWSTATE_MYSQL_URL` name (or a file
//! under the temp dir for SQLite), dropped when the test is done. A server
//! that does not answer fails the test: no backend is ever skipped.

use diesel::RunQueryDsl as _;
use diesel_async::{
    AsyncConnection, AsyncMysqlConnection, AsyncPgConnection, SimpleAsyncConnection,
};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};

/// The server URL (no database) for a server dialect.
pub fn server_url(dialect: Dialect) -> String {
    let (var, default) = match dialect {
        Dialect::Postgres => ("FLOWSTATE_PG_URL", "postgres://postgres@127.0.0.1:5432"),
        Dialect::Mysql => ("FLOWSTATE_MYSQL_URL", "mysql://root@127.0.0.1:3306"),
        Dialect::Sqlite => unreachable!("SQLite has no server"),
    };
    let url = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    let (scheme, rest) = url.split_once("://").expect("a server URL");
    let host = rest.split(['/', '?']).next().unwrap_or(rest);
    format!("{scheme}://{host}")
}

/// One test's database.
#[derive(Debug)]
pub struct TestDb {
    /// Its dialect.
    pub dialect: Dialect,
    /// Its name (`fst_<32 hex>`, a file name on SQLite).
    pub name: String,
    /// Its URL, as `DieselStore::open` takes it.
    pub url: String,
}

impl TestDb {
    /// A new, empty database.
    pub async fn empty(dialect: Dialect) -> Self {
        let name = format!("fst_{}", uuid::Uuid::now_v7().simple());
        let url = match dialect {
            Dialect::Sqlite => {
                let dir = std::env::temp_dir().join("flowstate-sqlite-tests");
                std::fs::create_dir_all(&dir).expect("the test database directory");
                format!("sqlite://{}", dir.join(format!("{name}.db")).display())
            }
            server => {
                admin_execute(server, &format!("CREATE DATABASE {name}")).await;
                format!("{}/{name}", server_url(server))
            }
        };
        Self { dialect, name, url }
    }

    /// A new database with the schema applied.
    pub async fn migrated(dialect: Dialect) -> Self {
        let db = Self::empty(dialect).await;
        let applied = flowstate_store_diesel::migrate::up(&db.url)
            .await
            .unwrap_or_else(|err| panic!("cannot migrate {}: {err}", db.url));
        assert!(!applied.is_empty(), "a fresh database gets every migration");
        db
    }

    /// A store on this database.
    pub async fn store(&self, config: StoreConfig) -> DieselStore {
        DieselStore::open(&self.url, config)
            .await
            .unwrap_or_else(|err| panic!("cannot open {}: {err}", self.url))
    }

    /// A store on this database with a pool of `connections`, every one of
    /// them opened before it is answered, so racers race rather than queue
    /// on connection setup.
    pub async fn warm_store(&self, config: StoreConfig, connections: usize) -> DieselStore {
        let store = self.store(config.pool_size(connections)).await;
        let opening: Vec<_> = (0..connections)
            .map(|_| store.reserve_connection())
            .collect();
        for held in futures_util::future::join_all(opening).await {
            drop(held.expect("open a pooled connection"));
        }
        store
    }

    /// Runs `sql` on a connection of its own, behind every store's back;
    /// answers the rows it affected.
    pub async fn execute(&self, sql: &str) -> usize {
        match self.dialect {
            Dialect::Postgres => {
                let mut conn = AsyncPgConnection::establish(&self.url)
                    .await
                    .expect("connect");
                diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), &mut conn)
                    .await
                    .unwrap_or_else(|err| panic!("{sql}: {err}"))
            }
            Dialect::Mysql => {
                let mut conn = AsyncMysqlConnection::establish(&self.url)
                    .await
                    .expect("connect");
                diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), &mut conn)
                    .await
                    .unwrap_or_else(|err| panic!("{sql}: {err}"))
            }
            Dialect::Sqlite => {
                use diesel::Connection;
                let path = self.url.trim_start_matches("sqlite://");
                let mut conn = diesel::SqliteConnection::establish(path).expect("open");
                diesel::sql_query(sql)
                    .execute(&mut conn)
                    .unwrap_or_else(|err| panic!("{sql}: {err}"))
            }
        }
    }

    /// Drops the database (best effort: CI drops every `fst_%` first).
    pub async fn drop_database(self) {
        match self.dialect {
            Dialect::Sqlite => {
                let path = self.url.trim_start_matches("sqlite://").to_owned();
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{path}{suffix}"));
                }
            }
            Dialect::Postgres => {
                admin_execute(
                    Dialect::Postgres,
                    &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
                )
                .await;
            }
            Dialect::Mysql => {
                admin_execute(
                    Dialect::Mysql,
                    &format!("DROP DATABASE IF EXISTS {}", self.name),
                )
                .await;
            }
        }
    }
}

/// Runs `sql` on the server's admin database; panics with a clear message
/// if the server cannot be reached.
async fn admin_execute(dialect: Dialect, sql: &str) {
    let server = server_url(dialect);
    let hint = "start it, or point FLOWSTATE_PG_URL / FLOWSTATE_MYSQL_URL at a server";
    match dialect {
        Dialect::Postgres => {
            let url = format!("{server}/postgres");
            let mut conn = AsyncPgConnection::establish(&url)
                .await
                .unwrap_or_else(|err| panic!("cannot reach PostgreSQL at {url} ({err}): {hint}"));
            conn.batch_execute(sql)
                .await
                .unwrap_or_else(|err| panic!("{sql}: {err}"));
        }
        Dialect::Mysql => {
            let mut conn = AsyncMysqlConnection::establish(&server)
                .await
                .unwrap_or_else(|err| panic!("cannot reach MySQL at {server} ({err}): {hint}"));
            conn.batch_execute(sql)
                .await
                .unwrap_or_else(|err| panic!("{sql}: {err}"));
        }
        Dialect::Sqlite => unreachable!("SQLite has no server"),
    }
}
