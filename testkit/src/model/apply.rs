//! Carrying out one [`Op`] on one store: the slots resolved to that store's
//! ids, the port method called, its answer made canonical ([`Reply`]).

use std::time::Duration;

use flowstate_core::ports::{BatchStepStore, RecoveryStore, RunStore, StepStore};
use flowstate_core::step_claim::is_expired;
use flowstate_core::{
    BatchClaim, Inserted, NewRun, NewStep, Result, RetryPolicy, StepClaim, Timestamp,
};
use serde_json::json;

use super::answer::{Answer, Ids, Reply};
use super::ops::Op;

/// A store the model drives: every port an op calls.
pub trait ModelStore: RunStore + StepStore + BatchStepStore + RecoveryStore {}

impl<T: RunStore + StepStore + BatchStepStore + RecoveryStore> ModelStore for T {}

/// What an op leaves to be decided when it runs, decided once on the
/// reference store and passed to both, so both get the same call.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    /// The attempt each claim of the op names ([`super::ops::Attempt`]
    /// against the reference's current attempt), in the op's order.
    attempts: Vec<u32>,
    /// `expire_step_claims`'s limit, raised to the end of a tie.
    limit: u32,
}

/// Decides what `op` leaves open, from the reference store (its lease
/// clock reads `now`).
pub(crate) async fn resolve<S: ModelStore>(
    reference: &S,
    ids: &Ids,
    now: Timestamp,
    op: &Op,
) -> Resolved {
    let current = async |step| match reference.get_step(ids.step(step)).await {
        Ok(step) => step.attempt,
        Err(_) => RetryPolicy::FIRST_ATTEMPT,
    };
    let mut resolved = Resolved::default();
    match op {
        Op::TransitionClaimed { step, attempt, .. } | Op::RenewStepClaim { step, attempt } => {
            resolved.attempts.push(attempt.of(current(*step).await));
        }
        Op::CompleteBatch { items } => {
            for (step, attempt, _) in items {
                resolved.attempts.push(attempt.of(current(*step).await));
            }
        }
        Op::ExpireStepClaims { limit } => {
            // The port takes the first expired first and says nothing of
            // ties. The reference's deadlines tie where two claims were made
            // at one clock reading with one timeout (or add up to the same
            // instant); a subject whose lease clock moves with real time
            // orders them by when they were made. A limit that would cut a
            // tie takes all of it, so both stores take back the same steps.
            let mut deadlines = Vec::new();
            for id in ids.steps() {
                if let Ok(step) = reference.get_step(id).await {
                    if is_expired(&step, now) {
                        deadlines.extend(step.claimed_until);
                    }
                }
            }
            deadlines.sort_unstable();
            let cut = *limit as usize;
            resolved.limit = match (
                cut.checked_sub(1).map(|i| deadlines.get(i)),
                deadlines.get(cut),
            ) {
                (Some(Some(last)), Some(next)) if last == next => {
                    deadlines.iter().filter(|d| *d <= last).count() as u32
                }
                _ => *limit,
            };
        }
        _ => {}
    }
    resolved
}

/// Carries out `op` on `store` with the ids of `ids` (noting the runs and
/// steps it creates there) and answers canonically. [`Op::AdvanceClock`]
/// is the runner's, not a store's: it answers [`Answer::Done`].
pub(crate) async fn apply<S: ModelStore>(
    store: &S,
    ids: &mut Ids,
    op: &Op,
    resolved: &Resolved,
) -> Reply {
    let claim = |ids: &Ids, step, index: usize| StepClaim {
        step: ids.step(step),
        attempt: resolved.attempts[index],
    };
    let answer: Result<Answer> = match op {
        Op::CreateRun { key } => {
            let mut run = NewRun::new("wf", json!({"n": 1}));
            if let Some(key) = key {
                run = run.with_idempotency_key(*key);
            }
            match store.create_run(run).await {
                Ok(new) => {
                    if new.inserted {
                        ids.created_run(new.record.id);
                    }
                    Ok(Answer::NewRun(new))
                }
                Err(error) => Err(error),
            }
        }
        Op::GetRun { run } => store.get_run(ids.run(*run)).await.map(Answer::Run),
        Op::SetRunStatus { run, to } => store
            .set_run_status(ids.run(*run), *to)
            .await
            .map(Answer::Run),
        Op::WriteState { run, key, value } => store
            .write_state(ids.run(*run), key, &value.json())
            .await
            .map(|()| Answer::Done),
        Op::ReadState { run } => store.read_state(ids.run(*run)).await.map(Answer::State),
        Op::InsertStep {
            step,
            function,
            retries,
            retry_delay,
            claim_timeout_minutes,
        } => {
            let new = NewStep {
                run: ids.run(step.run),
                name: step.name.to_owned(),
                function: function.map(str::to_owned),
                input: json!({"step": step.name}),
                retry: RetryPolicy {
                    retries: *retries,
                    retry_delay: retry_delay.then_some(Duration::from_secs(120)),
                },
                claim_timeout: claim_timeout_minutes.map(|m| Duration::from_secs(60 * m)),
            };
            match store.insert_step(new).await {
                Ok(Inserted { record, inserted }) => {
                    ids.inserted_step(*step, record.id);
                    Ok(Answer::NewStep(Inserted { record, inserted }))
                }
                Err(error) => Err(error),
            }
        }
        Op::GetStep(step) => store.get_step(ids.step(*step)).await.map(Answer::Step),
        Op::FindStep(step) => store
            .find_step(ids.run(step.run), step.name)
            .await
            .map(Answer::Step),
        Op::ListSteps { run } => store.list_steps(ids.run(*run)).await.map(Answer::Steps),
        Op::ClaimStep { step, function } => store
            .claim_step(ids.run(step.run), step.name, function)
            .await
            .map(Answer::Claimed),
        Op::ClaimStepOutcome { step, function } => store
            .claim_step_outcome(ids.run(step.run), step.name, function)
            .await
            .map(Answer::Outcome),
        Op::TransitionStep { step, to } => store
            .transition_step(ids.step(*step), to.transition())
            .await
            .map(|()| Answer::Done),
        Op::TransitionClaimed { step, to, .. } => store
            .transition_claimed(claim(ids, *step, 0), to.transition())
            .await
            .map(|()| Answer::Done),
        Op::RenewStepClaim { step, .. } => store
            .renew_step_claim(claim(ids, *step, 0))
            .await
            .map(Answer::Deadline),
        Op::CreateRetryAttempt { step, start } => store
            .create_retry_attempt(ids.step(*step), *start)
            .await
            .map(|()| Answer::Done),
        Op::RetryStep { step, start } => store
            .retry_step(ids.step(*step), *start)
            .await
            .map(Answer::Step),
        Op::ClaimBatch { limit, function } => {
            let mut batch = BatchClaim::new(*limit);
            batch.function = function.map(str::to_owned);
            store.claim_batch(&batch).await.map(Answer::Steps)
        }
        Op::CompleteBatch { items } => {
            let completions = items
                .iter()
                .enumerate()
                .map(|(index, (step, _, outcome))| (claim(ids, *step, index), outcome.completion()))
                .collect();
            store.complete_batch(completions).await.map(|results| {
                let refused = |result: Result<()>| result.map_err(|e| ids.refusal(e));
                Answer::Completed(results.into_iter().map(refused).collect())
            })
        }
        Op::StepHistory { run } => store.step_history(ids.run(*run)).await.map(Answer::History),
        Op::ExpireStepClaims { .. } => store
            .expire_step_claims(resolved.limit)
            .await
            .map(Answer::Expired),
        Op::AdvanceClock { .. } => Ok(Answer::Done),
    };
    answer
        .map(|answer| ids.answer(answer))
        .map_err(|error| ids.refusal(error))
}
