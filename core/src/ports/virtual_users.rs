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
    NewSchedule, Schedule, SchedulePatch, TranscriptPage, VirtualUserRun, VirtualUserRunQuery,
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
    /// none). Its runs stay.
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
    /// Starts a run of `persona`: running, created now, no transcript.
    fn start_virtual_user_run(
        &self,
        persona: &str,
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
    /// [`Error::VirtualUserRunSettled`].
    fn complete_virtual_user_run(
        &self,
        id: VirtualUserRunId,
        findings: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Fails a running run with `reason`, guarded like
    /// [`Self::complete_virtual_user_run`].
    fn fail_virtual_user_run(
        &self,
        id: VirtualUserRunId,
        reason: &str,
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
