//! flowstate's fault scenarios, one `#[tokio::test]` per scenario and
//! dialect, all in one test binary so they run side by side. Each ends
//! with its row of the fault table (printed with `--nocapture`, written to
//! `target/fault-report/` and `target/fault-report.md`) and asserts 0 lost,
//! 0 doubled, 0 stuck.
//!
//! Servers that a scenario kills or restarts are its own throw-away ones;
//! the scenarios that only call the API use databases of their own on the
//! shared servers.

mod events_restart;
mod hostile_input;
mod leases_restart;
mod past_one_server;
mod pool_exhaustion;
mod pool_faults;
mod restart;
mod retention;
mod servers;
mod sessions;
mod skewed_clock;
mod stale_lease;
mod support;
mod worker_killed;
