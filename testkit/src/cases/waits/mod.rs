//! The `waits` family: [`RunWaitStore`](flowstate_core::ports::RunWaitStore):
//! runs that sleep, wait for a signal or a deadline.

pub mod basics;
