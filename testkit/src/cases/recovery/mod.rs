//! The `recovery` family: [`RecoveryStore`](flowstate_core::ports::RecoveryStore)
//! and [`RunRecoveryStore`](flowstate_core::ports::RunRecoveryStore): the recovery
//! queries, lease reaping, leasing one named run and taking back expired
//! step claims.

pub mod claim_expiry;
pub mod dense_expiry;
pub mod expiry_atomicity;
pub mod leases;
pub mod queries;
