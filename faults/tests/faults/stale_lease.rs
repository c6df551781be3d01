//! A stale lease holder: store A leases 16 runs, its leases run out (the
//! shared lease clock moved past them, as store-diesel's tests do), store
//! B takes every run over. Then, at the same time, A tries to renew,
//! finish, release and claim again while B finishes its runs (half
//! completed, half failed with B's reason). Every call of A is `LeaseLost`
//! (or finds nothing to claim), and each run ends as B said.
//!
//! Counted: lost = runs not ending as B said; doubled = calls of A that
//! went through (a stale holder writing) or runs A claimed again; stuck =
//! runs still leased at the end; wrong = answers of A other than
//! `LeaseLost`, and B's calls that failed.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{RunLeaseStore as _, RunStore as _};
use flowstate_core::{Error, NewRun, Release, RunOutcome, RunStatus};
use flowstate_faults::{Scenario, SharedDb};
use flowstate_store_diesel::{Dialect, LeaseClockOffset, StoreConfig};

/// How long a lease is taken for.
const LEASE: Duration = Duration::from_secs(60);
/// How many runs.
const RUNS: usize = 16;

async fn stale_lease_holder(dialect: Dialect) {
    let db = SharedDb::migrated(dialect).await.expect("a database");
    let offset = LeaseClockOffset::default();
    let config = StoreConfig::default()
        .pool_size(2)
        .lease_clock_offset(offset.clone());
    let a = Arc::new(db.store(config.clone()).await.expect("store A"));
    let b = Arc::new(db.store(config).await.expect("store B"));
    for i in 0..RUNS {
        a.create_run(NewRun::new("lease", serde_json::json!({ "i": i })))
            .await
            .expect("create a run");
    }
    let held = a.claim_runs("A", 32, LEASE).await.expect("A claims");
    assert_eq!(held.len(), RUNS, "A leases every run");
    offset.advance(LEASE + Duration::from_secs(1));
    let taken = b.claim_runs("B", 32, LEASE).await.expect("B claims");
    assert_eq!(taken.len(), RUNS, "B takes every expired run over");

    let mut scenario = Scenario::new(
        "stale lease holder",
        dialect,
        format!("{RUNS} runs, 2 stores"),
        "A's leases run out, B takes over; A renews, finishes, releases".into(),
    );
    let stale = {
        let a = Arc::clone(&a);
        let held = held.clone();
        tokio::spawn(async move {
            let mut answers = Vec::new();
            for lease in &held {
                let (run, token) = (lease.run.id, lease.token);
                answers.push(("renew", a.renew(run, token, LEASE).await));
                answers.push((
                    "finish",
                    a.finish(run, token, RunOutcome::Failed { reason: "A".into() })
                        .await,
                ));
                answers.push((
                    "release",
                    a.release(run, token, Release::Yield).await.map(drop),
                ));
            }
            let again = a.claim_runs("A", 32, LEASE).await;
            (answers, again)
        })
    };
    let mut b_failed = 0;
    for (i, lease) in taken.iter().enumerate() {
        let outcome = if i % 2 == 0 {
            RunOutcome::Completed
        } else {
            RunOutcome::Failed { reason: "B".into() }
        };
        if let Err(err) = b.finish(lease.run.id, lease.token, outcome).await {
            scenario.note(format!("B's finish failed: {err}"));
            b_failed += 1;
        }
    }
    let (answers, again) = stale.await.expect("A's task");
    for (what, answer) in &answers {
        match answer {
            Err(Error::LeaseLost { .. }) => {}
            Ok(()) => {
                scenario.doubled += 1;
                scenario.note(format!("A's stale {what} went through"));
            }
            Err(err) => {
                scenario.wrong += 1;
                scenario.note(format!("A's {what}: {err}"));
            }
        }
    }
    match again {
        Ok(again) => scenario.doubled += again.len() as u64,
        Err(err) => {
            scenario.wrong += 1;
            scenario.note(format!("A's claim: {err}"));
        }
    }
    scenario.wrong += b_failed;

    for (i, lease) in taken.iter().enumerate() {
        let run = b.get_run(lease.run.id).await.expect("read the run");
        let state = b.lease_state(lease.run.id).await.expect("read the lease");
        let (status, reason) = if i % 2 == 0 {
            (RunStatus::Completed, None)
        } else {
            (RunStatus::Failed, Some("B"))
        };
        if run.status != status || state.failure_reason.as_deref() != reason {
            scenario.lost += 1;
            scenario.note(format!(
                "run {} ended {} ({:?}), B said {status}",
                run.id, run.status, state.failure_reason
            ));
        }
        if state.worker.is_some() || state.token != lease.token {
            scenario.stuck += 1;
            scenario.note(format!(
                "run {} still leased to {:?} (token {})",
                run.id, state.worker, state.token
            ));
        }
    }
    scenario.note(format!(
        "A answered {} stale calls; tokens {} then {}",
        answers.len(),
        held[0].token,
        taken[0].token
    ));
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_lease_holder_postgres() {
    stale_lease_holder(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_lease_holder_mariadb() {
    stale_lease_holder(Dialect::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_lease_holder_sqlite() {
    stale_lease_holder(Dialect::Sqlite).await;
}
