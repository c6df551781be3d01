//! The operator commands (`runs`, `events`, `stats`) run as an operator
//! runs them, the xtask binary against an SQLite store seeded through the
//! ports: a run with a failed then retried step, state, a child, a live
//! lease; an event that started a run, one dead-lettered, one that matched
//! nothing. Each command's human output and its `--json` are checked, and
//! the writes (`runs cancel`, `events redrive`) read back through the
//! ports.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use flowstate_core::ports::{EventStore, RunLeaseStore, RunStore, StepStore};
use flowstate_core::{
    Dispatch, EventId, NewEvent, NewRun, NewStep, RetryPolicy, RunId, RunStatus, StepTransition,
};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;

use common::{has, xtask, xtask_json};

/// What the seed made, to look for in the output.
struct Seeded {
    url: String,
    order: RunId,
    child: RunId,
    leased: RunId,
    idle: RunId,
    from_event: RunId,
    started: EventId,
    dead: EventId,
}

/// A fresh SQLite file, migrated and seeded through the ports.
async fn seed(name: &str) -> Seeded {
    let url = common::fresh_sqlite("ops", name);
    let store = DieselStore::open_migrated(&url, StoreConfig::default().pool_size(2))
        .await
        .expect("open");

    // A run whose step failed once, then succeeded; state; a child.
    let order = store
        .create_run(NewRun::new("order", json!({"sku": "A-1"})))
        .await
        .unwrap()
        .record
        .id;
    let retry = RetryPolicy {
        retries: 2,
        retry_delay: None,
    };
    store
        .insert_step(NewStep::new(order, "charge", "pay", json!({})).with_retry(retry))
        .await
        .unwrap();
    let step = store
        .claim_step(order, "charge", "pay")
        .await
        .unwrap()
        .unwrap();
    store
        .transition_step(
            step.id,
            StepTransition::Failed(json!({"message": "card declined"})),
        )
        .await
        .unwrap();
    let step = store
        .claim_step(order, "charge", "pay")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(step.attempt, 2);
    store
        .transition_step(step.id, StepTransition::Succeeded(json!({"paid": true})))
        .await
        .unwrap();
    store
        .insert_step(NewStep::new(order, "ship", "ship", json!({})))
        .await
        .unwrap();
    store
        .write_state(order, "cart", &json!([1, 2]))
        .await
        .unwrap();
    let child = store
        .create_run(NewRun::new("invoice", json!({})).with_parent(order))
        .await
        .unwrap()
        .record
        .id;

    // A run leased to a worker, and one nobody holds.
    let leased = store
        .create_run(NewRun::new("report", json!({})))
        .await
        .unwrap()
        .record
        .id;
    let idle = store
        .create_run(NewRun::new("report", json!({})))
        .await
        .unwrap()
        .record
        .id;
    // Oldest first: `order`, `child`, then `leased`.
    let mut taken = Vec::new();
    while let Some(lease) = store
        .claim_run("worker-7", Duration::from_secs(600))
        .await
        .unwrap()
    {
        taken.push(lease.run.id);
        if lease.run.id == leased {
            break;
        }
    }
    for run in taken.into_iter().filter(|r| *r != leased) {
        let token = store.lease_state(run).await.unwrap().token;
        store
            .release(run, token, flowstate_core::Release::Yield)
            .await
            .unwrap();
    }

    // Events: one dispatched into a run, one dead-lettered, one unmatched.
    common::shop_listening(&store).await;
    let started = store
        .emit(
            NewEvent::new("shop", "eu", "order.placed", json!({"order": 1})),
            Dispatch::Deferred,
        )
        .await
        .unwrap()
        .event;
    let runs = store.dispatch_event(started).await.unwrap().unwrap();
    let from_event = runs[0];
    let dead = common::dead_letter(&store, json!({"order": 2}), "ledger unreachable").await;
    common::unmatched(&store).await;
    Seeded {
        url,
        order,
        child,
        leased,
        idle,
        from_event,
        started,
        dead,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_list_filters_and_pages() {
    let s = seed("runs_list").await;
    let out = xtask(&s.url, &["runs", "list"]);
    has(
        &out,
        &[
            "ID", "WORKFLOW", "STATUS", "order", "invoice", "fulfil", "5 runs",
        ],
    );

    let json = xtask_json(&s.url, &["runs", "list", "--workflow", "report"]);
    let ids: Vec<&str> = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{json}");
    assert!(ids.contains(&s.leased.to_string().as_str()));

    let page = xtask(&s.url, &["runs", "list", "--limit", "2"]);
    has(
        &page,
        &["2 runs; next page: cargo xtask runs list --limit 2 --after "],
    );
    let json = xtask_json(&s.url, &["runs", "list", "--limit", "2"]);
    let after = json["next_after"].as_str().unwrap().to_owned();
    let rest = xtask_json(
        &s.url,
        &["runs", "list", "--limit", "10", "--after", &after],
    );
    assert_eq!(rest["runs"].as_array().unwrap().len(), 3, "{rest}");
    assert!(rest["next_after"].is_null());

    let json = xtask_json(&s.url, &["runs", "list", "--parent", &s.order.to_string()]);
    assert_eq!(json["runs"][0]["id"], json!(s.child.to_string()));
    let none = xtask(&s.url, &["runs", "list", "--older-than", "1h"]);
    has(&none, &["no runs", "older than 1h"]);
    let json = xtask_json(
        &s.url,
        &["runs", "list", "--newer-than", "1h", "--status", "running"],
    );
    assert_eq!(json["runs"].as_array().unwrap().len(), 5, "{json}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_show_tells_everything_the_ports_know() {
    let s = seed("runs_show").await;
    let out = xtask(&s.url, &["runs", "show", &s.order.to_string()]);
    has(
        &out,
        &[
            &format!("run {}", s.order),
            "workflow     order",
            "status       running",
            "1 key(s): cart",
            "1 (1 running)",
            &s.child.to_string(),
            "steps (2)",
            "charge",
            "2 of 3",
            "attempts (3)",
            "card declined",
            "not started by an event",
            "free, fencing token",
        ],
    );
    let json = xtask_json(&s.url, &["runs", "show", &s.order.to_string()]);
    assert_eq!(json["run"]["workflow"], "order");
    assert_eq!(json["steps"].as_array().unwrap().len(), 2);
    assert_eq!(json["attempts"].as_array().unwrap().len(), 3);
    assert_eq!(json["state"]["cart"], json!([1, 2]));
    assert_eq!(json["children"]["counts"]["running"], 1);

    let out = xtask(&s.url, &["runs", "show", &s.leased.to_string()]);
    has(&out, &["held by worker-7, fencing token 1, expires in"]);
    let json = xtask_json(&s.url, &["runs", "show", &s.leased.to_string()]);
    assert_eq!(json["lease"]["worker"], "worker-7");
    assert_eq!(json["lease"]["token"], 1);

    let out = xtask(&s.url, &["runs", "show", &s.from_event.to_string()]);
    has(&out, &[&format!("cause        event {}", s.started)]);
    let json = xtask_json(&s.url, &["runs", "show", &s.from_event.to_string()]);
    assert_eq!(json["cause"]["event"], json!(s.started.to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_cancel_settles_a_free_run_and_asks_a_held_one() {
    let s = seed("runs_cancel").await;
    let out = xtask(&s.url, &["runs", "cancel", &s.idle.to_string()]);
    has(&out, &[&format!("run {} cancelled (was running)", s.idle)]);
    let again = xtask_json(&s.url, &["runs", "cancel", &s.idle.to_string()]);
    assert_eq!(
        (again["status"].as_str(), again["cancelled"].as_bool()),
        (Some("cancelled"), Some(false))
    );

    let out = xtask(&s.url, &["runs", "cancel", &s.leased.to_string()]);
    has(&out, &["cancel requested", "held by worker-7", "--now"]);
    let json = xtask_json(&s.url, &["runs", "cancel", &s.leased.to_string(), "--now"]);
    assert_eq!(json["status"], "cancelled");

    let store = DieselStore::open(&s.url, StoreConfig::default().pool_size(1))
        .await
        .unwrap();
    for run in [s.idle, s.leased] {
        assert_eq!(
            store.get_run(run).await.unwrap().status,
            RunStatus::Cancelled
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn events_list_show_and_redrive() {
    let s = seed("events").await;
    let out = xtask(&s.url, &["events", "list"]);
    has(
        &out,
        &[
            "order.refunded",
            "dead-lettered",
            "nobody.listens",
            "matched nothing",
            "2 events",
        ],
    );
    let out = xtask(&s.url, &["events", "list", "--dead-lettered"]);
    has(
        &out,
        &[
            &s.dead.to_string(),
            "ledger unreachable",
            "1 event",
            "events redrive ID",
        ],
    );
    let json = xtask_json(&s.url, &["events", "list", "--dead-lettered"]);
    assert_eq!(json["events"].as_array().unwrap().len(), 1);
    assert_eq!(json["events"][0]["id"], json!(s.dead.to_string()));

    let out = xtask(&s.url, &["events", "show", &s.started.to_string()]);
    has(
        &out,
        &[
            "type         order.placed",
            "1 pinned",
            "runs it started (1)",
            &s.from_event.to_string(),
        ],
    );
    let json = xtask_json(&s.url, &["events", "show", &s.started.to_string()]);
    assert_eq!(
        json["runs"][0]["run"]["id"],
        json!(s.from_event.to_string())
    );
    let out = xtask(&s.url, &["events", "show", &s.dead.to_string()]);
    has(
        &out,
        &["dead-lettered", "after 1 attempt(s)", "ledger unreachable"],
    );

    let out = xtask(&s.url, &["events", "redrive", &s.dead.to_string()]);
    has(&out, &["redriven", "1 of 1 redriven"]);
    let out = xtask(&s.url, &["events", "redrive", "--type", "order.refunded"]);
    has(&out, &["nothing to redrive"]);
    let json = xtask_json(&s.url, &["events", "redrive", &s.dead.to_string()]);
    assert_eq!(json["redriven"], 0, "not dead-lettered any more: {json}");

    let store = DieselStore::open(&s.url, StoreConfig::default().pool_size(1))
        .await
        .unwrap();
    let event = store.get_event(s.dead).await.unwrap();
    assert!(event.dead_lettered_at.is_none());
    assert_eq!(event.attempts, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn redrive_by_type_takes_every_dead_letter_of_it() {
    let s = seed("redrive_type").await;
    let json = xtask_json(&s.url, &["events", "redrive", "--type", "order.refunded"]);
    assert_eq!(json["redriven"], 1, "{json}");
    let json = xtask_json(&s.url, &["stats"]);
    assert_eq!(json["events"]["dead_lettered"], 0, "{json}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stats_counts_the_store() {
    let s = seed("stats").await;
    let out = xtask(&s.url, &["stats"]);
    has(
        &out,
        &[
            "flowstate on sqlite",
            "5 in all: 5 running, 0 suspended, 0 completed, 0 failed, 0 cancelled",
            "\"ship\" (pending) of run",
            "1 held, 0 expired",
            "1 dead-lettered, 1 matched nothing",
            "events list --dead-lettered",
        ],
    );
    let json = xtask_json(&s.url, &["stats"]);
    assert_eq!(json["runs"]["running"], 5);
    assert_eq!(json["leases"]["held"], 1);
    assert_eq!(json["events"]["dead_lettered"], 1);
    assert_eq!(json["events"]["matched_nothing"], 1);
    assert_eq!(json["oldest_waiting_step"]["name"], "ship");
}

#[test]
fn every_command_has_help_and_a_missing_file_is_named() {
    for args in [
        &["runs", "--help"][..],
        &["runs", "list", "--help"],
        &["runs", "show", "--help"],
        &["runs", "cancel", "--help"],
        &["events", "list", "--help"],
        &["events", "show", "--help"],
        &["events", "redrive", "--help"],
        &["stats", "--help"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("--database-url"),
            "{args:?}"
        );
    }
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ops_missing.db");
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["stats", "--database-url", &missing.display().to_string()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no database at"));
    assert!(!missing.exists(), "looking must not create the file");
}
