//! What the SQLite-only tests share: a database file per test, addressed
//! by path and removed on drop, and a bounded wait for something that must
//! happen.

use std::path::PathBuf;
use std::sync::Arc;

use flowstate_store_diesel::{DieselStore, StatementLog, StoreConfig};

/// The flowstate tables, in the order SCHEMA.md lists them.
pub const TABLES: [&str; 15] = [
    "flowstate_effects",
    "flowstate_runs",
    "flowstate_run_signals",
    "flowstate_run_state",
    "flowstate_steps",
    "flowstate_step_history",
    "flowstate_workflow_versions",
    "flowstate_virtual_user_schedules",
    "flowstate_virtual_user_runs",
    "flowstate_virtual_user_transcript",
    "flowstate_workflows",
    "flowstate_published_versions",
    "flowstate_activations",
    "flowstate_events",
    "flowstate_event_deliveries",
];

/// A database file under the temp dir, removed (with its WAL files) on drop.
#[derive(Debug)]
pub struct TestDb {
    /// The file's path.
    pub path: PathBuf,
}

impl TestDb {
    /// A new, empty, migrated database file `fst_<32 hex>.db`.
    pub async fn migrated() -> Self {
        let db = Self::empty();
        let applied = flowstate_store_diesel::migrate::up(&db.url())
            .await
            .unwrap_or_else(|err| panic!("cannot migrate {}: {err}", db.url()));
        assert_eq!(
            applied,
            crate::common::db::migration_versions(flowstate_store_diesel::Dialect::Sqlite),
            "a fresh database gets every migration"
        );
        db
    }

    /// A new database file name that nothing has created yet.
    pub fn empty() -> Self {
        let dir = std::env::temp_dir().join("flowstate-sqlite-tests");
        std::fs::create_dir_all(&dir).expect("cannot create the test database directory");
        let name = format!("fst_{}.db", uuid::Uuid::now_v7().simple());
        Self {
            path: dir.join(name),
        }
    }

    /// The `sqlite://` URL of the file.
    pub fn url(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }

    /// The file's path as text.
    pub fn target(&self) -> String {
        self.path.display().to_string()
    }

    /// A store on this file with `config`.
    pub async fn store(&self, config: StoreConfig) -> DieselStore {
        DieselStore::open(&self.url(), config)
            .await
            .unwrap_or_else(|err| panic!("cannot open {}: {err}", self.target()))
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.path.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A migrated database and a store on it recording every statement in the
/// returned log.
pub async fn logged_store() -> (TestDb, DieselStore, Arc<StatementLog>) {
    let db = TestDb::migrated().await;
    let log = StatementLog::new();
    let store = db
        .store(StoreConfig::default().statement_log(log.clone()))
        .await;
    (db, store, log)
}

/// How many times [`eventually`] looks before it gives up.
const LOOKS: u32 = 3_000;

/// Waits for `done` to hold, looking every 10 ms, and panics naming `what`
/// if it still does not after 30 s: a bound on something that must happen
/// (a hang guard), not a timing check.
pub async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..LOOKS {
        if done().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}
