//! Run leases through a server restart: 400 runs, four workers each
//! leasing up to 8 at a time (`claim_runs`, leases of 3 s) and finishing
//! each, while the throw-away server is SIGKILLed and started again. One
//! run in four is first put to sleep for 300 ms instead (`wait`), so the
//! claim's range of sleepers whose time has come (migration 000021) hands
//! it back before it is finished, through the fault as well. A
//! claim whose answer the kill cut off may have committed: its runs stay
//! held until their lease runs out, then the claim's run-out range gives
//! them to another worker (migration 000020's second range, exercised
//! here for real). Judged from the database: every run completed, none
//! left held or running; a run finished twice would need two tokens to
//! hold at once, so the workers' won finishes must be exactly the runs.
//! Time to heal runs from the server accepting connections again to the
//! first run finished after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use flowstate_core::ports::{RunLeaseStore, RunStore, RunWaitStore};
use flowstate_core::{Error, NewRun, RunOutcome, Wait};
use flowstate_faults::Scenario;
use flowstate_faults::report::Heal;
use flowstate_faults::sql::RawConn;
use flowstate_store_diesel::Dialect;
use serde_json::json;

use crate::support::{Restarted, bounded, kill_mid_flight, migrated_server, store};

/// Runs to lease and finish.
const RUNS: u64 = 400;
/// Workers leasing at once.
const WORKERS: usize = 4;
/// Runs finished before the kill.
const KILL_AFTER: u64 = 100;
/// The lease each claim takes: short, so runs a cut-off claim took come
/// back within the scenario.
const LEASE: Duration = Duration::from_secs(3);

/// How long a run put to sleep sleeps.
const NAP: Duration = Duration::from_millis(300);

/// Whether the run created `i`-th sleeps before it is finished.
fn sleeper(input: &serde_json::Value) -> bool {
    input["i"].as_u64().is_some_and(|i| i % 4 == 0)
}

/// What the workers saw.
#[derive(Default)]
struct Seen {
    /// Finishes that won.
    finished: AtomicU64,
    /// Sleeps that took (each run at most once: `asleep`).
    slept: AtomicU64,
    /// The runs that slept.
    asleep: std::sync::Mutex<std::collections::HashSet<flowstate_core::RunId>>,
    /// Finishes refused because the lease was lost (it ran out while the
    /// server was down, and another worker may have it now).
    lost: AtomicU64,
    /// Calls that failed retryably.
    errors: AtomicU64,
    /// Calls that failed otherwise: each wrong.
    wrong: AtomicU64,
}

/// The database's counts: runs completed, runs still held, runs running.
async fn counts(url: &str) -> [u64; 3] {
    let mut conn = RawConn::connect(url).await.expect("a raw connection");
    let mut out = [0; 3];
    let queries = [
        "SELECT COUNT(*) AS n FROM flowstate_runs WHERE status = 'completed'",
        "SELECT COUNT(*) AS n FROM flowstate_runs WHERE lease_owner IS NOT NULL",
        "SELECT COUNT(*) AS n FROM flowstate_runs WHERE status = 'running'",
    ];
    for (slot, sql) in out.iter_mut().zip(queries) {
        *slot = conn.count(sql).await.expect(sql);
    }
    out
}

async fn leases_through_a_server_restart(dialect: Dialect) {
    let (mut server, url) = migrated_server(dialect).await;
    let setup = store(&url, 2).await;
    bounded("creating the runs", Duration::from_secs(60), async {
        for i in 0..RUNS {
            setup
                .create_run(NewRun::new("faults.leased", json!({ "i": i })))
                .await
                .expect("a run");
        }
    })
    .await;

    let leasing = store(&url, WORKERS).await;
    let seen = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (store, seen, stop) = (Arc::clone(&leasing), Arc::clone(&seen), Arc::clone(&stop));
            tokio::spawn(async move {
                let name = format!("worker-{w}");
                while !stop.load(Ordering::SeqCst) {
                    let leases = match store.claim_runs(&name, 8, LEASE).await {
                        Ok(leases) => leases,
                        Err(err) if err.is_retryable() => {
                            seen.errors.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        Err(err) => {
                            seen.wrong.fetch_add(1, Ordering::SeqCst);
                            eprintln!("{name}: claim_runs: {err}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    if leases.is_empty() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    for lease in leases {
                        let wakes = seen
                            .asleep
                            .lock()
                            .expect("the sleepers")
                            .contains(&lease.run.id);
                        if sleeper(&lease.run.input) && !wakes {
                            match store.wait(lease.run.id, lease.token, Wait::For(NAP)).await {
                                Ok(()) => {
                                    seen.asleep
                                        .lock()
                                        .expect("the sleepers")
                                        .insert(lease.run.id);
                                    seen.slept.fetch_add(1, Ordering::SeqCst);
                                }
                                Err(Error::LeaseLost { .. }) => {
                                    seen.lost.fetch_add(1, Ordering::SeqCst);
                                }
                                Err(err) if err.is_retryable() => {
                                    seen.errors.fetch_add(1, Ordering::SeqCst);
                                }
                                Err(err) => {
                                    eprintln!("{name}: wait: {err}");
                                    seen.wrong.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                            continue;
                        }
                        match store
                            .finish(lease.run.id, lease.token, RunOutcome::Completed)
                            .await
                        {
                            Ok(()) => seen.finished.fetch_add(1, Ordering::SeqCst),
                            Err(Error::LeaseLost { .. }) => {
                                seen.lost.fetch_add(1, Ordering::SeqCst)
                            }
                            Err(err) if err.is_retryable() => {
                                seen.errors.fetch_add(1, Ordering::SeqCst)
                            }
                            Err(err) => {
                                eprintln!("{name}: finish: {err}");
                                seen.wrong.fetch_add(1, Ordering::SeqCst)
                            }
                        };
                    }
                }
            })
        })
        .collect();

    // The recovery sweep of waits beside the workers, through the kill:
    // it may end a sleeper's wait before a claim takes it, never one that
    // is not due (every sleeper still sleeps exactly once, below).
    let sweeps = tokio::spawn({
        let (store, stop) = (Arc::clone(&leasing), Arc::clone(&stop));
        async move {
            let (mut passes, mut woken, mut failed) = (0_u64, 0_u64, 0_u64);
            while !stop.load(Ordering::SeqCst) {
                match store.wake_expired().await {
                    Ok(n) => {
                        passes += 1;
                        woken += n;
                    }
                    Err(err) if err.is_retryable() => failed += 1,
                    Err(err) => panic!("wake_expired: {err}"),
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (passes, woken, failed)
        }
    });

    let Restarted {
        before_kill,
        recovered_in,
        healed,
    } = kill_mid_flight(&mut server, &seen.finished, KILL_AFTER, "finishing").await;
    // Runs a cut-off claim took come back when their lease runs out.
    let drained = tokio::time::timeout(Duration::from_secs(60), async {
        while counts(&url).await[0] < RUNS {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .is_ok();
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        bounded("a worker", Duration::from_secs(30), worker)
            .await
            .expect("a worker");
    }

    let (passes, woken, sweeps_failed) = bounded("the sweep", Duration::from_secs(30), sweeps)
        .await
        .expect("the sweep");
    let [completed, held, running] = counts(&url).await;
    let finished = seen.finished.load(Ordering::SeqCst);
    let mut scenario = Scenario::new(
        "run leases through a server restart",
        dialect,
        format!(
            "{RUNS} runs (one in four first asleep 300 ms), {WORKERS} workers and a wake sweep, claim_runs of \
             up to 8, leases of 3 s"
        ),
        "SIGKILL of the server mid-leasing, restart".into(),
    );
    scenario.lost += RUNS.saturating_sub(completed);
    scenario.doubled += finished.saturating_sub(completed);
    scenario.stuck += held + running;
    scenario.wrong += seen.wrong.load(Ordering::SeqCst);
    scenario.heal = Heal::Healed(healed);
    let (lost, errors, slept) = (
        seen.lost.load(Ordering::SeqCst),
        seen.errors.load(Ordering::SeqCst),
        seen.slept.load(Ordering::SeqCst),
    );
    scenario.note(format!(
        "server back in {} ms; {before_kill} finished before the kill; {errors} calls failed \
         retryably, {lost} finishes or waits found their lease lost; {slept} runs slept and \
         woke; drained {}; {completed} runs completed, {finished} finishes won, {held} held, \
         {running} running; the wake sweep: {passes} passes, {woken} waits ended, \
         {sweeps_failed} passes failed retryably",
        recovered_in.as_millis(),
        if drained {
            "in time"
        } else {
            "NOT within 60 s"
        }
    ));
    assert!(
        errors > 0,
        "the kill hit no call: the scenario proves nothing"
    );
    assert!(passes > 0, "the wake sweep never ran");
    assert_eq!(
        slept,
        RUNS / 4,
        "every fourth run slept once, then was finished"
    );
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_through_a_server_restart_postgres() {
    leases_through_a_server_restart(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_through_a_server_restart_mariadb() {
    leases_through_a_server_restart(Dialect::Mysql).await;
}
