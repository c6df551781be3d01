//! [`RecoveryStore`] and [`RunRecoveryStore`]: the queries and the writes
//! the recovery sweeps need.
//!
//! The rules they carry out are in [`recovery`](crate::recovery); the
//! policy that acts on what they find (the relay, the stalled sweep, the
//! settled-run guard, the sweeper) is in `flowstate-recovery`. New traits
//! beside the older ones, so a backend that has no recovery still compiles.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::ids::RunId;
use crate::lease::RunLease;
use crate::ports::{RunLeaseStore, StepStore};
use crate::recovery::{StalledRun, UndispatchedStep};
use crate::step_claim::ExpiredClaim;
// Named by the docs' links only: imported always, not only under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these traits.
#[allow(unused_imports)]
use crate::{error::Error, recovery, status::RunStatus, step_claim};

/// The two recovery queries, each answered from an index rather than by
/// reading every run: a table of a million settled runs costs what a table
/// of none does.
///
/// **One clock.** `idle_for` is measured back from now on the store's
/// lease clock (the database's clock, the one run leases and step claims
/// expire on: [`lease`](crate::lease#one-clock-for-leases)), so the clock
/// of the process that sweeps never decides what is idle: a sweeper whose
/// clock is minutes off finds what any other finds. `limit` is read by
/// [`recovery::effective_limit`].
pub trait RecoveryStore: StepStore {
    /// The steps [`recovery::is_undispatched`] admits with the cutoff
    /// `idle_for` before now: pending, or failed with a retry due, unchanged
    /// for `idle_for`, in runs that are not settled; oldest first by
    /// `(created_at, id)`, at most `limit`. Several steps of one run are
    /// each answered.
    fn undispatched_steps(
        &self,
        idle_for: Duration,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<UndispatchedStep>>> + Send;

    /// The runs [`recovery::is_stalled`] admits with the cutoff `idle_for`
    /// before now: running, nothing about them or their steps changed for
    /// `idle_for`, no step running or scheduled, no unexpired lease, not
    /// waiting (a backend without leases has none of either); least
    /// recently moved first by `(updated_at, id)`, at most `limit`.
    fn stalled_runs(
        &self,
        idle_for: Duration,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<StalledRun>>> + Send;

    /// Takes back every claim that ran out ([`step_claim::is_expired`] on
    /// the store's lease clock): each such step's current attempt fails
    /// with [`step_claim::claim_expired_error`], its history row with it,
    /// and its deadline is cleared, as a failed transition would write
    /// them; at most `limit` ([`recovery::effective_limit`]), first expired
    /// first. The step is then retried by the next claim, or failed for
    /// good, by its retry policy ([`ExpiredClaim::retrying`]). Each step is
    /// one status-guarded write: a claim renewed or completed in the
    /// meantime is not touched, and a step taken back by one call is not
    /// answered by a concurrent one. The old holder's later writes are
    /// [`Error::ClaimLost`].
    fn expire_step_claims(
        &self,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<ExpiredClaim>>> + Send;
}

/// The run-lease writes recovery needs beyond [`RunLeaseStore`]: leasing
/// one named run (for an orchestrator message about it) and reaping
/// leases whose holder is gone.
pub trait RunRecoveryStore: RunLeaseStore {
    /// Leases run `run` to `worker` for `lease_for`, as
    /// [`RunLeaseStore::claim_run`] leases one: only if it is runnable
    /// (not settled, lease free or expired, not waiting), raising its
    /// fencing token, settling it as cancelled instead if a cancel was
    /// requested. `None` when it is not runnable; of any number of
    /// concurrent calls for one run, at most one answers `Some`. An unknown
    /// run is [`Error::RunNotFound`]; bad input is [`Error::InvalidInput`].
    fn lease_run(
        &self,
        run: RunId,
        worker: &str,
        lease_for: Duration,
    ) -> impl Future<Output = Result<Option<RunLease>>> + Send;

    /// Frees every lease that has run out on the store's lease clock (the
    /// holder is cleared, the token and the failure count stay), at most
    /// `limit` ([`recovery::effective_limit`]), and answers those runs,
    /// first expired first. A reaped run is claimed by the next claim like
    /// any free one; a lease that is still live is never touched, and a
    /// run reaped by one call is not answered by a concurrent one.
    fn reap_expired_leases(&self, limit: u32) -> impl Future<Output = Result<Vec<RunId>>> + Send;
}
