//! The families [`suite!`](crate::suite) stamps, one trait each: what a
//! harness must be for the family's cases. Each is implemented for every
//! harness that has the family's ports, so a factory whose store lacks one
//! is one compile error, `required for ... to implement family::<Name>`,
//! naming the family. The port families are core's
//! ([`flowstate_core::ports`]); the policy families drive a policy crate
//! over them.

use flowstate_core::ports::{
    BatchStepStore, ChildRunStore, DefinitionStore, EffectJournal, FencedWrites, RecoveryStore,
    RunRecoveryStore, RunWaitStore, ScheduleStore, VirtualUserRunStore,
};

use crate::cases::retention::RetentionBackend;
use crate::{EventBackend, EventQueueBackend, Harness, LeaseHarness};

/// Declares each family trait and implements it for every harness that
/// meets its bound.
macro_rules! families {
    ($($(#[doc = $doc:literal])* $name:ident: [$($bound:tt)+])*) => {
        $(
            $(#[doc = $doc])*
            pub trait $name: $($bound)+ {}
            impl<H: $($bound)+> $name for H {}
        )*
    };
}

families! {
    /// `runs`: [`RunStore`](flowstate_core::ports::RunStore), part of every
    /// [`Harness`]'s store.
    Runs: [Harness]
    /// `steps`: [`StepStore`](flowstate_core::ports::StepStore), part of every
    /// [`Harness`]'s store.
    Steps: [Harness]
    /// `versions`: [`VersionStore`](flowstate_core::ports::VersionStore), part
    /// of every [`Harness`]'s store.
    Versions: [Harness]
    /// `batch`: [`BatchStepStore`].
    Batch: [Harness<Store: BatchStepStore>]
    /// `leases`: [`RunLeaseStore`](flowstate_core::ports::RunLeaseStore) and
    /// [`FencedWrites`], on a [`LeaseHarness`] (a settled run takes no
    /// signal: [`RunWaitStore`]).
    Leases: [LeaseHarness<Store: FencedWrites + RunWaitStore>]
    /// `waits`: [`RunWaitStore`], on a [`LeaseHarness`].
    Waits: [LeaseHarness<Store: RunWaitStore>]
    /// `children`: [`ChildRunStore`], on a [`LeaseHarness`] (a parent waits
    /// for its children through [`RunWaitStore`]).
    Children: [LeaseHarness<Store: ChildRunStore + RunWaitStore>]
    /// `effects`: [`EffectJournal`], on a [`LeaseHarness`].
    Effects: [LeaseHarness<Store: EffectJournal>]
    /// `definitions`: [`DefinitionStore`].
    Definitions: [Harness<Store: DefinitionStore>]
    /// `events`: [`EventStore`](flowstate_core::ports::EventStore) and
    /// [`EventQueueStore`](flowstate_core::ports::EventQueueStore), with the
    /// definitions their deliveries match ([`EventQueueBackend`]).
    Events: [Harness<Store: EventQueueBackend>]
    /// `recovery`: [`RecoveryStore`] and [`RunRecoveryStore`], on a
    /// [`LeaseHarness`] whose store also has [`RunWaitStore`].
    Recovery: [LeaseHarness<Store: RecoveryStore + RunRecoveryStore + RunWaitStore>]
    /// `virtual_users`: [`ScheduleStore`] and [`VirtualUserRunStore`].
    VirtualUsers: [Harness<Store: ScheduleStore + VirtualUserRunStore>]
    /// `retention`: [`RetentionStore`](flowstate_core::ports::RetentionStore),
    /// on a [`LeaseHarness`] whose store has every port a prune deletes
    /// from ([`RetentionBackend`]: events, waits, children, effects,
    /// virtual-user runs), so what was pruned is read back through them.
    Retention: [LeaseHarness<Store: RetentionBackend>]
    /// `pool`: `flowstate-pool`'s group commit and worker pool over
    /// [`BatchStepStore`], with [`RecoveryStore`] to take back what an
    /// outage left claimed.
    Pool: [Harness<Store: BatchStepStore + RecoveryStore>]
    /// `sweeps`: `flowstate-recovery`'s relay, stalled sweep and sweeper over
    /// the [`Recovery`] ports.
    Sweeps: [LeaseHarness<Store: RecoveryStore + RunRecoveryStore + RunWaitStore>]
    /// `guard`: `flowstate-recovery`'s settled-run guard over the
    /// [`Recovery`] ports.
    Guard: [LeaseHarness<Store: RecoveryStore + RunRecoveryStore + RunWaitStore>]
    /// `ticks`: `flowstate_virtual_users::tick` over the [`VirtualUsers`]
    /// ports.
    Ticks: [Harness<Store: ScheduleStore + VirtualUserRunStore>]
    /// `dispatch`: `flowstate-events`' dispatchers over the event ports
    /// ([`EventBackend`]).
    Dispatch: [Harness<Store: EventBackend>]
}
