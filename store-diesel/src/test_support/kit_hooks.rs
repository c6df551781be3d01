//! The conformance kit's hooks (`flowstate_testkit::Hooks`) on a SQL
//! database: the statements that reach behind every store's back (delete
//! a history row, make history writes fail, abort a call after its pick,
//! count a run's rows), per [`Dialect`], written once for every harness
//! that runs the kit on a [`DieselStore`](crate::DieselStore).
//!
//! A harness says how it reaches its database ([`HookDb`]: one
//! connection to one server, one directly past a pooler, one on another
//! node of a cluster that waits for every node to apply its DDL) and
//! stamps the hooks with [`impl_kit_hooks!`](crate::impl_kit_hooks):
//!
//! ```ignore
//! impl HookDb for CaseDb { /* dialect, execute, count (and ddl) */ }
//! flowstate_store_diesel::impl_kit_hooks!(MyHarness, db);
//! ```
//!
//! This crate does not depend on `flowstate-testkit` (its tests do): the
//! functions here take table names and answer [`RunRows`], and the macro,
//! expanded in the harness's crate, turns the kit's `Pick` and
//! `RowCounts` into them. Ids are uuids and attempts numbers, so nothing
//! in the SQL needs escaping.

use std::future::Future;

use flowstate_core::{RunId, StepId};

use crate::Dialect;

/// The name of the trigger (and, on PostgreSQL, of its function and of
/// the sequence that counts its strikes) of [`abort_after_pick`].
pub const ABORT_AFTER_PICK: &str = "fst_abort_after_pick";

/// The database behind a harness's stores, as its hooks reach it.
pub trait HookDb: Sync {
    /// The dialect its SQL is written in.
    fn dialect(&self) -> Dialect;

    /// Runs `sql` behind every store's back and answers the rows it
    /// affected; panics naming the statement if it fails.
    fn execute(&self, sql: &str) -> impl Future<Output = usize> + Send;

    /// Runs `sql`, a query answering one `BIGINT` column `n`, behind every
    /// store's back and answers `n`; panics naming the query if it fails.
    fn count(&self, sql: &str) -> impl Future<Output = u64> + Send;

    /// Runs the DDL `sql` (a hook's triggers), in order: by default each
    /// through [`HookDb::execute`]; a cluster also waits until every node
    /// has applied it.
    fn ddl(&self, sql: &[String]) -> impl Future<Output = ()> + Send {
        async move {
            for sql in sql {
                self.execute(sql).await;
            }
        }
    }
}

/// How many rows a run owns, counted behind the ports (what the kit's
/// `RowCounts` carries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunRows {
    /// Steps of the run.
    pub steps: u64,
    /// History rows of the steps asked about.
    pub history: u64,
    /// State keys of the run.
    pub state: u64,
}

/// `Hooks::delete_history_row`: deletes the history row of attempt
/// `attempt` of `step`; panics unless exactly one was deleted.
pub async fn delete_history_row<D: HookDb>(db: &D, step: StepId, attempt: u32) {
    let sql = format!(
        "DELETE FROM flowstate_step_history WHERE step_id = '{step}' AND attempt = {attempt}"
    );
    let deleted = db.execute(&sql).await;
    assert_eq!(
        deleted, 1,
        "no history row for attempt {attempt} of step {step}"
    );
}

/// `Hooks::fail_history_writes`: makes every insert and update of a
/// history row raise (a trigger per dialect), or with `fail` false drops
/// that again: a fault inside the store's own statement or transaction,
/// for the atomicity cases.
pub async fn fail_history_writes<D: HookDb>(db: &D, fail: bool) {
    db.ddl(&history_fault(db.dialect(), fail)).await;
}

/// `Hooks::fail_history_writes_of`: makes every insert and update of a
/// history row of `step` raise (a trigger per dialect whose condition
/// names the step), or with `None` drops that again: a fault that strikes
/// one step of a call writing many, for the atomicity cases of batches
/// and expiries.
pub async fn fail_history_writes_of<D: HookDb>(db: &D, step: Option<StepId>) {
    db.ddl(&history_fault_of(db.dialect(), step)).await;
}

/// `Hooks::abort_after_pick`: makes the first update of a row of `table`
/// (the kit's `Pick::table`) abort its statement with the dialect's
/// conflict error, after the call has picked (a trigger per dialect), or
/// with `None` drops that again, from whichever of `tables` (every
/// `Pick`'s) it is on: a transaction that dies between its pick and its
/// write, as a Galera node's does when another node's commit aborts it.
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
pub async fn abort_after_pick<D: HookDb>(db: &D, table: Option<&str>, tables: &[&str]) {
    db.ddl(&abort_after_pick_sql(db.dialect(), table, tables))
        .await;
}

/// `Hooks::count_rows`: the rows of `run` in `flowstate_steps` and
/// `flowstate_run_state`, and the history rows of `steps` (none asked, none
/// counted).
pub async fn count_rows<D: HookDb>(db: &D, run: RunId, steps: &[StepId]) -> RunRows {
    let steps: Vec<String> = steps.iter().map(|s| format!("'{s}'")).collect();
    let history = if steps.is_empty() {
        0
    } else {
        let sql = format!(
            "SELECT COUNT(*) AS n FROM flowstate_step_history WHERE step_id IN ({})",
            steps.join(", ")
        );
        db.count(&sql).await
    };
    let of_run = |table: &str| format!("SELECT COUNT(*) AS n FROM {table} WHERE run_id = '{run}'");
    RunRows {
        steps: db.count(&of_run("flowstate_steps")).await,
        history,
        state: db.count(&of_run("flowstate_run_state")).await,
    }
}

/// The SQL of [`fail_history_writes`].
fn history_fault(dialect: Dialect, fail: bool) -> Vec<String> {
    let sql: &[&str] = match (dialect, fail) {
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
    };
    sql.iter().map(|sql| (*sql).to_owned()).collect()
}

/// The SQL of [`fail_history_writes_of`].
fn history_fault_of(dialect: Dialect, step: Option<StepId>) -> Vec<String> {
    const MESSAGE: &str = "history writes of one step fail (test fault)";
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

/// The SQL of [`abort_after_pick`].
fn abort_after_pick_sql(dialect: Dialect, table: Option<&str>, tables: &[&str]) -> Vec<String> {
    const ABORT: &str = ABORT_AFTER_PICK;
    const MESSAGE: &str = "the transaction was aborted after its pick (test fault)";
    let Some(table) = table else {
        return match dialect {
            Dialect::Postgres => tables
                .iter()
                .map(|table| format!("DROP TRIGGER IF EXISTS {ABORT} ON {table}"))
                .chain([
                    format!("DROP FUNCTION IF EXISTS {ABORT}()"),
                    format!("DROP SEQUENCE IF EXISTS {ABORT}"),
                ])
                .collect(),
            Dialect::Mysql | Dialect::Sqlite => vec![format!("DROP TRIGGER IF EXISTS {ABORT}")],
        };
    };
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

/// Implements `flowstate_testkit::Hooks` for harness `$harness` on its
/// field `$db`, a [`HookDb`](crate::test_support::kit_hooks::HookDb):
/// every hook through [`kit_hooks`](crate::test_support::kit_hooks), the
/// kit's `Pick` and `RowCounts` turned into table names and back. Expanded
/// in a crate that depends on `flowstate-core` and `flowstate-testkit`.
#[macro_export]
macro_rules! impl_kit_hooks {
    ($harness:ty, $db:ident) => {
        impl ::flowstate_testkit::Hooks for $harness {
            async fn delete_history_row(&self, step: ::flowstate_core::StepId, attempt: u32) {
                $crate::test_support::kit_hooks::delete_history_row(&self.$db, step, attempt).await;
            }

            async fn fail_history_writes(&self, fail: bool) {
                $crate::test_support::kit_hooks::fail_history_writes(&self.$db, fail).await;
            }

            async fn fail_history_writes_of(
                &self,
                step: ::std::option::Option<::flowstate_core::StepId>,
            ) {
                $crate::test_support::kit_hooks::fail_history_writes_of(&self.$db, step).await;
            }

            async fn abort_after_pick(
                &self,
                pick: ::std::option::Option<::flowstate_testkit::Pick>,
            ) {
                $crate::test_support::kit_hooks::abort_after_pick(
                    &self.$db,
                    pick.map(::flowstate_testkit::Pick::table),
                    &::flowstate_testkit::Pick::ALL.map(::flowstate_testkit::Pick::table),
                )
                .await;
            }

            async fn count_rows(
                &self,
                run: ::flowstate_core::RunId,
                steps: &[::flowstate_core::StepId],
            ) -> ::flowstate_testkit::RowCounts {
                let rows = $crate::test_support::kit_hooks::count_rows(&self.$db, run, steps).await;
                ::flowstate_testkit::RowCounts {
                    steps: rows.steps,
                    history: rows.history,
                    state: rows.state,
                }
            }
        }
    };
}
