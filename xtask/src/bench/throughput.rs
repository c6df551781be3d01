//! Throughput: steps per second for claim + succeed, with N workers sharing
//! a pool of N connections (so each has a connection of its own). Creating
//! the steps is not timed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, RunId, StepTransition};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;
use tokio::task::JoinSet;

/// Steps per bench run.
const STEPS_PER_RUN: usize = 10;

/// The function every bench step is pinned to.
pub const FUNCTION: &str = "bench.work";

/// What one throughput measurement found.
#[derive(Clone, Copy, Debug)]
pub struct Throughput {
    /// Steps claimed and succeeded.
    pub steps: usize,
    /// How long that took.
    pub elapsed: Duration,
}

impl Throughput {
    /// Steps per second.
    pub fn per_second(&self) -> f64 {
        self.steps as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// On a terminal, a task that rewrites one line with how many of `total`
/// steps the workers have taken, twice a second, until aborted.
pub fn show_progress(
    label: String,
    next: Arc<AtomicUsize>,
    total: usize,
) -> Option<tokio::task::JoinHandle<()>> {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let done = next.load(Ordering::Relaxed).min(total);
            eprint!("\r  {label}: {done}/{total} steps");
        }
    }))
}

/// Creates `steps` pending steps on `store` (in runs of ten), `tasks` at a
/// time; returns `(run, step name)` for each.
pub async fn create_steps(
    store: &Arc<DieselStore>,
    steps: usize,
    tasks: usize,
) -> Result<Vec<(RunId, String)>> {
    create_steps_for(store, steps, tasks, FUNCTION).await
}

/// [`create_steps`], pinned to `function`.
pub async fn create_steps_for(
    store: &Arc<DieselStore>,
    steps: usize,
    tasks: usize,
    function: &'static str,
) -> Result<Vec<(RunId, String)>> {
    let runs = steps.div_ceil(STEPS_PER_RUN);
    let tasks = tasks.clamp(1, 8);
    let mut set: JoinSet<flowstate_core::Result<Vec<(RunId, String)>>> = JoinSet::new();
    for task in 0..tasks {
        let store = Arc::clone(store);
        set.spawn(async move {
            let mut made = Vec::new();
            for run_index in (task..runs).step_by(tasks) {
                let run = store
                    .create_run(NewRun::new("bench.throughput", json!({})))
                    .await?
                    .record
                    .id;
                let first = run_index * STEPS_PER_RUN;
                for index in first..(first + STEPS_PER_RUN).min(steps) {
                    let name = format!("step-{index}");
                    store
                        .insert_step(NewStep::new(run, name.clone(), function, json!({})))
                        .await?;
                    made.push((run, name));
                }
            }
            Ok(made)
        });
    }
    let mut all = Vec::with_capacity(steps);
    while let Some(made) = set.join_next().await {
        all.extend(
            made.context("a setup task panicked")?
                .context("creating the bench steps failed")?,
        );
    }
    Ok(all)
}

/// Sends `workers` reads at once (an unknown run's steps), so the pool
/// opens a connection for each that finds none idle: a round's clock then
/// starts with its connections open, and a workload that set up on one
/// connection times (almost) no connect.
pub(super) async fn open_every_connection(store: &Arc<DieselStore>, workers: usize) {
    let mut warm = JoinSet::new();
    for _ in 0..workers {
        let store = Arc::clone(store);
        warm.spawn(async move { store.list_steps(RunId::generate()).await.err() });
    }
    while warm.join_next().await.is_some() {}
}

/// Claims and succeeds `steps` fresh steps on `url` with `workers` workers;
/// on a terminal, `progress` labels a line that counts the steps done.
pub async fn measure(
    url: &str,
    workers: usize,
    steps: usize,
    progress: &str,
) -> Result<Throughput> {
    let config = StoreConfig::default()
        .pool_size(workers)
        .acquire_timeout(Duration::from_secs(30));
    let store = Arc::new(
        DieselStore::open(url, config)
            .await
            .context("cannot open the store")?,
    );
    let items = Arc::new(create_steps(&store, steps, workers).await?);
    open_every_connection(&store, workers).await;

    let next = Arc::new(AtomicUsize::new(0));
    let lost = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let ticker = show_progress(progress.to_owned(), Arc::clone(&next), items.len());
    let mut set: JoinSet<flowstate_core::Result<()>> = JoinSet::new();
    for _ in 0..workers {
        let (store, items, next, lost) = (
            Arc::clone(&store),
            Arc::clone(&items),
            Arc::clone(&next),
            Arc::clone(&lost),
        );
        set.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some((run, name)) = items.get(index) else {
                    return Ok(());
                };
                match store.claim_step(*run, name, FUNCTION).await? {
                    Some(step) => {
                        store
                            .transition_claimed(
                                step.claim(),
                                StepTransition::Succeeded(json!({ "i": index })),
                            )
                            .await?;
                    }
                    None => {
                        lost.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    while let Some(done) = set.join_next().await {
        done.context("a bench worker panicked")?
            .context("a bench worker failed")?;
    }
    let elapsed = started.elapsed();
    if let Some(ticker) = ticker {
        ticker.abort();
        eprint!("\r{:60}\r", "");
    }
    ensure!(
        lost.load(Ordering::Relaxed) == 0,
        "a claim of a fresh, undelivered step answered None"
    );
    Ok(Throughput {
        steps: items.len(),
        elapsed,
    })
}
