//! The `virtual_users` family: [`ScheduleStore`](flowstate_core::ports::ScheduleStore)
//! and [`VirtualUserRunStore`](flowstate_core::ports::VirtualUserRunStore).

pub mod races;
pub mod run_progress;
pub mod run_records;
pub mod runs;
pub mod schedule_records;
pub mod schedules;
pub mod transcripts;
