//! [`ScheduleStore`] and [`VirtualUserRunStore`] for [`MemoryStore`]:
//! personas' schedules, their runs and transcripts, each method one critical
//! section, every rule asked of core.

use std::collections::HashMap;

use flowstate_core::ports::checks;
use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::retention;
use flowstate_core::virtual_users::tally_overflow;
use flowstate_core::{
    Error, NewSchedule, NewVirtualUserRun, Result, RunBudget, RunTally, Schedule, SchedulePatch,
    StopReason, Timestamp, TranscriptEntry, TranscriptPage, VirtualUserRun, VirtualUserRunId,
    VirtualUserRunQuery, VirtualUserRunStatus,
};
use serde_json::Value;

use super::MemoryStore;
use crate::harness::Pick;

/// The virtual-user tables, as fields of the store's one [`super::Tables`].
#[derive(Debug, Default)]
pub(super) struct VirtualUserTables {
    schedules: HashMap<String, Schedule>,
    runs: HashMap<VirtualUserRunId, VirtualUserRun>,
    transcripts: HashMap<VirtualUserRunId, Vec<TranscriptEntry>>,
}

impl VirtualUserTables {
    /// The run `id` if it is still running: unknown is not found, settled
    /// is [`Error::VirtualUserRunSettled`].
    fn running(&mut self, id: VirtualUserRunId) -> Result<&mut VirtualUserRun> {
        let run = self
            .runs
            .get_mut(&id)
            .ok_or(Error::VirtualUserRunNotFound(id))?;
        if run.status != VirtualUserRunStatus::Running {
            return Err(Error::VirtualUserRunSettled {
                run: id,
                status: run.status,
            });
        }
        Ok(run)
    }

    /// The runs [`retention::is_prunable_virtual_user_run`] admits at
    /// `cutoff`, oldest settled first by `(updated_at, id)`.
    pub(super) fn prunable(&self, cutoff: Timestamp) -> Vec<VirtualUserRunId> {
        let mut old: Vec<&VirtualUserRun> = self
            .runs
            .values()
            .filter(|run| retention::is_prunable_virtual_user_run(run, cutoff))
            .collect();
        old.sort_by_key(|run| (run.updated_at, run.id));
        old.into_iter().map(|run| run.id).collect()
    }

    /// Deletes run `id` with its transcript.
    pub(super) fn remove(&mut self, id: VirtualUserRunId) {
        self.runs.remove(&id);
        self.transcripts.remove(&id);
    }
}

impl ScheduleStore for MemoryStore {
    async fn upsert_schedule(&self, schedule: NewSchedule) -> Result<()> {
        checks::upsert_schedule(&self.limits, &schedule)?;
        let now = self.now();
        let mut tables = self.lock();
        let schedules = &mut tables.virtual_users.schedules;
        let old = schedules.get(&schedule.persona);
        let last_run = old.and_then(|old| old.last_run);
        let last_run_at = old.and_then(|old| old.last_run_at);
        let goals = old.map(|old| old.goals.clone()).unwrap_or_default();
        let budget = old.map_or(RunBudget::UNLIMITED, |old| old.budget);
        schedules.insert(
            schedule.persona.clone(),
            Schedule {
                persona: schedule.persona,
                enabled: schedule.enabled,
                interval: schedule.interval,
                next_run_at: schedule.next_run_at,
                last_run,
                last_run_at,
                goals,
                budget,
                updated_at: now,
            },
        );
        Ok(())
    }

    async fn update_schedule(&self, persona: &str, patch: &SchedulePatch) -> Result<Schedule> {
        checks::update_schedule(&self.limits, persona, patch)?;
        let now = self.now();
        let mut tables = self.lock();
        let schedule = tables
            .virtual_users
            .schedules
            .get_mut(persona)
            .ok_or_else(|| Error::ScheduleNotFound(persona.to_owned()))?;
        if let Some(enabled) = patch.enabled {
            schedule.enabled = enabled;
        }
        if let Some(interval) = patch.interval {
            schedule.interval = interval;
        }
        if let Some(at) = patch.next_run_at {
            schedule.next_run_at = at;
        }
        if let Some(goals) = &patch.goals {
            schedule.goals.clone_from(goals);
        }
        if let Some(budget) = patch.budget {
            // Stored to the millisecond, as every backend keeps it.
            schedule.budget = RunBudget {
                max_duration: budget
                    .max_duration
                    .map(|d| std::time::Duration::from_millis(d.as_millis() as u64)),
                ..budget
            };
        }
        schedule.updated_at = now;
        Ok(schedule.clone())
    }

    async fn remove_schedule(&self, persona: &str) -> Result<()> {
        checks::get_schedule(&self.limits, persona)?;
        self.lock()
            .virtual_users
            .schedules
            .remove(persona)
            .map(drop)
            .ok_or_else(|| Error::ScheduleNotFound(persona.to_owned()))
    }

    async fn list_schedules(&self, limit: u32) -> Result<Vec<Schedule>> {
        let tables = self.lock();
        let mut all: Vec<Schedule> = tables.virtual_users.schedules.values().cloned().collect();
        all.sort_by(|a, b| a.persona.as_bytes().cmp(b.persona.as_bytes()));
        all.truncate(Schedule::due_limit(limit) as usize);
        Ok(all)
    }

    async fn get_schedule(&self, persona: &str) -> Result<Option<Schedule>> {
        checks::get_schedule(&self.limits, persona)?;
        Ok(self.lock().virtual_users.schedules.get(persona).cloned())
    }

    async fn due_schedules(&self, now: Timestamp, limit: u32) -> Result<Vec<Schedule>> {
        let tables = self.lock();
        let mut due: Vec<Schedule> = tables
            .virtual_users
            .schedules
            .values()
            .filter(|s| flowstate_core::schedule::is_due(s.enabled, s.next_run_at, now))
            .cloned()
            .collect();
        due.sort_by(|a, b| (a.next_run_at, &a.persona).cmp(&(b.next_run_at, &b.persona)));
        due.truncate(Schedule::due_limit(limit) as usize);
        Ok(due)
    }

    async fn claim_schedule(
        &self,
        persona: &str,
        expected: Timestamp,
        next: Timestamp,
        run: Option<VirtualUserRunId>,
    ) -> Result<bool> {
        checks::claim_schedule(&self.limits, persona)?;
        let now = self.now();
        let mut tables = self.lock();
        let Some(schedule) = tables.virtual_users.schedules.get_mut(persona) else {
            return Ok(false);
        };
        if !schedule.enabled || schedule.next_run_at != expected {
            return Ok(false);
        }
        tables.strike_after_pick(Pick::Schedules, "claim_schedule")?;
        let schedule = tables
            .virtual_users
            .schedules
            .get_mut(persona)
            .expect("the schedule just found");
        schedule.next_run_at = next;
        schedule.last_run = run;
        if run.is_some() {
            schedule.last_run_at = Some(now);
        }
        schedule.updated_at = now;
        Ok(true)
    }
}

impl VirtualUserRunStore for MemoryStore {
    async fn start_virtual_user_run_with(&self, new: &NewVirtualUserRun) -> Result<VirtualUserRun> {
        checks::start_virtual_user_run_with(&self.limits, new)?;
        let run = VirtualUserRun::started_from(VirtualUserRunId::generate(), new, self.now());
        self.lock().virtual_users.runs.insert(run.id, run.clone());
        Ok(run)
    }

    async fn get_virtual_user_run(&self, id: VirtualUserRunId) -> Result<VirtualUserRun> {
        let tables = self.lock();
        tables
            .virtual_users
            .runs
            .get(&id)
            .cloned()
            .ok_or(Error::VirtualUserRunNotFound(id))
    }

    async fn list_virtual_user_runs(
        &self,
        query: &VirtualUserRunQuery,
    ) -> Result<Vec<VirtualUserRun>> {
        checks::list_virtual_user_runs(&self.limits, query)?;
        let tables = self.lock();
        let mut runs: Vec<VirtualUserRun> = tables
            .virtual_users
            .runs
            .values()
            .filter(|r| query.persona.as_ref().is_none_or(|p| *p == r.persona))
            .filter(|r| query.status.is_none_or(|s| s == r.status))
            .cloned()
            .collect();
        runs.sort_by_key(|r| std::cmp::Reverse((r.created_at, r.id)));
        runs.truncate(query.effective_limit() as usize);
        Ok(runs)
    }

    async fn complete_virtual_user_run_with_reason(
        &self,
        id: VirtualUserRunId,
        findings: &Value,
        reason: StopReason,
    ) -> Result<()> {
        checks::complete_virtual_user_run(&self.limits, findings)?;
        let now = self.now();
        let mut tables = self.lock();
        let run = tables.virtual_users.running(id)?;
        run.status = VirtualUserRunStatus::Completed;
        run.findings = Some(findings.clone());
        run.stop_reason = Some(reason);
        run.updated_at = now;
        Ok(())
    }

    async fn fail_virtual_user_run_with_reason(
        &self,
        id: VirtualUserRunId,
        failure: &str,
        reason: StopReason,
    ) -> Result<()> {
        checks::fail_virtual_user_run(&self.limits, failure)?;
        let now = self.now();
        let mut tables = self.lock();
        let run = tables.virtual_users.running(id)?;
        run.status = VirtualUserRunStatus::Failed;
        run.failure = Some(failure.to_owned());
        run.stop_reason = Some(reason);
        run.updated_at = now;
        Ok(())
    }

    async fn add_to_tally(&self, id: VirtualUserRunId, delta: RunTally) -> Result<RunTally> {
        checks::add_to_tally(&self.limits, &delta)?;
        let now = self.now();
        let mut tables = self.lock();
        let run = tables.virtual_users.running(id)?;
        run.tally = run
            .tally
            .checked_add(delta)
            .ok_or_else(|| tally_overflow(id, run.tally, delta))?;
        run.updated_at = now;
        Ok(run.tally)
    }

    async fn set_memory(&self, id: VirtualUserRunId, memory: &Value) -> Result<()> {
        checks::set_memory(&self.limits, memory)?;
        let now = self.now();
        let mut tables = self.lock();
        let run = tables.virtual_users.running(id)?;
        run.memory = Some(memory.clone());
        run.updated_at = now;
        Ok(())
    }

    async fn set_intents(&self, id: VirtualUserRunId, intents: &[String]) -> Result<()> {
        checks::set_intents(&self.limits, intents)?;
        let now = self.now();
        let mut tables = self.lock();
        let run = tables.virtual_users.running(id)?;
        run.intents = intents.to_vec();
        run.updated_at = now;
        Ok(())
    }

    async fn append_transcript(&self, id: VirtualUserRunId, entries: &[Value]) -> Result<u64> {
        checks::append_transcript(&self.limits, entries)?;
        let now = self.now();
        let mut tables = self.lock();
        let run = tables.virtual_users.running(id)?;
        let first = run.transcript_len;
        run.transcript_len += entries.len() as u64;
        run.updated_at = now;
        let len = run.transcript_len;
        let transcript = tables.virtual_users.transcripts.entry(id).or_default();
        transcript.extend(
            entries
                .iter()
                .enumerate()
                .map(|(i, entry)| TranscriptEntry {
                    seq: first + i as u64,
                    entry: entry.clone(),
                    at: now,
                }),
        );
        Ok(len)
    }

    async fn read_transcript(
        &self,
        id: VirtualUserRunId,
        from: u64,
        limit: u32,
    ) -> Result<TranscriptPage> {
        let limit = TranscriptPage::effective_limit(limit);
        let tables = self.lock();
        if !tables.virtual_users.runs.contains_key(&id) {
            return Err(Error::VirtualUserRunNotFound(id));
        }
        let entries: Vec<TranscriptEntry> = tables
            .virtual_users
            .transcripts
            .get(&id)
            .into_iter()
            .flatten()
            .filter(|e| e.seq >= from)
            .take(limit as usize)
            .cloned()
            .collect();
        Ok(TranscriptPage::of(entries, limit))
    }
}
