//! The invariants, read back from the database once the demo is over: the
//! flowstate tables through plain SQL and the ports, the demo's own tables
//! through its provider connection. Nothing here trusts a counter kept in
//! memory.
//!
//! Every query is scoped to the session: its events (app `shop`, scope the
//! session), the runs their deliveries started, and those runs' children.
//! Each walks from the session's events through indexes, or from the runs
//! still in flight, never over every run in the database, so the checks
//! and the polls stay cheap on a database of a million runs.

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

/// The runs of the session, each once, as a derived table `s (id,
/// workflow, status)`: the runs its events' deliveries started, and those
/// runs' children. It is walked from the session's events through indexes
/// (events by app and scope, deliveries by event, runs by id and by
/// parent), so reading it costs the session's size, never a scan of every
/// run in the database. Binds: app, scope, app, scope.
const SESSION_RUNS: &str = "(SELECT r.id, r.workflow, r.status FROM flowstate_events e \
     JOIN flowstate_event_deliveries d ON d.event_id = e.id \
     JOIN flowstate_runs r ON r.id = d.run_id WHERE e.app_id = ? AND e.scope_id = ? \
     UNION SELECT c.id, c.workflow, c.status FROM flowstate_events e \
     JOIN flowstate_event_deliveries d ON d.event_id = e.id \
     JOIN flowstate_runs c ON c.parent_id = d.run_id WHERE e.app_id = ? AND e.scope_id = ?) s";

/// Whether run `r` is one of the session's (the same runs as
/// [`SESSION_RUNS`]): a delivery of one of its events started `r` or `r`'s
/// parent. One probe of the deliveries' unique `run_id` index for each
/// of the two, each an equality (MariaDB planned `d.run_id IN (r.id,
/// r.parent_id)` as a walk of the session's deliveries per run: 885 ms a
/// poll at 2,000 runs). Binds: app, scope, app, scope.
const IN_SESSION: &str = "(EXISTS (SELECT 1 FROM flowstate_event_deliveries d \
     JOIN flowstate_events e ON e.id = d.event_id \
     WHERE d.run_id = r.id AND e.app_id = ? AND e.scope_id = ?) \
     OR EXISTS (SELECT 1 FROM flowstate_event_deliveries d \
     JOIN flowstate_events e ON e.id = d.event_id \
     WHERE d.run_id = r.parent_id AND e.app_id = ? AND e.scope_id = ?))";

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

/// Whether `run` is one of the session's runs (settled ones only, if
/// `settled_only`).
async fn is_session_run(
    provider: &mut Provider,
    run: flowstate_core::RunId,
    settled_only: bool,
) -> Result<bool> {
    let s = provider.session().to_owned();
    let status = if settled_only {
        format!("r.status IN ({}) AND ", status_list(true))
    } else {
        String::new()
    };
    let n = provider
        .count(
            &format!(
                "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE r.id = ? AND {status}{IN_SESSION}"
            ),
            &[&run.to_string(), APP, &s, APP, &s],
        )
        .await?;
    Ok(n > 0)
}

/// Whether `run` is one of the session's runs and settled.
pub async fn is_settled_session_run(
    provider: &mut Provider,
    run: flowstate_core::RunId,
) -> Result<bool> {
    is_session_run(provider, run, true).await
}

/// The demo's poll: what decides whether the session's work is done and
/// how many more orders may be emitted, read every time; and the figures
/// the progress display shows, read when `display` says so.
///
/// The first part reads only what is still in flight: the session's
/// events not yet dispatched (through the events' pending index) and its
/// runs not yet settled (through the runs' status index, each checked
/// with [`IN_SESSION`]), so it costs the same after a million runs as
/// after ten. The display's totals cost the session's size, so the demo
/// reads them less often as the session grows.
#[derive(Clone, Copy, Debug, Default)]
pub struct Poll {
    /// The figures shown, if read this time.
    pub snapshot: Option<Snapshot>,
    /// Events that matched, not dispatched and not dead-lettered.
    pub pending: u64,
    /// Events dead-lettered and not dispatched, if read this time (when
    /// the display is, and whenever nothing else is in flight).
    pub dead: Option<u64>,
    /// Runs not settled.
    pub unsettled: u64,
    /// Orders in flight: `order.placed` events pending and order runs not
    /// settled.
    pub orders_in_flight: u64,
}

/// Reads the poll (the display's totals too if `display`).
pub async fn poll(provider: &mut Provider, display: bool) -> Result<Poll> {
    let scope = provider.session().to_owned();
    let binds = [APP, scope.as_str()];
    let n = |v: i64| v.max(0) as u64;
    // On SQLite the planner, without statistics, would walk every event of
    // the session by app and scope: the pending index (partial, on the
    // events neither dispatched nor dead-lettered) is named.
    let pending_index = if provider.is_sqlite() {
        " INDEXED BY flowstate_events_pending"
    } else {
        ""
    };
    let undispatched = provider
        .counts(
            &format!(
                "SELECT COUNT(*) AS n0, \
                 COUNT(CASE WHEN e.event_type = '{ORDER_PLACED}' THEN 1 END) AS n1 \
                 FROM flowstate_events e{pending_index} WHERE e.dispatched_at IS NULL \
                 AND e.dead_lettered_at IS NULL AND e.matched > 0 \
                 AND e.app_id = ? AND e.scope_id = ?"
            ),
            &binds,
        )
        .await?;
    let unsettled = provider
        .counts(
            &format!(
                "SELECT COUNT(*) AS n0, COUNT(CASE WHEN r.workflow = '{ORDER}' THEN 1 END) AS n1 \
                 FROM flowstate_runs r WHERE r.status IN ({}) AND {IN_SESSION}",
                status_list(false)
            ),
            &[APP, scope.as_str(), APP, scope.as_str()],
        )
        .await?;
    let (pending, orders_pending) = (undispatched[0], undispatched[1]);
    // Dead letters have no index of their own (the pending index is
    // partial, on events neither dispatched nor dead-lettered): they are
    // counted over the session's events, only for the display and once
    // nothing else is in flight.
    let dead = if display || (pending == 0 && unsettled[0] == 0) {
        Some(
            provider
                .count(
                    "SELECT COUNT(*) AS n FROM flowstate_events e \
                     WHERE e.app_id = ? AND e.scope_id = ? AND e.dispatched_at IS NULL \
                     AND e.dead_lettered_at IS NOT NULL AND e.matched > 0",
                    &binds,
                )
                .await?,
        )
    } else {
        None
    };
    let snapshot = if display {
        let events = provider
            .count(
                "SELECT COUNT(*) AS n FROM flowstate_events e \
                 WHERE e.app_id = ? AND e.scope_id = ? AND e.matched > 0",
                &binds,
            )
            .await?;
        // The runs its deliveries started, plus their children: two counts
        // through the indexes, without the dedupe the checks do.
        let runs = provider
            .count(
                "SELECT (SELECT COUNT(*) FROM flowstate_events e \
                 JOIN flowstate_event_deliveries d ON d.event_id = e.id \
                 WHERE e.app_id = ? AND e.scope_id = ?) + \
                 (SELECT COUNT(*) FROM flowstate_events e \
                 JOIN flowstate_event_deliveries d ON d.event_id = e.id \
                 JOIN flowstate_runs c ON c.parent_id = d.run_id \
                 WHERE e.app_id = ? AND e.scope_id = ?) AS n",
                &[APP, &scope, APP, &scope],
            )
            .await?;
        let steps = provider
            .count(
                "SELECT COUNT(*) AS n FROM demo_executions WHERE session = ?",
                &[scope.as_str()],
            )
            .await?;
        Some(Snapshot {
            events: n(events),
            dispatched: n(events - pending - dead.unwrap_or(0)),
            runs: n(runs),
            settled: n(runs - unsettled[0]),
            steps: n(steps),
        })
    } else {
        None
    };
    Ok(Poll {
        snapshot,
        pending: n(pending),
        dead: dead.map(n),
        unsettled: n(unsettled[0]),
        orders_in_flight: n(orders_pending + unsettled[1]),
    })
}

/// Reads the display's totals ([`poll`] with `display`) on `provider`, a
/// connection of their own, and sends each reading with when it was read,
/// until the demo stops listening: the next reading a second later, or
/// nine times as long as this one took, whichever is longer, so reading
/// them takes a tenth of a connection's time at most however large the
/// session. A failed reading is logged and tried again.
pub async fn totals(
    mut provider: Provider,
    readings: tokio::sync::watch::Sender<Option<(Snapshot, std::time::Instant)>>,
) {
    loop {
        let started = std::time::Instant::now();
        match poll(&mut provider, true).await {
            Ok(Poll {
                snapshot: Some(snapshot),
                ..
            }) => {
                if readings
                    .send(Some((snapshot, std::time::Instant::now())))
                    .is_err()
                {
                    return;
                }
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %format!("{err:#}"), "reading the totals"),
        }
        if readings.is_closed() {
            return;
        }
        tokio::time::sleep((started.elapsed() * 9).max(std::time::Duration::from_secs(1))).await;
    }
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

/// Reads every invariant's figures back. Each statement reads the
/// session's rows through indexes ([`SESSION_RUNS`], the demo's tables by
/// session), and the figures of one kind come from one statement, so the
/// checks cost a few passes over the session, however large.
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
    let events = provider
        .counts(
            &format!(
                "SELECT {}, COUNT(CASE WHEN e.dispatched_at IS NULL \
                 AND e.dead_lettered_at IS NOT NULL THEN 1 END) AS n4 \
                 FROM flowstate_events e WHERE e.app_id = ? AND e.scope_id = ?",
                types
                    .iter()
                    .enumerate()
                    .map(|(i, (t, _))| format!(
                        "COUNT(CASE WHEN e.event_type = '{t}' THEN 1 END) AS n{i}"
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            &[APP, s],
        )
        .await?;
    found.events.copy_from_slice(&events[..4]);
    found.dead_now = events[4];
    for (i, (event_type, workflow)) in types.into_iter().enumerate() {
        found.wrong_runs[i] = match workflow {
            Some(workflow) => {
                provider
                    .count(
                        // Each event's deliveries by its id, each delivery's
                        // run by its id. (A join of the two let SQLite walk
                        // every run of the workflow for each event instead,
                        // by the workflow's index: 400 million probes at
                        // 20,000 orders, minutes instead of 0.1 s.)
                        "SELECT COUNT(*) AS n FROM flowstate_events e \
                         WHERE e.app_id = ? AND e.scope_id = ? AND e.event_type = ? AND \
                         (SELECT COUNT(*) FROM flowstate_event_deliveries d \
                          WHERE d.event_id = e.id AND \
                          (SELECT r.workflow FROM flowstate_runs r WHERE r.id = d.run_id) = ?) \
                         <> 1",
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

    let runs4 = [APP, s, APP, s];
    let columns = [
        (ORDER, RunStatus::Completed),
        (ORDER, RunStatus::Cancelled),
        (ORDER, RunStatus::Failed),
        (NOTIFY, RunStatus::Completed),
        (REFUND, RunStatus::Completed),
        (IMPORT, RunStatus::Completed),
    ]
    .iter()
    .enumerate()
    .map(|(i, (workflow, status))| {
        format!(
            "COUNT(CASE WHEN s.workflow = '{workflow}' AND s.status = '{}' THEN 1 END) AS n{i}",
            status.as_str()
        )
    })
    .collect::<Vec<_>>()
    .join(", ");
    let runs = provider
        .counts(
            &format!(
                "SELECT {columns}, COUNT(CASE WHEN s.status IN ({}) THEN 1 END) AS n6 \
                 FROM {SESSION_RUNS}",
                status_list(false)
            ),
            &runs4,
        )
        .await?;
    found.orders = (runs[0], runs[1], runs[2]);
    found.completed = (runs[3], runs[4], runs[5]);
    found.unsettled = runs[6];
    found.orders_without_child = provider
        .count(
            &format!(
                "SELECT COUNT(*) AS n FROM {SESSION_RUNS} WHERE s.workflow = '{ORDER}' \
                 AND s.status = 'completed' AND \
                 (SELECT COUNT(*) FROM flowstate_runs c WHERE c.parent_id = s.id \
                  AND c.status = 'completed') <> 1"
            ),
            &runs4,
        )
        .await?;

    let executions = provider
        .counts(
            "SELECT COUNT(*) AS n0, COUNT(CASE WHEN attempt > 1 THEN 1 END) AS n1 \
             FROM demo_executions WHERE session = ?",
            &[s],
        )
        .await?;
    found.executions = executions[0];
    found.retries = executions[1];
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
    // Each completed run against the effects its workflow performs: one
    // column per (workflow, effect), counting the runs the provider never
    // saw perform it.
    let missing = [
        (ORDER, "reserve"),
        (ORDER, "charge"),
        (ORDER, "ship"),
        (NOTIFY, "notify"),
        (REFUND, "refund"),
        (IMPORT, "import"),
    ]
    .iter()
    .enumerate()
    .map(|(i, (workflow, key))| {
        format!(
            "COUNT(CASE WHEN s.workflow = '{workflow}' AND NOT EXISTS \
             (SELECT 1 FROM demo_effects f WHERE f.run_id = s.id \
              AND f.effect_key = '{key}') THEN 1 END) AS n{i}"
        )
    })
    .collect::<Vec<_>>()
    .join(", ");
    found.effects_missing = provider
        .counts(
            &format!("SELECT {missing} FROM {SESSION_RUNS} WHERE s.status = 'completed'"),
            &runs4,
        )
        .await?
        .iter()
        .sum();
    for stranded in store.stranded_effects(std::time::Duration::ZERO).await? {
        // Only this session's runs: an earlier demo's leftovers are not ours.
        if is_session_run(provider, stranded.run, false).await? {
            found.stranded += 1;
        }
    }
    Ok(found)
}
