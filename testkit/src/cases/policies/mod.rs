//! The policy crates driven over the ports, as a backend's users run them:
//! `flowstate-pool`'s group commit and worker pool (the `pool` family),
//! `flowstate-recovery`'s sweeps and guard (`sweeps`, `guard`),
//! `flowstate_virtual_users::tick` (`ticks`) and `flowstate-events`'
//! dispatchers (`dispatch`). Their faults come from wrappers around the
//! harness's store, not from hooks.

pub mod event_dispatch;
pub mod pool_commit;
pub mod pool_faults;
pub mod pool_outages;
pub mod pool_retries;
pub(crate) mod pool_support;
pub(crate) mod pool_watched;
pub mod pool_workers;
pub mod recovery_guard;
pub mod recovery_sweeps;
pub mod virtual_user_ticks;
