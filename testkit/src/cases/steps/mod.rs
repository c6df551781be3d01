//! The `steps` family: [`StepStore`](flowstate_core::ports::StepStore): inserting,
//! claiming, moving and retrying steps, their history, and the races
//! over them.

pub mod atomicity;
pub mod basics;
pub mod claim;
pub mod claim_outcomes;
pub mod claim_races;
pub mod dense_claims;
pub mod dense_moves;
pub mod dense_races;
pub mod graph;
pub mod history;
pub mod inline;
pub mod retries;
pub mod settled_runs;
pub mod step_claims;
pub mod transitions;
pub mod wide_races;
