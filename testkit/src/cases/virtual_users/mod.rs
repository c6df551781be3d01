//! The `virtual_users` family: [`ScheduleStore`](flowstate_core::ports::ScheduleStore)
//! and [`VirtualUserRunStore`](flowstate_core::ports::VirtualUserRunStore).

pub mod virtual_user_races;
pub mod virtual_user_runs;
pub mod virtual_user_schedules;
pub mod virtual_user_transcripts;
