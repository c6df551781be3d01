//! Recovery: one `Sweeper` beside the workers, a pass every half second
//! (wake-ups, lease reaping, claim expiry, the relay, the stalled sweep).
//!
//! Leans on `RunRecoveryStore::reap_expired_leases` (a lease that ran out
//! on the database's clock is freed for the next claim),
//! `RecoveryStore::expire_step_claims` (a step whose claim deadline passed
//! has that attempt failed, so its retry is claimable and the old holder's
//! late writes are `ClaimLost`) and `RunWaitStore::wake_expired`. The
//! engine pulls work with `claim_runs`, so a run the sweeps re-drive needs
//! no message: the callback only notes it, and the next claim takes it.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowstate_core::{RunId, SystemClock};
use flowstate_recovery::{Reason, SweepOptions, Sweeper, SweeperHandle};
use flowstate_store_diesel::DieselStore;

/// The runs the sweeps re-drove, with why.
pub type Redriven = Arc<Mutex<Vec<(RunId, Reason)>>>;

/// Starts the sweeper on `store`; what it re-drives is noted in the answer.
pub fn spawn(store: DieselStore) -> (SweeperHandle, Redriven) {
    let redriven: Redriven = Arc::default();
    let noted = Arc::clone(&redriven);
    let options = SweepOptions {
        relay_after: Duration::from_secs(2),
        stalled_after: Duration::from_secs(5),
        ..SweepOptions::default()
    };
    let sweeper = Sweeper::new(
        Arc::new(store),
        move |run, reason| {
            noted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((run, reason));
            async { Ok::<(), Infallible>(()) }
        },
        Arc::new(SystemClock),
    )
    .with_options(options)
    .with_interval(Duration::from_millis(500));
    (sweeper.spawn(), redriven)
}
