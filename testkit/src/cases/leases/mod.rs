//! The `leases` family: [`RunLeaseStore`](flowstate_core::ports::RunLeaseStore)
//! and [`FencedWrites`](flowstate_core::ports::FencedWrites): leasing runs to
//! workers, releasing them, and writes fenced by the lease token.

pub mod aborts;
pub mod basics;
pub mod fenced_writes;
pub mod output;
pub mod races;
pub mod releases;
