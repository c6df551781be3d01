//! [`RunWaitStore`]: leased runs that sleep or wait on named signals; the
//! waits themselves are in [`wait`](crate::wait).

use std::future::Future;

use serde_json::Value;

use crate::error::Result;
use crate::ids::RunId;
use crate::ports::RunLeaseStore;
use crate::wait::Wait;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::error::Error;

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
