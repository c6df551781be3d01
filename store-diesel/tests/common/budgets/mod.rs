//! The statement budgets of DESIGN.md: one scenario per port family
//! ([`steps`], [`events`], [`leases`], [`recovery`], [`virtual_users`],
//! [`retention`]), each
//! run through a logged [`DieselStore`](flowstate_store_diesel::DieselStore)
//! and compared exactly with its rows of the one [`table`]: per operation,
//! the first word of every statement it sends.

pub mod events;
pub mod leases;
pub mod recovery;
pub mod retention;
pub mod steps;
pub mod table;
pub mod virtual_users;

use std::sync::Arc;

use flowstate_store_diesel::{Dialect, DieselStore, StatementLog, StoreConfig};

use super::db::TestDb;

/// One row of a budget table: an operation and the first word of each
/// statement it sends, in order.
pub type Budget = (&'static str, &'static [&'static str]);

/// What a budget scenario sent: each operation and its statements.
pub type Sent = Vec<(&'static str, Vec<String>)>;

/// Defines, in the scenario that calls it, `capture!(op, call)` (run
/// `call` under `log`, push its statements to `sent` as `op`, answer its
/// `Ok` or panic) and `refused!(op, call)` (the same for a call that must
/// fail). `$d` is a `$`, which the inner macros need for their own
/// variables: `recorder!($, sent, log)`.
macro_rules! recorder {
    ($d:tt, $sent:ident, $log:ident) => {
        #[allow(unused_macros)]
        macro_rules! capture {
                            ($d op:literal, $d call:expr) => {{
                                let (out, statements) = $log.capture($d call).await;
                                $sent.push(($d op, statements));
                                out.unwrap_or_else(|err| panic!("{}: {err}", $d op))
                            }};
                        }
        #[allow(unused_macros)]
        macro_rules! refused {
                            ($d op:literal, $d call:expr) => {{
                                let (out, statements) = $log.capture($d call).await;
                                $sent.push(($d op, statements));
                                assert!(out.is_err(), "{} should be refused: {out:?}", $d op);
                            }};
                        }
    };
}
pub(crate) use recorder;

/// Runs `scenario` through a store on a fresh, migrated `dialect` database
/// that logs every statement into the log it is handed, then drops the
/// database; answers what each operation sent.
pub async fn run_scenario(
    dialect: Dialect,
    scenario: impl AsyncFnOnce(&DieselStore, &Arc<StatementLog>) -> Sent,
) -> Sent {
    let db = TestDb::migrated(dialect).await;
    let log = StatementLog::new();
    let store = db
        .store(StoreConfig::default().statement_log(log.clone()))
        .await;
    let sent = scenario(&store, &log).await;
    drop(store);
    db.drop_database().await;
    sent
}

/// Runs `scenario` ([`run_scenario`]) and checks what it sent against
/// `table` ([`assert_budgets`]); `what` names the table in a failure.
pub async fn check_scenario(
    dialect: Dialect,
    what: &str,
    table: &[Budget],
    scenario: impl AsyncFnOnce(&DieselStore, &Arc<StatementLog>) -> Sent,
) {
    let sent = Box::pin(run_scenario(dialect, scenario)).await;
    assert_budgets(dialect, what, table, &sent);
}

/// Asserts that every operation of `sent` sent exactly the statements
/// `table` lists for it (their first words, in order), and that `table`
/// names only operations that ran; the panic lists every difference.
/// `what` names the table in the message.
pub fn assert_budgets(
    dialect: Dialect,
    what: &str,
    table: &[Budget],
    sent: &[(&'static str, Vec<String>)],
) {
    let mut problems = Vec::new();
    for (op, statements) in sent {
        let verbs: Vec<&str> = statements
            .iter()
            // A compound query's first part may be parenthesised
            // (MySQL's run claim pick: `(SELECT ...) UNION ALL (SELECT
            // ...)`): its verb is the part's.
            .map(|s| {
                s.trim_start_matches('(')
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
            })
            .collect();
        match table.iter().find(|(name, _)| name == op) {
            None => problems.push(format!("{op}: not in the table; sent {verbs:?}")),
            Some((_, expected)) if *expected != verbs.as_slice() => {
                problems.push(format!("{op}: expected {expected:?}, sent {statements:#?}"));
            }
            Some(_) => {}
        }
    }
    for (name, _) in table {
        if !sent.iter().any(|(op, _)| op == name) {
            problems.push(format!("{name}: in the table but not run"));
        }
    }
    assert!(
        problems.is_empty(),
        "{dialect} {what} budgets:\n{}",
        problems.join("\n")
    );
}
