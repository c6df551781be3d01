//! The `runs` family: [`RunStore`](flowstate_core::ports::RunStore): creating,
//! listing, moving, deleting runs and their state, and the input checks
//! every run write makes.

pub mod bad_input;
pub mod bad_names;
pub mod basics;
pub mod deletion;
pub mod exactness;
pub mod output;
pub mod run_list;
pub mod run_races;
pub mod run_state;
pub mod summary;
pub mod unknown_ids;
