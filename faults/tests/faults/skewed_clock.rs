//! Skewed clocks: two stores on one database, one whose clock is 10
//! minutes behind and one 10 minutes ahead, race to lease the same 64
//! runs (real concurrency, released together). Whichever clock stamps the
//! rows, a lease is measured on the database's clock, so no run is ever
//! held by both: the two sets of leases are disjoint and cover every run.
//! Then every lease runs out (the shared lease clock moved), both race
//! again, and every old holder's renew is `LeaseLost`; the new holders
//! complete every run.
//!
//! Counted: doubled = runs leased by both at once, and stale renews that
//! went through; lost = runs never leased, or not completed; stuck = runs
//! still leased at the end; wrong = errors where an answer was due.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{RunLeaseStore as _, RunStore as _};
use flowstate_core::{Error, NewRun, RunId, RunLease, RunOutcome, RunStatus};
use flowstate_faults::clock::SkewedClock;
use flowstate_faults::{Scenario, SharedDb};
use flowstate_store_diesel::{Dialect, DieselStore, LeaseClockOffset, StoreConfig};
use tokio::sync::Barrier;

/// How long a lease is taken for.
const LEASE: Duration = Duration::from_secs(60);
/// How many runs.
const RUNS: usize = 64;

/// Both stores claim one run at a time until neither finds one; answers
/// each run's leases, by store (0 behind, 1 ahead), and the errors.
async fn race(
    stores: &[Arc<DieselStore>; 2],
) -> (BTreeMap<RunId, Vec<(usize, RunLease)>>, Vec<String>) {
    let barrier = Arc::new(Barrier::new(2));
    let tasks: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(i, store)| {
            let store = Arc::clone(store);
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                let worker = ["behind", "ahead"][i];
                let mut mine = Vec::new();
                let mut errors = Vec::new();
                barrier.wait().await;
                loop {
                    match store.claim_run(worker, LEASE).await {
                        Ok(Some(lease)) => mine.push(lease),
                        Ok(None) => break,
                        Err(err) if err.is_retryable() => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        Err(err) => {
                            errors.push(format!("{worker}'s claim: {err}"));
                            break;
                        }
                    }
                }
                (i, mine, errors)
            })
        })
        .collect();
    let mut leases: BTreeMap<RunId, Vec<(usize, RunLease)>> = BTreeMap::new();
    let mut errors = Vec::new();
    for task in tasks {
        let (i, mine, errs) = task.await.expect("a racer");
        for lease in mine {
            leases.entry(lease.run.id).or_default().push((i, lease));
        }
        errors.extend(errs);
    }
    (leases, errors)
}

async fn skewed_clocks(dialect: Dialect) {
    let db = SharedDb::migrated(dialect).await.expect("a database");
    let offset = LeaseClockOffset::default();
    let config = |minutes| {
        StoreConfig::default()
            .pool_size(2)
            .lease_clock_offset(offset.clone())
            .clock(Arc::new(SkewedClock::minutes(minutes)))
    };
    let stores = [
        Arc::new(db.store(config(-10)).await.expect("the store behind")),
        Arc::new(db.store(config(10)).await.expect("the store ahead")),
    ];
    let mut runs = Vec::new();
    for i in 0..RUNS {
        let store = &stores[i % 2];
        let run = store
            .create_run(NewRun::new("skew", serde_json::json!({ "i": i })))
            .await
            .expect("create a run");
        runs.push(run.record.id);
    }
    let mut scenario = Scenario::new(
        "skewed clock",
        dialect,
        format!("{RUNS} runs, 2 stores racing, twice"),
        "store clocks 10 min behind and 10 min ahead".into(),
    );

    // Round one: fresh runs.
    let (first, errors) = race(&stores).await;
    scenario.wrong += errors.len() as u64;
    for error in &errors {
        scenario.note(error);
    }
    judge_round(&mut scenario, &runs, &first, "first");

    // Round two: every lease run out; the old holders must have lost them.
    offset.advance(LEASE + Duration::from_secs(1));
    let (second, errors) = race(&stores).await;
    scenario.wrong += errors.len() as u64;
    for error in &errors {
        scenario.note(error);
    }
    judge_round(&mut scenario, &runs, &second, "second");
    for holders in first.values() {
        for (i, old) in holders {
            match stores[*i].renew(old.run.id, old.token, LEASE).await {
                Err(Error::LeaseLost { .. }) => {}
                Ok(()) => {
                    scenario.doubled += 1;
                    scenario.note(format!("a stale renew of {} went through", old.run.id));
                }
                Err(err) => {
                    scenario.wrong += 1;
                    scenario.note(format!("stale renew: {err}"));
                }
            }
        }
    }
    let mut held_by = [0u64; 2];
    for holders in second.values() {
        let (i, lease) = &holders[0];
        held_by[*i] += 1;
        if let Err(err) = stores[*i]
            .finish(lease.run.id, lease.token, RunOutcome::Completed)
            .await
        {
            scenario.wrong += 1;
            scenario.note(format!("finish: {err}"));
        }
    }
    for run in &runs {
        let status = stores[0].get_run(*run).await.expect("read a run").status;
        let state = stores[1].lease_state(*run).await.expect("read a lease");
        if status != RunStatus::Completed {
            scenario.lost += 1;
            scenario.note(format!("run {run} ended {status}"));
        }
        if state.worker.is_some() {
            scenario.stuck += 1;
        }
    }
    scenario.note(format!(
        "second round: {} runs to the store behind, {} ahead",
        held_by[0], held_by[1]
    ));
    scenario.finish();
}

/// One round's leases: each run leased exactly once.
fn judge_round(
    scenario: &mut Scenario,
    runs: &[RunId],
    leases: &BTreeMap<RunId, Vec<(usize, RunLease)>>,
    round: &str,
) {
    for run in runs {
        match leases.get(run).map_or(0, Vec::len) {
            0 => {
                scenario.lost += 1;
                scenario.note(format!("{round} round: run {run} leased by nobody"));
            }
            1 => {}
            n => {
                scenario.doubled += n as u64 - 1;
                scenario.note(format!("{round} round: run {run} leased {n} times"));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_clocks_postgres() {
    skewed_clocks(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_clocks_mariadb() {
    skewed_clocks(Dialect::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_clocks_sqlite() {
    skewed_clocks(Dialect::Sqlite).await;
}
