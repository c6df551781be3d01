//! MySQL's statement budgets, one row per operation (see
//! `common::budgets`).

use flowstate_store_diesel::Dialect;

use crate::common::budgets::{Budget, check};
use crate::common::lease_budgets::check_leases;
use crate::common::recovery_budgets::check_recovery;

/// What each operation sends on MySQL.
const BUDGETS: &[Budget] = &[
    ("create_run", &["INSERT"]),
    ("create_run keyed", &["INSERT", "SELECT"]),
    ("create_run keyed again", &["INSERT", "SELECT"]),
    (
        "insert_step",
        &["BEGIN", "INSERT", "SELECT", "INSERT", "COMMIT"],
    ),
    (
        "insert_step again",
        &["BEGIN", "INSERT", "SELECT", "COMMIT"],
    ),
    // The claim's history row is written by a trigger inside its UPDATE.
    ("claim won", &["UPDATE", "SELECT"]),
    ("claim lost", &["UPDATE", "SELECT"]),
    ("claim mismatch", &["UPDATE", "SELECT"]),
    ("claim unknown", &["UPDATE", "SELECT"]),
    (
        "transition succeeded",
        &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
    ),
    (
        "transition refused",
        &["BEGIN", "UPDATE", "COMMIT", "SELECT"],
    ),
    (
        "transition failed",
        &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
    ),
    ("claim retry", &["UPDATE", "SELECT"]),
    (
        "create_retry_attempt",
        &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
    ),
    (
        "transition scheduled",
        &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
    ),
    (
        "claim_batch",
        &["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"],
    ),
    ("complete_batch", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
    ("claim_batch empty", &["BEGIN", "SELECT", "COMMIT"]),
    (
        "complete_batch refused",
        &[
            "BEGIN", "UPDATE", "ROLLBACK", "BEGIN", "SELECT", "COMMIT", "SELECT",
        ],
    ),
    ("get_step", &["SELECT"]),
    ("find_step", &["SELECT"]),
    ("list_steps", &["SELECT"]),
    ("list_steps unknown run", &["SELECT"]),
    ("step_history", &["SELECT"]),
    ("write_state", &["INSERT"]),
    ("read_state", &["SELECT"]),
    ("set_branch_taken", &["UPDATE"]),
    ("set_run_status", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
    ("upsert_version", &["INSERT", "SELECT"]),
    ("get_run", &["SELECT"]),
    ("delete_run", &["DELETE"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_sends_its_budget() {
    check(Dialect::Mysql, BUDGETS).await;
}

/// What each virtual-user operation sends on Mysql (see
/// `common::virtual_user_budgets`). A tick pays `due` once and, per
/// persona it dispatches, one listing and two claims.
const VIRTUAL_USER_BUDGETS: &[Budget] = &[
    ("upsert_schedule", &["INSERT"]),
    ("upsert_schedule again", &["INSERT"]),
    ("get_schedule", &["SELECT"]),
    ("due", &["SELECT"]),
    ("claim won", &["UPDATE"]),
    ("claim lost", &["UPDATE"]),
    ("claim records the run", &["UPDATE"]),
    ("start_virtual_user_run", &["INSERT"]),
    ("get_virtual_user_run", &["SELECT"]),
    ("list_virtual_user_runs latest", &["SELECT"]),
    // No `RETURNING`: the length is read back under the update's lock.
    (
        "append_transcript",
        &["BEGIN", "UPDATE", "SELECT", "INSERT", "COMMIT"],
    ),
    ("read_transcript", &["SELECT"]),
    ("read_transcript unknown run", &["SELECT"]),
    ("complete_virtual_user_run", &["UPDATE"]),
    ("fail_virtual_user_run settled", &["UPDATE", "SELECT"]),
    (
        "append_transcript settled",
        &["BEGIN", "UPDATE", "COMMIT", "SELECT"],
    ),
    ("fail_virtual_user_run", &["UPDATE"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_virtual_user_operation_sends_its_budget() {
    crate::common::virtual_user_budgets::check(Dialect::Mysql, VIRTUAL_USER_BUDGETS).await;
}

/// What each event operation sends on MySQL (see `common::budgets_events`).
/// A keyed emit reads the holder of its key after the insert: `INSERT
/// IGNORE` reports a duplicate as a row, so only the holder's id tells.
const EVENT_BUDGETS: &[Budget] = &[
    ("emit no match", &["BEGIN", "SELECT", "INSERT", "COMMIT"]),
    (
        "emit now, 2 matches",
        &[
            "BEGIN", "SELECT", "INSERT", "INSERT", "INSERT", "INSERT", "INSERT", "COMMIT",
        ],
    ),
    (
        "emit now keyed, 2 matches",
        &[
            "BEGIN", "SELECT", "INSERT", "SELECT", "INSERT", "INSERT", "INSERT", "INSERT", "COMMIT",
        ],
    ),
    (
        "emit duplicate",
        &["BEGIN", "SELECT", "INSERT", "SELECT", "COMMIT"],
    ),
    (
        "emit deferred, 2 matches",
        &["BEGIN", "SELECT", "INSERT", "INSERT", "INSERT", "COMMIT"],
    ),
    ("pending_events", &["SELECT"]),
    (
        "dispatch_event, 2 deliveries",
        &[
            "BEGIN", "SELECT", "SELECT", "INSERT", "INSERT", "UPDATE", "COMMIT",
        ],
    ),
    ("dispatch_event taken", &["BEGIN", "SELECT", "COMMIT"]),
    ("record_dispatch_failure", &["UPDATE"]),
    (
        "dispatch_next, 2 deliveries",
        &[
            "BEGIN", "SELECT", "SELECT", "INSERT", "INSERT", "UPDATE", "COMMIT",
        ],
    ),
    ("dispatch_next idle", &["BEGIN", "SELECT", "COMMIT"]),
    ("get_event", &["SELECT"]),
    ("run_cause", &["SELECT"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_operation_sends_its_budget() {
    crate::common::budgets_events::check_events(Dialect::Mysql, EVENT_BUDGETS).await;
}

/// What each lease operation sends on Mysql.
const LEASE_BUDGETS: &[Budget] = &[
    // The runs with a cancel requested, then the claimable runs, each
    // `SELECT ... FOR UPDATE SKIP LOCKED`; the `UPDATE`s of what was taken
    // (the cancel one skipped when there is none); the leased runs read back.
    (
        "claim_run",
        &["BEGIN", "SELECT", "SELECT", "UPDATE", "SELECT", "COMMIT"],
    ),
    (
        "claim_runs",
        &["BEGIN", "SELECT", "SELECT", "UPDATE", "SELECT", "COMMIT"],
    ),
    ("claim_run none", &["BEGIN", "SELECT", "SELECT", "COMMIT"]),
    ("renew", &["UPDATE"]),
    ("renew lost", &["UPDATE", "SELECT"]),
    // No `RETURNING`: the status and count after, in the same transaction.
    ("release failure", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
    ("release yield", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
    ("finish", &["UPDATE"]),
    ("request_cancel", &["UPDATE"]),
    ("lease_state", &["SELECT"]),
    ("signal", &["INSERT"]),
    ("wait", &["UPDATE"]),
    ("wake_expired", &["UPDATE"]),
    // No `DELETE ... RETURNING`: the payload read locked, then deleted.
    ("take_signal", &["BEGIN", "SELECT", "DELETE", "COMMIT"]),
    ("take_signal none", &["BEGIN", "SELECT", "COMMIT", "SELECT"]),
    ("create_children", &["INSERT", "SELECT"]),
    ("create_children again", &["INSERT", "SELECT"]),
    ("begin_effect", &["INSERT", "SELECT"]),
    ("settle_effect", &["UPDATE"]),
    ("begin_effect replayed", &["INSERT", "SELECT"]),
    ("stranded_effects", &["SELECT"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lease_operation_sends_its_budget() {
    check_leases(Dialect::Mysql, LEASE_BUDGETS).await;
}

/// What each recovery operation sends on Mysql (see
/// `common::recovery_budgets`).
const RECOVERY_BUDGETS: &[Budget] = &[
    ("undispatched_steps", &["SELECT"]),
    ("stalled_runs", &["SELECT"]),
    // The run read locked (whether it exists and is runnable), the
    // `UPDATE`, and the leased run read back (no `RETURNING`).
    (
        "lease_run",
        &["BEGIN", "SELECT", "UPDATE", "SELECT", "COMMIT"],
    ),
    ("lease_run held", &["BEGIN", "SELECT", "COMMIT"]),
    ("lease_run unknown", &["BEGIN", "SELECT", "COMMIT"]),
    (
        "lease_run cancelled",
        &["BEGIN", "SELECT", "UPDATE", "COMMIT"],
    ),
    // The expired leases picked `FOR UPDATE SKIP LOCKED`, then freed.
    (
        "reap_expired_leases",
        &["BEGIN", "SELECT", "UPDATE", "COMMIT"],
    ),
    ("reap_expired_leases none", &["BEGIN", "SELECT", "COMMIT"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recovery_operation_sends_its_budget() {
    check_recovery(Dialect::Mysql, RECOVERY_BUDGETS).await;
}
