//! The virtual-user ports: [`ScheduleStore`] (a persona's schedule and the
//! compare-and-set claim that keeps two ticks from dispatching it twice) and
//! [`VirtualUserRunStore`] (its runs and their transcripts). New traits, so
//! a backend of the other ports keeps compiling without them.
//!
//! As everywhere, names and JSON go through the backend's
//! [`InputLimits`](crate::InputLimits) first ([`Error::InvalidInput`], nothing
//! written), and an unknown run is a typed error.

use std::future::Future;

use serde_json::Value;

use crate::error::Result;
use crate::ids::VirtualUserRunId;
use crate::time::Timestamp;
use crate::virtual_users::{
    NewSchedule, NewVirtualUserRun, RunTally, Schedule, SchedulePatch, StopReason, TranscriptPage,
    VirtualUserRun, VirtualUserRunQuery,
};
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::error::Error;

/// Personas' schedules.
pub trait ScheduleStore: Send + Sync {
    /// Writes `schedule`: inserts it, or replaces the persona's enabled flag,
    /// interval and `next_run_at` in one statement, keeping the run it last
    /// recorded, its goals and its budget.
    fn upsert_schedule(&self, schedule: NewSchedule) -> impl Future<Output = Result<()>> + Send;

    /// Writes what `patch` sets of `persona`'s schedule and keeps the rest,
    /// in one statement, answering the schedule as written
    /// ([`Error::ScheduleNotFound`] if the persona has none; goals checked
    /// against the backend's limits first, nothing written if refused).
    fn update_schedule(
        &self,
        persona: &str,
        patch: &SchedulePatch,
    ) -> impl Future<Output = Result<Schedule>> + Send;

    /// Removes `persona`'s schedule ([`Error::ScheduleNotFound`] if it has
    /// none), and with it everything the schedule row holds: its timing,
    /// last run, goals and budget (there is no separate budget record to
    /// leave behind). A schedule upserted for the persona afterwards starts
    /// afresh: no goals, [`RunBudget::UNLIMITED`](crate::RunBudget::UNLIMITED),
    /// no last run. Its runs stay, each with its own record, including the
    /// goals it was started with.
    fn remove_schedule(&self, persona: &str) -> impl Future<Output = Result<()>> + Send;

    /// Every schedule, enabled or not, by persona, at most
    /// [`Schedule::due_limit`] of `limit`: a settings page's listing.
    fn list_schedules(&self, limit: u32) -> impl Future<Output = Result<Vec<Schedule>>> + Send;

    /// Reads one persona's schedule; `None` if it has none.
    fn get_schedule(&self, persona: &str) -> impl Future<Output = Result<Option<Schedule>>> + Send;

    /// The enabled schedules due at `now` (`next_run_at <= now`), earliest
    /// first then by persona, at most [`Schedule::due_limit`] of `limit`,
    /// by index: a disabled schedule is never listed.
    fn due_schedules(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<Schedule>>> + Send;

    /// Compare-and-set: if `persona`'s schedule is enabled and its
    /// `next_run_at` is still `expected`, sets it to `next`, records `run`
    /// as its last run (`None` clears it; `Some` also sets
    /// [`Schedule::last_run_at`] to now) and answers `true`; otherwise
    /// writes nothing and answers `false` (another caller moved it first,
    /// it was disabled, or there is no such schedule). One guarded write: of
    /// any number of concurrent claims from the same `expected`, at most one
    /// answers `true`.
    fn claim_schedule(
        &self,
        persona: &str,
        expected: Timestamp,
        next: Timestamp,
        run: Option<VirtualUserRunId>,
    ) -> impl Future<Output = Result<bool>> + Send;
}

/// Virtual-user runs and their transcripts.
pub trait VirtualUserRunStore: Send + Sync {
    /// Starts a run of `persona`: running, created now, no transcript, no
    /// goals, seed or starter: [`Self::start_virtual_user_run_with`] of
    /// [`NewVirtualUserRun::new`].
    fn start_virtual_user_run(
        &self,
        persona: &str,
    ) -> impl Future<Output = Result<VirtualUserRun>> + Send {
        async move {
            self.start_virtual_user_run_with(&NewVirtualUserRun::new(persona))
                .await
        }
    }

    /// Starts the run `run` describes: running, created now, no transcript,
    /// a zero tally, with the goals, seed and starter it gives (checked
    /// first: [`Error::InvalidInput`], nothing written). One insert.
    fn start_virtual_user_run_with(
        &self,
        run: &NewVirtualUserRun,
    ) -> impl Future<Output = Result<VirtualUserRun>> + Send;

    /// Reads one run ([`Error::VirtualUserRunNotFound`] if there is none).
    fn get_virtual_user_run(
        &self,
        id: VirtualUserRunId,
    ) -> impl Future<Output = Result<VirtualUserRun>> + Send;

    /// Lists runs matching `query`, newest first by `(created_at, id)`.
    fn list_virtual_user_runs(
        &self,
        query: &VirtualUserRunQuery,
    ) -> impl Future<Output = Result<Vec<VirtualUserRun>>> + Send;

    /// Completes a running run with `findings`, as one status-guarded
    /// write: of racing completes and fails, one lands and the others are
    /// [`Error::VirtualUserRunSettled`]. Its stop reason is
    /// [`StopReason::Finished`]: [`Self::complete_virtual_user_run_with_reason`]
    /// gives another.
    fn complete_virtual_user_run(
        &self,
        id: VirtualUserRunId,
        findings: &Value,
    ) -> impl Future<Output = Result<()>> + Send {
        self.complete_virtual_user_run_with_reason(id, findings, StopReason::Finished)
    }

    /// Completes a running run with `findings`, stopped for `reason`: the
    /// same one status-guarded write as [`Self::complete_virtual_user_run`].
    fn complete_virtual_user_run_with_reason(
        &self,
        id: VirtualUserRunId,
        findings: &Value,
        reason: StopReason,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Fails a running run with `reason`, guarded like
    /// [`Self::complete_virtual_user_run`]. Its stop reason is
    /// [`StopReason::Failed`]: [`Self::fail_virtual_user_run_with_reason`]
    /// gives another.
    fn fail_virtual_user_run(
        &self,
        id: VirtualUserRunId,
        reason: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        self.fail_virtual_user_run_with_reason(id, reason, StopReason::Failed)
    }

    /// Fails a running run with `failure` (the message), stopped for
    /// `reason`: the same one status-guarded write as
    /// [`Self::fail_virtual_user_run`].
    fn fail_virtual_user_run_with_reason(
        &self,
        id: VirtualUserRunId,
        failure: &str,
        reason: StopReason,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Adds `delta` to a running run's [`RunTally`], each counter in the
    /// database (`turns = turns + ?`, never read then written), and answers
    /// the tally as that add left it: of concurrent adds none is lost. One
    /// status-guarded `UPDATE` (`RETURNING` the tally; on MySQL the row is
    /// read back in the same transaction). A settled run refuses
    /// ([`Error::VirtualUserRunSettled`]), an unknown one is
    /// [`Error::VirtualUserRunNotFound`], and an add that would take a
    /// counter past `i64::MAX` is [`Error::InvalidInput`]; each writes
    /// nothing.
    fn add_to_tally(
        &self,
        id: VirtualUserRunId,
        delta: RunTally,
    ) -> impl Future<Output = Result<RunTally>> + Send;

    /// Replaces a running run's memory with `memory` (a JSON document of
    /// the persona's shape, checked against the backend's limits first:
    /// too large or too deep is [`Error::InvalidInput`], nothing written),
    /// as one status-guarded write; settled and unknown runs are refused
    /// as by [`Self::add_to_tally`].
    fn set_memory(
        &self,
        id: VirtualUserRunId,
        memory: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Replaces a running run's intents (what it means to do next, in
    /// order; at most [`MAX_INTENTS`](crate::virtual_users::MAX_INTENTS),
    /// each text; an empty list clears them), guarded and checked like
    /// [`Self::set_memory`].
    fn set_intents(
        &self,
        id: VirtualUserRunId,
        intents: &[String],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Appends a chunk of entries to a running run's transcript, numbered on
    /// from its current length, and answers the new length. Concurrent
    /// appends to one run never share a position. A settled run refuses
    /// ([`Error::VirtualUserRunSettled`]): a run that was reaped learns so
    /// at its next append.
    fn append_transcript(
        &self,
        id: VirtualUserRunId,
        entries: &[Value],
    ) -> impl Future<Output = Result<u64>> + Send;

    /// One page of a run's transcript, in order, starting at position
    /// `from`, at most `limit` entries ([`TranscriptPage::effective_limit`]);
    /// `next` is where the following page starts when this one is full.
    fn read_transcript(
        &self,
        id: VirtualUserRunId,
        from: u64,
        limit: u32,
    ) -> impl Future<Output = Result<TranscriptPage>> + Send;
}
