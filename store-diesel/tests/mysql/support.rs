//! What the MySQL tests share: a fresh database per test on the server
//! `FLOWSTATE_MYSQL_URL` names, a store on it, and the conformance harness.

use std::future::Future;
use std::sync::Arc;

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::StepId;
use flowstate_store_diesel::StoreConfig;
use flowstate_store_diesel::mysql::MysqlStore;
use flowstate_testkit::{Harness, ManualClock};

/// The server the tests use, without a database.
pub fn server_url() -> String {
    let url = std::env::var("FLOWSTATE_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned());
    // Keep scheme, credentials and host; drop any database path.
    let (scheme, rest) = url
        .split_once("://")
        .expect("FLOWSTATE_MYSQL_URL is not a URL");
    let host = rest.split(['/', '?']).next().unwrap_or(rest);
    format!("{scheme}://{host}")
}

/// A database of its own for one test, dropped by [`TestDb::drop_database`].
#[derive(Debug)]
pub struct TestDb {
    /// The URL of the database.
    pub url: String,
    /// Its name, `fst_<32 hex>`.
    pub name: String,
}

impl TestDb {
    /// Creates an empty database (no schema).
    pub async fn empty() -> Self {
        let server = server_url();
        let name = format!("fst_{}", uuid::Uuid::now_v7().simple());
        let mut admin = admin(&server).await;
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|err| panic!("cannot create database {name} on {server}: {err}"));
        Self {
            url: format!("{server}/{name}"),
            name,
        }
    }

    /// Creates a database with the schema applied.
    pub async fn migrated() -> Self {
        let db = Self::empty().await;
        let applied = flowstate_store_diesel::migrate::up(&db.url)
            .await
            .expect("migrate up");
        assert_eq!(applied.len(), 1, "a fresh database takes the one migration");
        db
    }

    /// Opens a store on this database.
    pub async fn store(&self, config: StoreConfig) -> MysqlStore {
        MysqlStore::connect(&self.url, config)
            .await
            .unwrap_or_else(|err| panic!("cannot open a store on {}: {err}", self.url))
    }

    /// A connection of its own to this database, outside any store.
    pub async fn connection(&self) -> AsyncMysqlConnection {
        admin(&self.url).await
    }

    /// Drops the database.
    pub async fn drop_database(self) {
        let mut admin = admin(&server_url()).await;
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {}", self.name))
            .await
            .expect("drop database");
    }
}

async fn admin(url: &str) -> AsyncMysqlConnection {
    AsyncMysqlConnection::establish(url).await.unwrap_or_else(|err| {
        panic!(
            "cannot reach the MySQL/MariaDB server at {url} ({err}); start it or set FLOWSTATE_MYSQL_URL"
        )
    })
}

/// One column of text, for ad-hoc reads.
#[derive(Debug, diesel::QueryableByName)]
pub struct TextRow {
    /// `v`
    #[diesel(sql_type = Text)]
    pub v: String,
}

/// One count, for ad-hoc reads.
#[derive(Debug, diesel::QueryableByName)]
pub struct CountRow {
    /// `n`
    #[diesel(sql_type = BigInt)]
    pub n: i64,
}

/// Runs `sql` (a query selecting `n`) on `conn`.
pub async fn count(conn: &mut AsyncMysqlConnection, sql: &str) -> i64 {
    diesel::sql_query(sql)
        .get_result::<CountRow>(conn)
        .await
        .expect(sql)
        .n
}

/// The conformance harness: a fresh migrated database and a store on it
/// reading a [`ManualClock`].
pub struct MysqlHarness {
    db: TestDb,
    store: Arc<MysqlStore>,
    clock: Arc<ManualClock>,
}

impl MysqlHarness {
    /// A harness on a fresh database.
    pub async fn create() -> Self {
        let db = TestDb::migrated().await;
        let clock = Arc::new(ManualClock::new());
        let config = StoreConfig::default().pool_size(16).clock(clock.clone());
        let store = Arc::new(db.store(config).await);
        Self { db, store, clock }
    }
}

impl Harness for MysqlHarness {
    type Store = MysqlStore;

    fn store(&self) -> &Arc<MysqlStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    fn delete_history_row(&self, step: StepId, attempt: u32) -> impl Future<Output = ()> + Send {
        let store = Arc::clone(&self.store);
        async move {
            let mut conn = store
                .pool()
                .get("delete_history_row")
                .await
                .expect("a connection");
            let deleted = diesel::sql_query(
                "DELETE FROM flowstate_step_history WHERE step_id = ? AND attempt = ?",
            )
            .bind::<Text, _>(step.to_string())
            .bind::<BigInt, _>(i64::from(attempt))
            .execute(&mut *conn)
            .await
            .expect("delete history row");
            assert_eq!(
                deleted, 1,
                "no history row for attempt {attempt} of step {step}"
            );
        }
    }

    async fn teardown(self) {
        drop(self.store);
        self.db.drop_database().await;
    }
}

/// Every row of every flowstate table, as text: equal dumps mean nothing
/// was written.
pub async fn dump(conn: &mut AsyncMysqlConnection) -> Vec<String> {
    const TABLES: [&str; 5] = [
        "SELECT CONCAT_WS('|', 'run', id, workflow, status, input, graph_hash, parent_id, idempotency_key, \
         created_at, updated_at) AS v FROM flowstate_runs ORDER BY id",
        "SELECT CONCAT_WS('|', 'state', run_id, state_key, value) AS v FROM flowstate_run_state \
         ORDER BY run_id, state_key",
        "SELECT CONCAT_WS('|', 'step', id, run_id, name, function_name, status, input, result, error, \
         current_attempt, retries, retry_delay_ms, branch_taken, created_at, updated_at) AS v \
         FROM flowstate_steps ORDER BY id",
        "SELECT CONCAT_WS('|', 'history', id, step_id, attempt, status, result, error, created_at, \
         scheduled_at, running_at, succeeded_at, failed_at) AS v FROM flowstate_step_history ORDER BY id",
        "SELECT CONCAT_WS('|', 'version', id, workflow, graph_hash, graph, created_at) AS v \
         FROM flowstate_workflow_versions ORDER BY id",
    ];
    let mut rows = Vec::new();
    for query in TABLES {
        let table = diesel::sql_query(query)
            .load::<TextRow>(conn)
            .await
            .expect(query);
        rows.extend(table.into_iter().map(|r| r.v));
    }
    rows
}
