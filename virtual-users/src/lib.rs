//! flowstate-virtual-users: scheduled synthetic-user runs.
//!
//! Nothing lives here yet. `next_run_at`, `is_due` and the default interval are
//! in `flowstate-core`; this crate will hold the tick (with its in-flight skip
//! and compare-and-set claim) over the core store ports.
