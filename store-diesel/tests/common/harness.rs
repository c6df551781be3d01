//! [`DieselHarness`]: the conformance suite's view of a [`DieselStore`] on a
//! database of its own, read through a `ManualClock`: the type users open
//! is the type the suite runs through, on every dialect.

use std::sync::Arc;

use flowstate_core::{RunId, StepId};
use flowstate_store_diesel::{Dialect, DieselStore, LeaseClockOffset, StoreConfig};
use flowstate_testkit::{Harness, Hooks, LeaseHarness, ManualClock, Pick, RowCounts, SkewedClock};

use super::db::TestDb;

/// Connections the race cases (32 tasks at once) need open so they race
/// rather than queue on connection setup.
const CONNECTIONS: usize = 34;

/// A store on a fresh database, its clock and the database.
pub struct DieselHarness {
    store: Arc<DieselStore>,
    clock: Arc<ManualClock>,
    db: TestDb,
    /// The lease clock offset every store of this harness shares.
    lease_offset: LeaseClockOffset,
}

impl DieselHarness {
    /// A fresh migrated database of `dialect` and a store on it with every
    /// pooled connection already open.
    pub async fn create(dialect: Dialect) -> Self {
        let db = TestDb::migrated(dialect).await;
        let clock = Arc::new(ManualClock::new());
        // One clock, as the memory store has: leases, claim deadlines and
        // idleness are measured on the database's clock moved to read the
        // harness clock, so a case that moves the clock moves them too.
        let lease_offset = LeaseClockOffset::following(clock.clone());
        let config = StoreConfig::default()
            .pool_size(CONNECTIONS)
            .clock(clock.clone())
            .lease_clock_offset(lease_offset.clone());
        let store = db.store(config).await;
        let opening: Vec<_> = (0..CONNECTIONS)
            .map(|_| store.reserve_connection())
            .collect();
        for held in futures_util::future::join_all(opening).await {
            drop(held.expect("open a pooled connection"));
        }
        Self {
            store: Arc::new(store),
            clock,
            db,
            lease_offset,
        }
    }
}

impl Harness for DieselHarness {
    type Store = DieselStore;

    fn store(&self) -> &Arc<DieselStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    async fn teardown(self) {
        drop(self.store);
        self.db.drop_database().await;
    }
}

impl Hooks for DieselHarness {
    async fn delete_history_row(&self, step: StepId, attempt: u32) {
        // `step` is a uuid and `attempt` a number: nothing to escape.
        let sql = format!(
            "DELETE FROM flowstate_step_history WHERE step_id = '{step}' AND attempt = {attempt}"
        );
        let deleted = self.db.execute(&sql).await;
        assert_eq!(
            deleted, 1,
            "no history row for attempt {attempt} of step {step}"
        );
    }

    async fn fail_history_writes(&self, fail: bool) {
        for sql in history_fault(self.db.dialect, fail) {
            self.db.execute(sql).await;
        }
    }

    async fn fail_history_writes_of(&self, step: Option<StepId>) {
        for sql in history_fault_of(self.db.dialect, step) {
            self.db.execute(&sql).await;
        }
    }

    async fn abort_after_pick(&self, pick: Option<Pick>) {
        for sql in abort_after_pick(self.db.dialect, pick) {
            self.db.execute(&sql).await;
        }
    }

    async fn count_rows(&self, run: RunId, steps: &[StepId]) -> RowCounts {
        // Ids are uuids: nothing to escape.
        let steps: Vec<String> = steps.iter().map(|s| format!("'{s}'")).collect();
        let history = if steps.is_empty() {
            0
        } else {
            let sql = format!(
                "SELECT COUNT(*) AS n FROM flowstate_step_history WHERE step_id IN ({})",
                steps.join(", ")
            );
            self.db.count(&sql).await
        };
        let of_run =
            |table: &str| format!("SELECT COUNT(*) AS n FROM {table} WHERE run_id = '{run}'");
        let count = |n: i64| u64::try_from(n).expect("a count");
        RowCounts {
            steps: count(self.db.count(&of_run("flowstate_steps")).await),
            history: count(history),
            state: count(self.db.count(&of_run("flowstate_run_state")).await),
        }
    }
}

/// The SQL that makes every insert and update of a history row raise (a
/// trigger per dialect), or that drops it again: a fault inside the store's
/// own statement or transaction, for the atomicity cases.
fn history_fault(dialect: Dialect, fail: bool) -> &'static [&'static str] {
    match (dialect, fail) {
        (Dialect::Postgres, true) => &[
            "CREATE FUNCTION fst_fail_history() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'history writes fail (test fault)'; END $$",
            "CREATE TRIGGER fst_fail_history BEFORE INSERT OR UPDATE ON flowstate_step_history \
             FOR EACH ROW EXECUTE FUNCTION fst_fail_history()",
        ],
        (Dialect::Postgres, false) => &[
            "DROP TRIGGER fst_fail_history ON flowstate_step_history",
            "DROP FUNCTION fst_fail_history()",
        ],
        (Dialect::Mysql, true) => &[
            "CREATE TRIGGER fst_fail_history_insert BEFORE INSERT ON flowstate_step_history \
             FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'history writes fail (test fault)'",
            "CREATE TRIGGER fst_fail_history_update BEFORE UPDATE ON flowstate_step_history \
             FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'history writes fail (test fault)'",
        ],
        (Dialect::Sqlite, true) => &[
            "CREATE TRIGGER fst_fail_history_insert BEFORE INSERT ON flowstate_step_history \
             BEGIN SELECT RAISE(ABORT, 'history writes fail (test fault)'); END",
            "CREATE TRIGGER fst_fail_history_update BEFORE UPDATE ON flowstate_step_history \
             BEGIN SELECT RAISE(ABORT, 'history writes fail (test fault)'); END",
        ],
        (Dialect::Mysql | Dialect::Sqlite, false) => &[
            "DROP TRIGGER fst_fail_history_insert",
            "DROP TRIGGER fst_fail_history_update",
        ],
    }
}

/// The SQL that makes every insert and update of a history row of `step`
/// raise (a trigger per dialect whose condition names the step), or with
/// `None` drops it again: a fault that strikes one step of a call writing
/// many, for the atomicity cases of batches and expiries.
fn history_fault_of(dialect: Dialect, step: Option<StepId>) -> Vec<String> {
    const MESSAGE: &str = "history writes of one step fail (test fault)";
    // `step` is a uuid: nothing to escape.
    match (dialect, step) {
        (Dialect::Postgres, Some(step)) => vec![
            format!(
                "CREATE FUNCTION fst_fail_history_of() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION '{MESSAGE}'; END $$"
            ),
            format!(
                "CREATE TRIGGER fst_fail_history_of BEFORE INSERT OR UPDATE \
                 ON flowstate_step_history FOR EACH ROW WHEN (NEW.step_id = '{step}') \
                 EXECUTE FUNCTION fst_fail_history_of()"
            ),
        ],
        (Dialect::Postgres, None) => vec![
            "DROP TRIGGER fst_fail_history_of ON flowstate_step_history".to_owned(),
            "DROP FUNCTION fst_fail_history_of()".to_owned(),
        ],
        (Dialect::Mysql, Some(step)) => ["INSERT", "UPDATE"]
            .iter()
            .map(|event| {
                format!(
                    "CREATE TRIGGER fst_fail_history_of_{} BEFORE {event} \
                     ON flowstate_step_history FOR EACH ROW BEGIN \
                     IF NEW.step_id = '{step}' THEN \
                     SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{MESSAGE}'; END IF; END",
                    event.to_lowercase()
                )
            })
            .collect(),
        (Dialect::Sqlite, Some(step)) => ["INSERT", "UPDATE"]
            .iter()
            .map(|event| {
                format!(
                    "CREATE TRIGGER fst_fail_history_of_{} BEFORE {event} \
                     ON flowstate_step_history WHEN NEW.step_id = '{step}' \
                     BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END",
                    event.to_lowercase()
                )
            })
            .collect(),
        (Dialect::Mysql | Dialect::Sqlite, None) => vec![
            "DROP TRIGGER fst_fail_history_of_insert".to_owned(),
            "DROP TRIGGER fst_fail_history_of_update".to_owned(),
        ],
    }
}

/// The name of the trigger (and, on PostgreSQL, of its function and of
/// the sequence that counts its strikes) of [`abort_after_pick`].
const ABORT: &str = "fst_abort_after_pick";

/// The SQL that makes the first update of a row of `pick`'s table abort
/// its statement with the dialect's conflict error, after the call has
/// picked (a trigger per dialect), or with `None` drops it again: a
/// transaction that dies between its pick and its write, as a Galera
/// node's does when another node's commit aborts it.
///
/// - PostgreSQL: 40001 (`serialization_failure`), raised only while a
///   sequence, which a rollback does not take back, first counts: once.
/// - MySQL: 1213 (`ER_LOCK_DEADLOCK`, SQLSTATE 40001, Galera's own error
///   for an abort), raised once per connection: a session variable, which
///   a rollback does not take back either, remembers this fault's
///   generation (a fresh uuid per call), and a store runs an aborted
///   transaction again on the same connection.
/// - SQLite: its busy error's text ("database is locked"), the only way
///   another writer ends a transaction there, on every update until
///   dropped: a trigger's writes roll back with the transaction it
///   aborts, and the store runs no transaction again itself.
fn abort_after_pick(dialect: Dialect, pick: Option<Pick>) -> Vec<String> {
    const MESSAGE: &str = "the transaction was aborted after its pick (test fault)";
    let Some(pick) = pick else {
        return match dialect {
            Dialect::Postgres => Pick::ALL
                .iter()
                .map(|p| format!("DROP TRIGGER IF EXISTS {ABORT} ON {}", p.table()))
                .chain([
                    format!("DROP FUNCTION IF EXISTS {ABORT}()"),
                    format!("DROP SEQUENCE IF EXISTS {ABORT}"),
                ])
                .collect(),
            Dialect::Mysql | Dialect::Sqlite => vec![format!("DROP TRIGGER IF EXISTS {ABORT}")],
        };
    };
    let table = pick.table();
    match dialect {
        Dialect::Postgres => vec![
            format!("CREATE SEQUENCE {ABORT}"),
            format!(
                "CREATE FUNCTION {ABORT}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF nextval('{ABORT}') = 1 THEN \
                 RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = '40001'; END IF; \
                 RETURN NEW; END $$"
            ),
            format!(
                "CREATE TRIGGER {ABORT} BEFORE UPDATE ON {table} \
                 FOR EACH ROW EXECUTE FUNCTION {ABORT}()"
            ),
        ],
        Dialect::Mysql => {
            let generation = uuid::Uuid::now_v7().simple();
            vec![format!(
                "CREATE TRIGGER {ABORT} BEFORE UPDATE ON {table} FOR EACH ROW BEGIN \
                 IF @{ABORT} IS NULL OR @{ABORT} <> '{generation}' THEN \
                 SET @{ABORT} = '{generation}'; \
                 SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, \
                 MESSAGE_TEXT = 'Deadlock found when trying to get lock; {MESSAGE}'; \
                 END IF; END"
            )]
        }
        Dialect::Sqlite => vec![format!(
            "CREATE TRIGGER {ABORT} BEFORE UPDATE ON {table} \
             BEGIN SELECT RAISE(ABORT, 'database is locked ({MESSAGE})'); END"
        )],
    }
}

impl LeaseHarness for DieselHarness {
    async fn advance_lease_clock(&self, by: std::time::Duration) {
        self.lease_offset.advance(by);
    }

    async fn skewed_store(&self, skew_micros: i64) -> Arc<DieselStore> {
        let clock = Arc::new(SkewedClock::new(self.clock.clone(), skew_micros));
        let config = StoreConfig::default()
            .pool_size(4)
            .clock(clock)
            .lease_clock_offset(self.lease_offset.clone());
        Arc::new(self.db.store(config).await)
    }
}
