//! The pool load: a [`WorkerPool`] of `flowstate-pool` working the seeded
//! steps through a store while a fault strikes, as an engine that uses the
//! pool would (batch claims, completions group-committed, a failed flush
//! sent again with backoff).
//!
//! Its handler is the step's work: it writes the ledger (inside the step),
//! holds the step a moment, and answers `Succeeded` with
//! [`result_of`]`(`[`POOL_WORKER`]`)`. Time to heal is read off the pool's
//! own counters ([`PoolLoad::heal`]): from the fault's end to the first
//! batch claim that answered and the first completion committed after it,
//! whichever comes later (so it includes the pool's own backoff: the
//! claimer's idle backoff and the flush retry's).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use flowstate_core::{Completion, Step};
use flowstate_pool::{PoolConfig, PoolHandle, PoolReport, WorkerPool};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;

use crate::ledger::{Entry, Ledger};
use crate::load::{FUNCTION, result_of};
use crate::report::Heal;
use crate::sql::RawConn;

/// The worker name the pool's handler writes in the ledger and its
/// results.
pub const POOL_WORKER: &str = "pool";

/// How long the handler holds each step after its ledger row.
pub const HOLD: Duration = Duration::from_millis(10);

/// The pool's settings: 8 workers, batch claims of 16, 32 steps in flight,
/// only the suite's function; the default idle backoff and flush retry
/// (50 ms doubling to 2 s, giving up after 60 s), as an engine gets them.
pub fn pool_config() -> PoolConfig {
    PoolConfig::default()
        .workers(8)
        .claim_batch(16)
        .max_in_flight(32)
        .function(FUNCTION)
}

/// A pool at work on a store, and what the test needs to judge it.
#[derive(Debug)]
pub struct PoolLoad {
    pool: PoolHandle<DieselStore>,
    ledger: Arc<Ledger>,
    doubles: Arc<AtomicU64>,
    ledger_failures: Arc<AtomicU64>,
    fault_over: Option<(Instant, PoolReport)>,
}

impl PoolLoad {
    /// Opens a store on `url` (a pool of 4 connections) and starts a
    /// [`WorkerPool`] on it with [`pool_config`], its handler writing the
    /// ledger through `ledger_url`.
    pub async fn start(url: &str, ledger_url: &str) -> Result<Self> {
        let config = StoreConfig::default()
            .pool_size(4)
            .acquire_timeout(Duration::from_secs(2));
        let store = Arc::new(
            DieselStore::open(url, config)
                .await
                .with_context(|| format!("open {url}"))?,
        );
        let pool_config = pool_config();
        let ledger = Arc::new(Ledger::new(ledger_url, pool_config.workers));
        let doubles = Arc::new(AtomicU64::new(0));
        let ledger_failures = Arc::new(AtomicU64::new(0));
        let next_slot = Arc::new(AtomicUsize::new(0));
        let handler = {
            let (ledger, doubles, failures) = (
                Arc::clone(&ledger),
                Arc::clone(&doubles),
                Arc::clone(&ledger_failures),
            );
            move |step: Step| {
                let (ledger, doubles, failures) = (
                    Arc::clone(&ledger),
                    Arc::clone(&doubles),
                    Arc::clone(&failures),
                );
                let slot = next_slot.fetch_add(1, Ordering::Relaxed);
                async move {
                    match ledger
                        .record(slot, step.id, step.attempt, POOL_WORKER)
                        .await
                    {
                        Ok(Entry::First) => {}
                        Ok(Entry::Double) => {
                            doubles.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) => {
                            failures.fetch_add(1, Ordering::Relaxed);
                            return Completion::Failed(json!({ "ledger": format!("{err:#}") }));
                        }
                    }
                    tokio::time::sleep(HOLD).await;
                    Completion::Succeeded(result_of(POOL_WORKER))
                }
            }
        };
        let pool = WorkerPool::new(store, handler)
            .with_config(pool_config.clone())
            .spawn();
        Ok(Self {
            pool,
            ledger,
            doubles,
            ledger_failures,
            fault_over: None,
        })
    }

    /// The ledger the handler writes (for the drain after recovery).
    pub fn ledger(&self) -> Arc<Ledger> {
        Arc::clone(&self.ledger)
    }

    /// The pool's counters so far.
    pub fn stats(&self) -> PoolReport {
        self.pool.report()
    }

    /// Waits until `n` completions are committed, at most `timeout`.
    pub async fn wait_for(&self, n: u64, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.stats().succeeded < n {
            anyhow::ensure!(
                Instant::now() < deadline,
                "only {} completions committed within {timeout:?}, waited for {n}",
                self.stats().succeeded
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Marks now as the end of the fault: time to heal counts from here.
    pub fn fault_over(&mut self) {
        self.fault_over = Some((Instant::now(), self.stats()));
    }

    /// Time to heal: from [`Self::fault_over`] until a batch claim has
    /// answered and a completion has been committed since, polled every
    /// 5 ms; `Never` if not within `bound`, `NotMeasured` if no fault was
    /// marked. A pool that had nothing left to claim or commit heals at
    /// once (`0 ms`, said as such by [`PoolReport`] in the note).
    pub async fn heal(&self, bound: Duration) -> Heal {
        let Some((from, at_fault)) = self.fault_over else {
            return Heal::NotMeasured;
        };
        let (mut claimed, mut committed) = (None, None);
        loop {
            let now = self.stats();
            if claimed.is_none() && now.claims > at_fault.claims {
                claimed = Some(from.elapsed());
            }
            if committed.is_none()
                && now.succeeded + now.failed > at_fault.succeeded + at_fault.failed
            {
                committed = Some(from.elapsed());
            }
            if let (Some(a), Some(b)) = (claimed, committed) {
                return Heal::Healed(a.max(b));
            }
            if from.elapsed() >= bound {
                return Heal::Never(bound);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits (at most `bound`) until the database at `url` has no step
    /// left to claim and every step the pool claimed is accounted for,
    /// then shuts the pool down; answers its counters and how long the
    /// wait took.
    pub async fn finish(self, url: &str, bound: Duration) -> Result<PoolDone> {
        let started = Instant::now();
        let mut conn = RawConn::connect(url).await?;
        let quiet = loop {
            let stats = self.stats();
            let claimable = conn
                .count(
                    "SELECT COUNT(*) AS n FROM flowstate_steps \
                     WHERE status IN ('pending', 'scheduled', 'failed')",
                )
                .await?;
            if claimable == 0 && stats.accounted() == stats.claimed {
                break true;
            }
            if started.elapsed() >= bound {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let stats = self.pool.shutdown().await;
        Ok(PoolDone {
            stats,
            quiet,
            waited: started.elapsed(),
            doubles: self.doubles.load(Ordering::Relaxed),
            ledger_failures: self.ledger_failures.load(Ordering::Relaxed),
        })
    }
}

/// How a pool load ended.
#[derive(Clone, Copy, Debug)]
pub struct PoolDone {
    /// The pool's counters after its shutdown.
    pub stats: PoolReport,
    /// Whether it had nothing left to do before the bound (otherwise it
    /// was shut down with work left, for recovery to find).
    pub quiet: bool,
    /// How long [`PoolLoad::finish`] waited.
    pub waited: Duration,
    /// Executions the ledger refused as doubles (the verdict counts them
    /// from the database too).
    pub doubles: u64,
    /// Handler runs whose ledger write failed for good (the step failed).
    pub ledger_failures: u64,
}

impl PoolDone {
    /// The counters for the scenario's note.
    pub fn summary(&self) -> String {
        let s = &self.stats;
        format!(
            "pool: claimed {} in {} claims ({} failed), succeeded {}, failed {}, \
             commit errors {} (given up {}, claims lost {}), flushes {} ({} retried), abandoned {}{}",
            s.claimed,
            s.claims,
            s.claim_errors,
            s.succeeded,
            s.failed,
            s.commit_errors,
            s.given_up,
            s.claims_lost,
            s.flushes,
            s.flush_retries,
            s.abandoned,
            if self.quiet {
                String::new()
            } else {
                format!("; still busy after {} s", self.waited.as_secs())
            }
        )
    }
}
