//! [`RunLeaseStore`]: runs taken by workers on many machines, under leases
//! with fencing tokens (re-exported from [`ports`](crate::ports)).
//!
//! The rules (which statuses may be leased, when failures fail a run, what
//! input is accepted) are in [`lease`](crate::lease); this is the port a
//! backend implements to carry them out atomically.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use crate::children::NewChild;
use crate::effects::{EffectBegin, StrandedEffect};
use crate::error::Result;
use crate::ids::RunId;
use crate::lease::{LeaseState, Release, Released, RunLease, RunOutcome};
use crate::ports::{RunStore, StepStore};
use crate::records::{Inserted, NewStep, Run, Step};
use crate::status::RunStatus;
use crate::wait::Wait;
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

/// Runs that sleep or wait on named signals, on top of their leases.
///
/// A waiting run is not runnable (a claim leaves it) until its time has
/// come on the store's lease clock or its signal is there; the claim that
/// then takes it clears the wait. [`Self::signal`] stores the signal as a
/// row of its own, so one sent before the run waits is not lost.
pub trait RunWaitStore: RunLeaseStore {
    /// Puts the run to sleep or to wait as `wait` says and frees its lease,
    /// if `token` still holds it (otherwise [`Error::LeaseLost`], nothing
    /// written). A signal already there makes the run runnable at once.
    fn wait(&self, run: RunId, token: u64, wait: Wait) -> impl Future<Output = Result<()>> + Send;

    /// Stores signal `name` for the run with `payload` (replacing the
    /// payload of one not yet taken), making a run waiting on it runnable.
    /// Any number of signals may race. An unknown run is
    /// [`Error::RunNotFound`]; a settled run [`Error::RunSettled`], and
    /// nothing is stored.
    fn signal(
        &self,
        run: RunId,
        name: &str,
        payload: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Takes signal `name` of the run (it is gone after), if `token` holds
    /// the run's lease; `None` if there is none. A stale token is
    /// [`Error::LeaseLost`] and takes nothing.
    fn take_signal(
        &self,
        run: RunId,
        token: u64,
        name: &str,
    ) -> impl Future<Output = Result<Option<Value>>> + Send;

    /// Ends every wait whose time has come (sleeps and signal deadlines),
    /// clearing it, and answers how many. Claims take such runs anyway;
    /// this is for a sweep that wants them marked awake.
    fn wake_expired(&self) -> impl Future<Output = Result<u64>> + Send;
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

/// Child runs created in bulk, on top of leases and waits: a parent holding
/// its lease creates its children, then waits on them with
/// [`Wait::Children`]; [`RunStore::count_children`] counts them by status.
pub trait ChildRunStore: RunWaitStore {
    /// Creates the children of `parent` in one call, each at most once per
    /// key whatever number of calls race ([`crate::children::child_key`]):
    /// answers every child in the order given, `inserted: false` for one
    /// that existed. A parent that does not exist is
    /// [`Error::RunNotFound`] and nothing is created.
    fn create_children(
        &self,
        parent: RunId,
        children: Vec<NewChild>,
    ) -> impl Future<Output = Result<Vec<Inserted<Run>>>> + Send;
}

/// The effect journal: a step records an effect's key before performing
/// it, so it is performed at most once per key whatever is replayed.
pub trait EffectJournal: RunStore {
    /// Begins effect `key` of `run`, or answers what an earlier begin left:
    /// of any number of concurrent begins of one key exactly one answers
    /// [`EffectBegin::Started`]; later ones answer
    /// [`EffectBegin::InFlight`] or, once settled,
    /// [`EffectBegin::Settled`] with the recorded outcome. An unknown run is
    /// [`Error::RunNotFound`].
    fn begin_effect(
        &self,
        run: RunId,
        key: &str,
    ) -> impl Future<Output = Result<EffectBegin>> + Send;

    /// Records the outcome of a begun effect. Settling it again changes
    /// nothing (the first outcome stays). An effect never begun is
    /// [`Error::EffectNotFound`].
    fn settle_effect(
        &self,
        run: RunId,
        key: &str,
        outcome: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Effects begun at least `older_than` ago (on the store's clock) and
    /// never settled, oldest first, for an operator or a sweep.
    fn stranded_effects(
        &self,
        older_than: Duration,
    ) -> impl Future<Output = Result<Vec<StrandedEffect>>> + Send;
}
