//! flowstate-pool: a worker pool for engines that want one, over the
//! [`BatchStepStore`](flowstate_core::ports::BatchStepStore) port.
//!
//! This crate doesn't decide which step a worker gets, nor whether a write
//! is legal: the store does, with the database's exclusion behind it. It
//! holds no lock that decides anything about steps. What it adds is the
//! machinery around the port:
//!
//! - [`GroupCommit`]: a write-combining queue per store. Completions from
//!   many tasks are coalesced into one
//!   [`complete_batch`](flowstate_core::ports::BatchStepStore::complete_batch) per
//!   flush; a flush starts when the previous one returns, so an idle queue
//!   adds no latency and no timer runs. Each caller's future resolves only
//!   once its own item's write has returned, with that item's own result.
//!   No completion is dropped: a flush that fails with a retryable error is
//!   sent again, backing off, as [`FlushRetry`] says (safe because each
//!   completion is fenced by its claim's attempt, and a repeat of one
//!   already written answers `Ok`); only if the store keeps failing past
//!   its limit (60 s by default) are its callers answered with the error,
//!   their steps left running for the claim deadline to recover.
//! - [`WorkerPool`]: a claimer that takes batches of claimable steps,
//!   bounded in-flight work, N worker tasks running a host-supplied handler,
//!   completions through a [`GroupCommit`]. [`WorkerPool::spawn`] answers
//!   a [`PoolHandle`] (`report`, `stop`, `shutdown`: the vocabulary of the
//!   event `Dispatcher`, the recovery `Sweeper` and the virtual-user
//!   `Runner` too) whose graceful shutdown returns [`PoolReport`]: every
//!   claimed step accounted for, with the flushes retried, the completions
//!   given up (left for recovery) and those whose claim was lost (taken
//!   back by recovery before they were written).
//! - [`Error`]: why a completion was not committed (the queue closed, its
//!   flush failed, the store refused it), one variant per cause.
//!
//! Both are tokio tasks and emit `tracing` spans (one per flush, one per
//! claim), a warning for each failed flush (its try and the wait before the
//! next) and an error for each that gave up. The only timers are the pool's
//! idle backoff after an empty claim and the wait before a flush is sent
//! again: none decides when a flush starts.
//!
//! ```
//! use std::sync::Arc;
//! use flowstate_core::ports::{RunStore, StepStore};
//! use flowstate_core::{Completion, NewRun, NewStep, Step};
//! use flowstate_pool::{PoolConfig, WorkerPool};
//! use flowstate_testkit::MemoryStore;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> flowstate_core::Result<()> {
//! let store = Arc::new(MemoryStore::new());
//! let run = store.create_run(NewRun::new("checkout", json!({}))).await?.record.id;
//! store.insert_step(NewStep::new(run, "charge", "payments.charge", json!({}))).await?;
//!
//! let (ran, mut done) = tokio::sync::mpsc::unbounded_channel();
//! let pool = WorkerPool::new(Arc::clone(&store), move |step: Step| {
//!     let ran = ran.clone();
//!     async move {
//!         let _ = ran.send(step.name.clone());
//!         Completion::Succeeded(json!({ "charged": true }))
//!     }
//! })
//! .with_config(PoolConfig::default().workers(4))
//! .spawn();
//! assert_eq!(done.recv().await.as_deref(), Some("charge"));
//! let report = pool.shutdown().await;
//! assert_eq!((report.claimed, report.succeeded), (1, 1));
//! # Ok(())
//! # }
//! ```

mod commit;
mod config;
mod error;
mod handle;
mod reply;
mod retry;
mod worker;

pub use commit::{CommitReport, DEFAULT_MAX_BATCH, GroupCommit, Pending};
pub use config::{IdleBackoff, PoolConfig};
pub use error::{Error, FlushFailed, Result};
pub use handle::{PoolControl, PoolHandle, PoolReport};
pub use retry::FlushRetry;
pub use worker::WorkerPool;
