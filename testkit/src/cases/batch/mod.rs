//! The `batch` family: [`BatchStepStore`](flowstate_core::ports::BatchStepStore):
//! claiming and completing many steps in one call.

pub mod basics;
pub mod batch_atomicity;
pub mod batch_races;
pub mod settled_runs;
