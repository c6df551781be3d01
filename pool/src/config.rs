//! [`PoolConfig`]: how a [`WorkerPool`](crate::WorkerPool) runs, and the
//! [`IdleBackoff`] its claimers wait by after an empty claim.

use std::time::Duration;

use flowstate_core::BatchClaim;

use crate::commit::DEFAULT_MAX_BATCH;
use crate::retry::FlushRetry;

/// How long a claimer waits after a claim that came back empty (or
/// failed): `initial`, doubled after each further empty claim up to `max`,
/// back to `initial` once a claim takes something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleBackoff {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for IdleBackoff {
    /// 5 ms, doubling up to 200 ms.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(200),
        }
    }
}

impl IdleBackoff {
    /// The wait after `previous`: doubled, capped at `max`.
    pub fn next(&self, previous: Duration) -> Duration {
        previous.saturating_mul(2).min(self.max).max(self.initial)
    }
}

/// How a [`WorkerPool`](crate::WorkerPool) runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Worker tasks running the handler (at least 1): how many handlers
    /// run at once. Their commits do not hold them up.
    pub workers: usize,
    /// Claim loops (at least 1), each with at most one `claim_batch` in
    /// progress: more than one keeps claiming while a claim is on the wire.
    /// They share the in-flight bound, and the store keeps them from
    /// taking the same step.
    pub claimers: usize,
    /// Steps asked for per claim (capped at [`BatchClaim::MAX_LIMIT`] and
    /// at `max_in_flight`).
    pub claim_batch: u32,
    /// Steps claimed and not yet committed, at most.
    pub max_in_flight: usize,
    /// Only steps pinned to this function.
    pub function: Option<String>,
    /// The wait after an empty claim.
    pub idle_backoff: IdleBackoff,
    /// The most completions one flush of the pool's [`GroupCommit`](crate::GroupCommit) writes.
    pub max_flush: usize,
    /// How a flush that failed with a retryable error is sent again.
    pub flush_retry: FlushRetry,
}

impl Default for PoolConfig {
    /// 8 workers, one claimer, claims of 64, 128 steps in flight, any
    /// function, the default [`IdleBackoff`], flushes of up to
    /// [`DEFAULT_MAX_BATCH`] retried as the default [`FlushRetry`] says.
    fn default() -> Self {
        Self {
            workers: 8,
            claimers: 1,
            claim_batch: 64,
            max_in_flight: 128,
            function: None,
            idle_backoff: IdleBackoff::default(),
            max_flush: DEFAULT_MAX_BATCH,
            flush_retry: FlushRetry::default(),
        }
    }
}

impl PoolConfig {
    /// With `workers` worker tasks.
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// With `claimers` claim loops.
    #[must_use]
    pub fn claimers(mut self, claimers: usize) -> Self {
        self.claimers = claimers;
        self
    }

    /// Claiming `claim_batch` steps at a time.
    #[must_use]
    pub fn claim_batch(mut self, claim_batch: u32) -> Self {
        self.claim_batch = claim_batch;
        self
    }

    /// Holding at most `max_in_flight` claimed, uncommitted steps.
    #[must_use]
    pub fn max_in_flight(mut self, max_in_flight: usize) -> Self {
        self.max_in_flight = max_in_flight;
        self
    }

    /// Claiming only steps pinned to `function`.
    #[must_use]
    pub fn function(mut self, function: impl Into<String>) -> Self {
        self.function = Some(function.into());
        self
    }

    /// Waiting as `backoff` says after an empty claim.
    #[must_use]
    pub fn idle_backoff(mut self, backoff: IdleBackoff) -> Self {
        self.idle_backoff = backoff;
        self
    }

    /// Flushing at most `max_flush` completions at a time.
    #[must_use]
    pub fn max_flush(mut self, max_flush: usize) -> Self {
        self.max_flush = max_flush;
        self
    }

    /// Retrying a failed flush as `retry` says.
    #[must_use]
    pub fn flush_retry(mut self, retry: FlushRetry) -> Self {
        self.flush_retry = retry;
        self
    }

    /// The in-flight bound applied (at least 1, at most 2^20).
    pub(crate) fn in_flight(&self) -> usize {
        self.max_in_flight.clamp(1, 1 << 20)
    }

    /// The claim each claimer makes: the batch size capped by the in-flight
    /// bound, so a whole batch always fits.
    pub(crate) fn claim(&self) -> BatchClaim {
        let cap = u32::try_from(self.in_flight()).unwrap_or(u32::MAX);
        let limit = self
            .claim_batch
            .clamp(1, BatchClaim::MAX_LIMIT)
            .min(cap.max(1));
        let claim = BatchClaim::new(limit);
        match &self.function {
            Some(function) => claim.for_function(function.clone()),
            None => claim,
        }
    }
}
