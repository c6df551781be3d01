//! The `events` family: [`EventStore`](flowstate_core::ports::EventStore) and
//! [`EventQueueStore`](flowstate_core::ports::EventQueueStore), one event at a
//! time and in batches (emitted and dispatched).

pub mod aborts;
pub mod basics;
pub mod batches;
pub mod emit_batches;
pub mod event_runs;
pub mod queue;
pub mod races;
