//! flowstate-recovery: stalled-run sweeps, the undispatched-step relay, run
//! leases and the guard that never replays a settled run.
//!
//! Nothing lives here yet. The pure decisions it will act on
//! (`RunStatus::is_settled`, `RedispatchBackoff`, the stale-run limit) are in
//! `flowstate-core`; this crate will hold the sweeps and their runners, generic
//! over the core store ports, and will never know which database is behind them.
