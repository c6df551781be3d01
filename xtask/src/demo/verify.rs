//! The invariants, read back from the database once the demo is over: the
//! flowstate tables through plain SQL and the ports, the demo's own tables
//! through its provider connection. Nothing here trusts a counter kept in
//! memory.
//!
//! Every query is scoped to the session: its events (app `shop`, scope the
//! session), the runs their deliveries started, and those runs' children.

use anyhow::Result;
use flowstate_core::RunStatus;
use flowstate_core::ports::EffectJournal;
use flowstate_store_diesel::DieselStore;

use super::definitions::{
    APP, CATALOG_IMPORTED, IMPORT, NOTIFY, ORDER, ORDER_CANCELLED, ORDER_PLACED, ORDER_VIEWED,
    REFUND,
};
use super::progress::Snapshot;
use super::provider::Provider;

/// The runs of the session: started by its events, or children of those.
/// Binds: app, scope, app, scope.
const SESSION_RUNS: &str = "(r.id IN (SELECT d.run_id FROM flowstate_event_deliveries d \
     JOIN flowstate_events e ON e.id = d.event_id WHERE e.app_id = ? AND e.scope_id = ?) \
     OR r.parent_id IN (SELECT d.run_id FROM flowstate_event_deliveries d \
     JOIN flowstate_events e ON e.id = d.event_id WHERE e.app_id = ? AND e.scope_id = ?))";

/// The statuses of a run that is (`settled`) or is not settled, as SQL
/// literals (core's enum, never user input).
fn status_list(settled: bool) -> String {
    RunStatus::ALL
        .iter()
        .filter(|s| s.is_settled() == settled)
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `run` is one of the session's runs and settled.
pub async fn is_settled_session_run(
    provider: &mut Provider,
    run: flowstate_core::RunId,
) -> Result<bool> {
    let s = provider.session().to_owned();
    let settled = status_list(true);
    let n = provider
        .count(
            &format!(
                "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.id = ? \
                 AND r.status IN ({settled}) AND {SESSION_RUNS}"
            ),
            &[&run.to_string(), APP, &s, APP, &s],
        )
        .await?;
    Ok(n > 0)
}

/// The demo's poll: what the progress display shows, and whether the
/// session's work is done.
#[derive(Clone, Copy, Debug, Default)]
pub struct Poll {
    /// The figures shown.
    pub snapshot: Snapshot,
    /// Events that matched, not dispatched and not dead-lettered.
    pub pending: u64,
    /// Events dead-lettered and not dispatched.
    pub dead: u64,
    /// Runs not settled.
    pub unsettled: u64,
    /// Orders settled.
    pub orders_settled: u64,
}

/// Reads the poll.
pub async fn poll(provider: &mut Provider) -> Result<Poll> {
    let scope = provider.session().to_owned();
    let event = |condition: &str| {
        format!(
            "SELECT COUNT(*) AS n FROM flowstate_events e WHERE e.app_id = ? AND e.scope_id = ? \
             AND e.matched > 0 AND {condition}"
        )
    };
    let binds = [APP, scope.as_str()];
    let runs4 = [APP, scope.as_str(), APP, scope.as_str()];
    let events = provider.count(&event("1 = 1"), &binds).await?;
    let dispatched = provider
        .count(&event("e.dispatched_at IS NOT NULL"), &binds)
        .await?;
    let dead = provider
        .count(
            &event("e.dispatched_at IS NULL AND e.dead_lettered_at IS NOT NULL"),
            &binds,
        )
        .await?;
    let runs = provider
        .count(
            &format!("SELECT COUNT(*) AS n FROM flowstate_runs r WHERE {SESSION_RUNS}"),
            &runs4,
        )
        .await?;
    let unsettled = provider
        .count(
            &format!(
                "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.status IN ({}) AND {SESSION_RUNS}",
                status_list(false)
            ),
            &runs4,
        )
        .await?;
    let orders_unsettled = provider
        .count(
            &format!(
                "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.workflow = '{ORDER}' \
                 AND r.status IN ({}) AND {SESSION_RUNS}",
                status_list(false)
            ),
            &runs4,
        )
        .await?;
    let orders = provider
        .count(
            &format!(
                "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.workflow = '{ORDER}' \
                 AND {SESSION_RUNS}"
            ),
            &runs4,
        )
        .await?;
    let steps = provider
        .count(
            "SELECT COUNT(*) AS n FROM demo_executions WHERE session = ?",
            &[scope.as_str()],
        )
        .await?;
    let n = |v: i64| v.max(0) as u64;
    Ok(Poll {
        snapshot: Snapshot {
            events: n(events),
            dispatched: n(dispatched),
            runs: n(runs),
            settled: n(runs - unsettled),
            steps: n(steps),
        },
        pending: n(events - dispatched - dead),
        dead: n(dead),
        unsettled: n(unsettled),
        orders_settled: n(orders - orders_unsettled),
    })
}

/// What the database holds once the demo is over.
#[derive(Debug, Default)]
pub struct Found {
    /// Events recorded, per type: placed, cancelled, viewed, imported.
    pub events: [i64; 4],
    /// Events of each type whose runs are not exactly what they should be
    /// (one run of the right workflow; none for `order.viewed`).
    pub wrong_runs: [i64; 4],
    /// Events dead-lettered now and not dispatched.
    pub dead_now: i64,
    /// Orders completed, cancelled, failed.
    pub orders: (i64, i64, i64),
    /// Completed orders without exactly one completed child.
    pub orders_without_child: i64,
    /// Notify children completed; refunds completed; imports completed.
    pub completed: (i64, i64, i64),
    /// Runs of the session not settled.
    pub unsettled: i64,
    /// Step attempts executed (rows of `demo_executions`).
    pub executions: i64,
    /// Attempts beyond the first.
    pub retries: i64,
    /// `(run, step, attempt)` executed more than once.
    pub double_executions: i64,
    /// Side effects performed (rows of `demo_effects`).
    pub effects: i64,
    /// `(run, step, key)` performed more than once.
    pub effects_repeated: i64,
    /// Completed runs missing an effect their workflow performs.
    pub effects_missing: i64,
    /// Effects of the session begun and never settled.
    pub stranded: i64,
}

/// Reads every invariant's figures back.
pub async fn read_back(provider: &mut Provider, store: &DieselStore) -> Result<Found> {
    let scope = provider.session().to_owned();
    let s = scope.as_str();
    let mut found = Found::default();
    let types = [
        (ORDER_PLACED, Some(ORDER)),
        (ORDER_CANCELLED, Some(REFUND)),
        (ORDER_VIEWED, None),
        (CATALOG_IMPORTED, Some(IMPORT)),
    ];
    for (i, (event_type, workflow)) in types.into_iter().enumerate() {
        found.events[i] = provider
            .count(
                "SELECT COUNT(*) AS n FROM flowstate_events e \
                 WHERE e.app_id = ? AND e.scope_id = ? AND e.event_type = ?",
                &[APP, s, event_type],
            )
            .await?;
        found.wrong_runs[i] = match workflow {
            Some(workflow) => {
                provider
                    .count(
                        "SELECT COUNT(*) AS n FROM flowstate_events e \
                         WHERE e.app_id = ? AND e.scope_id = ? AND e.event_type = ? AND \
                         (SELECT COUNT(*) FROM flowstate_event_deliveries d \
                          JOIN flowstate_runs r ON r.id = d.run_id \
                          WHERE d.event_id = e.id AND r.workflow = ?) <> 1",
                        &[APP, s, event_type, workflow],
                    )
                    .await?
            }
            None => {
                provider
                    .count(
                        "SELECT COUNT(*) AS n FROM flowstate_events e \
                         WHERE e.app_id = ? AND e.scope_id = ? AND e.event_type = ? AND \
                         (e.matched <> 0 OR EXISTS (SELECT 1 FROM flowstate_event_deliveries d \
                          WHERE d.event_id = e.id))",
                        &[APP, s, event_type],
                    )
                    .await?
            }
        };
    }
    found.dead_now = provider
        .count(
            "SELECT COUNT(*) AS n FROM flowstate_events e WHERE e.app_id = ? AND e.scope_id = ? \
             AND e.dispatched_at IS NULL AND e.dead_lettered_at IS NOT NULL",
            &[APP, s],
        )
        .await?;

    let runs4 = [APP, s, APP, s];
    let mut counts = Vec::new();
    for (workflow, status) in [
        (ORDER, RunStatus::Completed),
        (ORDER, RunStatus::Cancelled),
        (ORDER, RunStatus::Failed),
        (NOTIFY, RunStatus::Completed),
        (REFUND, RunStatus::Completed),
        (IMPORT, RunStatus::Completed),
    ] {
        let sql = format!(
            "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.workflow = '{workflow}' \
             AND r.status = '{}' AND {SESSION_RUNS}",
            status.as_str()
        );
        counts.push(provider.count(&sql, &runs4).await?);
    }
    found.orders = (counts[0], counts[1], counts[2]);
    found.completed = (counts[3], counts[4], counts[5]);
    found.orders_without_child = provider
        .count(
            &format!(
                "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.workflow = '{ORDER}' \
                 AND r.status = 'completed' AND {SESSION_RUNS} AND \
                 (SELECT COUNT(*) FROM flowstate_runs c WHERE c.parent_id = r.id \
                  AND c.status = 'completed') <> 1"
            ),
            &runs4,
        )
        .await?;
    found.unsettled = provider
        .count(
            &format!(
                "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.status IN ({}) AND {SESSION_RUNS}",
                status_list(false)
            ),
            &runs4,
        )
        .await?;

    found.executions = provider
        .count(
            "SELECT COUNT(*) AS n FROM demo_executions WHERE session = ?",
            &[s],
        )
        .await?;
    found.retries = provider
        .count(
            "SELECT COUNT(*) AS n FROM demo_executions WHERE session = ? AND attempt > 1",
            &[s],
        )
        .await?;
    found.double_executions = provider
        .count(
            "SELECT COUNT(*) AS n FROM (SELECT run_id FROM demo_executions WHERE session = ? \
             GROUP BY run_id, step, attempt HAVING COUNT(*) > 1) x",
            &[s],
        )
        .await?;
    found.effects = provider
        .count(
            "SELECT COUNT(*) AS n FROM demo_effects WHERE session = ?",
            &[s],
        )
        .await?;
    found.effects_repeated = provider
        .count(
            "SELECT COUNT(*) AS n FROM (SELECT run_id FROM demo_effects WHERE session = ? \
             GROUP BY run_id, step, effect_key HAVING COUNT(*) > 1) x",
            &[s],
        )
        .await?;
    for (workflow, key) in [
        (ORDER, "reserve"),
        (ORDER, "charge"),
        (ORDER, "ship"),
        (NOTIFY, "notify"),
        (REFUND, "refund"),
        (IMPORT, "import"),
    ] {
        found.effects_missing += provider
            .count(
                &format!(
                    "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.workflow = '{workflow}' \
                     AND r.status = 'completed' AND {SESSION_RUNS} AND NOT EXISTS \
                     (SELECT 1 FROM demo_effects f WHERE f.run_id = r.id AND f.effect_key = '{key}')"
                ),
                &runs4,
            )
            .await?;
    }
    for stranded in store.stranded_effects(std::time::Duration::ZERO).await? {
        // Only this session's runs: an earlier demo's leftovers are not ours.
        let ours = provider
            .count(
                &format!(
                    "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.id = ? AND {SESSION_RUNS}"
                ),
                &[&stranded.run.to_string(), APP, s, APP, s],
            )
            .await?;
        found.stranded += ours;
    }
    Ok(found)
}
