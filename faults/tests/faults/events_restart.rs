//! Events dispatched through a server restart: 1,500 events, each matched
//! by two activations, recorded for a later dispatch, then four
//! dispatchers drain them with `dispatch_queued` (batches of up to 64
//! events a transaction, `EventQueueStore::dispatch_next_batch`) while the
//! throw-away server is SIGKILLed and started again mid-drain. A batch is
//! one transaction, so the kill leaves it whole or undone; a batch that
//! fails is taken again one event at a time, and an event whose dispatch
//! failed is recorded and due again after its backoff. Judged from the
//! database: every event dispatched, none dead-lettered, every delivery
//! with its run, no run without its delivery (each event started exactly
//! its runs, once). Time to heal runs from the server accepting
//! connections again to the first event dispatched after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use flowstate_core::ports::{DefinitionStore, EventStore};
use flowstate_core::{
    Dispatch, EventDispatchBackoff, NewActivation, NewEvent, NewPublishedVersion, NewWorkflow,
};
use flowstate_faults::Scenario;
use flowstate_faults::report::Heal;
use flowstate_faults::sql::RawConn;
use flowstate_store_diesel::{Dialect, DieselStore};
use serde_json::json;

use crate::support::{Restarted, bounded, kill_mid_flight, migrated_server, store};

/// Events emitted before the drain.
const EVENTS: u64 = 1_500;
/// The workflows listening for every event: each event has a delivery,
/// and starts a run, for each.
const LISTENERS: [&str; 2] = ["listener-a", "listener-b"];
/// Dispatchers draining at once.
const DISPATCHERS: usize = 4;
/// The event type the listeners activate on.
const EVENT_TYPE: &str = "faults.tick";
/// Events dispatched before the kill.
const KILL_AFTER: u64 = 300;

/// A workflow named `name` with a published version and an activation on
/// [`EVENT_TYPE`].
async fn listen(store: &DieselStore, name: &str) {
    let workflow = store
        .create_workflow(NewWorkflow {
            app_id: "faults".into(),
            scope_id: "s".into(),
            name: name.into(),
        })
        .await
        .expect("a workflow")
        .record;
    let version = store
        .publish_version(NewPublishedVersion {
            workflow: workflow.id,
            hash: "h1".into(),
            definition: json!({}),
        })
        .await
        .expect("its version")
        .record;
    store
        .create_activation(NewActivation {
            workflow: workflow.id,
            version: version.id,
            event_type: EVENT_TYPE.into(),
            authorization: json!({"as": "faults"}),
        })
        .await
        .expect("its activation");
}

/// What the dispatchers saw.
#[derive(Default)]
struct Seen {
    /// Events dispatched, as their reports say (a batch committed whose
    /// answer the kill cut off is not counted: the database is the truth).
    dispatched: AtomicU64,
    /// Events whose dispatch failed and was recorded on them.
    failed: AtomicU64,
    /// Calls that failed retryably (no connection, the server gone).
    errors: AtomicU64,
    /// Calls that failed otherwise: each wrong.
    wrong: AtomicU64,
}

/// The database's counts: events dispatched, dead-lettered, deliveries,
/// deliveries whose run exists, runs of the listening workflows.
async fn counts(url: &str) -> [u64; 5] {
    let mut conn = RawConn::connect(url).await.expect("a raw connection");
    let mut out = [0; 5];
    let listeners = LISTENERS.map(|name| format!("'{name}'")).join(", ");
    let queries = [
        "SELECT COUNT(*) AS n FROM flowstate_events WHERE dispatched_at IS NOT NULL".to_owned(),
        "SELECT COUNT(*) AS n FROM flowstate_events WHERE dead_lettered_at IS NOT NULL".to_owned(),
        "SELECT COUNT(*) AS n FROM flowstate_event_deliveries".to_owned(),
        "SELECT COUNT(*) AS n FROM flowstate_event_deliveries d \
         JOIN flowstate_runs r ON r.id = d.run_id"
            .to_owned(),
        format!("SELECT COUNT(*) AS n FROM flowstate_runs WHERE workflow IN ({listeners})"),
    ];
    for (slot, sql) in out.iter_mut().zip(&queries) {
        *slot = conn.count(sql).await.expect(sql);
    }
    out
}

async fn events_through_a_server_restart(dialect: Dialect) {
    let (mut server, url) = migrated_server(dialect).await;
    let setup = store(&url, 4).await;
    for name in LISTENERS {
        listen(&setup, name).await;
    }
    let emitters: Vec<_> = (0..4_u64)
        .map(|part| {
            let setup = Arc::clone(&setup);
            tokio::spawn(async move {
                for i in (part..EVENTS).step_by(4) {
                    let event = NewEvent::new("faults", "s", EVENT_TYPE, json!({ "i": i }));
                    setup
                        .emit(event, Dispatch::Deferred)
                        .await
                        .expect("an emit");
                }
            })
        })
        .collect();
    bounded("emitting", Duration::from_secs(90), async {
        for emitter in emitters {
            emitter.await.expect("an emitter");
        }
    })
    .await;

    let dispatching = store(&url, DISPATCHERS).await;
    let seen = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let dispatchers: Vec<_> = (0..DISPATCHERS)
        .map(|_| {
            let (store, seen, stop) = (
                Arc::clone(&dispatching),
                Arc::clone(&seen),
                Arc::clone(&stop),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let backoff = EventDispatchBackoff::default();
                    match flowstate_events::dispatch_queued(&*store, backoff, 256).await {
                        Ok(report) => {
                            seen.dispatched
                                .fetch_add(u64::from(report.dispatched), Ordering::SeqCst);
                            seen.failed
                                .fetch_add(u64::from(report.failed), Ordering::SeqCst);
                            if report.dispatched + report.failed == 0 {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                        Err(err) if err.is_retryable() => {
                            seen.errors.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Err(err) => {
                            seen.wrong.fetch_add(1, Ordering::SeqCst);
                            eprintln!("a dispatcher: {err}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            })
        })
        .collect();

    let Restarted {
        before_kill,
        recovered_in,
        healed,
    } = kill_mid_flight(&mut server, &seen.dispatched, KILL_AFTER, "dispatching").await;
    // Events whose dispatch failed are due again after their backoff (1 s,
    // then 2 s, ...): the drain waits for them.
    let drained = tokio::time::timeout(Duration::from_secs(90), async {
        while counts(&url).await[0] < EVENTS {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .is_ok();
    stop.store(true, Ordering::SeqCst);
    for dispatcher in dispatchers {
        bounded("a dispatcher", Duration::from_secs(30), dispatcher)
            .await
            .expect("a dispatcher");
    }

    let [dispatched, dead, deliveries, delivered, runs] = counts(&url).await;
    let mut scenario = Scenario::new(
        "events dispatched through a server restart",
        dialect,
        format!(
            "{EVENTS} events of {} deliveries, {DISPATCHERS} dispatchers, batches of up to 64",
            LISTENERS.len()
        ),
        "SIGKILL of the server mid-drain, restart".into(),
    );
    let expected = EVENTS * LISTENERS.len() as u64;
    scenario.lost += EVENTS.saturating_sub(dispatched) + deliveries.saturating_sub(delivered);
    scenario.lost += expected.saturating_sub(deliveries);
    scenario.doubled += runs.saturating_sub(delivered);
    scenario.stuck += dead;
    scenario.wrong += seen.wrong.load(Ordering::SeqCst);
    scenario.heal = Heal::Healed(healed);
    let (failed, errors) = (
        seen.failed.load(Ordering::SeqCst),
        seen.errors.load(Ordering::SeqCst),
    );
    scenario.note(format!(
        "server back in {} ms; {before_kill} dispatched before the kill; {failed} dispatches \
         failed and were recorded, {errors} calls failed retryably; drained {}; \
         {dispatched} events dispatched, {deliveries} deliveries, {delivered} with their run, \
         {runs} runs",
        recovered_in.as_millis(),
        if drained {
            "in time"
        } else {
            "NOT within 90 s"
        }
    ));
    assert!(
        failed + errors > 0,
        "the kill hit no dispatch: the scenario proves nothing"
    );
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_through_a_server_restart_postgres() {
    events_through_a_server_restart(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_through_a_server_restart_mariadb() {
    events_through_a_server_restart(Dialect::Mysql).await;
}
