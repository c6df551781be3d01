//! A worker pool: a thousand steps claimed in batches, run by eight
//! workers, their completions group-committed, every tenth step failing
//! its first attempt and retried; then a graceful shutdown that accounts
//! for every claimed step.
//!
//! On testkit's `MemoryStore`; any store with `BatchStepStore`
//! (`flowstate-store-diesel`'s `DieselStore`) takes its place unchanged.
//!
//! `cargo run -p flowstate-pool --example pool`

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Completion, NewRun, NewStep, Step};
use flowstate_pool::{PoolConfig, WorkerPool};
use flowstate_testkit::MemoryStore;
use serde_json::json;

const RUNS: usize = 20;
const STEPS_PER_RUN: usize = 50;

#[tokio::main]
async fn main() -> flowstate_core::Result<()> {
    let store = Arc::new(MemoryStore::new());
    for r in 0..RUNS {
        let run = store
            .create_run(NewRun::new("resize", json!({ "batch": r })))
            .await?;
        for s in 0..STEPS_PER_RUN {
            let input = json!({ "image": r * STEPS_PER_RUN + s });
            let step = NewStep::new(run.record.id, format!("image-{s}"), "resize", input);
            store.insert_step(step).await?;
        }
    }
    let total = (RUNS * STEPS_PER_RUN) as u64;

    let started = Instant::now();
    let pool = WorkerPool::new(Arc::clone(&store), |step: Step| async move {
        // The handler: the step's work, answered as a completion.
        let image = step.input["image"].as_u64().unwrap_or(0);
        if image % 10 == 0 && step.attempt == 1 {
            Completion::Failed(json!({ "message": "thumbnailer timed out" }))
        } else {
            Completion::Succeeded(json!({ "image": image, "attempt": step.attempt }))
        }
    })
    .with_config(PoolConfig::default().workers(8))
    .spawn();

    while pool.report().succeeded < total {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let report = pool.shutdown().await;
    println!(
        "{} steps in {:?}: {} claims, {} claimed, {} succeeded, {} failed (then retried)",
        total,
        started.elapsed(),
        report.claims,
        report.claimed,
        report.succeeded,
        report.failed
    );
    println!(
        "nothing lost: {} commit errors, {} given up, {} claims lost",
        report.commit_errors, report.given_up, report.claims_lost
    );
    assert_eq!((report.succeeded, report.failed), (total, total / 10));
    Ok(())
}
