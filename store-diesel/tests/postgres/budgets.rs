//! PostgreSQL's statement budgets, one row per operation (see
//! `common::budgets`).

use flowstate_store_diesel::Dialect;

use crate::common::budgets::{Budget, check};

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
    ("get_event", &["SELECT"]),
    ("run_cause", &["SELECT"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_operation_sends_its_budget() {
    crate::common::budgets_events::check_events(Dialect::Postgres, EVENT_BUDGETS).await;
}
