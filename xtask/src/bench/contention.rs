//! Contention: N workers race for the same steps. Every worker tries to
//! claim every step (each starting at a different place in the list, so
//! the workers meet), and the race must end with each step won exactly
//! once: fewer wins is a lost step, more is a double execution. The figure
//! is claims per second, wins and losses together, since a losing claim
//! costs the database as much as a winning one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use flowstate_core::ports::StepStore;
use flowstate_store_diesel::{DieselStore, StoreConfig};
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use super::throughput::{FUNCTION, create_steps};

/// What one race found.
#[derive(Clone, Copy, Debug)]
pub struct Contention {
    /// Racing workers, each on a connection of its own.
    pub workers: usize,
    /// Steps raced for.
    pub steps: usize,
    /// Claims made, wins and losses (`workers * steps`).
    pub claims: usize,
    /// Claims that won: `steps` when every step was won exactly once.
    pub wins: usize,
    /// How long the race took.
    pub elapsed: Duration,
}

impl Contention {
    /// Claims, won or lost, per second.
    pub fn claims_per_second(&self) -> f64 {
        self.claims as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Races `workers` workers for `steps` fresh steps on `url`; fails unless
/// every step was won exactly once.
pub async fn measure(url: &str, workers: usize, steps: usize) -> Result<Contention> {
    let config = StoreConfig::default()
        .pool_size(workers)
        .acquire_timeout(Duration::from_secs(30));
    let store = Arc::new(
        DieselStore::open(url, config)
            .await
            .context("cannot open the store")?,
    );
    let items = Arc::new(create_steps(&store, steps, workers).await?);
    let wins: Arc<Vec<AtomicU32>> = Arc::new((0..items.len()).map(|_| AtomicU32::new(0)).collect());
    let barrier = Arc::new(Barrier::new(workers));
    let started = Instant::now();
    let mut set: JoinSet<flowstate_core::Result<()>> = JoinSet::new();
    for worker in 0..workers {
        let (store, items, wins, barrier) = (
            Arc::clone(&store),
            Arc::clone(&items),
            Arc::clone(&wins),
            Arc::clone(&barrier),
        );
        set.spawn(async move {
            // Every connection opened before the race starts.
            let _ = store.list_steps(flowstate_core::RunId::generate()).await;
            barrier.wait().await;
            let start = worker * items.len() / workers;
            for offset in 0..items.len() {
                let index = (start + offset) % items.len();
                let (run, name) = &items[index];
                if store.claim_step(*run, name, FUNCTION).await?.is_some() {
                    wins[index].fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done.context("a racing worker panicked")?
            .context("a racing worker failed")?;
    }
    let elapsed = started.elapsed();
    let counts: Vec<u32> = wins.iter().map(|w| w.load(Ordering::Relaxed)).collect();
    let unclaimed = counts.iter().filter(|&&n| n == 0).count();
    let doubled = counts.iter().filter(|&&n| n > 1).count();
    ensure!(
        unclaimed == 0 && doubled == 0,
        "{unclaimed} steps were never won and {doubled} were won more than once"
    );
    Ok(Contention {
        workers,
        steps: items.len(),
        claims: workers * items.len(),
        wins: counts.iter().map(|&n| n as usize).sum(),
        elapsed,
    })
}
