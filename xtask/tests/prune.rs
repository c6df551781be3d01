//! `cargo xtask prune` run as an operator runs it, the xtask binary
//! against an SQLite store seeded through the ports ten days in the past
//! (a store whose clock stands ten days back): three settled runs, a
//! running run, a parent settled over a running child, a dispatched event,
//! a dead letter, an event that matched nothing. The dry run counts and
//! deletes nothing; the prune deletes exactly that and keeps the live
//! work; a second dry run counts nothing.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{ChildRunStore, EventStore, RunStore};
use flowstate_core::{
    Clock, Dispatch, Error, NewChild, NewEvent, NewRun, RunId, RunStatus, SystemClock, Timestamp,
};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;

use common::{has, xtask, xtask_json};

/// The system clock, ten days back.
#[derive(Debug)]
struct TenDaysAgo;

impl Clock for TenDaysAgo {
    fn now(&self) -> Timestamp {
        let back = Duration::from_secs(10 * 24 * 60 * 60).as_micros() as i64;
        Timestamp::from_micros(SystemClock.now().as_micros() - back)
    }
}

/// What the seed made.
struct Seeded {
    url: String,
    settled: Vec<RunId>,
    kept: Vec<RunId>,
}

/// A fresh SQLite file, migrated and seeded ten days back.
async fn seed(name: &str) -> Seeded {
    let url = common::fresh_sqlite("prune", name);
    let config = StoreConfig::default()
        .pool_size(2)
        .clock(Arc::new(TenDaysAgo));
    let store = DieselStore::open_migrated(&url, config)
        .await
        .expect("open");
    let mut settled = Vec::new();
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let run = store
            .create_run(NewRun::new("order", json!({})))
            .await
            .unwrap()
            .record;
        store.set_run_status(run.id, status).await.unwrap();
        settled.push(run.id);
    }
    let running = store
        .create_run(NewRun::new("order", json!({})))
        .await
        .unwrap()
        .record
        .id;
    let parent = store
        .create_run(NewRun::new("batch", json!({})))
        .await
        .unwrap()
        .record
        .id;
    let child = store
        .create_children(parent, vec![NewChild::new("c", "item", json!({}))])
        .await
        .unwrap()
        .remove(0)
        .record
        .id;
    store
        .set_run_status(parent, RunStatus::Completed)
        .await
        .unwrap();

    common::shop_listening(&store).await;
    let started = store
        .emit(
            NewEvent::new("shop", "eu", "order.placed", json!({})),
            Dispatch::Now,
        )
        .await
        .unwrap();
    common::dead_letter(&store, json!({}), "down").await;
    common::unmatched(&store).await;
    Seeded {
        url,
        settled,
        kept: vec![running, parent, child, started.runs[0]],
    }
}

/// Whether run `id` is still in the store at `url`.
async fn exists(url: &str, id: RunId) -> bool {
    let store = DieselStore::open(url, StoreConfig::default().pool_size(1))
        .await
        .unwrap();
    match store.get_run(id).await {
        Ok(_) => true,
        Err(Error::RunNotFound(_)) => false,
        Err(err) => panic!("get_run: {err}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_counts_then_deletes_only_what_settled_long_ago() {
    let s = seed("week").await;
    let dry = xtask(&s.url, &["prune", "--older-than", "7d", "--dry-run"]);
    has(
        &dry,
        &[
            "flowstate on sqlite",
            "settled more than 7d ago (dead letters 7d), dry run: nothing deleted",
            "  runs               3\n",
            "  events             2\n",
            "  dead_letters       1\n",
            "  virtual_user_runs  0\n",
            "6 would be deleted",
        ],
    );
    // A longer window for dead letters keeps the one there is.
    let json = xtask_json(
        &s.url,
        &[
            "prune",
            "--older-than",
            "7d",
            "--dead-letters-older-than",
            "30d",
            "--dry-run",
        ],
    );
    assert_eq!(json["dry_run"], true);
    assert_eq!(json["older_than_secs"], 7 * 86_400);
    assert_eq!(json["counts"]["runs"], 3);
    assert_eq!(json["counts"]["dead_letters"], 0);
    assert_eq!(json["total"], 5);
    // Nothing is young enough at 11 days.
    let none = xtask_json(&s.url, &["prune", "--older-than", "11d", "--dry-run"]);
    assert_eq!(none["total"], 0);
    for id in &s.settled {
        assert!(exists(&s.url, *id).await, "a dry run deleted {id}");
    }

    let done = xtask(&s.url, &["prune", "--older-than", "7d", "--batch", "2"]);
    has(
        &done,
        &[
            "settled more than 7d ago (dead letters 7d)\n",
            "  runs               3\n",
            "  events             2\n",
            "  dead_letters       1\n",
            "6 deleted",
        ],
    );
    for id in &s.settled {
        assert!(!exists(&s.url, *id).await, "{id} was not pruned");
    }
    for id in &s.kept {
        assert!(exists(&s.url, *id).await, "live work {id} was pruned");
    }
    let after = xtask_json(&s.url, &["prune", "--older-than", "7d", "--dry-run"]);
    assert_eq!(after["total"], 0);
}

#[test]
fn prune_has_help_and_refuses_a_bad_duration() {
    let help = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["prune", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    has(
        &text,
        &["--older-than", "--dry-run", "--database-url", "--json"],
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["prune", "--older-than", "soon", "--dry-run"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("write a duration"));
}
