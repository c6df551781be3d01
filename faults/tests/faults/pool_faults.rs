//! The worker pool under faults: a `flowstate_pool::WorkerPool` (batch
//! claims, group-committed completions, a failed flush sent again with
//! backoff) works seeded steps on a throw-away server while
//!
//! 1. the server is SIGKILLed and started again (400 steps), then, on a
//!    second database of the same server,
//! 2. every connection is cut on the wire by the proxy (200 steps).
//!
//! After each, the pool finishes what it can and shuts down, one recovery
//! pass runs past every claim's deadline (a batch claim whose answer was
//! lost leaves its steps running with nobody holding them), a drain works
//! the re-driven runs, and the database must say: 0 lost, 0 doubled, 0
//! stuck. Wrong: completions the pool did not commit (given up, claims
//! lost, refused), which nothing in these faults justifies. Time to heal:
//! from the server back (or the cut) to the pool's first answered claim
//! and first committed completion after it, its own backoff included.
//! The note carries the pool's `PoolReport`.

use std::time::Duration;

use flowstate_faults::load::seed;
use flowstate_faults::pool_load::{PoolDone, PoolLoad};
use flowstate_faults::recovery::{recover_and_drain, store_past_deadlines};
use flowstate_faults::report::finish_all;
use flowstate_faults::{FaultProxy, Heal, Scenario, Throwaway, Verdict};
use flowstate_store_diesel::Dialect;

use crate::support::{HEAL_BOUND, bounded, kill_and_restart, store};

/// How long the pool may take to finish after the fault.
const FINISH_BOUND: Duration = Duration::from_secs(60);

/// The fault of one phase.
#[derive(Clone, Copy)]
enum Fault {
    /// SIGKILL of the server, restart.
    Restart,
    /// The proxy cuts every connection.
    Cut,
}

/// One phase: `runs` x 10 steps on database `name` of `server`, the fault
/// struck once `strike_at` completions are committed; answers its row.
async fn phase(
    server: &mut Throwaway,
    name: &str,
    runs: usize,
    strike_at: u64,
    fault: Fault,
) -> Scenario {
    let dialect = server.dialect();
    let url = server
        .migrated_database(name)
        .await
        .expect("the phase's database");
    let proxy = FaultProxy::to_local(server.port())
        .await
        .expect("the proxy");
    let work_url = match fault {
        Fault::Restart => url.clone(),
        Fault::Cut => server.via_port(&url, proxy.port()),
    };
    let steps = {
        let seeding = store(&url, 2).await;
        seed(&seeding, runs, 10).await.expect("seed the steps")
    };
    let mut load = PoolLoad::start(&work_url, &work_url)
        .await
        .expect("start the pool");
    bounded(
        "the load under way",
        Duration::from_secs(30),
        load.wait_for(strike_at, Duration::from_secs(30)),
    )
    .await
    .expect("the load is under way");
    let before = load.stats();
    let (what, detail) = match fault {
        Fault::Restart => {
            let back = kill_and_restart(server).await;
            (
                "SIGKILL of the server, restart",
                format!("server back in {} ms", back.as_millis()),
            )
        }
        Fault::Cut => {
            let cut = proxy.cut_all();
            (
                "proxy cut_all (reset both ways)",
                format!("{cut} connections cut"),
            )
        }
    };
    load.fault_over();
    let heal = load.heal(HEAL_BOUND).await;
    let ledger = load.ledger();
    let done: PoolDone = load
        .finish(&url, FINISH_BOUND)
        .await
        .expect("the pool finishes");
    let past = store_past_deadlines(&url)
        .await
        .expect("the recovery store");
    let recovery = bounded(
        "the recovery pass",
        Duration::from_secs(60),
        recover_and_drain(past, ledger, &steps),
    )
    .await
    .expect("the recovery pass");
    let mut scenario = Scenario::new(
        "pool under faults",
        dialect,
        format!("{} steps, WorkerPool of 8 workers, claims of 16", runs * 10),
        what.into(),
    );
    Verdict::judge(&mut scenario, &url, None, &recovery)
        .await
        .expect("read the verdict");
    scenario.heal = heal;
    scenario.wrong += done.stats.commit_errors + done.ledger_failures;
    scenario.note(detail);
    scenario.note(format!(
        "at the fault: {} committed, {} claimed",
        before.succeeded, before.claimed
    ));
    scenario.note(done.summary());
    if !matches!(heal, Heal::Healed(_)) {
        scenario.note(format!("server log: {}", server.log_tail(3)));
    }
    drop(proxy);
    scenario
}

async fn pool_under_faults(dialect: Dialect) {
    let mut server = Throwaway::start(dialect)
        .await
        .expect("a throw-away server");
    let restart = phase(&mut server, "pool_restart", 40, 100, Fault::Restart).await;
    let cut = phase(&mut server, "pool_cut", 20, 60, Fault::Cut).await;
    finish_all(&[restart, cut]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_under_faults_postgres() {
    pool_under_faults(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_under_faults_mariadb() {
    pool_under_faults(Dialect::Mysql).await;
}
