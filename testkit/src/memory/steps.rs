//! [`StepStore`] for [`MemoryStore`]: steps, transitions, claims, history.

use flowstate_core::limits::checked;
use flowstate_core::ports::StepStore;
use flowstate_core::ports::checks;
use flowstate_core::step_claim::claimed_targets;
use flowstate_core::{
    ClaimDecision, ClaimInput, Error, HistoryId, InlineOutcome, InlineStep, Inserted, NewStep,
    Result, RetryStart, RunId, Step, StepAttempt, StepClaim, StepId, StepStatus, StepTransition,
    Timestamp,
};

use super::{MemoryStore, Tables};

impl StepStore for MemoryStore {
    async fn insert_step(&self, step: NewStep) -> Result<Inserted<Step>> {
        let (step, _) = checked(step, |step| checks::insert_step(&self.limits, step))?;
        let now = self.now();
        let mut tables = self.lock();
        Self::unsettled(&tables, step.run)?;
        insert_step_in(&mut tables, step, now)
    }

    async fn record_step(&self, inline: InlineStep) -> Result<Inserted<Step>> {
        let (inline, ()) = checked(inline, |i| checks::record_step(&self.limits, i).map(drop))?;
        let now = self.now();
        let mut tables = self.lock();
        Self::unsettled(&tables, inline.step.run)?;
        if let Ok(existing) = tables.step_by_name(inline.step.run, &inline.step.name) {
            return Ok(Inserted {
                record: existing.clone(),
                inserted: false,
            });
        }
        let InlineStep {
            step,
            outcome,
            started_at,
            finished_at,
        } = inline;
        let mut record = step.into_step(StepId::generate(), now)?;
        tables.check_history_writes()?;
        record.status = outcome.status();
        let mut attempt = StepAttempt {
            id: HistoryId::generate(),
            step: record.id,
            step_name: record.name.clone(),
            attempt: record.attempt,
            status: record.status,
            result: None,
            error: None,
            created_at: now,
            scheduled_at: None,
            running_at: Some(started_at),
            succeeded_at: None,
            failed_at: None,
        };
        match outcome {
            InlineOutcome::Succeeded(result) => {
                record.result = Some(result.clone());
                attempt.result = Some(result);
                attempt.succeeded_at = Some(finished_at);
            }
            InlineOutcome::Failed(error) => {
                record.error = Some(error.clone());
                attempt.error = Some(error);
                attempt.failed_at = Some(finished_at);
            }
        }
        tables
            .step_by_name
            .insert((record.run, record.name.clone()), record.id);
        tables.history.insert((record.id, record.attempt), attempt);
        tables.steps.insert(record.id, record.clone());
        Ok(Inserted {
            record,
            inserted: true,
        })
    }

    async fn get_step(&self, id: StepId) -> Result<Step> {
        self.lock().step(id).cloned()
    }

    async fn find_step(&self, run: RunId, name: &str) -> Result<Step> {
        checks::find_step(&self.limits, name)?;
        self.lock().step_by_name(run, name).cloned()
    }

    async fn list_steps(&self, run: RunId) -> Result<Vec<Step>> {
        let tables = self.lock();
        tables.run(run)?;
        let mut steps: Vec<Step> = tables
            .steps
            .values()
            .filter(|step| step.run == run)
            .cloned()
            .collect();
        steps.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        Ok(steps)
    }

    async fn transition_step(&self, id: StepId, transition: StepTransition) -> Result<()> {
        let (transition, _) = checked(transition, |t| checks::transition_step(&self.limits, t))?;
        let now = self.now();
        let mut tables = self.lock();
        let step = tables.step(id)?.clone();
        let to = transition.target();
        if !step.status.can_transition_to(to) {
            return Err(Error::IllegalStepTransition {
                step: id,
                from: step.status,
                to,
            });
        }
        tables.check_history_writes()?;
        self.apply(&mut tables, step, transition, now);
        Ok(())
    }

    async fn transition_claimed(&self, claim: StepClaim, transition: StepTransition) -> Result<()> {
        let (transition, _) = checked(transition, |t| checks::transition_step(&self.limits, t))?;
        let now = self.now();
        let mut tables = self.lock();
        let step = tables.step(claim.step)?.clone();
        let to = transition.target();
        let holds = step.status == StepStatus::Running && step.attempt == claim.attempt;
        if !holds || !claimed_targets().contains(&to) {
            return claim.explain_refusal(&step, &transition);
        }
        tables.check_history_writes()?;
        self.apply(&mut tables, step, transition, now);
        Ok(())
    }

    async fn renew_step_claim(&self, claim: StepClaim) -> Result<Timestamp> {
        let mut tables = self.lock();
        let deadline = self.claim_deadline(tables.step(claim.step)?);
        let step = tables.steps.get_mut(&claim.step).expect("read above");
        if step.status != StepStatus::Running || step.attempt != claim.attempt {
            return Err(claim.lost());
        }
        step.claimed_until = Some(deadline);
        Ok(deadline)
    }

    async fn create_retry_attempt(&self, id: StepId, start: RetryStart) -> Result<()> {
        let now = self.now();
        let mut tables = self.lock();
        let mut step = tables.step(id)?.clone();
        if step.status != StepStatus::Failed {
            return Err(Error::IllegalStepTransition {
                step: id,
                from: step.status,
                to: start.status(),
            });
        }
        tables.check_history_writes()?;
        let next = step.attempt.saturating_add(1);
        start_attempt(&mut step, next, start.status());
        step.updated_at = now;
        step.claimed_until = Some(self.claim_deadline(&step));
        tables.save_step(step, now);
        Ok(())
    }

    async fn claim_step(&self, run: RunId, name: &str, function: &str) -> Result<Option<Step>> {
        checks::claim_step(&self.limits, name, function)?;
        let now = self.now();
        let mut tables = self.lock();
        let mut step = tables.step_by_name(run, name)?.clone();
        let input = ClaimInput {
            status: step.status,
            function: step.function.as_deref(),
            attempt: step.attempt,
            retry: step.retry,
        };
        let decision = ClaimDecision::decide(input, function);
        match decision {
            ClaimDecision::Refuse => {
                return Err(Error::FunctionMismatch {
                    run,
                    name: name.to_owned(),
                    expected: step.function.unwrap_or_default(),
                    claimed: function.to_owned(),
                });
            }
            // Nothing to claim answers `None` in a settled run too: a
            // duplicate delivery of a finished step stays a no-op.
            ClaimDecision::Nothing(_) => return Ok(None),
            ClaimDecision::ClaimFresh | ClaimDecision::ClaimRetry => {}
        }
        Self::unsettled(&tables, run)?;
        tables.check_history_writes()?;
        let attempt = decision.attempt_after(step.attempt);
        start_attempt(&mut step, attempt, StepStatus::Running);
        step.updated_at = now;
        step.claimed_until = Some(self.claim_deadline(&step));
        tables.save_step(step.clone(), now);
        Ok(Some(step))
    }

    async fn step_history(&self, run: RunId) -> Result<Vec<StepAttempt>> {
        let tables = self.lock();
        tables.run(run)?;
        let mut rows: Vec<StepAttempt> = tables
            .history
            .values()
            .filter(|row| tables.steps.get(&row.step).is_some_and(|s| s.run == run))
            .cloned()
            .collect();
        rows.sort_by_key(|row| (row.created_at, row.attempt, row.id));
        Ok(rows)
    }

    async fn set_branch_taken(&self, id: StepId, branch: &str) -> Result<()> {
        checks::set_branch_taken(&self.limits, branch)?;
        let now = self.now();
        let mut tables = self.lock();
        let step = tables.steps.get_mut(&id).ok_or(Error::StepNotFound(id))?;
        step.branch = Some(branch.to_owned());
        step.updated_at = now;
        Ok(())
    }
}

/// Inserts `step` into `tables` (its input checked, its run unsettled),
/// or answers the step holding its name.
pub(super) fn insert_step_in(
    tables: &mut Tables,
    step: NewStep,
    now: Timestamp,
) -> Result<Inserted<Step>> {
    if let Ok(existing) = tables.step_by_name(step.run, &step.name) {
        return Ok(Inserted {
            record: existing.clone(),
            inserted: false,
        });
    }
    let record = step.into_step(StepId::generate(), now)?;
    tables.check_history_writes()?;
    tables
        .step_by_name
        .insert((record.run, record.name.clone()), record.id);
    tables.save_step(record.clone(), now);
    Ok(Inserted {
        record,
        inserted: true,
    })
}

impl MemoryStore {
    /// Writes `transition` of `step` (its guard already passed): status,
    /// stamp, payload, and the claim deadline of a move to running.
    fn apply(
        &self,
        tables: &mut Tables,
        mut step: Step,
        transition: StepTransition,
        now: Timestamp,
    ) {
        step.status = transition.target();
        step.updated_at = now;
        match transition {
            StepTransition::Succeeded(result) => step.result = Some(result),
            StepTransition::Failed(error) => step.error = Some(error),
            StepTransition::Running => step.claimed_until = Some(self.claim_deadline(&step)),
            StepTransition::Scheduled => {}
        }
        tables.save_step(step, now);
    }
}

/// Puts `step` in `attempt` with `status`; a new attempt starts with no
/// result and no error.
pub(super) fn start_attempt(step: &mut Step, attempt: u32, status: StepStatus) {
    if attempt != step.attempt {
        step.attempt = attempt;
        step.result = None;
        step.error = None;
    }
    step.status = status;
}
