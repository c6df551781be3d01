//! PostgreSQL's statement budgets, one row per operation (see
//! `common::budgets`).

use flowstate_store_diesel::Dialect;

use crate::common::budgets::{Budget, check};
use crate::common::lease_budgets::check_leases;

/// What each operation sends on PostgreSQL.
const BUDGETS: &[Budget] = &[
    ("create_run", &["INSERT"]),
    ("create_run keyed", &["INSERT"]),
    ("create_run keyed again", &["INSERT", "SELECT"]),
    ("insert_step", &["WITH"]),
    ("insert_step again", &["WITH", "SELECT"]),
    ("claim won", &["WITH"]),
    ("claim lost", &["WITH"]),
    ("claim mismatch", &["WITH"]),
    ("claim unknown", &["WITH"]),
    ("transition succeeded", &["WITH"]),
    ("transition refused", &["WITH"]),
    ("transition failed", &["WITH"]),
    ("claim retry", &["WITH"]),
    ("create_retry_attempt", &["WITH"]),
    ("transition scheduled", &["WITH"]),
    ("get_step", &["SELECT"]),
    ("find_step", &["SELECT"]),
    ("list_steps", &["SELECT"]),
    ("list_steps unknown run", &["SELECT"]),
    ("step_history", &["SELECT"]),
    ("write_state", &["INSERT"]),
    ("read_state", &["SELECT"]),
    ("set_branch_taken", &["UPDATE"]),
    ("set_run_status", &["UPDATE"]),
    ("upsert_version", &["INSERT"]),
    ("get_run", &["SELECT"]),
    ("delete_run", &["DELETE"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_sends_its_budget() {
    check(Dialect::Postgres, BUDGETS).await;
}

/// What each lease operation sends on Postgres.
const LEASE_BUDGETS: &[Budget] = &[
    // One statement, win or lose: the cancel sweep and the claim are one CTE.
    ("claim_run", &["WITH"]),
    ("claim_runs", &["WITH"]),
    ("claim_run none", &["WITH"]),
    ("renew", &["UPDATE"]),
    ("renew lost", &["UPDATE", "SELECT"]),
    ("release failure", &["UPDATE"]),
    ("release yield", &["UPDATE"]),
    ("finish", &["UPDATE"]),
    ("request_cancel", &["UPDATE"]),
    ("lease_state", &["SELECT"]),
    ("signal", &["INSERT"]),
    ("wait", &["UPDATE"]),
    ("wake_expired", &["UPDATE"]),
    ("take_signal", &["DELETE"]),
    ("take_signal none", &["DELETE", "SELECT"]),
    ("create_children", &["INSERT", "SELECT"]),
    ("create_children again", &["INSERT", "SELECT"]),
    ("begin_effect", &["INSERT", "SELECT"]),
    ("settle_effect", &["UPDATE"]),
    ("begin_effect replayed", &["INSERT", "SELECT"]),
    ("stranded_effects", &["SELECT"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lease_operation_sends_its_budget() {
    check_leases(Dialect::Postgres, LEASE_BUDGETS).await;
}
