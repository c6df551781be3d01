//! SQLite's statement budgets, one row per operation (see
//! `common::budgets`).

use flowstate_store_diesel::Dialect;

use crate::common::budgets::{Budget, check};
use crate::common::lease_budgets::check_leases;
use crate::common::recovery_budgets::check_recovery;

/// What each operation sends on SQLite.
const BUDGETS: &[Budget] = &[
    ("create_run", &["INSERT"]),
    ("create_run keyed", &["INSERT"]),
    ("create_run keyed again", &["INSERT", "SELECT"]),
    ("insert_step", &["BEGIN", "INSERT", "INSERT", "COMMIT"]),
    (
        "insert_step again",
        &["BEGIN", "INSERT", "SELECT", "COMMIT"],
    ),
    ("claim won", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
    ("claim lost", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
    ("claim mismatch", &["BEGIN", "UPDATE", "SELECT", "ROLLBACK"]),
    ("claim unknown", &["BEGIN", "UPDATE", "SELECT", "ROLLBACK"]),
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
    ("claim retry", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
    (
        "create_retry_attempt",
        &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
    ),
    (
        "transition scheduled",
        &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
    ),
    ("claim_batch", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
    ("complete_batch", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
    ("claim_batch empty", &["BEGIN", "UPDATE", "COMMIT"]),
    (
        "complete_batch refused",
        &["BEGIN", "UPDATE", "COMMIT", "SELECT"],
    ),
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
    check(Dialect::Sqlite, BUDGETS).await;
}

/// What each virtual-user operation sends on Sqlite (see
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
    (
        "append_transcript",
        &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
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
    crate::common::virtual_user_budgets::check(Dialect::Sqlite, VIRTUAL_USER_BUDGETS).await;
}

/// What each event operation sends on SQLite (see `common::budgets_events`).
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
            "BEGIN", "SELECT", "INSERT", "INSERT", "INSERT", "INSERT", "INSERT", "COMMIT",
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
    crate::common::budgets_events::check_events(Dialect::Sqlite, EVENT_BUDGETS).await;
}

/// What each lease operation sends on Sqlite.
const LEASE_BUDGETS: &[Budget] = &[
    // One write transaction: the cancel sweep, then the claim.
    ("claim_run", &["BEGIN", "UPDATE", "UPDATE", "COMMIT"]),
    ("claim_runs", &["BEGIN", "UPDATE", "UPDATE", "COMMIT"]),
    ("claim_run none", &["BEGIN", "UPDATE", "UPDATE", "COMMIT"]),
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
    // One insert per child (no multi-row upsert on SQLite), one write.
    (
        "create_children",
        &["BEGIN", "INSERT", "INSERT", "COMMIT", "SELECT"],
    ),
    (
        "create_children again",
        &["BEGIN", "INSERT", "INSERT", "COMMIT", "SELECT"],
    ),
    ("begin_effect", &["INSERT", "SELECT"]),
    ("settle_effect", &["UPDATE"]),
    ("begin_effect replayed", &["INSERT", "SELECT"]),
    ("stranded_effects", &["SELECT"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lease_operation_sends_its_budget() {
    check_leases(Dialect::Sqlite, LEASE_BUDGETS).await;
}

/// What each recovery operation sends on Sqlite (see
/// `common::recovery_budgets`).
const RECOVERY_BUDGETS: &[Budget] = &[
    ("undispatched_steps", &["SELECT"]),
    ("stalled_runs", &["SELECT"]),
    // One guarded `UPDATE ... RETURNING`, win, lose or cancel; only a
    // refusal reads the run, to tell a missing one.
    ("lease_run", &["UPDATE"]),
    ("lease_run held", &["UPDATE", "SELECT"]),
    ("lease_run unknown", &["UPDATE", "SELECT"]),
    ("lease_run cancelled", &["UPDATE"]),
    // One write: the expired leases read (with the expiry the order
    // needs), then freed.
    (
        "reap_expired_leases",
        &["BEGIN", "SELECT", "UPDATE", "COMMIT"],
    ),
    ("reap_expired_leases none", &["BEGIN", "SELECT", "COMMIT"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recovery_operation_sends_its_budget() {
    check_recovery(Dialect::Sqlite, RECOVERY_BUDGETS).await;
}
