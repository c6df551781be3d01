//! Running one step of a leased run, and performing one side effect at most
//! once: the two helpers every workflow body in [`super::workflows`] calls.
//!
//! A step leans on `FencedWrites::insert_step_fenced` (inserted once per
//! name, only while the lease holds), `StepStore::claim_step` (exactly one
//! claimer per attempt; a failed step with attempts left is claimed as its
//! next attempt; a step held by another answers `None`) and
//! `StepStore::transition_claimed` (the outcome written only while the
//! claim still holds: a claim that ran out and was taken back is
//! `ClaimLost`). Every step has a short claim timeout
//! (`NewStep::with_claim_timeout`), so a step held by a dead worker comes
//! back in seconds, not the store's default ten minutes.
//!
//! An effect leans on `EffectJournal`: of all begins of one key exactly one
//! is `Started`; later ones see `InFlight` (begun, never settled: its
//! performer died) or `Settled` with the recorded outcome. `InFlight` is
//! resolved by asking the provider whether the effect happened, so it is
//! never performed twice.

use std::future::Future;
use std::sync::atomic::Ordering;

use anyhow::Result;
use flowstate_core::ports::{EffectJournal, FencedWrites, StepStore};
use flowstate_core::{
    EffectBegin, NewStep, RetryPolicy, RunLease, Step, StepStatus, StepTransition,
};
use serde_json::{Value, json};

use super::engine::Engine;

/// What became of a step this lease.
#[derive(Debug)]
pub enum StepRun {
    /// It has succeeded, now or before; `now` says whether this call ran
    /// it.
    Done {
        /// Whether this call ran the attempt that succeeded.
        now: bool,
    },
    /// This call ran an attempt that failed; the step has attempts left.
    Failed(String),
    /// Another worker holds it (or held it and died: its claim runs out).
    Busy,
    /// It failed for good: no attempt left.
    Exhausted(String),
}

impl Engine {
    /// Makes sure step `name` of the leased run exists, then claims and
    /// runs its current attempt with `body` if it is claimable. `body`
    /// answers `Ok(result)`, or `Err(reason)` for a failed attempt.
    pub async fn step<F, Fut>(
        &self,
        lease: &RunLease,
        name: &str,
        retries: u32,
        body: F,
    ) -> Result<StepRun>
    where
        F: FnOnce(Step) -> Fut,
        Fut: Future<Output = Result<std::result::Result<Value, String>>>,
    {
        let run = lease.run.id;
        let function = format!("{}.{name}", lease.run.workflow);
        let new = NewStep::new(run, name, function.as_str(), lease.run.input.clone())
            .with_retry(RetryPolicy::with_retries(retries))
            .with_claim_timeout(self.shared.claim_timeout);
        let existing = self
            .store
            .insert_step_fenced(lease.token, new)
            .await?
            .record;
        if existing.status == StepStatus::Succeeded {
            return Ok(StepRun::Done { now: false });
        }
        let Some(step) = self.store.claim_step(run, name, &function).await? else {
            let step = self.store.find_step(run, name).await?;
            return Ok(match step.status {
                StepStatus::Succeeded => StepRun::Done { now: false },
                StepStatus::Failed => StepRun::Exhausted(format!(
                    "{name} failed for good after {} attempts",
                    step.attempt
                )),
                _ => StepRun::Busy,
            });
        };
        self.provider
            .lock()
            .await
            .record_execution(run, name, step.attempt, &self.name)
            .await?;
        let claim = step.claim();
        let attempt = step.attempt;
        let outcome = body(step).await?;
        let transition = match &outcome {
            Ok(result) => StepTransition::Succeeded(result.clone()),
            Err(reason) => StepTransition::Failed(json!({ "error": reason, "attempt": attempt })),
        };
        self.store.transition_claimed(claim, transition).await?;
        Ok(match outcome {
            Ok(_) => StepRun::Done { now: true },
            Err(reason) => StepRun::Failed(reason),
        })
    }

    /// Performs side effect `key` of `step` at most once, whatever was
    /// replayed or crashed before, and answers its receipt.
    pub async fn effect(&self, step: &Step, key: &str) -> Result<Value> {
        let run = step.run;
        match self.store.begin_effect(run, key).await? {
            EffectBegin::Started => {
                let receipt = self
                    .provider
                    .lock()
                    .await
                    .perform(run, &step.name, key, &self.name)
                    .await?;
                self.shared
                    .crash
                    .window(&self.name, run, &step.name, step.attempt)
                    .await;
                self.store.settle_effect(run, key, &receipt).await?;
                Ok(receipt)
            }
            EffectBegin::Settled(receipt) => {
                self.shared.effects_replayed.fetch_add(1, Ordering::Relaxed);
                Ok(receipt)
            }
            EffectBegin::InFlight { began_at } => {
                // Begun by an attempt that never settled it: that attempt's
                // claim has run out (this attempt holds the step), so its
                // worker is gone. Ask the provider instead of guessing.
                let mut provider = self.provider.lock().await;
                let receipt = match provider.lookup(run, key).await? {
                    Some(receipt) => receipt,
                    None => provider.perform(run, &step.name, key, &self.name).await?,
                };
                drop(provider);
                self.store.settle_effect(run, key, &receipt).await?;
                self.shared
                    .stranded_resolved
                    .fetch_add(1, Ordering::Relaxed);
                tracing::info!(%run, key, %began_at, "stranded effect resolved from the provider");
                Ok(receipt)
            }
        }
    }
}
