//! Many writers on one SQLite file: no `SQLITE_BUSY` surfaces under load,
//! a lock held past `busy_timeout` is a retryable error, and other
//! connections and other processes see every commit (WAL).

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Text};
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Error, NewRun, NewStep, RunId, StepStatus, StepTransition};
use flowstate_store_diesel::StoreConfig;
use flowstate_store_diesel::sqlite::SqliteStore;
use serde_json::json;

use crate::records;
use crate::support::TestDb;

/// 32 tasks on a pool of 8 connections, in pairs racing for the same steps
/// (insert, claim, transition, state writes, reads): every call succeeds,
/// since BEGIN IMMEDIATE and busy_timeout queue the writers, and every step
/// is won exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_writers_on_one_file_never_see_busy() {
    let db = TestDb::migrated().await;
    let store = Arc::new(db.store(StoreConfig::default().pool_size(8)).await);
    let runs: Vec<RunId> = {
        let mut runs = Vec::new();
        for _ in 0..4 {
            runs.push(
                store
                    .create_run(NewRun::new("wf", json!({})))
                    .await
                    .unwrap()
                    .record
                    .id,
            );
        }
        runs
    };
    let mut tasks = Vec::new();
    for worker in 0..32_usize {
        let store = Arc::clone(&store);
        // Workers come in pairs that race for the same steps of one run.
        let pair = worker / 2;
        let run = runs[pair % runs.len()];
        tasks.push(tokio::spawn(async move {
            let mut won = 0_usize;
            for i in 0..10 {
                let name = format!("p{pair}-{i}");
                let step = store
                    .insert_step(NewStep::new(run, &name, "f", json!(i)))
                    .await?
                    .record;
                if store.claim_step(run, &name, "f").await?.is_some() {
                    store
                        .transition_step(step.id, StepTransition::Succeeded(json!(worker)))
                        .await?;
                    won += 1;
                }
                store
                    .write_state(run, &format!("w{worker}"), &json!(i))
                    .await?;
                store.list_steps(run).await?;
                assert!(store.claim_step(run, &name, "f").await?.is_none());
            }
            Ok::<_, Error>(won)
        }));
    }
    let mut wins = 0;
    for task in tasks {
        wins += task.await.unwrap().unwrap_or_else(|err| {
            panic!("a writer failed: {err} (retryable: {})", err.is_retryable())
        });
    }
    assert_eq!(wins, 160, "every step is won exactly once");
    let mut total = 0;
    for run in runs {
        let steps = store.list_steps(run).await.unwrap();
        assert!(
            steps
                .iter()
                .all(|s| s.status == StepStatus::Succeeded && s.attempt == 1)
        );
        total += steps.len();
        assert_eq!(store.step_history(run).await.unwrap().len(), steps.len());
        assert_eq!(store.read_state(run).await.unwrap().len(), 8);
    }
    assert_eq!(total, 160);
}

/// The write lock held by someone else past busy_timeout: the call fails
/// with a backend error marked retryable, and wrote nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_past_busy_timeout_is_a_retryable_error() {
    let db = TestDb::migrated().await;
    let config = StoreConfig {
        sqlite_busy_timeout: Duration::from_millis(100),
        ..StoreConfig::default()
    };
    let store = db.store(config).await;
    let run = records::run(&store, json!(1)).await;
    records::step(&store, run.id, "a", json!(1)).await;

    let mut locker = SqliteConnection::establish(&db.target()).unwrap();
    locker.batch_execute("BEGIN IMMEDIATE").unwrap();
    let claim = store.claim_step(run.id, "a", "f").await;
    let write = store.write_state(run.id, "k", &json!(1)).await;
    // Readers are not blocked by a writer in WAL mode.
    let read = store.find_step(run.id, "a").await;
    locker.batch_execute("ROLLBACK").unwrap();

    for result in [claim.map(drop), write] {
        match result {
            Err(err @ Error::Backend { .. }) => {
                assert!(err.is_retryable(), "{err}");
                assert!(err.to_string().contains("locked"), "{err}");
            }
            other => panic!("expected a retryable busy error, got {other:?}"),
        }
    }
    assert_eq!(read.unwrap().status, StepStatus::Pending);
    assert!(store.read_state(run.id).await.unwrap().is_empty());
    assert!(store.claim_step(run.id, "a", "f").await.unwrap().is_some());
}

#[derive(QueryableByName)]
struct Mode {
    #[diesel(sql_type = Text)]
    journal_mode: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Two stores with pools of their own, like two workers: each sees the
/// other's commits at once, and so does a plain connection.
#[tokio::test]
async fn another_connection_sees_every_commit() {
    let db = TestDb::migrated().await;
    let first = db.store(StoreConfig::default()).await;
    let second = db.store(StoreConfig::default()).await;
    let run = records::run(&first, json!(1)).await;
    assert_eq!(second.get_run(run.id).await.unwrap(), run);
    let step = records::step(&second, run.id, "a", json!(1)).await;
    assert!(first.claim_step(run.id, "a", "f").await.unwrap().is_some());
    assert!(second.claim_step(run.id, "a", "f").await.unwrap().is_none());
    assert_eq!(
        second.get_step(step.id).await.unwrap().status,
        StepStatus::Running
    );

    let mut plain = SqliteConnection::establish(&db.target()).unwrap();
    let mode: Mode = sql_query("PRAGMA journal_mode")
        .get_result(&mut plain)
        .unwrap();
    assert_eq!(mode.journal_mode, "wal");
    let running: Count =
        sql_query("SELECT count(*) AS n FROM flowstate_steps WHERE status = 'running'")
            .get_result(&mut plain)
            .unwrap();
    assert_eq!(running.n, 1);
}

/// The env var that makes [`worker_process`] work on a database it is given.
const WORKER_DB: &str = "FLOWSTATE_SQLITE_WORKER_DB";
/// How many steps the cross-process test races for.
const STEPS: usize = 40;

/// Claims and completes every step of every run it finds, printing
/// `WON <step name>` for each step it won. On its own, it makes a database
/// with one run of [`STEPS`] steps and checks it completes them all; run by
/// [`two_processes_claim_each_step_once`] it works on that test's database,
/// racing another process.
async fn work(store: &SqliteStore) -> BTreeSet<String> {
    let mut won = BTreeSet::new();
    let runs = store
        .list_runs(&flowstate_core::RunQuery::default())
        .await
        .unwrap();
    for run in runs.items {
        for step in store.list_steps(run.id).await.unwrap() {
            if let Some(claimed) = store.claim_step(run.id, &step.name, "f").await.unwrap() {
                store
                    .transition_step(
                        claimed.id,
                        StepTransition::Succeeded(json!(std::process::id())),
                    )
                    .await
                    .unwrap();
                println!("WON {}", step.name);
                won.insert(step.name);
            }
        }
    }
    won
}

async fn run_with_steps(store: &SqliteStore) -> RunId {
    let run = records::run(store, json!(1)).await;
    for i in 0..STEPS {
        records::step(store, run.id, format!("s{i:02}"), json!(i)).await;
    }
    run.id
}

#[tokio::test]
async fn worker_process() {
    if let Ok(path) = std::env::var(WORKER_DB) {
        let store = SqliteStore::connect(&path, StoreConfig::default().pool_size(2))
            .await
            .unwrap();
        work(&store).await;
        return;
    }
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = run_with_steps(&store).await;
    assert_eq!(work(&store).await.len(), STEPS);
    assert!(
        store
            .list_steps(run)
            .await
            .unwrap()
            .iter()
            .all(|s| s.status == StepStatus::Succeeded)
    );
}

/// Two OS processes (this test binary, re-run as [`worker_process`]) race
/// for the same steps on one file: every step is won exactly once, and this
/// process sees all their commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_claim_each_step_once() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = run_with_steps(&store).await;
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "concurrency::worker_process",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(WORKER_DB, db.target())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut won_by: Vec<BTreeSet<String>> = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "worker failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("1 passed"),
            "the worker test did not run: {stdout}"
        );
        // libtest prints `test <name> ... ` with no newline before the test's
        // own output, so a `WON` may not start its line.
        won_by.push(
            stdout
                .lines()
                .filter_map(|l| l.split_once("WON ").map(|(_, name)| name.trim().to_owned()))
                .collect(),
        );
    }
    assert!(won_by[0].is_disjoint(&won_by[1]), "a step was won twice");
    assert_eq!(won_by[0].len() + won_by[1].len(), STEPS);
    let steps = store.list_steps(run).await.unwrap();
    assert!(
        steps
            .iter()
            .all(|s| s.status == StepStatus::Succeeded && s.attempt == 1)
    );
    let history = store.step_history(run).await.unwrap();
    assert_eq!(history.len(), STEPS);
}
