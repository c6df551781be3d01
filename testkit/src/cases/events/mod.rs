//! The `events` family: [`EventStore`](flowstate_core::ports::EventStore) and
//! [`EventQueueStore`](flowstate_core::ports::EventQueueStore).

pub mod aborts;
pub mod basics;
pub mod event_runs;
pub mod queue;
pub mod races;
