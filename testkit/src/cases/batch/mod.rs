//! The `batch` family: [`BatchStepStore`](flowstate_core::ports::BatchStepStore):
//! claiming and completing many steps in one call.

pub mod aborts;
pub mod atomicity;
pub mod basics;
pub mod races;
pub mod settled_runs;
