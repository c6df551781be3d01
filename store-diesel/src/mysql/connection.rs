//! What MySQL's connection spells its own way inside the shared typed
//! queries ([`crate::dialect::Connection`]): the answer to "what does
//! MySQL do differently?" for every write written in the DSL. It has no
//! `RETURNING`, so a write that answers a row is the guarded write and a
//! read of the row in one transaction; no `ON CONFLICT (target)` and no
//! `excluded`, so an upsert is `ON DUPLICATE KEY UPDATE` with the values
//! bound (and a skip of a taken key `ON DUPLICATE KEY UPDATE k = k`).

use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::StepStatus;

use crate::cached::CacheExt;
use crate::dialect::{
    Connection, Fence, Held, LeaseRelease, RUNS_PER_INSERT, RunLeasing, RunMove, TallyAdd,
};
use crate::health::Watched;
use crate::rows::effects::EffectRow;
use crate::rows::events::{DeliveryRow, EventRow};
use crate::rows::leases::{Leased, LeasedRunRow};
use crate::rows::signals::SignalRow;
use crate::rows::virtual_users::{ScheduleRow, schedule_replaced, tally_add};
use crate::rows::{RunRow, StateRow};
use crate::schema::{
    JsonText, flowstate_effects as effects, flowstate_event_deliveries as deliveries,
    flowstate_events as events, flowstate_run_signals as signals, flowstate_run_state as state,
    flowstate_runs as runs, flowstate_steps as steps, flowstate_virtual_user_runs as vu_runs,
    flowstate_virtual_user_schedules as schedules,
};
use crate::sql::Upsert;
use crate::sql::typed::{
    DUE_ORDER, claim_deadline, failure_release, held, lease_set, move_run, move_run_fenced,
    pending, runnable, signal_source, state_values, unsettled_run, yield_release,
};

impl Connection for AsyncMysqlConnection {
    /// The difference from the epoch of two `DATETIME`s, which no time
    /// zone setting touches.
    const NOW_US: &'static str =
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

    /// No `ON CONFLICT (target)`: `ON DUPLICATE KEY UPDATE`.
    const UPSERT: Upsert = Upsert::OnDuplicateKey;

    /// A skipped duplicate still counts as a row (`INSERT IGNORE`, or a
    /// matched row under `CLIENT_FOUND_ROWS`).
    const INSERTS_TELL_SKIPS: bool = false;

    const CLAIMABLE_COLUMN: bool = true;

    /// One range of `flowstate_runs(wake_at)`.
    const WAKE_SWEEP: crate::sql::waits::WakeSweep = crate::sql::waits::WakeSweep::Plain;

    /// `FOR UPDATE SKIP LOCKED` (MySQL 8, MariaDB 10.6+): a dispatcher
    /// passes over an event another one holds instead of waiting for it.
    async fn lock_pending(&mut self, id: &str, now: i64) -> QueryResult<Option<EventRow>> {
        pending(now)
            .filter(events::id.eq(id))
            .select(EventRow::as_select())
            .for_update()
            .skip_locked()
            .first(self)
            .await
            .optional()
    }

    /// `LIMIT n FOR UPDATE SKIP LOCKED`: concurrent dispatchers each lock
    /// a different set and none waits on another's.
    async fn lock_next_pending(&mut self, now: i64, limit: i64) -> QueryResult<Vec<EventRow>> {
        pending(now)
            .order(DUE_ORDER)
            .select(EventRow::as_select())
            .limit(limit)
            .for_update()
            .skip_locked()
            .load(self)
            .await
    }

    /// One multi-row `INSERT IGNORE`: no foreign key on the events table, so it hides nothing but the taken key; a skipped row still counts.
    async fn insert_events(&mut self, rows: &[EventRow]) -> QueryResult<usize> {
        diesel::insert_into(events::table)
            .values(rows)
            .on_conflict_do_nothing()
            .execute(self)
            .await
    }

    /// One multi-row `INSERT`.
    async fn insert_deliveries(&mut self, rows: &[DeliveryRow]) -> QueryResult<usize> {
        diesel::insert_into(deliveries::table)
            .values(rows)
            .execute(self)
            .await
    }

    /// `ON DUPLICATE KEY UPDATE id = id`: `INSERT IGNORE` would also turn
    /// a missing parent into a warning; this only skips the key. It cannot
    /// tell a skip from a write.
    async fn insert_keyed_run(&mut self, row: &RunRow) -> QueryResult<Option<bool>> {
        diesel::insert_into(runs::table)
            .values(row)
            .on_conflict(diesel::dsl::DuplicatedKeys)
            .do_update()
            .set(runs::id.eq(runs::id))
            .execute(self)
            .await
            .map(|_| None)
    }

    /// One multi-row `INSERT ... ON DUPLICATE KEY UPDATE id = id` per
    /// [`RUNS_PER_INSERT`] rows, skipping each taken key as
    /// [`Self::insert_keyed_run`] does: a dispatch batch's runs in one
    /// statement, not one a run.
    async fn insert_keyed_runs(&mut self, rows: Vec<RunRow>) -> QueryResult<()> {
        for chunk in rows.chunks(RUNS_PER_INSERT) {
            diesel::insert_into(runs::table)
                .values(chunk)
                .on_conflict(diesel::dsl::DuplicatedKeys)
                .do_update()
                .set(runs::id.eq(runs::id))
                .execute(self)
                .await?;
        }
        Ok(())
    }

    /// `ON DUPLICATE KEY UPDATE run_id = run_id`: skips the key only.
    async fn insert_effect(&mut self, row: &EffectRow) -> QueryResult<()> {
        diesel::insert_into(effects::table)
            .values(row)
            .on_conflict(diesel::dsl::DuplicatedKeys)
            .do_update()
            .set(effects::run_id.eq(effects::run_id))
            .execute(self)
            .await
            .map(|_| ())
    }

    /// No `excluded`: `ON DUPLICATE KEY UPDATE` with the values bound.
    async fn upsert_signal(&mut self, row: &SignalRow) -> QueryResult<usize> {
        diesel::insert_into(signals::table)
            .values(signal_source(row))
            .into_columns((
                signals::run_id,
                signals::name,
                signals::payload,
                signals::sent_at,
            ))
            .on_conflict(diesel::dsl::DuplicatedKeys)
            .do_update()
            .set((
                signals::payload.eq(&row.payload),
                signals::sent_at.eq(row.sent_at),
            ))
            .cached()
            .execute(self)
            .await
    }

    /// No `RETURNING`: the signal is read locked, then deleted, in one
    /// transaction.
    async fn take_signal(&mut self, lease: Held<'_>, name: &str) -> QueryResult<Option<JsonText>> {
        self.transaction(async |conn| {
            let payload: Option<JsonText> = signals::table
                .filter(signals::run_id.eq(lease.id))
                .filter(signals::name.eq(name))
                .filter(diesel::dsl::exists(
                    held(
                        Self::NOW_US,
                        lease.id,
                        lease.fence.token,
                        lease.fence.offset,
                    )
                    .select(runs::id),
                ))
                .select(signals::payload)
                .for_update()
                .first(conn)
                .await
                .optional()?;
            if payload.is_some() {
                diesel::delete(
                    signals::table
                        .filter(signals::run_id.eq(lease.id))
                        .filter(signals::name.eq(name)),
                )
                .execute(conn)
                .await?;
            }
            Ok(payload)
        })
        .await
    }

    /// No conflict target and no `excluded` (and `replace_into` would
    /// delete and re-insert): `ON DUPLICATE KEY UPDATE value = <the bound
    /// value>`.
    async fn upsert_state(&mut self, row: &StateRow, fence: Option<Fence>) -> QueryResult<usize> {
        let columns = (state::run_id, state::state_key, state::value);
        let value = state::value.eq(&row.value);
        match fence {
            None => {
                diesel::insert_into(state::table)
                    .values(unsettled_run(&row.run_id).select(state_values(row)))
                    .into_columns(columns)
                    .on_conflict(diesel::dsl::DuplicatedKeys)
                    .do_update()
                    .set(value)
                    .cached()
                    .execute(self)
                    .await
            }
            Some(fence) => {
                diesel::insert_into(state::table)
                    .values(
                        held(Self::NOW_US, &row.run_id, fence.token, fence.offset)
                            .select(state_values(row)),
                    )
                    .into_columns(columns)
                    .on_conflict(diesel::dsl::DuplicatedKeys)
                    .do_update()
                    .set(value)
                    .cached()
                    .execute(self)
                    .await
            }
        }
    }

    /// `ON DUPLICATE KEY UPDATE`.
    async fn upsert_schedule(&mut self, row: &ScheduleRow) -> QueryResult<()> {
        diesel::insert_into(schedules::table)
            .values(row)
            .on_conflict(diesel::dsl::DuplicatedKeys)
            .do_update()
            .set(schedule_replaced(row))
            .execute(self)
            .await
            .map(|_| ())
    }

    /// No `RETURNING`: the guarded write, then the run, in one transaction.
    async fn move_run(&mut self, run_move: &RunMove<'_>) -> QueryResult<Option<RunRow>> {
        let RunMove {
            id,
            to,
            now,
            output,
            fence,
        } = *run_move;
        self.transaction(async |conn| {
            let moved = match fence {
                None => move_run(id, to, now, output).cached().execute(conn).await?,
                Some(fence) => {
                    move_run_fenced(Self::NOW_US, id, to, now, output, fence.token, fence.offset)
                        .cached()
                        .execute(conn)
                        .await?
                }
            };
            if moved == 0 {
                return Ok(None);
            }
            runs::table
                .find(id)
                .select(RunRow::as_select())
                .first(conn)
                .await
                .map(Some)
        })
        .await
    }

    /// No `RETURNING`: the release, then the run's status and failures,
    /// in one transaction.
    async fn release_lease(
        &mut self,
        lease: Held<'_>,
        release: LeaseRelease<'_>,
    ) -> QueryResult<Option<(String, i64)>> {
        self.transaction(async |conn| {
            let held = held(
                Self::NOW_US,
                lease.id,
                lease.fence.token,
                lease.fence.offset,
            );
            let released = match release {
                LeaseRelease::Failure { reason, limit, now } => {
                    diesel::update(held)
                        .set(failure_release(reason, limit, now))
                        .cached()
                        .execute(conn)
                        .await?
                }
                LeaseRelease::Yield => {
                    diesel::update(held)
                        .set(yield_release())
                        .cached()
                        .execute(conn)
                        .await?
                }
            };
            if released == 0 {
                return Ok(None);
            }
            runs::table
                .find(lease.id)
                .select((runs::status, runs::failures))
                .first(conn)
                .await
                .map(Some)
        })
        .await
    }

    /// MySQL cannot `UPDATE` a table its `WHERE` reads in a subquery (the
    /// awake test reads the children), so the run is read locked first,
    /// with whether it is runnable; the write and the read-back follow in
    /// the same transaction.
    async fn lease_run(&mut self, lease: RunLeasing<'_>) -> QueryResult<Leased> {
        let RunLeasing {
            id,
            worker,
            now,
            offset,
            until,
        } = lease;
        self.transaction(async |conn| {
            let found: Option<(bool, Option<bool>)> = runs::table
                .filter(runs::id.eq(id))
                .select((runs::cancel_requested, runnable(Self::NOW_US, offset)))
                .for_update()
                .first(conn)
                .await
                .optional()?;
            let cancel = match found {
                None => return Ok(Leased::Missing),
                Some((cancel, Some(true))) => cancel,
                Some(_) => return Ok(Leased::NotRunnable),
            };
            diesel::update(runs::table.filter(runs::id.eq(id)))
                .set(lease_set(Self::NOW_US, now, worker, until))
                .cached()
                .execute(conn)
                .await?;
            if cancel {
                return Ok(Leased::Cancelled);
            }
            runs::table
                .filter(runs::id.eq(id))
                .select(LeasedRunRow::as_select())
                .first(conn)
                .await
                .map(|row| Leased::Won(Box::new(row)))
        })
        .await
    }

    /// No `RETURNING`: the guarded write, then the new deadline, in one
    /// transaction.
    async fn renew_step_claim(
        &mut self,
        id: &str,
        attempt: i64,
        offset: i64,
        default_us: i64,
    ) -> QueryResult<Option<Option<i64>>> {
        self.transaction(async |conn| {
            let matched = diesel::update(
                steps::table
                    .find(id)
                    .filter(steps::current_attempt.eq(attempt))
                    .filter(steps::status.eq(StepStatus::Running.as_str())),
            )
            .set(steps::claimed_until.eq(claim_deadline(Self::NOW_US, offset, default_us)))
            .cached()
            .execute(conn)
            .await?;
            if matched == 0 {
                return Ok(None);
            }
            steps::table
                .find(id)
                .select(steps::claimed_until)
                .first(conn)
                .await
                .map(Some)
        })
        .await
    }

    /// No `RETURNING`: the row the update locked is read back in the same
    /// transaction, so the answer is this add's.
    async fn add_to_tally(
        &mut self,
        id: &str,
        add: TallyAdd,
        now: i64,
    ) -> QueryResult<Option<(i64, i64, i64)>> {
        self.transaction(async |conn| {
            let matched = tally_add(id, add.turns, add.tokens, add.cost, now)
                .execute(conn)
                .await?;
            if matched == 0 {
                return Ok(None);
            }
            vu_runs::table
                .find(id)
                .select((
                    vu_runs::tally_turns,
                    vu_runs::tally_tokens,
                    vu_runs::tally_cost,
                ))
                .first(conn)
                .await
                .map(Some)
        })
        .await
    }
}

/// A server connection can be lost: the pool watches it.
impl Watched for AsyncMysqlConnection {
    const WATCHED: bool = true;
}
