//! The workflow code: what each workflow does with a run it holds the lease
//! on, as far as it can go before it must wait. Each function is one
//! workflow; it reads where the run stands from the store (its steps, its
//! children, its signals, its state), never from memory, so any worker can
//! pick up any run where the last one left it.
//!
//! Leans on `RunWaitStore` (a run waiting on a signal or on its children is
//! left out of claims until the signal is there or every child settled;
//! `take_signal` takes the signal under the lease; a signal sent before
//! the wait is kept), `ChildRunStore` (a child created once per key
//! however often the parent replays), `FencedWrites::write_state_fenced`
//! (state written only by the lease holder) and the two helpers of
//! [`super::steps`].

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use flowstate_core::ports::{ChildRunStore, FencedWrites, RunStore, RunWaitStore};
use flowstate_core::{NewChild, Release, RunLease, RunOutcome, Wait};
use serde_json::{Value, json};

use super::definitions::{NOTIFY, PICKED_UP};
use super::engine::{Engine, Next};
use super::steps::StepRun;

/// Attempts a `charge` may have beyond its first: two transient failures
/// at most, one attempt lost to the crash, and one to spare.
const CHARGE_RETRIES: u32 = 4;

/// How long a refund waits before it pays out (a sleep: the run is not
/// claimable until then, and the sweeper's wake-up marks it awake).
const COOLING_OFF: Duration = Duration::from_millis(150);

/// How long a run sleeps when one of its steps is held by another worker
/// (alive, or dead and waiting for its claim deadline).
const BUSY_NAP: Duration = Duration::from_millis(500);

/// The order pipeline: reserve, charge, a `notify` child and its wait, the
/// carrier's pickup signal, ship.
pub async fn order(engine: &Engine, lease: &RunLease) -> Result<Next> {
    let (run, token) = (lease.run.id, lease.token);
    let order = order_number(&lease.run.input);

    let reserved = engine
        .step(lease, "reserve", 2, |step| async move {
            Ok(Ok(engine.effect(&step, "reserve").await?))
        })
        .await?;
    match reserved {
        StepRun::Done { now: true, .. } if cancels(order, engine.shared.cancel_percent) => {
            // The customer changes their mind while the order is under way.
            engine
                .shared
                .cancels_in_flight
                .fetch_add(1, Ordering::SeqCst);
            let _ = engine.shared.customer.send((run, order));
        }
        StepRun::Done { .. } => {}
        other => return Ok(not_done(other)),
    }

    let failure_percent = engine.shared.charge_failure_percent;
    let charged = engine
        .step(lease, "charge", CHARGE_RETRIES, |step| async move {
            if charge_declined(order, step.attempt, failure_percent) {
                return Ok(Err(format!(
                    "card declined, try again (attempt {})",
                    step.attempt
                )));
            }
            Ok(Ok(engine.effect(&step, "charge").await?))
        })
        .await?;
    if !matches!(charged, StepRun::Done { .. }) {
        return Ok(not_done(charged));
    }

    let children = engine.store.count_children(run).await?;
    if children.is_empty() {
        engine
            .store
            .create_children(
                run,
                vec![NewChild::new("notify", NOTIFY, lease.run.input.clone())],
            )
            .await?;
        // Book the pickup now, while the child runs: a signal that comes
        // before the run waits for it is kept, so it cannot be missed.
        let _ = engine
            .shared
            .carrier
            .send((run, tokio::time::Instant::now()));
        return Ok(Next::Wait(Wait::Children { timeout: None }));
    }
    if children.keys().any(|status| !status.is_settled()) {
        return Ok(Next::Wait(Wait::Children { timeout: None }));
    }

    if let Some(pickup) = engine.store.take_signal(run, token, PICKED_UP).await? {
        // Kept in the run's state: a worker that takes over after a crash
        // finds the pickup here, the signal being gone.
        engine
            .store
            .write_state_fenced(run, token, "pickup", &pickup)
            .await?;
    } else if !engine.store.read_state(run).await?.contains_key("pickup") {
        return Ok(Next::Wait(Wait::signal(PICKED_UP)));
    }

    let shipped = engine
        .step(lease, "ship", 2, |step| async move {
            Ok(Ok(engine.effect(&step, "ship").await?))
        })
        .await?;
    if !matches!(shipped, StepRun::Done { .. }) {
        return Ok(not_done(shipped));
    }
    Ok(Next::Finish(RunOutcome::Completed))
}

/// The child of every order: one notification sent.
pub async fn notify(engine: &Engine, lease: &RunLease) -> Result<Next> {
    let sent = engine
        .step(lease, "send", 2, |step| async move {
            Ok(Ok(engine.effect(&step, "notify").await?))
        })
        .await?;
    Ok(match sent {
        StepRun::Done { .. } => Next::Finish(RunOutcome::Completed),
        other => not_done(other),
    })
}

/// A cancelled order's refund: a cooling-off sleep, then the refund.
pub async fn refund(engine: &Engine, lease: &RunLease) -> Result<Next> {
    let (run, token) = (lease.run.id, lease.token);
    if !engine
        .store
        .read_state(run)
        .await?
        .contains_key("cooled_off")
    {
        engine
            .store
            .write_state_fenced(run, token, "cooled_off", &json!(true))
            .await?;
        return Ok(Next::Wait(Wait::For(COOLING_OFF)));
    }
    let refunded = engine
        .step(lease, "refund", 2, |step| async move {
            Ok(Ok(engine.effect(&step, "refund").await?))
        })
        .await?;
    Ok(match refunded {
        StepRun::Done { .. } => Next::Finish(RunOutcome::Completed),
        other => not_done(other),
    })
}

/// The run a poison event starts once it is redriven: one import.
pub async fn import(engine: &Engine, lease: &RunLease) -> Result<Next> {
    let imported = engine
        .step(lease, "import", 2, |step| async move {
            Ok(Ok(engine.effect(&step, "import").await?))
        })
        .await?;
    Ok(match imported {
        StepRun::Done { .. } => Next::Finish(RunOutcome::Completed),
        other => not_done(other),
    })
}

/// What to do with a run whose step did not get done this lease.
fn not_done(step: StepRun) -> Next {
    match step {
        // Succeeded steps never come here.
        StepRun::Done { .. } => Next::Release(Release::Yield),
        // Counted against the run's consecutive failures; the step's retry
        // is claimed by whoever leases the run next.
        StepRun::Failed(reason) => Next::Release(Release::failure(reason)),
        StepRun::Busy => Next::Wait(Wait::For(BUSY_NAP)),
        StepRun::Exhausted(reason) => Next::Finish(RunOutcome::Failed { reason }),
    }
}

/// The order number in a run's input.
pub fn order_number(input: &Value) -> u64 {
    input.get("order").and_then(Value::as_u64).unwrap_or(0)
}

/// Whether the customer of `order` cancels it: `percent` of orders, the
/// same ones every time.
pub fn cancels(order: u64, percent: u32) -> bool {
    fnv(&format!("cancel/{order}")) % 100 < u64::from(percent)
}

/// Whether attempt `attempt` of `order`'s charge is declined: `percent` of
/// first attempts and of second attempts, never a later one, the same ones
/// every time.
pub fn charge_declined(order: u64, attempt: u32, percent: u32) -> bool {
    attempt <= 2 && fnv(&format!("charge/{order}/{attempt}")) % 100 < u64::from(percent)
}

/// FNV-1a: a fixed hash, so the same orders fail and cancel on every run.
pub fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_cancels_are_the_same_every_time_and_near_their_share() {
        let declined = (0..10_000).filter(|&o| charge_declined(o, 1, 20)).count();
        assert!((1_700..2_300).contains(&declined), "{declined} of 10,000");
        assert!((0..10_000).all(|o| !charge_declined(o, 3, 100)));
        let cancelled = (0..10_000).filter(|&o| cancels(o, 2)).count();
        assert!((120..280).contains(&cancelled), "{cancelled} of 10,000");
        assert_eq!(charge_declined(7, 1, 20), charge_declined(7, 1, 20));
        assert!(!cancels(7, 0));
    }
}
