//! Per-step work beside a prune (issue 31): the bench's claim + succeed,
//! with a [`RetentionStore::prune`] loop deleting a backlog of old settled
//! runs on its own connection for the whole round, batch after batch at
//! full rate. Taken in turn with the same work alone ([`super::interleaved`]),
//! so the ratio of the two says what retention costs the workers (goal:
//! at least 0.90x).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use flowstate_core::ports::{RetentionStore, RunStore};
use flowstate_core::{NewRun, PruneKind, RunStatus};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;
use tokio::task::JoinSet;

use super::report::Rounds;
use super::throughput::{self, Throughput};

/// The column's label for `dialect_name`'s per-step work beside a prune.
pub fn label(dialect_name: &str) -> String {
    format!("{dialect_name} + prune")
}

/// Settles `runs` runs (not timed), then measures `workers` workers'
/// claim + succeed of `steps` steps while a prune loop deletes them, 500
/// a batch; answers the workers' throughput and what the prune did during
/// the round.
pub async fn measure(
    url: &str,
    workers: usize,
    steps: usize,
    progress: &str,
) -> Result<(Throughput, Pruned)> {
    let config = StoreConfig::default()
        .pool_size(8)
        .acquire_timeout(Duration::from_secs(30));
    let store = Arc::new(
        DieselStore::open(url, config)
            .await
            .context("cannot open the pruner's store")?,
    );
    // A backlog as large as the round, so the prune has work throughout.
    let mut set: JoinSet<flowstate_core::Result<()>> = JoinSet::new();
    for task in 0..8 {
        let store = Arc::clone(&store);
        let mine = steps / 8 + usize::from(task < steps % 8);
        set.spawn(async move {
            for _ in 0..mine {
                let run = store
                    .create_run(NewRun::new("bench.old", json!({})))
                    .await?
                    .record;
                store.set_run_status(run.id, RunStatus::Completed).await?;
            }
            Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done.context("a backlog task panicked")?
            .context("settling the backlog failed")?;
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let deleted = Arc::new(AtomicU64::new(0));
    let busy_us = Arc::new(AtomicU64::new(0));
    let pruner: tokio::task::JoinHandle<flowstate_core::Result<()>> = {
        let (store, stop, deleted, busy_us) = (
            Arc::clone(&store),
            Arc::clone(&stop),
            Arc::clone(&deleted),
            Arc::clone(&busy_us),
        );
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let started = std::time::Instant::now();
                let n = store.prune(PruneKind::Runs, Duration::ZERO, 500).await?;
                deleted.fetch_add(n, Ordering::Relaxed);
                if n > 0 {
                    let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    busy_us.fetch_add(took, Ordering::Relaxed);
                }
                if n == 0 {
                    // Nothing left: wait a little rather than spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            Ok(())
        })
    };
    let measured = throughput::measure(url, workers, steps, progress).await;
    stop.store(true, Ordering::Relaxed);
    pruner
        .await
        .context("the prune loop panicked")?
        .context("the prune loop failed")?;
    let during = Pruned {
        runs: deleted.load(Ordering::Relaxed),
        busy: Duration::from_micros(busy_us.load(Ordering::Relaxed)),
    };
    // What the round left is cleared, so the next round starts alike.
    while store
        .prune(PruneKind::Runs, Duration::ZERO, 5_000)
        .await
        .context("clearing the backlog")?
        > 0
    {}
    Ok((measured?, during))
}

/// What the prune loop did during one round.
#[derive(Clone, Copy, Debug)]
pub struct Pruned {
    /// Runs deleted.
    pub runs: u64,
    /// Time spent in batches that deleted something.
    pub busy: Duration,
}

/// One line per worker count: the median beside a prune over the median
/// alone, against the goal, with what the prune did in a round on average
/// (runs deleted, and the share of the round it spent deleting them).
pub fn ratios(
    name: &str,
    alone: &[Rounds],
    beside: &[Rounds],
    pruned: &[(Pruned, Duration)],
) -> Vec<String> {
    let n = pruned.len().max(1) as f64;
    let runs = pruned.iter().map(|(p, _)| p.runs as f64).sum::<f64>() / n;
    let busy = pruned
        .iter()
        .map(|(p, round)| p.busy.as_secs_f64() / round.as_secs_f64().max(1e-9))
        .sum::<f64>()
        / n;
    alone
        .iter()
        .filter_map(|a| {
            let b = beside.iter().find(|b| b.workers == a.workers)?;
            Some(format!(
                "{name} per-step beside a prune / alone, {} workers: {:.2}x \
                 (the prune deleted {runs:.0} runs a round, busy {:.0}% of it; \
                 goal: at least 0.90x)",
                a.workers,
                b.median() / a.median().max(1e-9),
                busy * 100.0
            ))
        })
        .collect()
}
