//! Retention through a server restart: a spawned `Pruner` deletes 1,200
//! runs settled ten days ago (each with a step and a state key), one small
//! batch a pass, while 8 workers claim and complete 500 steps of live runs
//! beside it, and the throw-away server is SIGKILLed and started again
//! mid-prune. A batch is one statement (one transaction on MySQL), so the
//! kill leaves it whole or undone; the pruner's loop must log the failed
//! passes and go on with the same store. Judged from the database: every
//! old run gone with its rows, not one live run or step touched, and the
//! workers' steps each run once, nothing lost or stuck. Time to heal runs
//! from the server accepting connections again to the first pass that
//! deleted again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, RunStatus};
use flowstate_faults::Scenario;
use flowstate_faults::clock::SkewedClock;
use flowstate_faults::load::CrewOptions;
use flowstate_faults::report::Heal;
use flowstate_faults::sql::RawConn;
use flowstate_recovery::{Pruner, RetentionPolicy};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};
use serde_json::json;

use crate::support::{StepRun, bounded, kill_and_restart, migrated_server, store};

/// Runs settled ten days ago, for the pruner.
const OLD_RUNS: u64 = 1_200;
/// The pruner's batch: small, so the prune is still going when the server
/// dies.
const BATCH: u32 = 10;
/// Live runs the workers work on, 10 steps each.
const LIVE_RUNS: usize = 50;
/// The workflow of the old runs (the workers' runs are `faults`).
const OLD: &str = "settled-long-ago";

/// `OLD_RUNS` runs of workflow [`OLD`], each with a step and a state key,
/// completed by a store whose clock reads ten days back.
async fn seed_old_runs(url: &str) {
    let config = StoreConfig::default()
        .pool_size(4)
        .clock(Arc::new(SkewedClock::minutes(-10 * 24 * 60)));
    let past = Arc::new(
        DieselStore::open(url, config)
            .await
            .expect("a store ten days back"),
    );
    let seeders: Vec<_> = (0..4)
        .map(|part| {
            let past = Arc::clone(&past);
            tokio::spawn(async move {
                for n in (part..OLD_RUNS).step_by(4) {
                    let run = past
                        .create_run(NewRun::new(OLD, json!({ "n": n })))
                        .await
                        .expect("an old run")
                        .record
                        .id;
                    past.insert_step(NewStep::new(run, "only", "f", json!({})))
                        .await
                        .expect("its step");
                    past.write_state(run, "k", &json!(n))
                        .await
                        .expect("its state");
                    past.set_run_status(run, RunStatus::Completed)
                        .await
                        .expect("settled");
                }
            })
        })
        .collect();
    for seeder in seeders {
        seeder.await.expect("a seeder");
    }
}

/// Rows left of the old runs: runs, then steps and state keys of runs no
/// longer there (none, if the schema's cascades held).
async fn old_rows(url: &str) -> (u64, u64, u64) {
    let mut conn = RawConn::connect(url).await.expect("a raw connection");
    let runs = conn
        .count(&format!(
            "SELECT COUNT(*) AS n FROM flowstate_runs WHERE workflow = '{OLD}'"
        ))
        .await
        .expect("count old runs");
    let orphan_steps = conn
        .count(
            "SELECT COUNT(*) AS n FROM flowstate_steps s WHERE NOT EXISTS \
             (SELECT 1 FROM flowstate_runs r WHERE r.id = s.run_id)",
        )
        .await
        .expect("count orphan steps");
    let orphan_state = conn
        .count(
            "SELECT COUNT(*) AS n FROM flowstate_run_state s WHERE NOT EXISTS \
             (SELECT 1 FROM flowstate_runs r WHERE r.id = s.run_id)",
        )
        .await
        .expect("count orphan state");
    (runs, orphan_steps, orphan_state)
}

async fn prune_through_a_server_restart(dialect: Dialect) {
    let (mut server, url) = migrated_server(dialect).await;
    bounded(
        "seeding the old runs",
        Duration::from_secs(90),
        seed_old_runs(&url),
    )
    .await;
    assert_eq!(old_rows(&url).await, (OLD_RUNS, 0, 0));

    let options = CrewOptions::default();
    let run = StepRun::start(store(&url, 8).await, &url, LIVE_RUNS, 10, options).await;
    let policy = RetentionPolicy {
        batch: BATCH,
        max_batches: 1,
        ..RetentionPolicy::uniform(Duration::from_secs(7 * 24 * 60 * 60))
    };
    let pruner = Pruner::new(store(&url, 2).await, policy)
        .with_interval(Duration::from_millis(5))
        .spawn();
    bounded("the first 200 pruned", Duration::from_secs(30), async {
        while pruner.report().runs < 200 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    bounded(
        "100 completions",
        Duration::from_secs(30),
        run.crew.progress.wait_for(100, Duration::from_secs(30)),
    )
    .await
    .expect("the load is under way");
    let before_kill = pruner.report();
    let recovered_in = kill_and_restart(&mut server).await;
    let back = Instant::now();
    run.crew.progress.fault_over();
    let at_restart = pruner.report();
    let healed = bounded(
        "the pruner deleting again",
        Duration::from_secs(30),
        async {
            while pruner.report().runs <= at_restart.runs {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            back.elapsed()
        },
    )
    .await;
    bounded("every old run pruned", Duration::from_secs(60), async {
        while old_rows(&url).await.0 > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let pruned = pruner.shutdown().await;

    let mut scenario = Scenario::new(
        "prune through a server restart",
        dialect,
        format!(
            "{OLD_RUNS} old runs pruned {BATCH} a batch beside {} steps, {} workers",
            LIVE_RUNS * 10,
            options.workers
        ),
        "SIGKILL of the server mid-prune, restart".into(),
    );
    scenario.note(format!(
        "server back in {} ms; {} pruned before the kill; {} passes, {} failed; time to heal is the pruner's",
        recovered_in.as_millis(),
        before_kill.runs,
        pruned.passes,
        pruned.failed_passes
    ));
    // The verdict on the workers' steps (none deleted, each run once).
    run.finish(&mut scenario, &url).await;
    let (left, orphan_steps, orphan_state) = old_rows(&url).await;
    scenario.stuck += left;
    scenario.wrong += orphan_steps + orphan_state;
    if orphan_steps + orphan_state > 0 {
        scenario.note(format!(
            "{orphan_steps} steps and {orphan_state} state keys outlived their runs"
        ));
    }
    let mut conn = RawConn::connect(&url).await.expect("a raw connection");
    let live = conn
        .count("SELECT COUNT(*) AS n FROM flowstate_runs WHERE workflow = 'faults'")
        .await
        .expect("count live runs");
    scenario.lost += (LIVE_RUNS as u64).saturating_sub(live);
    scenario.heal = Heal::Healed(healed);
    assert!(
        pruned.failed_passes > 0,
        "the kill hit no pass of the pruner: it proves nothing ({pruned:?})"
    );
    assert!(
        pruned.runs <= OLD_RUNS,
        "the pruner counted more deletions than there were old runs: {pruned:?}"
    );
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_through_a_server_restart_postgres() {
    prune_through_a_server_restart(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_through_a_server_restart_mariadb() {
    prune_through_a_server_restart(Dialect::Mysql).await;
}
