//! The crash: one worker, armed once the demo is part-way through, stops
//! for good between `begin_effect` and `settle_effect` of a `charge` that
//! is already on its second attempt or later, with its batch of run leases
//! and that step's claim held, and the demo aborts its task there.
//!
//! Nothing tells the store. What brings its runs back is flowstate alone:
//! the leases run out on the database's clock and the `Sweeper` reaps them
//! (`RunRecoveryStore::reap_expired_leases`), the step's claim deadline
//! passes and the sweeper takes the attempt back
//! (`RecoveryStore::expire_step_claims`, so the old holder could write
//! nothing if it woke), and the effect left begun and unsettled is found
//! by the next attempt's `begin_effect` as `InFlight` and resolved from the
//! provider instead of performed again ([`super::steps`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use flowstate_core::RunId;
use tokio::sync::oneshot;

/// Where the crash happened.
#[derive(Clone, Debug)]
pub struct CrashNotice {
    /// The worker that stopped.
    pub worker: String,
    /// The run whose effect it left begun.
    pub run: RunId,
    /// The step, and its attempt.
    pub step: String,
    /// The attempt.
    pub attempt: u32,
    /// Every run it held a lease on.
    pub held: Vec<RunId>,
}

/// The crash, armed for one worker.
pub struct Crash {
    victim: Option<String>,
    arm_after: u64,
    charges: AtomicU64,
    fired: AtomicBool,
    held: Mutex<Vec<RunId>>,
    notice: Mutex<Option<oneshot::Sender<CrashNotice>>>,
}

impl Crash {
    /// A crash of worker `victim` (none: no crash) once `arm_after` charges
    /// have been performed by anyone; the notice goes to `notice`.
    pub fn new(
        victim: Option<String>,
        arm_after: u64,
        notice: oneshot::Sender<CrashNotice>,
    ) -> Self {
        Self {
            victim,
            arm_after,
            charges: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            held: Mutex::new(Vec::new()),
            notice: Mutex::new(Some(notice)),
        }
    }

    /// Notes the runs `worker` just leased (only the victim's are kept).
    pub fn holding(&self, worker: &str, runs: Vec<RunId>) {
        if self.victim.as_deref() == Some(worker) {
            *lock(&self.held) = runs;
        }
    }

    /// Called between `begin_effect` and `settle_effect`: for the victim,
    /// once armed and on a retried `charge`, never returns (the demo aborts
    /// the task while it waits here). Everyone else goes on at once.
    pub async fn window(&self, worker: &str, run: RunId, step: &str, attempt: u32) {
        if step == "charge" {
            self.charges.fetch_add(1, Ordering::Relaxed);
        }
        let armed = self.charges.load(Ordering::Relaxed) >= self.arm_after;
        if self.victim.as_deref() != Some(worker) || step != "charge" || attempt < 2 || !armed {
            return;
        }
        if self.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        let notice = CrashNotice {
            worker: worker.to_owned(),
            run,
            step: step.to_owned(),
            attempt,
            held: lock(&self.held).clone(),
        };
        tracing::info!(%worker, %run, attempt, "crashing between begin_effect and settle_effect");
        if let Some(tx) = lock(&self.notice).take() {
            let _ = tx.send(notice);
        }
        std::future::pending::<()>().await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
