//! PostgreSQL's statement budgets, one row per operation (see
//! `common::budgets`).

use flowstate_store_diesel::Dialect;

use crate::common::budgets::{Budget, check};
use crate::common::lease_budgets::check_leases;
use crate::common::recovery_budgets::check_recovery;

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
    ("claim_batch", &["BEGIN", "SET", "WITH", "COMMIT"]),
    ("complete_batch", &["WITH"]),
    ("claim_batch empty", &["BEGIN", "SET", "WITH", "COMMIT"]),
    ("complete_batch refused", &["WITH", "SELECT"]),
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

/// What each virtual-user operation sends on Postgres (see
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
    crate::common::virtual_user_budgets::check(Dialect::Postgres, VIRTUAL_USER_BUDGETS).await;
}

/// What each event operation sends on PostgreSQL (see `common::budgets_events`).
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
    crate::common::budgets_events::check_events(Dialect::Postgres, EVENT_BUDGETS).await;
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

/// What each recovery operation sends on Postgres (see
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
    // One statement: the locking pick and the `UPDATE` in one CTE.
    ("reap_expired_leases", &["WITH"]),
    ("reap_expired_leases none", &["WITH"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recovery_operation_sends_its_budget() {
    check_recovery(Dialect::Postgres, RECOVERY_BUDGETS).await;
}
