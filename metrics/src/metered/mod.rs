//! [`Metered`]: a store that records what its calls did, then answers
//! exactly what the store it wraps answered. One file per port family, as
//! `flowstate_core::ports` has them; each implements its family's traits
//! for `Metered<S>` whenever `S` implements them, delegating every method
//! (the provided ones too, so a backend's own override is still the one
//! that runs).
//!
//! The virtual-user ports (`ScheduleStore`, `VirtualUserRunStore`) are not
//! wrapped: nothing is counted there. Call them on
//! [`Metered::inner`].

mod batch;
mod children;
mod definitions;
mod effects;
mod events;
mod leases;
mod recovery;
mod retention;
mod runs;
mod steps;
mod versions;
mod waits;

/// A store whose port calls are counted and timed through the `metrics`
/// facade ([the table](crate#metrics)), answering exactly what `S`
/// answers. With no recorder installed a count is a no-op.
///
/// Wrap a store once and use the wrapper wherever the store was used:
/// `Metered<S>` implements every store port `S` implements (the
/// virtual-user ports aside: [`inner`](Self::inner) reaches them).
#[derive(Clone, Debug, Default)]
pub struct Metered<S> {
    inner: S,
}

impl<S> Metered<S> {
    /// Wraps `inner`.
    pub const fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped store, for calls that are not counted.
    pub const fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwraps the store.
    pub fn into_inner(self) -> S {
        self.inner
    }
}
