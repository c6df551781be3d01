//! Hook the conformance kit to your own store.
//!
//! In your backend's crate, with `flowstate-testkit` as a dev-dependency,
//! one function and one macro call in a test file stamp every case of the
//! families your store has into `#[tokio::test]`s:
//!
//! ```ignore
//! async fn open(clock: Arc<ManualClock>) -> MyStore { /* a fresh, empty store */ }
//! flowstate_testkit::suite!(my_store, StoreHarness::create(open), [runs, steps, versions]);
//! ```
//!
//! This example runs a few of those cases by hand, as a program, against
//! `open` below (the reference `MemoryStore` standing in for yours): each
//! case is a `pub async fn` taking a harness, and panics if the store
//! breaks the guarantee it checks.
//!
//! `cargo run -p flowstate-testkit --example own_store`

use std::sync::Arc;
use std::time::Instant;

use flowstate_testkit::cases::{runs, steps};
use flowstate_testkit::{CASES, ManualClock, MemoryStore, StoreHarness};

/// A fresh, empty store that stamps times from `clock`: yours would make
/// a database (or a schema) for this call alone.
async fn open(clock: Arc<ManualClock>) -> MemoryStore {
    MemoryStore::with_clock(clock)
}

/// Runs each case on a harness of its own, as `suite!` does.
macro_rules! run_cases {
    ($($case:path),+ $(,)?) => {{
        let mut passed = 0;
        $(
            let harness = StoreHarness::create(open).await;
            let started = Instant::now();
            $case(&harness).await;
            println!("ok  {:<58} {:>8.2?}", stringify!($case), started.elapsed());
            passed += 1;
        )+
        passed
    }};
}

#[tokio::main]
async fn main() {
    let passed = run_cases!(
        runs::basics::create_run_starts_running,
        runs::basics::create_run_is_idempotent_by_key,
        runs::basics::run_transitions_illegal_rows,
        steps::claim_races::claim_pending_race_8,
        steps::claim_races::claim_failed_race_8,
        steps::claim_races::claim_scheduled_race_8,
    );
    let in_kit: usize = CASES.iter().map(|(_, names)| names.len()).sum();
    println!(
        "{passed} cases passed; the kit has {in_kit} in {} families:",
        CASES.len()
    );
    for (family, names) in CASES {
        println!("  {family:<14} {:>4} cases", names.len());
    }
}
