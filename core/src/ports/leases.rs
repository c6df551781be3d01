//! [`RunLeaseStore`]: runs taken by workers on many machines, under leases
//! with fencing tokens, and [`FencedWrites`], the writes a lease holder
//! makes under its token.
//!
//! The rules (which statuses may be leased, when failures fail a run, what
//! input is accepted) are in [`lease`](crate::lease); this is the port a
//! backend implements to carry them out atomically.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use crate::error::Result;
use crate::ids::RunId;
use crate::lease::{LeaseState, Release, Released, RunLease, RunOutcome};
use crate::ports::{RunStore, StepStore};
use crate::records::{Inserted, NewStep, Run, Step};
use crate::status::RunStatus;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::{error::Error, lease};

/// Runs leased to workers, with fencing tokens.
///
/// **One clock.** Every expiry is measured on the store's lease clock, never
/// on the caller's (see [`lease`](crate::lease#one-clock-for-leases)): a
/// backend on a database server uses the server's clock, so workers whose
/// clocks disagree by minutes still never hold one run at once. A backend
/// must not compute an expiry from a time the worker sent.
///
/// **Runnable.** A claim takes only a *runnable* run: its status is not
/// settled ([`lease::leasable_statuses`]) and its lease is free or expired
/// (expiry is exclusive: a lease is gone at the instant it expires). A run
/// with a cancel requested is settled as cancelled by the claim that finds
/// it, and not handed out.
///
/// **Fencing.** Each claim raises the run's token by one. [`Self::renew`],
/// [`Self::finish`] and [`Self::release`] succeed only for the token of the
/// current, unexpired lease; any other is [`Error::LeaseLost`] and writes
/// nothing.
pub trait RunLeaseStore: RunStore {
    /// Leases one runnable run to `worker` for `lease_for`, the oldest
    /// first (by creation, then id). Of any number of concurrent claims,
    /// each runnable run goes to at most one. `None` when there is nothing
    /// to take. Bad input ([`crate::InputLimits::check_lease`]) is
    /// [`Error::InvalidInput`].
    fn claim_run(
        &self,
        worker: &str,
        lease_for: Duration,
    ) -> impl Future<Output = Result<Option<RunLease>>> + Send;

    /// Leases up to `n` runnable runs to `worker`, as [`Self::claim_run`]
    /// does one: oldest first, none of them handed to a concurrent claim.
    fn claim_runs(
        &self,
        worker: &str,
        n: u32,
        lease_for: Duration,
    ) -> impl Future<Output = Result<Vec<RunLease>>> + Send;

    /// Extends the lease of `token` to `lease_for` from now (the store's
    /// now). A lease taken over, released or run out is
    /// [`Error::LeaseLost`]; an unknown run is [`Error::RunNotFound`].
    fn renew(
        &self,
        run: RunId,
        token: u64,
        lease_for: Duration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Settles the run as `outcome` says and frees its lease, if `token`
    /// still holds it; otherwise [`Error::LeaseLost`] and nothing is
    /// written.
    fn finish(
        &self,
        run: RunId,
        token: u64,
        outcome: RunOutcome,
    ) -> impl Future<Output = Result<()>> + Send;

    /// [`finish`](Self::finish) that also records the run's
    /// [`output`](crate::Run::output) in the same fenced write: a stale
    /// token is [`Error::LeaseLost`] and writes neither. The output is
    /// checked like any JSON input (field `run output`).
    fn finish_with_output(
        &self,
        run: RunId,
        token: u64,
        outcome: RunOutcome,
        output: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Frees the lease of `token` without settling the run, counting
    /// consecutive failures as [`Release`] says: a failure that reaches its
    /// limit fails the run with the reason recorded. A stale token is
    /// [`Error::LeaseLost`] and writes nothing.
    fn release(
        &self,
        run: RunId,
        token: u64,
        release: Release,
    ) -> impl Future<Output = Result<Released>> + Send;

    /// Asks for the run to stop: the next claim that finds it runnable
    /// settles it as cancelled instead of handing it out. Idempotent; a
    /// settled run is left as it is. An unknown run is
    /// [`Error::RunNotFound`].
    fn request_cancel(&self, run: RunId) -> impl Future<Output = Result<()>> + Send;

    /// Reads the run's lease bookkeeping. An unknown run is
    /// [`Error::RunNotFound`].
    fn lease_state(&self, run: RunId) -> impl Future<Output = Result<LeaseState>> + Send;
}

/// The writes a lease holder makes to its run, fenced by its token: each
/// succeeds only while `token` holds the run's current, unexpired lease
/// (as [`RunLeaseStore::renew`] checks it, in the same statement or
/// transaction as the write), so a holder whose lease ran out and was
/// taken over writes nothing ([`Error::LeaseLost`]) and cannot overwrite
/// what the new holder does.
///
/// The unfenced calls ([`RunStore::write_state`],
/// [`StepStore::insert_step`], [`RunStore::set_run_status`]) stay for
/// engines that do not lease runs. Apart from the fence, each call is its
/// unfenced twin: the same input checks, the same answers, the same
/// refusals (a settled run is [`Error::RunSettled`]).
pub trait FencedWrites: RunLeaseStore + StepStore {
    /// [`RunStore::write_state`] under the lease of `token`.
    fn write_state_fenced(
        &self,
        run: RunId,
        token: u64,
        key: &str,
        value: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// [`StepStore::insert_step`] into `step.run` under the lease of
    /// `token`. A name already taken answers the existing step
    /// (`inserted: false`) only while the lease holds.
    fn insert_step_fenced(
        &self,
        token: u64,
        step: NewStep,
    ) -> impl Future<Output = Result<Inserted<Step>>> + Send;

    /// [`RunStore::set_run_status`] under the lease of `token`. The lease
    /// stays as it is (settling a run and freeing its lease together is
    /// [`RunLeaseStore::finish`]).
    fn set_run_status_fenced(
        &self,
        run: RunId,
        token: u64,
        to: RunStatus,
    ) -> impl Future<Output = Result<Run>> + Send;
}
