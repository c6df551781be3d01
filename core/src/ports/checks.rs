//! The input rules of every port method, written once; a backend calls the
//! method's check before it touches storage, and gets the typed
//! [`Error::InvalidInput`](crate::Error::InvalidInput) with the one label.
//!
//! Besides refusals, a rule may shape what is kept: [`dispatch_error`] cuts
//! the error `record_dispatch_failure` keeps to
//! [`MAX_DISPATCH_ERROR_BYTES`].

use std::time::Duration;

use serde_json::Value;

use crate::error::{InvalidInput, Result};
use crate::events::EncodedEvent;
use crate::field;
use crate::{
    BatchClaim, EncodedStep, InlineOutcome, InlineStep, InputLimits, NewActivation, NewChild,
    NewEvent, NewPublishedVersion, NewRun, NewSchedule, NewStep, NewVirtualUserRun, NewWorkflow,
    NewWorkflowVersion, Release, RunId, RunOutcome, RunQuery, RunTally, SchedulePatch,
    StepTransition, VirtualUserRunQuery, Wait,
};

// ---- runs: `RunStore`

/// [`RunStore::create_run`](super::RunStore::create_run): the workflow,
/// graph hash, idempotency key and input; answers the input as JSON text.
pub fn create_run(limits: &InputLimits, run: &NewRun) -> Result<String> {
    limits.encode_run(run)
}

/// [`RunStore::list_runs`](super::RunStore::list_runs): the workflow
/// filter, if any, is checked like a workflow name written.
pub fn list_runs(limits: &InputLimits, query: &RunQuery) -> Result<()> {
    if let Some(workflow) = &query.workflow {
        limits.check_key(field::WORKFLOW, workflow)?;
    }
    Ok(())
}

/// [`RunStore::write_state`](super::RunStore::write_state) (and
/// [`FencedWrites::write_state_fenced`](super::FencedWrites::write_state_fenced)):
/// the key, then the value; answers the value as JSON text.
pub fn write_state(limits: &InputLimits, key: &str, value: &Value) -> Result<String> {
    limits.check_key(field::STATE_KEY, key)?;
    limits.encode(field::STATE_VALUE, value)
}

/// [`RunStore::set_run_status_with_output`](super::RunStore::set_run_status_with_output)
/// (and [`RunLeaseStore::finish_with_output`](super::RunLeaseStore::finish_with_output)):
/// the output; answers it as JSON text.
pub fn run_output(limits: &InputLimits, output: &Value) -> Result<String> {
    limits.encode(field::RUN_OUTPUT, output)
}

// ---- steps: `StepStore`

/// [`StepStore::insert_step`](super::StepStore::insert_step) (and
/// [`FencedWrites::insert_step_fenced`](super::FencedWrites::insert_step_fenced)):
/// name, function, input and retry delay; answers the step as a store
/// writes it.
pub fn insert_step(limits: &InputLimits, step: &NewStep) -> Result<EncodedStep> {
    limits.encode_step(step)
}

/// [`StepStore::record_step`](super::StepStore::record_step): the step as
/// [`insert_step`] checks it, its timings (finished not before started),
/// then its result or error; answers the step as a store writes it and
/// the payload as JSON text.
pub fn record_step(limits: &InputLimits, inline: &InlineStep) -> Result<(EncodedStep, String)> {
    let step = limits.encode_step(&inline.step)?;
    if inline.finished_at < inline.started_at {
        return Err(InvalidInput::OutOfRange {
            field: field::STEP_TIMINGS,
            detail: format!(
                "finished at {} before it started at {}",
                inline.finished_at.as_micros(),
                inline.started_at.as_micros()
            ),
        }
        .into());
    }
    let payload = match &inline.outcome {
        InlineOutcome::Succeeded(result) => limits.encode(field::STEP_RESULT, result)?,
        InlineOutcome::Failed(error) => limits.encode(field::STEP_ERROR, error)?,
    };
    Ok((step, payload))
}

/// [`StepStore::find_step`](super::StepStore::find_step): the step name
/// looked up.
pub fn find_step(limits: &InputLimits, name: &str) -> Result<()> {
    limits.check_key(field::STEP_NAME, name)
}

/// [`StepStore::transition_step`](super::StepStore::transition_step) (and
/// `transition_claimed`): the payload; answers it as JSON text, `None` for
/// a move that carries none.
pub fn transition_step(
    limits: &InputLimits,
    transition: &StepTransition,
) -> Result<Option<String>> {
    limits.encode_transition(transition)
}

/// [`StepStore::claim_step`](super::StepStore::claim_step) (and
/// `claim_step_outcome`): the step name, then the function.
pub fn claim_step(limits: &InputLimits, name: &str, function: &str) -> Result<()> {
    limits.check_claim(name, function)
}

/// [`StepStore::set_branch_taken`](super::StepStore::set_branch_taken):
/// the branch.
pub fn set_branch_taken(limits: &InputLimits, branch: &str) -> Result<()> {
    limits.check_key(field::BRANCH, branch)
}

// ---- versions: `VersionStore`

/// [`VersionStore::upsert_version`](super::VersionStore::upsert_version):
/// workflow, graph hash and graph; answers the graph as JSON text.
pub fn upsert_version(limits: &InputLimits, version: &NewWorkflowVersion) -> Result<String> {
    limits.encode_version(version)
}

/// [`VersionStore::propose_version`](super::VersionStore::propose_version):
/// as [`upsert_version`], then the source, if any; answers the graph as
/// JSON text.
pub fn propose_version(
    limits: &InputLimits,
    version: &NewWorkflowVersion,
    source: Option<&str>,
) -> Result<String> {
    let graph = limits.encode_version(version)?;
    if let Some(source) = source {
        limits.check_text(field::VERSION_SOURCE, source)?;
    }
    Ok(graph)
}

/// [`VersionStore::get_version`](super::VersionStore::get_version): the
/// workflow, then the graph hash looked up.
pub fn get_version(limits: &InputLimits, workflow: &str, graph_hash: &str) -> Result<()> {
    limits.check_key(field::WORKFLOW, workflow)?;
    limits.check_key(field::GRAPH_HASH, graph_hash)
}

// ---- batch: `BatchStepStore`

/// [`BatchStepStore::claim_batch`](super::BatchStepStore::claim_batch):
/// the function filter, if any.
pub fn claim_batch(limits: &InputLimits, claim: &BatchClaim) -> Result<()> {
    if let Some(function) = &claim.function {
        limits.check_key(field::FUNCTION, function)?;
    }
    Ok(())
}

/// [`BatchStepStore::complete_batch`](super::BatchStepStore::complete_batch):
/// one completion's transition, checked as
/// [`transition_step`] checks it; a refused one fails that completion alone.
pub fn complete_batch(limits: &InputLimits, transition: &StepTransition) -> Result<Option<String>> {
    transition_step(limits, transition)
}

// ---- leases: `RunLeaseStore`

/// [`RunLeaseStore::claim_run`](super::RunLeaseStore::claim_run): the
/// worker and the lease.
pub fn claim_run(limits: &InputLimits, worker: &str, lease_for: Duration) -> Result<()> {
    limits.check_lease(worker, lease_for)
}

/// [`RunLeaseStore::claim_runs`](super::RunLeaseStore::claim_runs): the
/// worker, the lease and the batch size.
pub fn claim_runs(limits: &InputLimits, worker: &str, n: u32, lease_for: Duration) -> Result<()> {
    limits.check_claim_batch(worker, n, lease_for)
}

/// [`RunLeaseStore::renew`](super::RunLeaseStore::renew): the lease.
pub fn renew(limits: &InputLimits, lease_for: Duration) -> Result<()> {
    limits.check_lease_for(lease_for)
}

/// [`RunLeaseStore::finish`](super::RunLeaseStore::finish): the failure
/// reason, if the outcome has one.
pub fn finish(limits: &InputLimits, outcome: &RunOutcome) -> Result<()> {
    match outcome.reason() {
        Some(reason) => limits.check_reason(reason),
        None => Ok(()),
    }
}

/// [`RunLeaseStore::release`](super::RunLeaseStore::release): the failure
/// reason of a release that fails.
pub fn release(limits: &InputLimits, release: &Release) -> Result<()> {
    if let Release::Failure { reason, .. } = release {
        limits.check_reason(reason)?;
    }
    Ok(())
}

// ---- recovery: `RunRecoveryStore`

/// [`RunRecoveryStore::lease_run`](super::RunRecoveryStore::lease_run): the
/// worker and the lease.
pub fn lease_run(limits: &InputLimits, worker: &str, lease_for: Duration) -> Result<()> {
    limits.check_lease(worker, lease_for)
}

// ---- waits: `RunWaitStore`

/// [`RunWaitStore::wait`](super::RunWaitStore::wait): what the run waits
/// for.
pub fn wait(limits: &InputLimits, wait: &Wait) -> Result<()> {
    limits.check_wait(wait)
}

/// [`RunWaitStore::signal`](super::RunWaitStore::signal): the name, then the
/// payload; answers the payload as JSON text.
pub fn signal(limits: &InputLimits, name: &str, payload: &Value) -> Result<String> {
    limits.check_key(field::SIGNAL_NAME, name)?;
    limits.encode(field::SIGNAL_PAYLOAD, payload)
}

/// [`RunWaitStore::take_signal`](super::RunWaitStore::take_signal): the
/// name looked up.
pub fn take_signal(limits: &InputLimits, name: &str) -> Result<()> {
    limits.check_key(field::SIGNAL_NAME, name)
}

// ---- children: `ChildRunStore`

/// [`ChildRunStore::create_children`](super::ChildRunStore::create_children):
/// the batch and every child; answers each as the run to create with its
/// input as JSON text.
pub fn create_children(
    limits: &InputLimits,
    parent: RunId,
    children: Vec<NewChild>,
) -> Result<Vec<(NewRun, String)>> {
    limits.encode_children(parent, children)
}

// ---- effects: `EffectJournal`

/// [`EffectJournal::begin_effect`](super::EffectJournal::begin_effect): the
/// effect key.
pub fn begin_effect(limits: &InputLimits, key: &str) -> Result<()> {
    limits.check_effect_key(key)
}

/// [`EffectJournal::settle_effect`](super::EffectJournal::settle_effect):
/// the key, then the outcome; answers the outcome as JSON text.
pub fn settle_effect(limits: &InputLimits, key: &str, outcome: &Value) -> Result<String> {
    limits.check_effect_key(key)?;
    limits.encode(field::EFFECT_OUTCOME, outcome)
}

// ---- definitions: `DefinitionStore`

/// [`DefinitionStore::create_workflow`](super::DefinitionStore::create_workflow).
pub fn create_workflow(limits: &InputLimits, workflow: &NewWorkflow) -> Result<()> {
    limits.check_workflow(workflow)
}

/// [`DefinitionStore::list_workflows`](super::DefinitionStore::list_workflows):
/// the app id, then the scope id.
pub fn list_workflows(limits: &InputLimits, app_id: &str, scope_id: &str) -> Result<()> {
    limits.check_key(field::APP_ID, app_id)?;
    limits.check_key(field::SCOPE_ID, scope_id)
}

/// [`DefinitionStore::publish_version`](super::DefinitionStore::publish_version):
/// answers the graph as JSON text.
pub fn publish_version(limits: &InputLimits, version: &NewPublishedVersion) -> Result<String> {
    limits.encode_published_version(version)
}

/// [`DefinitionStore::create_activation`](super::DefinitionStore::create_activation):
/// answers the activation's filter as JSON text.
pub fn create_activation(limits: &InputLimits, activation: &NewActivation) -> Result<String> {
    limits.encode_activation(activation)
}

// ---- events: `EventStore`

/// [`EventStore::emit`](super::EventStore::emit): answers the event as a
/// store writes it.
pub fn emit(limits: &InputLimits, event: &NewEvent) -> Result<EncodedEvent> {
    limits.encode_event(event)
}

// ---- virtual users: `ScheduleStore`, `VirtualUserRunStore`

/// [`ScheduleStore::upsert_schedule`](super::ScheduleStore::upsert_schedule):
/// the persona.
pub fn upsert_schedule(limits: &InputLimits, schedule: &NewSchedule) -> Result<()> {
    limits.check_persona(&schedule.persona)
}

/// [`ScheduleStore::update_schedule`](super::ScheduleStore::update_schedule):
/// the persona, then the patch; answers the goals, if set, as JSON text.
pub fn update_schedule(
    limits: &InputLimits,
    persona: &str,
    patch: &SchedulePatch,
) -> Result<Option<String>> {
    limits.check_persona(persona)?;
    limits.encode_schedule_patch(patch)
}

/// [`ScheduleStore::get_schedule`](super::ScheduleStore::get_schedule): the
/// persona looked up.
pub fn get_schedule(limits: &InputLimits, persona: &str) -> Result<()> {
    limits.check_persona(persona)
}

/// [`ScheduleStore::claim_schedule`](super::ScheduleStore::claim_schedule):
/// the persona.
pub fn claim_schedule(limits: &InputLimits, persona: &str) -> Result<()> {
    limits.check_persona(persona)
}

/// [`VirtualUserRunStore::start_virtual_user_run`](super::VirtualUserRunStore::start_virtual_user_run):
/// the persona.
pub fn start_virtual_user_run(limits: &InputLimits, persona: &str) -> Result<()> {
    limits.check_persona(persona)
}

/// [`VirtualUserRunStore::start_virtual_user_run_with`](super::VirtualUserRunStore::start_virtual_user_run_with):
/// the persona, the starter and the goals; answers the goals as JSON text,
/// `None` when there are none.
pub fn start_virtual_user_run_with(
    limits: &InputLimits,
    run: &NewVirtualUserRun,
) -> Result<Option<String>> {
    limits.encode_new_virtual_user_run(run)
}

/// [`VirtualUserRunStore::add_to_tally`](super::VirtualUserRunStore::add_to_tally):
/// each amount within what a store keeps.
pub fn add_to_tally(limits: &InputLimits, delta: &RunTally) -> Result<()> {
    limits.check_tally_delta(delta)
}

/// [`VirtualUserRunStore::set_memory`](super::VirtualUserRunStore::set_memory):
/// answers the memory as JSON text (its size and depth checked).
pub fn set_memory(limits: &InputLimits, memory: &Value) -> Result<String> {
    limits.encode(field::MEMORY, memory)
}

/// [`VirtualUserRunStore::set_intents`](super::VirtualUserRunStore::set_intents):
/// answers the intents as JSON text.
pub fn set_intents(limits: &InputLimits, intents: &[String]) -> Result<String> {
    limits.encode_intents(intents)
}

/// [`VirtualUserRunStore::list_virtual_user_runs`](super::VirtualUserRunStore::list_virtual_user_runs):
/// the persona filter, if any.
pub fn list_virtual_user_runs(limits: &InputLimits, query: &VirtualUserRunQuery) -> Result<()> {
    if let Some(persona) = &query.persona {
        limits.check_persona(persona)?;
    }
    Ok(())
}

/// [`VirtualUserRunStore::complete_virtual_user_run`](super::VirtualUserRunStore::complete_virtual_user_run):
/// answers the findings as JSON text.
pub fn complete_virtual_user_run(limits: &InputLimits, findings: &Value) -> Result<String> {
    limits.encode(field::FINDINGS, findings)
}

/// [`VirtualUserRunStore::fail_virtual_user_run`](super::VirtualUserRunStore::fail_virtual_user_run):
/// the reason.
pub fn fail_virtual_user_run(limits: &InputLimits, reason: &str) -> Result<()> {
    limits.check_failure_reason(reason)
}

/// [`VirtualUserRunStore::append_transcript`](super::VirtualUserRunStore::append_transcript):
/// answers each entry as JSON text.
pub fn append_transcript(limits: &InputLimits, entries: &[Value]) -> Result<Vec<String>> {
    limits.encode_transcript(entries)
}

// ---- events: `EventStore::record_dispatch_failure`

/// The longest dispatch error an event keeps, in bytes: what
/// [`EventStore::record_dispatch_failure`](super::EventStore::record_dispatch_failure)
/// stores is cut to this on a char boundary.
pub const MAX_DISPATCH_ERROR_BYTES: usize = 2_000;

/// The dispatch error as an event keeps it: the first at most
/// [`MAX_DISPATCH_ERROR_BYTES`] bytes of `error`, ending on a char boundary
/// (a multi-byte character the limit would split is left out whole).
pub fn dispatch_error(error: &str) -> String {
    let mut end = error.len().min(MAX_DISPATCH_ERROR_BYTES);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    error[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_dispatch_error_is_kept_whole() {
        assert_eq!(dispatch_error("boom"), "boom");
        assert_eq!(dispatch_error(""), "");
    }

    #[test]
    fn a_long_dispatch_error_is_cut_on_a_char_boundary() {
        let long = "é".repeat(5_000);
        let kept = dispatch_error(&long);
        assert_eq!(kept.len(), MAX_DISPATCH_ERROR_BYTES);
        let odd = format!("x{long}");
        let kept = dispatch_error(&odd);
        assert_eq!(kept.len(), MAX_DISPATCH_ERROR_BYTES - 1);
        assert!(odd.starts_with(&kept));
    }
}
