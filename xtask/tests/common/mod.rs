//! What the operator-command tests (`ops.rs`, `prune.rs`) share: a fresh
//! SQLite file, the shop's workflow listening for two event types, the
//! three kinds of event an operator meets (one that started a run, a dead
//! letter, one nobody listens for), and the xtask binary run as an
//! operator runs it.

use std::path::PathBuf;
use std::process::Command;

use flowstate_core::ports::{DefinitionStore, EventStore};
use flowstate_core::{
    Dispatch, EventDispatchOutcome, EventId, NewActivation, NewEvent, NewPublishedVersion,
    NewWorkflow,
};
use serde_json::{Value, json};

/// The URL of a fresh SQLite file `<prefix>_<name>.db` under cargo's
/// temporary directory for tests, any earlier one (and its WAL) removed.
pub fn fresh_sqlite(prefix: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{prefix}_{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    format!("sqlite://{}", path.display())
}

/// Workflow `fulfil` of app `shop`, scope `eu`, published once and
/// activated by `order.placed` and `order.refunded`.
pub async fn shop_listening(store: &impl DefinitionStore) {
    let workflow = store
        .create_workflow(NewWorkflow {
            app_id: "shop".into(),
            scope_id: "eu".into(),
            name: "fulfil".into(),
        })
        .await
        .unwrap()
        .record;
    let version = store
        .publish_version(NewPublishedVersion {
            workflow: workflow.id,
            hash: "h1".into(),
            definition: json!({"steps": ["pack"]}),
        })
        .await
        .unwrap()
        .record;
    for event_type in ["order.placed", "order.refunded"] {
        store
            .create_activation(NewActivation {
                workflow: workflow.id,
                version: version.id,
                event_type: event_type.into(),
                authorization: json!({"as": "system"}),
            })
            .await
            .unwrap();
    }
}

/// An `order.refunded` event with `payload`, deferred, whose first
/// dispatch failed with `error` and dead-lettered it.
pub async fn dead_letter(store: &impl EventStore, payload: Value, error: &str) -> EventId {
    let dead = store
        .emit(
            NewEvent::new("shop", "eu", "order.refunded", payload),
            Dispatch::Deferred,
        )
        .await
        .unwrap()
        .event;
    assert!(
        store
            .record_dispatch_failure(dead, 0, error, EventDispatchOutcome::DeadLetter)
            .await
            .unwrap()
    );
    dead
}

/// An event no activation listens for, deferred.
pub async fn unmatched(store: &impl EventStore) {
    store
        .emit(
            NewEvent::new("shop", "eu", "nobody.listens", json!({})),
            Dispatch::Deferred,
        )
        .await
        .unwrap();
}

/// Runs `xtask ARGS --database-url URL`, asserting it succeeded; answers
/// its stdout.
pub fn xtask(url: &str, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .args(["--database-url", url])
        .env_remove("DATABASE_URL")
        .env_remove("RUST_LOG")
        .output()
        .expect("xtask runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "xtask {args:?} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// [`xtask`] with `--json`, its output read as JSON.
pub fn xtask_json(url: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let out = xtask(url, &args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{out}"))
}

/// Asserts `out` contains every one of `needles`.
pub fn has(out: &str, needles: &[&str]) {
    for needle in needles {
        assert!(out.contains(needle), "no {needle:?} in:\n{out}");
    }
}
