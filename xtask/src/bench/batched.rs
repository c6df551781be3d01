//! Batched mode: the claim + succeed work of [`throughput`](super::throughput)
//! done by `flowstate-pool`'s `WorkerPool` instead of one claim and one
//! transition per step: the pool claims [`CLAIM_BATCH`] steps at a time with
//! `claim_batch` and writes the completions through its `GroupCommit`, one
//! `complete_batch` per flush. Every step still gets its history row.
//!
//! The pool needs two connections at most (its claimer and its flusher);
//! `workers` is the number of handler tasks, so the column lines up with
//! the per-step one. Four batches may be in flight, so the claimer runs
//! ahead of the flushes and a flush gathers up to 256 completions (the
//! pool's default). Claims of 256 steps ran 10-20% faster on PostgreSQL
//! than claims of 64, whose fixed cost per statement (a transaction and a
//! commit) weighed more; claims of 512 were faster again, by 7-20% in runs
//! side by side, while claims of 1,000 were no faster, and flushes of 512
//! slower than flushes of 256 (a longer flush leaves the claimer less to
//! overlap). A claim takes 500, the most one listed statement carries on
//! MySQL and SQLite, so a claim there is not split either. The statements
//! it sends are counted with a
//! [`StatementLog`] over the timed part (the empty claim that finds the
//! queue drained included), and shown per step.
//!
//! Its steps are pinned to their own function ([`FUNCTION`]), so steps
//! the other measurements leave pending are never taken here.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use flowstate_core::ports::StepStore;
use flowstate_core::{Completion, RunId, Step};
use flowstate_pool::{IdleBackoff, PoolConfig, WorkerPool};
use flowstate_store_diesel::{DieselStore, StatementLog, StoreConfig};
use serde_json::json;
use tokio::sync::Notify;

use super::peer::{self, Peer};
use super::report::Column;
use super::throughput::{Throughput, create_steps_for, show_progress};
use super::{Options, interleaved_all};

/// Steps per claim.
pub const CLAIM_BATCH: u32 = 500;

/// The function batched-mode steps are pinned to.
pub const FUNCTION: &str = "bench.batched";

/// What one batched round found.
#[derive(Clone, Copy, Debug)]
pub struct Batched {
    /// Steps processed, and how long it took.
    pub throughput: Throughput,
    /// Statements sent while processing them.
    pub statements: u64,
}

/// Every worker count of `concurrency`, `options.rounds` times each, in
/// batched mode on `url`: the column shown beside `name`'s per-step one.
/// With a `peer`, its rounds are taken in turn with these (see
/// [`interleaved_all`]), and its column comes back too; likewise with a
/// `pooled` URL (the same database through PgBouncer in transaction mode),
/// the same batched work through it, labelled `pgbouncer batch`.
pub async fn column(
    name: &str,
    url: &str,
    concurrency: &[usize],
    options: &Options,
    peer: Option<&Peer>,
    pooled: Option<&str>,
) -> (Column, Vec<Column>) {
    let label = format!("{name} batch");
    let sent = Cell::new((0_u64, 0_usize));
    let ours = async |workers, progress: &str| {
        let round = measure(url, workers, options.steps, progress).await?;
        let (statements, steps) = sent.get();
        sent.set((
            statements + round.statements,
            steps + round.throughput.steps,
        ));
        Ok(round.throughput)
    };
    let pooled_label = POOLED_LABEL;
    let mut labels = vec![label.as_str()];
    labels.extend(peer.map(|_| peer::LABEL));
    labels.extend(pooled.map(|_| pooled_label));
    let mut all = interleaved_all(
        &labels,
        concurrency,
        options,
        async |index, workers, progress| match labels[index] {
            l if l == peer::LABEL => match peer {
                Some(peer) => peer.measure(options.steps).await,
                None => unreachable!("a peer label only with a peer"),
            },
            l if l == pooled_label => match pooled {
                Some(pooled) => measure(pooled, workers, options.steps, progress)
                    .await
                    .map(|round| round.throughput),
                None => unreachable!("a pooled label only with a pooled URL"),
            },
            _ => ours(workers, progress).await,
        },
    )
    .await;
    let others: Vec<Column> = labels[1..]
        .iter()
        .zip(all.drain(1..))
        .map(|(label, throughput)| Column::rounds(label, throughput))
        .collect();
    let throughput = all
        .pop()
        .unwrap_or_else(|| unreachable!("one result per label"));
    let (statements, steps) = sent.get();
    let column = Column {
        statements_per_step: (steps > 0).then(|| statements as f64 / steps as f64),
        ..Column::rounds(&label, throughput)
    };
    (column, others)
}

/// The label of the batched column through PgBouncer.
pub const POOLED_LABEL: &str = "pgbouncer batch";

/// A store for one `WorkerPool` on `url`: its two connections (the
/// claimer's and the flusher's), both opened and set up before it is
/// answered, so no timing or count sees their setup; with a `log`, every
/// statement is counted there.
pub async fn open_pool_store(
    url: &str,
    log: Option<Arc<StatementLog>>,
) -> Result<Arc<DieselStore>> {
    let mut config = StoreConfig::default()
        .pool_size(2)
        .acquire_timeout(Duration::from_secs(30));
    if let Some(log) = log {
        config = config.statement_log(log);
    }
    let store = Arc::new(
        DieselStore::open(url, config)
            .await
            .context("cannot open the store")?,
    );
    let (a, b) = tokio::join!(
        store.list_steps(RunId::generate()),
        store.list_steps(RunId::generate())
    );
    drop((a, b));
    Ok(store)
}

/// The bench's pool settings for `handlers` handler tasks on steps of
/// `function`: claims of [`CLAIM_BATCH`], four in flight, a short idle
/// backoff.
pub fn pool_config(handlers: usize, function: &'static str) -> PoolConfig {
    PoolConfig::default()
        .workers(handlers)
        .claim_batch(CLAIM_BATCH)
        .max_in_flight((4 * CLAIM_BATCH as usize).max(handlers))
        .function(function)
        .idle_backoff(IdleBackoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(20),
        })
}

/// Creates `steps` fresh steps on `url`, then times a `WorkerPool` of
/// `workers` handler tasks claiming and succeeding all of them; on a
/// terminal, `progress` labels a line that counts the steps done.
pub async fn measure(url: &str, workers: usize, steps: usize, progress: &str) -> Result<Batched> {
    {
        // Setup on a store of its own, so the log below sees only the pool.
        let config = StoreConfig::default()
            .pool_size(workers.clamp(1, 8))
            .acquire_timeout(Duration::from_secs(30));
        let setup = Arc::new(
            DieselStore::open(url, config)
                .await
                .context("cannot open the store")?,
        );
        create_steps_for(&setup, steps, workers, FUNCTION).await?;
    }
    drain(url, workers, steps, progress).await
}

/// Times a `WorkerPool` of `workers` handler tasks claiming and succeeding
/// `steps` steps of [`FUNCTION`] already queued on `url` (by
/// [`create_steps_for`]), counting the statements it sends; the timed part
/// of [`measure`], which the soak ([`super::soak`]) takes round after
/// round.
pub async fn drain(url: &str, workers: usize, steps: usize, progress: &str) -> Result<Batched> {
    let log = StatementLog::new();
    let store = open_pool_store(url, Some(Arc::clone(&log))).await?;
    log.clear();

    let done = Arc::new(AtomicUsize::new(0));
    let all_done = Arc::new(Notify::new());
    let config = pool_config(workers, FUNCTION);
    let started = Instant::now();
    let ticker = show_progress(progress.to_owned(), Arc::clone(&done), steps);
    let pool = WorkerPool::new(Arc::clone(&store), {
        let (done, all_done) = (Arc::clone(&done), Arc::clone(&all_done));
        move |step: Step| {
            let (done, all_done) = (Arc::clone(&done), Arc::clone(&all_done));
            async move {
                if done.fetch_add(1, Ordering::Relaxed) + 1 == steps {
                    all_done.notify_one();
                }
                Completion::Succeeded(json!({ "attempt": step.attempt }))
            }
        }
    })
    .with_config(config.clone())
    .spawn();
    if steps > 0 {
        all_done.notified().await;
    }
    // Shutdown waits for the last flush: the clock stops once every step is
    // durable.
    let stats = pool.shutdown().await;
    let elapsed = started.elapsed();
    if let Some(ticker) = ticker {
        ticker.abort();
        eprint!("\r{:60}\r", "");
    }
    ensure!(
        stats.claimed == steps as u64 && stats.succeeded == steps as u64,
        "the pool claimed {} and succeeded {} of {steps} fresh steps ({stats:?})",
        stats.claimed,
        stats.succeeded
    );
    Ok(Batched {
        throughput: Throughput { steps, elapsed },
        statements: log.count(),
    })
}
