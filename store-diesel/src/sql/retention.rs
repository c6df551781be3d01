//! The conditions a prune's `WHERE` re-checks, written once for the three
//! dialects' statements (`postgres/retention.rs`, `mysql/retention.rs`,
//! `sqlite/retention.rs`): each dialect passes its own placeholder text
//! and the lease clock's SQL, and spells the statement around them.
//!
//! The statuses are literals from core's enums
//! ([`retention::prunable_run_statuses`]); the cutoff, the lease clock's
//! offset, the limit and the ids are bound.

use flowstate_core::retention::{self, PruneKind};
use flowstate_core::{RunStatus, VirtualUserRunStatus};

/// `'a', 'b'`: status literals for an `IN` list.
fn literals<'a>(statuses: impl IntoIterator<Item = &'a str>) -> String {
    statuses
        .into_iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The settled run statuses, as an `IN` list's literals.
pub(crate) fn settled() -> String {
    literals(
        retention::prunable_run_statuses()
            .into_iter()
            .map(RunStatus::as_str),
    )
}

/// The finished virtual-user run statuses, as an `IN` list's literals.
fn finished() -> String {
    literals(
        retention::prunable_virtual_user_statuses()
            .into_iter()
            .map(VirtualUserRunStatus::as_str),
    )
}

/// Whether the run row `a` may be pruned: settled, settled before the
/// cutoff (`cutoff`), no lease held on the lease clock (`now_us` plus
/// `offset`), no child that is not settled.
pub(crate) fn prunable_run(a: &str, cutoff: &str, now_us: &str, offset: &str) -> String {
    let settled = settled();
    format!(
        "{a}.status IN ({settled}) AND {a}.updated_at < {cutoff} \
         AND ({a}.lease_expires_at IS NULL OR {a}.lease_expires_at <= ({now_us} + {offset})) \
         AND NOT EXISTS (SELECT 1 FROM flowstate_runs c \
         WHERE c.parent_id = {a}.id AND c.status NOT IN ({settled}))"
    )
}

/// What an event row must be to be pruned as `kind`, the cutoff bound at
/// `cutoff` (every use its own placeholder text, given).
fn prunable_event(kind: PruneKind, cutoff: &str) -> String {
    match kind {
        PruneKind::DeadLetters => format!(
            "dispatched_at IS NULL AND dead_lettered_at IS NOT NULL AND dead_lettered_at < {cutoff}"
        ),
        _ => format!("dispatched_at IS NOT NULL AND dispatched_at < {cutoff}"),
    }
}

/// The table, the order and the condition of a prune of events, dead
/// letters or virtual-user runs (any kind but runs), its cutoff at the
/// placeholders `c1` and `c2` (the same bind where placeholders are
/// numbered, two binds on MySQL).
pub(crate) fn records(kind: PruneKind, c1: &str, c2: &str) -> (&'static str, &'static str, String) {
    match kind {
        PruneKind::VirtualUserRuns => (
            "flowstate_virtual_user_runs",
            "updated_at, id",
            format!(
                "status IN ({}) AND created_at < {c1} AND updated_at < {c2}",
                finished()
            ),
        ),
        _ => (
            "flowstate_events",
            "occurred_at, id",
            format!("occurred_at < {c1} AND {}", prunable_event(kind, c2)),
        ),
    }
}

/// The count a dry run reads: what a prune of `kind` would delete now,
/// with the cutoff at `c1` and `c2`, the lease clock at `now_us` and its
/// offset at `offset` (runs only).
pub(crate) fn count(kind: PruneKind, c1: &str, c2: &str, now_us: &str, offset: &str) -> String {
    if kind == PruneKind::Runs {
        format!(
            "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE {}",
            prunable_run("r", c1, now_us, offset)
        )
    } else {
        let (table, _, condition) = records(kind, c1, c2);
        format!("SELECT COUNT(*) AS n FROM {table} WHERE {condition}")
    }
}

/// One `COUNT(*)` read back.
#[derive(diesel::QueryableByName)]
pub(crate) struct Counted {
    /// The count.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) n: i64,
}
