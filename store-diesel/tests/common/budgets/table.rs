//! The statement budgets of DESIGN.md, one table: per scenario, the
//! first word of every statement each operation sends (`BEGIN` and `COMMIT`
//! included), as default rows and, per dialect, the rows where that
//! dialect differs. A default row is what most dialects send; a dialect
//! whose SQL differs (no `RETURNING`, a trigger, a CTE) overrides it, with
//! the reason beside the row. [`Table::rows`] resolves one dialect's table;
//! each scenario's `check` runs against its rows.

use flowstate_store_diesel::Dialect;

use super::Budget;

/// One scenario's budgets: the default rows and each dialect's overrides.
pub struct Table {
    /// Every operation of the scenario, with what most dialects send.
    pub default: &'static [Budget],
    /// Per dialect, the operations it sends otherwise; each names an
    /// operation of `default`.
    pub overrides: &'static [(Dialect, &'static [Budget])],
}

impl Table {
    /// `dialect`'s table: the default rows, each replaced by the dialect's
    /// override of the same operation. Panics if an override names an
    /// operation the default rows do not.
    pub fn rows(&self, dialect: Dialect) -> Vec<Budget> {
        let overrides: &[Budget] = self
            .overrides
            .iter()
            .find(|(of, _)| *of == dialect)
            .map_or(&[], |(_, rows)| rows);
        for (op, _) in overrides {
            assert!(
                self.default.iter().any(|(name, _)| name == op),
                "{dialect}: the override of {op} names no default row"
            );
        }
        self.default
            .iter()
            .map(|row| *overrides.iter().find(|(op, _)| *op == row.0).unwrap_or(row))
            .collect()
    }
}

/// The statement budgets of the step ports (`common::budgets::steps`).
pub const STEPS: Table = Table {
    default: &[
        ("create_run", &["INSERT"]),
        ("create_run keyed", &["INSERT"]),
        ("create_run keyed again", &["INSERT", "SELECT"]),
        ("insert_step", &["WITH"]),
        (
            "insert_step again",
            &["BEGIN", "INSERT", "SELECT", "COMMIT"],
        ),
        ("claim won", &["WITH"]),
        ("claim lost", &["WITH"]),
        ("claim mismatch", &["WITH"]),
        ("claim unknown", &["WITH"]),
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
        ("claim retry", &["WITH"]),
        (
            "create_retry_attempt",
            &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
        ),
        (
            "transition scheduled",
            &["BEGIN", "UPDATE", "INSERT", "COMMIT"],
        ),
        ("claim_batch", &["BEGIN", "SET", "WITH", "COMMIT"]),
        ("complete_batch", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
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
        ("set_run_status_with_output", &["UPDATE"]),
        ("list_workflow_names", &["SELECT"]),
        // One transaction: the guarded step insert, then its history row.
        ("record_step", &["BEGIN", "INSERT", "INSERT", "COMMIT"]),
        ("upsert_version", &["INSERT"]),
        ("propose_version", &["INSERT"]),
        // The guarded move, then the version read back by id.
        ("set_version_status", &["UPDATE", "SELECT"]),
        ("get_run", &["SELECT"]),
        ("delete_run", &["DELETE"]),
    ],
    overrides: &[
        (
            Dialect::Postgres,
            &[
                ("insert_step again", &["WITH", "SELECT"]),
                ("transition succeeded", &["WITH"]),
                ("transition refused", &["WITH"]),
                ("transition failed", &["WITH"]),
                ("create_retry_attempt", &["WITH"]),
                ("transition scheduled", &["WITH"]),
                ("complete_batch", &["WITH"]),
            ],
        ),
        (
            Dialect::Mysql,
            &[
                ("create_run keyed", &["INSERT", "SELECT"]),
                (
                    "insert_step",
                    &["BEGIN", "INSERT", "SELECT", "INSERT", "COMMIT"],
                ),
                // Every per-step move's history row is written by a trigger
                // inside its UPDATE (migration 000019): one autocommitted
                // statement, the status read only on a refusal.
                ("transition succeeded", &["UPDATE"]),
                ("transition refused", &["UPDATE", "SELECT"]),
                ("transition failed", &["UPDATE"]),
                ("create_retry_attempt", &["UPDATE"]),
                ("transition scheduled", &["UPDATE"]),
                ("claim won", &["UPDATE", "SELECT"]),
                ("claim lost", &["UPDATE", "SELECT"]),
                ("claim mismatch", &["UPDATE", "SELECT"]),
                ("claim unknown", &["UPDATE", "SELECT"]),
                ("claim retry", &["UPDATE", "SELECT"]),
                (
                    "claim_batch",
                    &["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"],
                ),
                ("claim_batch empty", &["BEGIN", "SELECT", "COMMIT"]),
                (
                    "complete_batch refused",
                    &[
                        "BEGIN", "UPDATE", "ROLLBACK", "BEGIN", "SELECT", "COMMIT", "SELECT",
                    ],
                ),
                ("set_run_status", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
                (
                    "set_run_status_with_output",
                    &["BEGIN", "UPDATE", "SELECT", "COMMIT"],
                ),
                ("upsert_version", &["INSERT", "SELECT"]),
                ("propose_version", &["INSERT", "SELECT"]),
            ],
        ),
        (
            Dialect::Sqlite,
            &[
                ("insert_step", &["BEGIN", "INSERT", "INSERT", "COMMIT"]),
                ("claim won", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
                ("claim lost", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
                ("claim mismatch", &["BEGIN", "UPDATE", "SELECT", "ROLLBACK"]),
                ("claim unknown", &["BEGIN", "UPDATE", "SELECT", "ROLLBACK"]),
                ("claim retry", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
                ("claim_batch", &["BEGIN", "UPDATE", "INSERT", "COMMIT"]),
                ("claim_batch empty", &["BEGIN", "UPDATE", "COMMIT"]),
                (
                    "complete_batch refused",
                    &["BEGIN", "UPDATE", "COMMIT", "SELECT"],
                ),
            ],
        ),
    ],
};

/// The statement budgets of the virtual-user ports
/// (`common::budgets::virtual_users`). A tick pays `due` once and, per
/// persona it dispatches, one listing and two claims.
pub const VIRTUAL_USERS: Table = Table {
    default: &[
        ("upsert_schedule", &["INSERT"]),
        ("upsert_schedule again", &["INSERT"]),
        ("get_schedule", &["SELECT"]),
        // The patch, then the schedule read back.
        ("update_schedule", &["UPDATE", "SELECT"]),
        ("list_schedules", &["SELECT"]),
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
        ("start_virtual_user_run_with", &["INSERT"]),
        // Each counter raised in place, `RETURNING` the tally.
        ("add_to_tally", &["UPDATE"]),
        // The guarded update matched nothing: the run read to say why.
        ("add_to_tally settled", &["UPDATE", "SELECT"]),
        ("set_memory", &["UPDATE"]),
        ("set_intents", &["UPDATE"]),
        ("set_memory settled", &["UPDATE", "SELECT"]),
        ("complete_virtual_user_run_with_reason", &["UPDATE"]),
    ],
    overrides: &[(
        Dialect::Mysql,
        &[
            // No `RETURNING`: the length is read back under the update's lock.
            (
                "append_transcript",
                &["BEGIN", "UPDATE", "SELECT", "INSERT", "COMMIT"],
            ),
            // No `RETURNING`: the tally is read back under the update's lock.
            ("add_to_tally", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
            (
                "add_to_tally settled",
                &["BEGIN", "UPDATE", "COMMIT", "SELECT"],
            ),
        ],
    )],
};

/// The statement budgets of the event ports (`common::budgets::events`).
/// A transaction's runs are one multi-row insert on every dialect (SQLite
/// sends it from one blocking hop, where each typed statement would be a
/// hop of its own inside the write lock), as are an event's deliveries.
pub const EVENTS: Table = Table {
    default: &[
        ("emit no match", &["BEGIN", "SELECT", "INSERT", "COMMIT"]),
        // The event, its deliveries in one insert, its runs in another.
        (
            "emit now, 2 matches",
            &["BEGIN", "SELECT", "INSERT", "INSERT", "INSERT", "COMMIT"],
        ),
        (
            "emit now keyed, 2 matches",
            &["BEGIN", "SELECT", "INSERT", "INSERT", "INSERT", "COMMIT"],
        ),
        (
            "emit duplicate",
            &["BEGIN", "SELECT", "INSERT", "SELECT", "COMMIT"],
        ),
        (
            "emit deferred, 2 matches",
            &["BEGIN", "SELECT", "INSERT", "INSERT", "COMMIT"],
        ),
        ("pending_events", &["SELECT"]),
        (
            "dispatch_event, 2 deliveries",
            &["BEGIN", "SELECT", "SELECT", "INSERT", "UPDATE", "COMMIT"],
        ),
        ("dispatch_event taken", &["BEGIN", "SELECT", "COMMIT"]),
        ("record_dispatch_failure", &["UPDATE"]),
        (
            "dispatch_next, 2 deliveries",
            &["BEGIN", "SELECT", "SELECT", "INSERT", "UPDATE", "COMMIT"],
        ),
        ("dispatch_next idle", &["BEGIN", "SELECT", "COMMIT"]),
        // The pick of all three, their deliveries in one read, their runs
        // in one insert, one mark of all three: 6 statements where three
        // `dispatch_next` send 18.
        (
            "dispatch_next_batch, 3 events of 2 deliveries",
            &["BEGIN", "SELECT", "SELECT", "INSERT", "UPDATE", "COMMIT"],
        ),
        ("dispatch_next_batch idle", &["BEGIN", "SELECT", "COMMIT"]),
        ("get_event", &["SELECT"]),
        ("run_cause", &["SELECT"]),
        // A second read only when no run is found: is the event known?
        ("event_runs, 2 runs", &["SELECT"]),
        ("event_runs, none", &["SELECT", "SELECT"]),
        // The activations read once, the events in one insert, their
        // deliveries in another: 5 statements where three `emit` send 15.
        (
            "emit_batch deferred, 3 events of 2 deliveries",
            &["BEGIN", "SELECT", "INSERT", "INSERT", "COMMIT"],
        ),
        // The repeat is not sent; every row written, so no read; the runs
        // in one insert: 6 where three `emit` send 17 (two keyed, a
        // duplicate).
        (
            "emit_batch now keyed, 2 events of 2 deliveries and a repeat",
            &["BEGIN", "SELECT", "INSERT", "INSERT", "INSERT", "COMMIT"],
        ),
        // Two rows skipped: the holders of the keys read once, the new
        // event's deliveries and runs written: 7 where three `emit` send 16.
        (
            "emit_batch now keyed, 2 stored duplicates and 1 new",
            &[
                "BEGIN", "SELECT", "INSERT", "SELECT", "INSERT", "INSERT", "COMMIT",
            ],
        ),
        ("emit_batch empty", &[]),
        // Checked whole before anything is sent.
        ("emit_batch refused", &[]),
    ],
    overrides: &[(
        Dialect::Mysql,
        &[
            (
                "emit now keyed, 2 matches",
                &[
                    "BEGIN", "SELECT", "INSERT", "SELECT", "INSERT", "INSERT", "COMMIT",
                ],
            ),
            // `INSERT IGNORE` counts a skipped row: a keyed batch reads the
            // holders whatever it wrote.
            (
                "emit_batch now keyed, 2 events of 2 deliveries and a repeat",
                &[
                    "BEGIN", "SELECT", "INSERT", "SELECT", "INSERT", "INSERT", "COMMIT",
                ],
            ),
        ],
    )],
};

/// The statement budgets of the lease, wait, child-run and effect ports
/// (`common::budgets::leases`).
pub const LEASES: Table = Table {
    default: &[
        // One statement, win or lose: the cancel sweep and the claim are one CTE.
        ("claim_run", &["WITH"]),
        ("claim_runs", &["WITH"]),
        ("claim_run none", &["WITH"]),
        ("renew", &["UPDATE"]),
        ("renew lost", &["UPDATE", "SELECT"]),
        ("release failure", &["UPDATE"]),
        ("release yield", &["UPDATE"]),
        ("finish", &["UPDATE"]),
        ("finish_with_output", &["UPDATE"]),
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
    ],
    overrides: &[
        (
            Dialect::Mysql,
            &[
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
                // No `RETURNING`: the status and count after, in the same transaction.
                ("release failure", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
                ("release yield", &["BEGIN", "UPDATE", "SELECT", "COMMIT"]),
                // No `DELETE ... RETURNING`: the payload read locked, then deleted.
                ("take_signal", &["BEGIN", "SELECT", "DELETE", "COMMIT"]),
                ("take_signal none", &["BEGIN", "SELECT", "COMMIT", "SELECT"]),
            ],
        ),
        (
            Dialect::Sqlite,
            &[
                // One write transaction: the cancel sweep, then the claim.
                ("claim_run", &["BEGIN", "UPDATE", "UPDATE", "COMMIT"]),
                ("claim_runs", &["BEGIN", "UPDATE", "UPDATE", "COMMIT"]),
                ("claim_run none", &["BEGIN", "UPDATE", "UPDATE", "COMMIT"]),
                // One insert per child (no multi-row upsert on SQLite), one write.
                (
                    "create_children",
                    &["BEGIN", "INSERT", "INSERT", "COMMIT", "SELECT"],
                ),
                (
                    "create_children again",
                    &["BEGIN", "INSERT", "INSERT", "COMMIT", "SELECT"],
                ),
            ],
        ),
    ],
};

/// The statement budgets of the recovery ports (`common::budgets::recovery`).
pub const RECOVERY: Table = Table {
    default: &[
        ("undispatched_steps", &["SELECT"]),
        ("stalled_runs", &["SELECT"]),
        // One guarded `UPDATE ... RETURNING`, win, lose or cancel; only a
        // refusal reads the run, to tell a missing one.
        ("lease_run", &["UPDATE"]),
        ("lease_run held", &["UPDATE", "SELECT"]),
        ("lease_run unknown", &["UPDATE", "SELECT"]),
        ("lease_run cancelled", &["UPDATE"]),
        // The expired leases picked `FOR UPDATE SKIP LOCKED`, then freed.
        (
            "reap_expired_leases",
            &["BEGIN", "SELECT", "UPDATE", "COMMIT"],
        ),
        ("reap_expired_leases none", &["BEGIN", "SELECT", "COMMIT"]),
    ],
    overrides: &[
        (
            Dialect::Postgres,
            &[
                // One statement: the locking pick and the `UPDATE` in one CTE.
                ("reap_expired_leases", &["WITH"]),
                ("reap_expired_leases none", &["WITH"]),
            ],
        ),
        (
            Dialect::Mysql,
            &[
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
            ],
        ),
    ],
};

/// The statement budgets of retention (`common::budgets::retention`): one
/// prune batch of each kind, and the dry run's counts.
pub const RETENTION: Table = Table {
    default: &[
        // One statement: the pick by the settled-runs index and the
        // `DELETE` re-checking it (SQLite's one writer; MySQL's single-table
        // `DELETE ... ORDER BY ... LIMIT` for all but runs); the rows that
        // go with a record go by the schema's cascades.
        ("prune runs", &["DELETE"]),
        ("prune runs none", &["DELETE"]),
        ("prune events", &["DELETE"]),
        ("prune dead_letters", &["DELETE"]),
        ("prune virtual_user_runs", &["DELETE"]),
        ("count_prunable runs", &["SELECT"]),
        ("count_prunable events", &["SELECT"]),
    ],
    overrides: &[
        (
            Dialect::Postgres,
            &[
                // One statement: the pick `FOR UPDATE SKIP LOCKED` in a CTE
                // (run once; an `IN (SELECT ... LIMIT)` may run per row),
                // the `DELETE ... USING` it re-checking every condition.
                ("prune runs", &["WITH"]),
                ("prune runs none", &["WITH"]),
                ("prune events", &["WITH"]),
                ("prune dead_letters", &["WITH"]),
                ("prune virtual_user_runs", &["WITH"]),
            ],
        ),
        (
            Dialect::Mysql,
            &[
                // No `LIMIT` in an `IN` subquery, no subquery on the table a
                // `DELETE` deletes from: the pick `FOR UPDATE SKIP LOCKED`,
                // then a `DELETE` of the ids picked joined to their live
                // children, re-checking every condition; nothing picked,
                // nothing deleted.
                ("prune runs", &["BEGIN", "SELECT", "DELETE", "COMMIT"]),
                ("prune runs none", &["BEGIN", "SELECT", "COMMIT"]),
            ],
        ),
    ],
};
