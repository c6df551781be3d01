//! The settled-run guard: [`handle_run_message`], the entry point for an
//! orchestrator message about one run.
//!
//! Such a message for a run that has already settled is routine, not
//! exceptional: the queue is at-least-once, the relay re-dispatches on
//! purpose, and a run can settle while a message for it is in flight.
//! Replaying it is not free: taking the run's lease and re-entering the
//! body of a run that failed can park it on a wait nothing will ever
//! satisfy. So the guard reads the run first and answers a settled one
//! without a write. A *suspended* run is not settled (it resumes when its
//! approval or signal arrives) and is handled.

use std::future::Future;
use std::time::Duration;

use flowstate_core::ports::RunRecoveryStore;
use flowstate_core::{Result, RunId, RunLease, RunStatus};
use tracing::Instrument;

/// What [`handle_run_message`] did with a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handled<T> {
    /// The run had settled in this status: answered without taking its
    /// lease or running the body.
    Settled(RunStatus),
    /// The run is not runnable now (another worker holds its lease, or it
    /// waits for a time or a signal): the body did not run. The message can
    /// be dropped; whoever holds the run, or its wake-up, moves it on.
    NotRunnable,
    /// A cancel had been requested: the lease claim settled the run as
    /// cancelled instead of handing it out, and the body did not run.
    Cancelled,
    /// The body ran under the lease and answered this.
    Ran(T),
}

/// Handles an orchestrator message for `run`: a settled run is answered at
/// once ([`Handled::Settled`], one read, nothing written); any other is
/// leased to `worker` for `lease_for` ([`RunRecoveryStore::lease_run`]) and
/// `body` runs with the lease, which it settles, releases or puts to wait
/// with the lease's token. The body's answer is [`Handled::Ran`].
///
/// The read and the lease claim are not one atomic step, and need not be:
/// a run that settles between them is not runnable, so the claim, guarded
/// in the store, refuses it ([`Handled::Settled`] again, read after the
/// refused claim).
pub async fn handle_run_message<S, F, Fut, T>(
    store: &S,
    run: RunId,
    worker: &str,
    lease_for: Duration,
    body: F,
) -> Result<Handled<T>>
where
    S: RunRecoveryStore,
    F: FnOnce(RunLease) -> Fut,
    Fut: Future<Output = T>,
{
    let span = tracing::info_span!("recovery.run_message", %run, outcome = tracing::field::Empty);
    async {
        let status = store.get_run(run).await?.status;
        let handled = if status.is_settled() {
            Handled::Settled(status)
        } else {
            match store.lease_run(run, worker, lease_for).await? {
                Some(lease) => Handled::Ran(body(lease).await),
                None => match store.get_run(run).await?.status {
                    RunStatus::Cancelled => Handled::Cancelled,
                    status if status.is_settled() => Handled::Settled(status),
                    _ => Handled::NotRunnable,
                },
            }
        };
        let outcome = match &handled {
            Handled::Settled(_) => "settled",
            Handled::NotRunnable => "not_runnable",
            Handled::Cancelled => "cancelled",
            Handled::Ran(_) => "ran",
        };
        tracing::Span::current().record("outcome", outcome);
        Ok(handled)
    }
    .instrument(span)
    .await
}
