//! The `versions` family: [`VersionStore`](flowstate_core::ports::VersionStore).

pub mod basics;
pub mod status;
