//! [`ScheduleStore`] and [`VirtualUserRunStore`] for [`DieselStore`],
//! written once in the diesel DSL for every dialect: nothing here is hot
//! enough, or different enough per dialect, for hand-written SQL.
//!
//! The claim is one status-guarded `UPDATE` (`enabled` and the expected
//! `next_run_at` in its `WHERE`) decided by its affected rows; settling a
//! run is the same shape on `status = 'running'`. An append takes its
//! positions from the run row's `transcript_len`, raised by the same guarded
//! `UPDATE` that admits it, in one transaction with the entries' insert, so
//! two appends can never number the same position. Only the spelling of an
//! upsert and the lack of `RETURNING` set MySQL apart (the schedule upsert
//! and the tally add are methods of `crate::dialect::Connection`), and the
//! append, whose admitting `UPDATE` answers the new length
//! differently on each (and whose multi-row insert diesel builds for SQLite
//! only on its blocking connection), is each dialect's
//! `virtual_users.rs`, through [`by_dialect!`].

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::Value;

use flowstate_core::ports::checks;
use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::virtual_users::tally_overflow;
use flowstate_core::{
    Error, NewSchedule, NewVirtualUserRun, Result, RunTally, Schedule, SchedulePatch, StopReason,
    Timestamp, TranscriptPage, VirtualUserRun, VirtualUserRunId, VirtualUserRunQuery,
    VirtualUserRunStatus,
};

use crate::backend::{by_dialect, on_connection};
use crate::cached::CacheExt;
use crate::dialect::{Connection, TallyAdd};
use crate::rows::convert;
use crate::rows::virtual_users::{
    RUNNING, ScheduleChanges, ScheduleRow, VirtualUserRunRow, position, running_run, tally,
    transcript_entry,
};
use crate::schema::{
    JsonText, flowstate_virtual_user_runs as runs, flowstate_virtual_user_schedules as schedules,
    flowstate_virtual_user_transcript as transcript,
};
use crate::store::DieselStore;

diesel::define_sql_function! {
    /// `COALESCE(given, stored)` over a time: a schedule claim that records
    /// a run stamps `last_run_at`, one that does not (`NULL` bound) keeps it.
    #[sql_name = "COALESCE"]
    fn micros_or_stored(
        given: diesel::sql_types::Nullable<diesel::sql_types::BigInt>,
        stored: diesel::sql_types::Nullable<diesel::sql_types::BigInt>,
    ) -> diesel::sql_types::Nullable<diesel::sql_types::BigInt>;
}

impl DieselStore {
    /// Why a guarded write to run `id` matched nothing (error path only):
    /// there is no such run, or it has settled.
    async fn not_running(&self, id: VirtualUserRunId) -> Error {
        match self.get_virtual_user_run(id).await {
            Ok(run) => Error::VirtualUserRunSettled {
                run: id,
                status: run.status,
            },
            Err(err) => err,
        }
    }

    /// Settles running run `id` as `status` with `findings` or `failure`,
    /// stopped for `reason`.
    async fn settle(
        &self,
        op: &'static str,
        id: VirtualUserRunId,
        status: VirtualUserRunStatus,
        (findings, failure): (Option<JsonText>, Option<&str>),
        reason: StopReason,
    ) -> Result<()> {
        let id_text = id.to_string();
        let now = self.now();
        let settled = on_connection!(self, op, |conn| diesel::update(
            runs::table
                .filter(runs::id.eq(&id_text))
                .filter(runs::status.eq(RUNNING))
        )
        .set((
            runs::status.eq(status.as_str()),
            runs::findings.eq(&findings),
            runs::failure.eq(failure),
            runs::stop_reason.eq(reason.as_str()),
            runs::updated_at.eq(now),
        ))
        .execute(conn)
        .await)?;
        if settled == 0 {
            return Err(self.not_running(id).await);
        }
        Ok(())
    }

    /// Writes `memory` or `intents` (JSON text) of running run `id`: one
    /// status-guarded `UPDATE`, the run read only when it matched nothing.
    async fn overwrite(
        &self,
        op: &'static str,
        id: VirtualUserRunId,
        with: Overwrite,
    ) -> Result<()> {
        let id_text = id.to_string();
        let now = self.now();
        let written = match with {
            Overwrite::Memory(memory) => {
                on_connection!(self, op, |conn| diesel::update(running_run(&id_text))
                    .set((runs::memory.eq(&memory), runs::updated_at.eq(now)))
                    .execute(conn)
                    .await)?
            }
            Overwrite::Intents(intents) => {
                on_connection!(self, op, |conn| diesel::update(running_run(&id_text))
                    .set((runs::intents.eq(&intents), runs::updated_at.eq(now)))
                    .execute(conn)
                    .await)?
            }
        };
        if written == 0 {
            return Err(self.not_running(id).await);
        }
        Ok(())
    }
}

/// What [`DieselStore::overwrite`] writes: a run's memory or its intents,
/// as JSON text.
enum Overwrite {
    /// `memory`.
    Memory(JsonText),
    /// `intents`.
    Intents(JsonText),
}

impl ScheduleStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(persona = %schedule.persona))]
    async fn upsert_schedule(&self, schedule: NewSchedule) -> Result<()> {
        checks::upsert_schedule(&self.config.limits, &schedule)?;
        let row = ScheduleRow {
            persona: schedule.persona,
            enabled: schedule.enabled,
            min_interval_ms: schedule.interval.min_ms,
            max_interval_ms: schedule.interval.max_ms,
            next_run_at: schedule.next_run_at.as_micros(),
            last_run_id: None,
            updated_at: self.now(),
            last_run_at: None,
            goals: None,
            budget_max_duration_ms: None,
            budget_max_turns: None,
            budget_max_spend: None,
        };
        let op = "upsert_schedule";
        on_connection!(self, op, |conn| conn.upsert_schedule(&row).await)?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(persona = %persona))]
    async fn update_schedule(&self, persona: &str, patch: &SchedulePatch) -> Result<Schedule> {
        let goals = checks::update_schedule(&self.config.limits, persona, patch)?;
        let changes = ScheduleChanges {
            enabled: patch.enabled,
            min_interval_ms: patch.interval.map(|i| i.min_ms),
            max_interval_ms: patch.interval.map(|i| i.max_ms),
            next_run_at: patch.next_run_at.map(Timestamp::as_micros),
            goals: goals.map(JsonText),
            budget_max_duration_ms: patch.budget.map(|b| {
                b.max_duration
                    .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }),
            budget_max_turns: patch.budget.map(|b| b.max_turns.map(i64::from)),
            budget_max_spend: patch
                .budget
                .map(|b| b.max_spend.map(|s| i64::try_from(s).unwrap_or(i64::MAX))),
            updated_at: self.now(),
        };
        // The statement's text is one per set of fields patched: few, and
        // none hot, so it is not kept prepared.
        let updated = on_connection!(self, "update_schedule", |conn| diesel::update(
            schedules::table.filter(schedules::persona.eq(persona))
        )
        .set(&changes)
        .execute(conn)
        .await)?;
        if updated == 0 {
            return Err(Error::ScheduleNotFound(persona.to_owned()));
        }
        self.get_schedule(persona)
            .await?
            .ok_or_else(|| Error::ScheduleNotFound(persona.to_owned()))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(persona = %persona))]
    async fn remove_schedule(&self, persona: &str) -> Result<()> {
        checks::get_schedule(&self.config.limits, persona)?;
        let removed = on_connection!(self, "remove_schedule", |conn| diesel::delete(
            schedules::table.filter(schedules::persona.eq(persona))
        )
        .execute(conn)
        .await)?;
        if removed == 0 {
            return Err(Error::ScheduleNotFound(persona.to_owned()));
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_schedules(&self, limit: u32) -> Result<Vec<Schedule>> {
        let limit = i64::from(Schedule::due_limit(limit));
        let rows: Vec<ScheduleRow> = on_connection!(self, "list_schedules", |conn| {
            schedules::table
                .order(schedules::persona.asc())
                .limit(limit)
                .select(ScheduleRow::as_select())
                .load(conn)
                .await
        })?;
        convert(rows)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(persona = %persona))]
    async fn get_schedule(&self, persona: &str) -> Result<Option<Schedule>> {
        checks::get_schedule(&self.config.limits, persona)?;
        let row = on_connection!(self, "get_schedule", |conn| schedules::table
            .find(persona)
            .select(ScheduleRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(Schedule::try_from).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(now = %now))]
    async fn due_schedules(&self, now: Timestamp, limit: u32) -> Result<Vec<Schedule>> {
        let limit = i64::from(Schedule::due_limit(limit));
        let now = now.as_micros();
        let rows: Vec<ScheduleRow> = on_connection!(self, "due_schedules", |conn| {
            schedules::table
                .filter(schedules::enabled.eq(true))
                .filter(schedules::next_run_at.le(now))
                .order((schedules::next_run_at.asc(), schedules::persona.asc()))
                .limit(limit)
                .select(ScheduleRow::as_select())
                .load(conn)
                .await
        })?;
        convert(rows)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(persona = %persona, expected = %expected))]
    async fn claim_schedule(
        &self,
        persona: &str,
        expected: Timestamp,
        next: Timestamp,
        run: Option<VirtualUserRunId>,
    ) -> Result<bool> {
        checks::claim_schedule(&self.config.limits, persona)?;
        let run = run.map(|r| r.to_string());
        let now = self.now();
        // A claim recording a run stamps when, as `last_run_at`; one that
        // does not binds `NULL` and keeps it: one statement text either way.
        let stamped = run.is_some().then_some(now);
        let claimed = on_connection!(self, "claim_schedule", |conn| diesel::update(
            schedules::table
                .filter(schedules::persona.eq(persona))
                .filter(schedules::enabled.eq(true))
                .filter(schedules::next_run_at.eq(expected.as_micros()))
        )
        .set((
            schedules::next_run_at.eq(next.as_micros()),
            schedules::last_run_id.eq(&run),
            schedules::last_run_at.eq(micros_or_stored(stamped, schedules::last_run_at)),
            schedules::updated_at.eq(now),
        ))
        .execute(conn)
        .await)?;
        Ok(claimed == 1)
    }
}

impl VirtualUserRunStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(persona = %new.persona))]
    async fn start_virtual_user_run_with(&self, new: &NewVirtualUserRun) -> Result<VirtualUserRun> {
        let goals = checks::start_virtual_user_run_with(&self.config.limits, new)?;
        let run = VirtualUserRun::started_from(
            VirtualUserRunId::generate(),
            new,
            Timestamp::from_micros(self.now()),
        );
        let row = VirtualUserRunRow::new(&run, goals);
        on_connection!(self, "start_virtual_user_run", |conn| diesel::insert_into(
            runs::table
        )
        .values(&row)
        .execute(conn)
        .await)?;
        Ok(run)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id))]
    async fn get_virtual_user_run(&self, id: VirtualUserRunId) -> Result<VirtualUserRun> {
        let id_text = id.to_string();
        let row = on_connection!(self, "get_virtual_user_run", |conn| runs::table
            .find(&id_text)
            .select(VirtualUserRunRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map_or(
            Err(Error::VirtualUserRunNotFound(id)),
            VirtualUserRun::try_from,
        )
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_virtual_user_runs(
        &self,
        query: &VirtualUserRunQuery,
    ) -> Result<Vec<VirtualUserRun>> {
        checks::list_virtual_user_runs(&self.config.limits, query)?;
        let limit = i64::from(query.effective_limit());
        let rows: Vec<VirtualUserRunRow> =
            on_connection!(self, "list_virtual_user_runs", |conn| {
                let mut listing = runs::table
                    .select(VirtualUserRunRow::as_select())
                    .into_boxed();
                if let Some(persona) = &query.persona {
                    listing = listing.filter(runs::persona.eq(persona));
                }
                if let Some(status) = query.status {
                    listing = listing.filter(runs::status.eq(status.as_str()));
                }
                // Boxed, so never kept prepared by diesel; its text is one of
                // four filter combinations, so it is cached here.
                listing
                    .order((runs::created_at.desc(), runs::id.desc()))
                    .limit(limit)
                    .cached()
                    .load(conn)
                    .await
            })?;
        convert(rows)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id, reason = %reason))]
    async fn complete_virtual_user_run_with_reason(
        &self,
        id: VirtualUserRunId,
        findings: &Value,
        reason: StopReason,
    ) -> Result<()> {
        let findings = JsonText(checks::complete_virtual_user_run(
            &self.config.limits,
            findings,
        )?);
        let status = VirtualUserRunStatus::Completed;
        let op = "complete_virtual_user_run";
        self.settle(op, id, status, (Some(findings), None), reason)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id, reason = %reason))]
    async fn fail_virtual_user_run_with_reason(
        &self,
        id: VirtualUserRunId,
        failure: &str,
        reason: StopReason,
    ) -> Result<()> {
        checks::fail_virtual_user_run(&self.config.limits, failure)?;
        let status = VirtualUserRunStatus::Failed;
        let op = "fail_virtual_user_run";
        self.settle(op, id, status, (None, Some(failure)), reason)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id))]
    async fn add_to_tally(&self, id: VirtualUserRunId, delta: RunTally) -> Result<RunTally> {
        checks::add_to_tally(&self.config.limits, &delta)?;
        // Each amount is at most `i64::MAX` (checked), so each room below
        // is at least 0.
        let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let (turns, tokens, cost) = (
            signed(delta.turns),
            signed(delta.tokens),
            signed(delta.cost),
        );
        let id_text = id.to_string();
        let add = TallyAdd {
            turns,
            tokens,
            cost,
        };
        let now = self.now();
        let op = "add_to_tally";
        let after = on_connection!(self, op, |conn| conn.add_to_tally(&id_text, add, now).await)?;
        if let Some(counters) = after {
            return tally(&id_text, counters);
        }
        // Error path only: no such run, a settled one, or a counter with no
        // room.
        let run = self.get_virtual_user_run(id).await?;
        Err(match run.status {
            VirtualUserRunStatus::Running => tally_overflow(id, run.tally, delta),
            status => Error::VirtualUserRunSettled { run: id, status },
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id))]
    async fn set_memory(&self, id: VirtualUserRunId, memory: &Value) -> Result<()> {
        let memory = JsonText(checks::set_memory(&self.config.limits, memory)?);
        self.overwrite("set_memory", id, Overwrite::Memory(memory))
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id, intents = intents.len()))]
    async fn set_intents(&self, id: VirtualUserRunId, intents: &[String]) -> Result<()> {
        let intents = JsonText(checks::set_intents(&self.config.limits, intents)?);
        self.overwrite("set_intents", id, Overwrite::Intents(intents))
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id, entries = entries.len()))]
    async fn append_transcript(&self, id: VirtualUserRunId, entries: &[Value]) -> Result<u64> {
        let encoded = checks::append_transcript(&self.config.limits, entries)?;
        let id_text = id.to_string();
        let now = self.now();
        let len = by_dialect!(self, append_transcript(id_text, encoded, now))?;
        match len {
            Some(len) => position("virtual-user transcript length", &id.to_string(), len),
            None => Err(self.not_running(id).await),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id, from = from))]
    async fn read_transcript(
        &self,
        id: VirtualUserRunId,
        from: u64,
        limit: u32,
    ) -> Result<TranscriptPage> {
        let limit = TranscriptPage::effective_limit(limit);
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let id_text = id.to_string();
        // One statement: no row is no run; one row of NULLs, no entries
        // from `from` on.
        let rows: Vec<Option<(i64, JsonText, i64)>> =
            on_connection!(self, "read_transcript", |conn| runs::table
                .left_join(
                    transcript::table.on(transcript::run_id
                        .eq(runs::id)
                        .and(transcript::seq.ge(from))),
                )
                .filter(runs::id.eq(&id_text))
                .order(transcript::seq.nullable().asc())
                .limit(i64::from(limit))
                .select((transcript::seq, transcript::entry, transcript::at).nullable())
                .load(conn)
                .await)?;
        if rows.is_empty() {
            return Err(Error::VirtualUserRunNotFound(id));
        }
        let entries = rows
            .into_iter()
            .flatten()
            .map(|row| transcript_entry(&id_text, row))
            .collect::<Result<Vec<_>>>()?;
        Ok(TranscriptPage::of(entries, limit))
    }
}
