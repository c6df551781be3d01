//! The two sweeps: [`relay_undispatched`] and [`sweep_stalled`], each one
//! index-backed query, then the dispatch callback for every run the shared
//! [`RedispatchBackoff`] lets through.

use std::fmt;
use std::future::Future;

use flowstate_core::ports::RecoveryStore;
use flowstate_core::{ExpiredClaim, RedispatchBackoff, Result, RunId, Timestamp};
use flowstate_metrics::names;
use tracing::Instrument;

use crate::dispatch::{Reason, RedriveReport, SweepOptions};

/// Re-dispatches the runs of steps that are claimable but untouched for
/// [`SweepOptions::relay_after`]
/// ([`RecoveryStore::undispatched_steps`]): each run once however many of
/// its steps were found, in the order found, through `dispatch`, unless
/// `backoff` holds it off at `now`.
///
/// Safe because claims are exclusive: a dispatch the engine had already
/// sent finds its step claimed and does nothing. Each run is noted in
/// `backoff` *before* `dispatch` runs, so one whose dispatch fails is held
/// off too. A store error ends the call with nothing dispatched; a dispatch
/// error is recorded in [`RedriveReport::failed`] and the others go on.
pub async fn relay_undispatched<S, D, Fut, E>(
    store: &S,
    backoff: &mut RedispatchBackoff,
    dispatch: &mut D,
    now: Timestamp,
    options: SweepOptions,
) -> Result<RedriveReport>
where
    S: RecoveryStore,
    D: FnMut(RunId, Reason) -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
    E: fmt::Display,
{
    let steps = store.undispatched_steps(options.relay_after, options.limit);
    let found = async {
        let mut runs: Vec<RunId> = Vec::new();
        for step in steps.await? {
            if !runs.contains(&step.run) {
                runs.push(step.run);
            }
        }
        Ok(runs)
    };
    sweep(Reason::Undispatched, found, backoff, dispatch, now).await
}

/// Resumes the runs that are running with nothing moving for
/// [`SweepOptions::stalled_after`] ([`RecoveryStore::stalled_runs`]: no
/// step running or scheduled, no live lease, not waiting) through
/// `dispatch`, unless `backoff` holds them off at `now`.
///
/// A resume does not clear whatever wedged a run, so an unconditional sweep
/// would re-queue the same runs on every tick forever; the backoff, noted
/// before the dispatch, makes it one message per run per window, shared
/// with [`relay_undispatched`] so a run the relay just re-drove is not
/// re-driven again here. Errors as for [`relay_undispatched`].
pub async fn sweep_stalled<S, D, Fut, E>(
    store: &S,
    backoff: &mut RedispatchBackoff,
    dispatch: &mut D,
    now: Timestamp,
    options: SweepOptions,
) -> Result<RedriveReport>
where
    S: RecoveryStore,
    D: FnMut(RunId, Reason) -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
    E: fmt::Display,
{
    let stalled = store.stalled_runs(options.stalled_after, options.limit);
    let found = async { Ok(stalled.await?.into_iter().map(|s| s.run).collect()) };
    sweep(Reason::Stalled, found, backoff, dispatch, now).await
}

/// What [`expire_claims`] did: the claims taken back, and the re-drive of
/// the runs whose step has an attempt left.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpiryReport {
    /// Every claim taken back ([`RecoveryStore::expire_step_claims`]),
    /// first expired first: each attempt is failed now.
    pub expired: Vec<ExpiredClaim>,
    /// The re-drive of the runs of the expired steps that will be retried
    /// ([`ExpiredClaim::retrying`]); a step with no attempt left is failed
    /// for good and its run is not re-driven for it.
    pub redrive: RedriveReport,
}

/// Takes back every step claim that ran out (the worker holding it died,
/// or hangs: [`RecoveryStore::expire_step_claims`], which fails the attempt
/// with core's claim-expired error), then re-drives, through `dispatch`,
/// the run of each one that will be retried, unless `backoff` holds it off
/// at `now`, so the retry does not wait for the relay.
///
/// The old holder cannot overwrite the retry: its writes carry its claim
/// and are refused ([`Error::ClaimLost`](flowstate_core::Error::ClaimLost)).
/// Errors as for [`relay_undispatched`].
pub async fn expire_claims<S, D, Fut, E>(
    store: &S,
    backoff: &mut RedispatchBackoff,
    dispatch: &mut D,
    now: Timestamp,
    options: SweepOptions,
) -> Result<ExpiryReport>
where
    S: RecoveryStore,
    D: FnMut(RunId, Reason) -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
    E: fmt::Display,
{
    let span = tracing::info_span!("recovery.expire_claims", expired = tracing::field::Empty);
    async {
        let expired = store.expire_step_claims(options.limit).await?;
        tracing::Span::current().record("expired", expired.len());
        for claim in &expired {
            tracing::warn!(
                run = %claim.run,
                step = %claim.step,
                name = %claim.name,
                attempt = claim.attempt,
                retrying = claim.retrying,
                "a step claim ran out; the attempt is failed"
            );
        }
        let mut runs: Vec<RunId> = Vec::new();
        for claim in expired.iter().filter(|claim| claim.retrying) {
            if !runs.contains(&claim.run) {
                runs.push(claim.run);
            }
        }
        let redrive = redrive(runs, Reason::ClaimExpired, backoff, dispatch, now).await;
        Ok(ExpiryReport { expired, redrive })
    }
    .instrument(span)
    .await
}

/// One sweep for `reason`: the runs `found` answers (a store query, each
/// run once, in order), then [`redrive`], in a `recovery.sweep` span that
/// records how many were found.
async fn sweep<D, Fut, E>(
    reason: Reason,
    found: impl Future<Output = Result<Vec<RunId>>>,
    backoff: &mut RedispatchBackoff,
    dispatch: &mut D,
    now: Timestamp,
) -> Result<RedriveReport>
where
    D: FnMut(RunId, Reason) -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
    E: fmt::Display,
{
    let span = tracing::info_span!(
        "recovery.sweep",
        reason = reason.as_str(),
        found = tracing::field::Empty
    );
    async {
        let runs = found.await?;
        tracing::Span::current().record("found", runs.len());
        Ok(redrive(runs, reason, backoff, dispatch, now).await)
    }
    .instrument(span)
    .await
}

/// Dispatches each of `runs` that `backoff` lets through at `now`, noting
/// it first.
async fn redrive<D, Fut, E>(
    runs: Vec<RunId>,
    reason: Reason,
    backoff: &mut RedispatchBackoff,
    dispatch: &mut D,
    now: Timestamp,
) -> RedriveReport
where
    D: FnMut(RunId, Reason) -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
    E: fmt::Display,
{
    let mut report = RedriveReport::default();
    for run in runs {
        if !backoff.is_eligible(run, now) {
            report.held_off.push(run);
            continue;
        }
        // Before the dispatch, not after: a run whose dispatch fails is the
        // one most likely to be found again next pass.
        backoff.note(run, now);
        match dispatch(run, reason).await {
            Ok(()) => report.redispatched.push(run),
            Err(err) => {
                tracing::warn!(%run, reason = reason.as_str(), error = %err, "re-dispatch failed");
                report.failed.push((run, err.to_string()));
            }
        }
    }
    tracing::debug!(
        reason = reason.as_str(),
        redispatched = report.redispatched.len(),
        held_off = report.held_off.len(),
        failed = report.failed.len(),
        "re-drive done"
    );
    record(reason, &report);
    report
}

/// Counts what one re-drive found and re-drove, under its reason
/// ([`names::SWEEP_FINDS`], [`names::SWEEP_REDRIVES`]).
fn record(reason: Reason, report: &RedriveReport) {
    let found = report.attempted() + report.held_off.len();
    if found > 0 {
        metrics::counter!(names::SWEEP_FINDS, names::REASON => reason.as_str())
            .increment(found as u64);
    }
    if !report.redispatched.is_empty() {
        metrics::counter!(names::SWEEP_REDRIVES, names::REASON => reason.as_str())
            .increment(report.redispatched.len() as u64);
    }
}
