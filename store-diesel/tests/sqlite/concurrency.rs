//! Many writers on one SQLite file: no `SQLITE_BUSY` surfaces under load,
//! a lock held past `busy_timeout` is a retryable error that wrote nothing,
//! and other connections and other processes see every commit (WAL).

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Text};
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Error, NewStep, RunId, StepStatus, StepTransition};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;

use crate::common::records;
use crate::support::TestDb;

/// 32 tasks on a pool of 8 connections, in pairs racing for the same steps
/// (insert, claim, transition, state writes, reads): every call succeeds,
/// since BEGIN IMMEDIATE and busy_timeout queue the writers, and every step
/// is won exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_writers_on_one_file_never_see_busy() {
    let db = TestDb::migrated().await;
    let store = Arc::new(db.store(StoreConfig::default().pool_size(8)).await);
    let mut runs: Vec<RunId> = Vec::new();
    for _ in 0..4 {
        runs.push(records::run(&*store, json!({})).await.id);
    }
    let mut tasks = Vec::new();
    for worker in 0..32_usize {
        let store = Arc::clone(&store);
        // Workers come in pairs that race for the same steps of one run.
        let pair = worker / 2;
        let run = runs[pair % runs.len()];
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
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
                    won.push((name.clone(), worker));
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
    let mut winner_of: BTreeMap<String, usize> = BTreeMap::new();
    for task in tasks {
        let won = task.await.unwrap().unwrap_or_else(|err| {
            panic!("a writer failed: {err} (retryable: {})", err.is_retryable())
        });
        for (name, worker) in won {
            assert!(
                winner_of.insert(name.clone(), worker).is_none(),
                "{name} was won twice"
            );
        }
    }
    assert_eq!(winner_of.len(), 160, "every step is won exactly once");
    let mut total = 0;
    for run in runs {
        let steps = store.list_steps(run).await.unwrap();
        for step in &steps {
            assert_eq!((step.status, step.attempt), (StepStatus::Succeeded, 1));
            assert_eq!(
                step.result,
                Some(json!(winner_of[&step.name])),
                "{} holds another worker's result",
                step.name
            );
        }
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
    let config = StoreConfig::default().sqlite_busy_timeout(Duration::from_millis(100));
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
    assert!(
        store.step_history(run.id).await.unwrap()[0]
            .running_at
            .is_none()
    );
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

/// What one worker did: the steps it won and the ones it found taken.
#[derive(Debug, Default)]
struct Worked {
    won: BTreeSet<String>,
    lost: BTreeSet<String>,
}

/// Claims every step of the one run there is and completes each it wins
/// with its process id as the result, printing `WON <step name>` for each.
/// Asserts what this worker alone can know: it saw every step, answered
/// each claim won or lost, completed every step it won (a second claim of
/// the same attempt would make one transition fail), and a step it lost
/// was taken by someone else (running or done, never with its result).
async fn work(store: &DieselStore) -> Worked {
    let me = json!(std::process::id());
    let runs = store
        .list_runs(&flowstate_core::RunQuery::default())
        .await
        .unwrap();
    assert_eq!(runs.items.len(), 1, "one run to work on");
    let run = &runs.items[0];
    let steps = store.list_steps(run.id).await.unwrap();
    assert_eq!(steps.len(), STEPS);
    let mut worked = Worked::default();
    for step in steps {
        if let Some(claimed) = store.claim_step(run.id, &step.name, "f").await.unwrap() {
            assert_eq!((claimed.id, claimed.attempt), (step.id, 1));
            store
                .transition_step(claimed.id, StepTransition::Succeeded(me.clone()))
                .await
                .unwrap_or_else(|err| panic!("completing {}: {err}", step.name));
            let done = store.get_step(claimed.id).await.unwrap();
            assert_eq!(done.status, StepStatus::Succeeded);
            assert_eq!(done.result.as_ref(), Some(&me), "{}", step.name);
            println!("WON {}", step.name);
            worked.won.insert(step.name);
        } else {
            let taken = store.get_step(step.id).await.unwrap();
            assert!(
                matches!(taken.status, StepStatus::Running | StepStatus::Succeeded),
                "{} was lost to nobody: {taken:?}",
                step.name
            );
            assert_ne!(taken.result.as_ref(), Some(&me), "{}", step.name);
            worked.lost.insert(step.name);
        }
    }
    assert_eq!(worked.won.len() + worked.lost.len(), STEPS);
    worked
}

async fn run_with_steps(store: &DieselStore) -> RunId {
    let run = records::run(store, json!(1)).await;
    for i in 0..STEPS {
        records::step(store, run.id, format!("s{i:02}"), json!(i)).await;
    }
    run.id
}

/// Run by [`two_processes_claim_each_step_once`] with [`WORKER_DB`] set, it
/// is one of the racing processes: it works on that database, asserts its
/// own outcome (a failure exits non-zero) and prints `WORKER DONE` with
/// its counts. On its own, it makes a database with one run of [`STEPS`]
/// steps and checks it wins them all.
#[tokio::test]
async fn worker_process() {
    if let Ok(path) = std::env::var(WORKER_DB) {
        let url = format!("sqlite://{path}");
        let store = DieselStore::open(&url, StoreConfig::default().pool_size(2))
            .await
            .unwrap();
        let worked = work(&store).await;
        println!(
            "WORKER DONE won={} lost={}",
            worked.won.len(),
            worked.lost.len()
        );
        return;
    }
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = run_with_steps(&store).await;
    let worked = work(&store).await;
    assert_eq!((worked.won.len(), worked.lost.len()), (STEPS, 0));
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
/// for the same steps on one file: each exits cleanly having checked its
/// own share, every step is won by exactly one of them and holds that
/// process's id, and this process sees all their commits.
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
    let mut won_by: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for child in children {
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "worker {pid} failed ({}): {stdout}\n{stderr}",
            out.status
        );
        assert!(
            stdout.contains("1 passed"),
            "the worker test did not run: {stdout}"
        );
        // libtest prints `test <name> ... ` with no newline before the test's
        // own output, so a marker may not start its line.
        let won: BTreeSet<String> = stdout
            .lines()
            .filter_map(|l| l.split_once("WON ").map(|(_, name)| name.trim().to_owned()))
            .collect();
        let done = format!("WORKER DONE won={} lost={}", won.len(), STEPS - won.len());
        assert!(
            stdout.contains(&done),
            "worker {pid} did not work on the shared database as expected ({done}): {stdout}"
        );
        won_by.insert(pid, won);
    }
    assert_eq!(won_by.len(), 2);
    let shares: Vec<&BTreeSet<String>> = won_by.values().collect();
    assert!(shares[0].is_disjoint(shares[1]), "a step was won twice");
    assert_eq!(shares[0].len() + shares[1].len(), STEPS);
    let steps = store.list_steps(run).await.unwrap();
    assert_eq!(steps.len(), STEPS);
    for step in &steps {
        let winners: Vec<u32> = won_by
            .iter()
            .filter(|(_, won)| won.contains(&step.name))
            .map(|(pid, _)| *pid)
            .collect();
        assert_eq!(winners.len(), 1, "{} won by {winners:?}", step.name);
        assert_eq!((step.status, step.attempt), (StepStatus::Succeeded, 1));
        assert_eq!(
            step.result,
            Some(json!(winners[0])),
            "{} holds another process's result",
            step.name
        );
    }
    let history = store.step_history(run).await.unwrap();
    assert_eq!(history.len(), STEPS);
    assert!(
        history
            .iter()
            .all(|h| h.status == StepStatus::Succeeded && h.attempt == 1)
    );
}
