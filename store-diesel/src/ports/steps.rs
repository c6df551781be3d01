//! [`StepStore`] for [`DieselStore`]: the reads and the branch write in the
//! diesel DSL, once for every dialect; the hot writes (insert, claim,
//! transition, retry) handed to the dialect modules.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::limits::checked;
use flowstate_core::ports::checks;
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{
    ClaimOutcome, Error, InlineStep, Inserted, NewStep, Result, RetryStart, RunId, Step,
    StepAttempt, StepClaim, StepId, StepStatus, StepTransition, Timestamp,
};

use super::leases::stored_token;
use super::runs::IDEMPOTENT_TRIES;
use crate::backend::{by_dialect, on_connection};
use crate::dialect::Connection;
use crate::guard::Inserting;
use crate::guard::{Guarded, step_transition_refused};
use crate::rows::{AttemptRow, StepRow, convert, joined_to_run};
use crate::schema::flowstate_steps as steps;
use crate::schema::{flowstate_runs as runs, flowstate_step_history as history};
use crate::sql::Move;
use crate::sql::typed::{held, now_sql};
use crate::store::DieselStore;

impl DieselStore {
    /// Step `name` of `run`, if it exists.
    pub(crate) async fn step_by_name(
        &self,
        op: &'static str,
        run: RunId,
        name: &str,
    ) -> Result<Option<Step>> {
        let run_text = run.to_string();
        let row: Option<StepRow> = on_connection!(self, op, |conn| steps::table
            .filter(steps::run_id.eq(&run_text))
            .filter(steps::name.eq(name))
            .select(StepRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(Step::try_from).transpose()
    }
}

impl DieselStore {
    /// [`StepStore::insert_step`], fenced by lease `token` when given
    /// ([`FencedWrites::insert_step_fenced`](flowstate_core::ports::FencedWrites::insert_step_fenced)).
    pub(super) async fn insert_step_under(
        &self,
        step: NewStep,
        token: Option<u64>,
    ) -> Result<Inserted<Step>> {
        let (step, encoded) = checked(step, |step| checks::insert_step(&self.config.limits, step))?;
        let record = step.into_step(StepId::generate(), Timestamp::from_micros(self.now()))?;
        let row = StepRow::new(&record, encoded.input, encoded.retry_delay_ms);
        let stored = token.map(stored_token);
        for _ in 0..IDEMPOTENT_TRIES {
            match by_dialect!(self, insert_step(record.run, &row, stored))? {
                Inserting::Inserted => {
                    tracing::debug!(run = %record.run, "step inserted");
                    return Ok(Inserted {
                        record,
                        inserted: true,
                    });
                }
                Inserting::Held(holder) => {
                    return Ok(Inserted {
                        record: Step::try_from(*holder)?,
                        inserted: false,
                    });
                }
                Inserting::Refused => {
                    // Error path only: why the run refused it. An admitting
                    // run means the name's holder was deleted meanwhile.
                    if let Some(refusal) = self.run_refusal(record.run, token).await? {
                        return Err(refusal);
                    }
                }
            }
        }
        Err(Error::backend(
            "insert_step",
            true,
            "the step holding this name kept disappearing",
        ))
    }

    /// Why a write into `run` guarded as [`crate::sql::RunGuard`] says (not
    /// settled; with `token`, under its lease) wrote nothing, read after
    /// it (error path only): the run is missing
    /// ([`Error::RunNotFound`]), settled ([`Error::RunSettled`]), or, with
    /// a token, the lease is not the token's ([`Error::LeaseLost`]);
    /// `None` when the run admits the write now.
    pub(super) async fn run_refusal(
        &self,
        run: RunId,
        token: Option<u64>,
    ) -> Result<Option<Error>> {
        let status = match self.get_run(run).await {
            Ok(found) => found.status,
            Err(err) => return Ok(Some(err)),
        };
        if status.is_settled() {
            return Ok(Some(Error::RunSettled { run, status }));
        }
        let Some(token) = token else {
            return Ok(None);
        };
        let (id, offset, stored) = (run.to_string(), self.lease_offset(), stored_token(token));
        let held: Option<String> = on_connection!(self, "lease_held", |conn| held(
            now_sql(&*conn),
            &id,
            stored,
            offset
        )
        .select(runs::id)
        .first(conn)
        .await
        .optional())?;
        Ok(held.is_none().then_some(Error::LeaseLost { run, token }))
    }

    /// `Ok` if a guarded write moved step `id` to `to`; otherwise the typed
    /// refusal, reading the step's status if the dialect did not.
    async fn moved_or_refused(&self, id: StepId, written: Guarded, to: StepStatus) -> Result<()> {
        let status = match written {
            Guarded::Moved => return Ok(()),
            #[cfg(feature = "postgres")]
            Guarded::Refused(status) => status,
            Guarded::Unseen => {
                let id_text = id.to_string();
                on_connection!(self, "step_status", |conn| steps::table
                    .find(&id_text)
                    .select(steps::status)
                    .first::<String>(conn)
                    .await
                    .optional())?
            }
        };
        Err(step_transition_refused(id, status.as_deref(), to))
    }
}

impl StepStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %step.run, name = %step.name))]
    async fn insert_step(&self, step: NewStep) -> Result<Inserted<Step>> {
        self.insert_step_under(step, None).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %step.step.run, name = %step.step.name))]
    async fn record_step(&self, step: InlineStep) -> Result<Inserted<Step>> {
        self.record_inline_step(step).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %id))]
    async fn get_step(&self, id: StepId) -> Result<Step> {
        let id_text = id.to_string();
        let row: Option<StepRow> = on_connection!(self, "get_step", |conn| steps::table
            .find(&id_text)
            .select(StepRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map_or(Err(Error::StepNotFound(id)), Step::try_from)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, name = %name))]
    async fn find_step(&self, run: RunId, name: &str) -> Result<Step> {
        checks::find_step(&self.config.limits, name)?;
        self.step_by_name("find_step", run, name)
            .await?
            .ok_or_else(|| Error::StepNameNotFound {
                run,
                name: name.to_owned(),
            })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    async fn list_steps(&self, run: RunId) -> Result<Vec<Step>> {
        let run_text = run.to_string();
        // From the run, so an unknown run (no row) differs from an empty one.
        let rows: Vec<Option<StepRow>> = on_connection!(self, "list_steps", |conn| runs::table
            .left_join(steps::table)
            .filter(runs::id.eq(&run_text))
            .order((steps::created_at, steps::name))
            .select(Option::<StepRow>::as_select())
            .load(conn)
            .await)?;
        convert(joined_to_run(run, rows)?)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %id, to = %transition.target()))]
    async fn transition_step(&self, id: StepId, transition: StepTransition) -> Result<()> {
        let (transition, payload) = checked(transition, |t| {
            checks::transition_step(&self.config.limits, t)
        })?;
        let step_move = Move::Transition(transition.target());
        let written = by_dialect!(self, guarded_move(id, step_move, payload, None))?;
        self.moved_or_refused(id, written, step_move.target()).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %claim.step, attempt = claim.attempt, to = %transition.target()))]
    async fn transition_claimed(&self, claim: StepClaim, transition: StepTransition) -> Result<()> {
        let (transition, payload) = checked(transition, |t| {
            checks::transition_step(&self.config.limits, t)
        })?;
        let step_move = Move::Claimed(transition.target());
        let written = by_dialect!(
            self,
            guarded_move(claim.step, step_move, payload, Some(claim.attempt))
        )?;
        if matches!(written, Guarded::Moved) {
            return Ok(());
        }
        // Error path only: the step as it is now says why.
        let step = self.get_step(claim.step).await?;
        claim.explain_refusal(&step, &transition)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %claim.step, attempt = claim.attempt))]
    async fn renew_step_claim(&self, claim: StepClaim) -> Result<Timestamp> {
        let op = "renew_step_claim";
        let (id, attempt) = (claim.step.to_string(), i64::from(claim.attempt));
        let (offset, default_us) = (
            self.config.lease_offset_us(),
            self.config.claim_default_us(),
        );
        let renewed = on_connection!(self, op, |conn| conn
            .renew_step_claim(&id, attempt, offset, default_us)
            .await)?;
        if let Some(Some(until)) = renewed {
            let until = Timestamp::from_micros(until);
            tracing::debug!(%until, "step claim renewed");
            Ok(until)
        } else {
            // Error path only: a step that exists lost this claim.
            self.get_step(claim.step).await?;
            Err(claim.lost())
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %id, start = %start.status()))]
    async fn create_retry_attempt(&self, id: StepId, start: RetryStart) -> Result<()> {
        let written = by_dialect!(self, guarded_move(id, Move::Retry(start), None, None))?;
        self.moved_or_refused(id, written, start.status()).await
    }

    async fn claim_step(&self, run: RunId, name: &str, function: &str) -> Result<Option<Step>> {
        Ok(self
            .claim_step_outcome(run, name, function)
            .await?
            .claimed())
    }

    /// Answers from the claim's own statement or transaction: every dialect
    /// already reads the step when its guarded write takes nothing (to tell
    /// a missing step and a function mismatch), so the reason costs no
    /// statement and is what the claim saw.
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, name = %name, function = %function))]
    async fn claim_step_outcome(
        &self,
        run: RunId,
        name: &str,
        function: &str,
    ) -> Result<ClaimOutcome> {
        checks::claim_step(&self.config.limits, name, function)?;
        by_dialect!(self, claim(run, name, function))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    async fn step_history(&self, run: RunId) -> Result<Vec<StepAttempt>> {
        let run_text = run.to_string();
        let rows: Vec<Option<AttemptRow>> =
            on_connection!(self, "step_history", |conn| runs::table
                .left_join(steps::table)
                .left_join(history::table.on(history::step_id.eq(steps::id)))
                .filter(runs::id.eq(&run_text))
                .order((history::created_at, history::attempt, history::id))
                .select(Option::<AttemptRow>::as_select())
                .load(conn)
                .await)?;
        convert(joined_to_run(run, rows)?)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %id))]
    async fn set_branch_taken(&self, id: StepId, branch: &str) -> Result<()> {
        checks::set_branch_taken(&self.config.limits, branch)?;
        let id_text = id.to_string();
        let now = self.now();
        // On MySQL the count is of matched rows (`CLIENT_FOUND_ROWS`), so a
        // step already on this branch still counts.
        let matched = on_connection!(self, "set_branch_taken", |conn| diesel::update(
            steps::table.find(&id_text)
        )
        .set((steps::branch_taken.eq(branch), steps::updated_at.eq(now)))
        .execute(conn)
        .await)?;
        if matched == 0 {
            return Err(Error::StepNotFound(id));
        }
        Ok(())
    }
}
