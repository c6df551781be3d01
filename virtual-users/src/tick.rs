//! [`tick`]: acts once on whichever personas are due.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::schedule::{STALE_RUN_AFTER, is_stale};
use flowstate_core::virtual_users::{claimed_next_run_at, reap_message};
use flowstate_core::{
    Error, Result, Schedule, StopReason, Timestamp, VirtualUserRunId, VirtualUserRunQuery,
    VirtualUserRunStatus,
};
use rand::Rng;

/// What a tick may do in one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickOptions {
    /// How long a run may sit at `running` before it is read as dead
    /// rather than busy, and reaped.
    pub stale_after: Duration,
    /// The most due schedules one tick acts on (see
    /// [`Schedule::due_limit`]); the rest wait for the next tick.
    pub limit: u32,
}

impl Default for TickOptions {
    /// Reap after [`STALE_RUN_AFTER`] (2 h); act on up to 100 personas.
    fn default() -> Self {
        Self {
            stale_after: STALE_RUN_AFTER,
            limit: 100,
        }
    }
}

/// Why a due persona was not dispatched by this tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Its latest run is still running and not yet stale.
    InFlight,
    /// Another tick claimed it first (or it was disabled or rewritten
    /// since it was listed).
    ClaimedElsewhere,
    /// It was claimed, but the host's dispatch failed; it waits for the
    /// `next_run_at` the claim set.
    DispatchFailed,
}

impl SkipReason {
    /// The reason as the seed names it: `in-flight`, `claimed-elsewhere`,
    /// `dispatch-failed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InFlight => "in-flight",
            Self::ClaimedElsewhere => "claimed-elsewhere",
            Self::DispatchFailed => "dispatch-failed",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A persona this tick dispatched, and the run the host started for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatched {
    /// The persona.
    pub persona: String,
    /// The run the dispatch answered.
    pub run: VirtualUserRunId,
}

/// A due persona this tick did not dispatch, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The persona.
    pub persona: String,
    /// Why.
    pub reason: SkipReason,
}

/// A run this tick found stranded at `running` and failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reaped {
    /// Its persona.
    pub persona: String,
    /// The run.
    pub run: VirtualUserRunId,
    /// How long it had been running.
    pub ran_for: Duration,
}

/// What one tick did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickOutcome {
    /// Personas dispatched, in the order they came due.
    pub dispatched: Vec<Dispatched>,
    /// Due personas skipped, with their reasons.
    pub skipped: Vec<Skipped>,
    /// Runs reaped.
    pub reaped: Vec<Reaped>,
}

/// Acts on whichever personas are due at `now`, once.
///
/// For each due schedule, earliest first: if its persona's latest run is
/// still running, the persona is skipped as [`SkipReason::InFlight`],
/// unless the run has been running for `options.stale_after`, in which
/// case it is failed with a message saying how long it ran and
/// [`StopReason::Abandoned`] (reaped) and the persona goes on. Then the schedule is claimed: `next_run_at` moves,
/// by compare-and-set, from the value listed to one drawn from its interval
/// ([`claimed_next_run_at`]); a claim that does not land is
/// [`SkipReason::ClaimedElsewhere`]. Then `dispatch` is called with the
/// schedule and answers the id of the run it started, which is recorded on
/// the schedule.
///
/// A failed dispatch is [`SkipReason::DispatchFailed`], and the claim has
/// already advanced `next_run_at`: the persona waits for its next draw
/// rather than being tried again on the next tick. On purpose: a dispatch
/// that fails now (the host's queue is down, its budget is spent) most
/// likely fails on the next tick too, and retrying every tick would hammer
/// whatever is failing; and putting `next_run_at` back would be a second
/// write racing other ticks' claims, which is what the compare-and-set
/// exists to avoid. The skip is reported, and logged with the error, so
/// the host sees it.
///
/// A store error ends the tick with that error, except when recording the
/// run id after a dispatch that succeeded: the run is started whatever the
/// record says, so the error is logged and the persona counted as
/// dispatched.
#[tracing::instrument(name = "virtual_users.tick", level = "debug", skip_all, fields(now = %now))]
pub async fn tick<S, D, Fut, E, R>(
    store: &S,
    mut dispatch: D,
    now: Timestamp,
    rng: &mut R,
    options: TickOptions,
) -> Result<TickOutcome>
where
    S: ScheduleStore + VirtualUserRunStore,
    D: FnMut(Schedule) -> Fut,
    Fut: Future<Output = std::result::Result<VirtualUserRunId, E>>,
    E: fmt::Display,
    R: Rng + ?Sized,
{
    let mut outcome = TickOutcome::default();
    for schedule in store.due_schedules(now, options.limit).await? {
        let persona = schedule.persona.clone();
        let latest = store
            .list_virtual_user_runs(&VirtualUserRunQuery::persona(persona.as_str(), 1))
            .await?
            .into_iter()
            .next();
        if let Some(run) = latest.filter(|r| r.status == VirtualUserRunStatus::Running) {
            if !is_stale(run.created_at, now, options.stale_after) {
                tracing::debug!(%persona, run = %run.id, "skipped: in flight");
                outcome.skipped.push(Skipped {
                    persona,
                    reason: SkipReason::InFlight,
                });
                continue;
            }
            let ran_for = now.since(run.created_at);
            let message = reap_message(ran_for);
            match store
                .fail_virtual_user_run_with_reason(run.id, &message, StopReason::Abandoned)
                .await
            {
                Ok(()) => {
                    tracing::info!(%persona, run = %run.id, ?ran_for, "reaped a stranded run");
                    outcome.reaped.push(Reaped {
                        persona: persona.clone(),
                        run: run.id,
                        ran_for,
                    });
                }
                // Another tick reaped it, or it finished meanwhile: either
                // way it no longer holds the persona.
                Err(Error::VirtualUserRunSettled { .. }) => {}
                Err(err) => return Err(err),
            }
        }

        let expected = schedule.next_run_at;
        let next = claimed_next_run_at(schedule.interval, now, rng);
        if !store.claim_schedule(&persona, expected, next, None).await? {
            tracing::debug!(%persona, "skipped: claimed elsewhere");
            outcome.skipped.push(Skipped {
                persona,
                reason: SkipReason::ClaimedElsewhere,
            });
            continue;
        }

        let run = match dispatch(schedule).await {
            Ok(run) => run,
            Err(err) => {
                tracing::warn!(%persona, error = %err, %next, "dispatch failed; the persona waits for its next run");
                outcome.skipped.push(Skipped {
                    persona,
                    reason: SkipReason::DispatchFailed,
                });
                continue;
            }
        };
        // From the value this tick set to the same value: a schedule
        // rewritten since (an upsert) keeps what was written.
        match store.claim_schedule(&persona, next, next, Some(run)).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(%persona, %run, "schedule rewritten before its run was recorded");
            }
            Err(err) => {
                tracing::warn!(%persona, %run, error = %err, "could not record the dispatched run");
            }
        }
        tracing::debug!(%persona, %run, %next, "dispatched");
        outcome.dispatched.push(Dispatched { persona, run });
    }
    tracing::debug!(
        dispatched = outcome.dispatched.len(),
        skipped = outcome.skipped.len(),
        reaped = outcome.reaped.len(),
        "tick done"
    );
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_named_as_the_seed_names_them() {
        let rows = [
            (SkipReason::InFlight, "in-flight"),
            (SkipReason::ClaimedElsewhere, "claimed-elsewhere"),
            (SkipReason::DispatchFailed, "dispatch-failed"),
        ];
        for (reason, name) in rows {
            assert_eq!(reason.as_str(), name);
            assert_eq!(reason.to_string(), name);
        }
    }

    #[test]
    fn the_default_tick_reaps_after_two_hours() {
        let options = TickOptions::default();
        assert_eq!(options.stale_after, Duration::from_secs(7_200));
        assert_eq!(Schedule::due_limit(options.limit), 100);
    }
}
