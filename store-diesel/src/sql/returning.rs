//! The writes PostgreSQL and SQLite spell alike and MySQL apart
//! ([`crate::dialect::Connection`], from `insert_keyed_run` down): the
//! `RETURNING` and `ON CONFLICT (target)` bodies, written once here as
//! [`returning_writes!`], which each of the two dialects' `connection.rs`
//! expands inside its `impl Connection`. MySQL's bodies are in its own
//! `connection.rs`.
//!
//! Why a macro and not a generic function: diesel types PostgreSQL's and
//! SQLite's `RETURNING` and `ON CONFLICT` clauses differently
//! (`PgLikeReturningClause` and `PgOnConflictClause` against
//! `SqliteReturningClause` and `SqliteOnConflictClause`), so a function
//! generic over both connections would need every statement's whole type
//! as a bound; expanded in each `impl`, every body is monomorphic, as each
//! body of `on_connection!` is. The fragments the bodies share with MySQL's
//! are functions in [`crate::sql::typed`].

/// The [`Connection`](crate::dialect::Connection) methods whose bodies
/// PostgreSQL and SQLite share (see the module doc): expand inside
/// `impl Connection for <the dialect's connection>`.
macro_rules! returning_writes {
    () => {
        /// `ON CONFLICT (idempotency_key) DO NOTHING`.
        async fn insert_keyed_run(
            &mut self,
            row: &$crate::rows::RunRow,
        ) -> diesel::QueryResult<Option<bool>> {
            use diesel_async::RunQueryDsl;
            use $crate::schema::flowstate_runs as runs;
            diesel::insert_into(runs::table)
                .values(row)
                .on_conflict(runs::idempotency_key)
                .do_nothing()
                .execute(self)
                .await
                .map(|n| Some(n == 1))
        }

        /// `ON CONFLICT (run_id, effect_key) DO NOTHING`.
        async fn insert_effect(
            &mut self,
            row: &$crate::rows::effects::EffectRow,
        ) -> diesel::QueryResult<()> {
            use diesel_async::RunQueryDsl;
            use $crate::schema::flowstate_effects as effects;
            diesel::insert_into(effects::table)
                .values(row)
                .on_conflict((effects::run_id, effects::effect_key))
                .do_nothing()
                .execute(self)
                .await
                .map(|_| ())
        }

        /// `ON CONFLICT (run_id, name) DO UPDATE` with `excluded`.
        async fn upsert_signal(
            &mut self,
            row: &$crate::rows::signals::SignalRow,
        ) -> diesel::QueryResult<usize> {
            use diesel::prelude::*;
            use diesel_async::RunQueryDsl;
            use $crate::cached::CacheExt;
            use $crate::schema::flowstate_run_signals as signals;
            diesel::insert_into(signals::table)
                .values($crate::sql::typed::signal_source(row))
                .into_columns((
                    signals::run_id,
                    signals::name,
                    signals::payload,
                    signals::sent_at,
                ))
                .on_conflict((signals::run_id, signals::name))
                .do_update()
                .set((
                    signals::payload.eq(diesel::upsert::excluded(signals::payload)),
                    signals::sent_at.eq(diesel::upsert::excluded(signals::sent_at)),
                ))
                .cached()
                .execute(self)
                .await
        }

        /// One `DELETE ... RETURNING payload` guarded by the lease.
        async fn take_signal(
            &mut self,
            lease: $crate::dialect::Held<'_>,
            name: &str,
        ) -> diesel::QueryResult<Option<$crate::schema::JsonText>> {
            use diesel::prelude::*;
            use diesel_async::RunQueryDsl;
            use $crate::schema::{flowstate_run_signals as signals, flowstate_runs as runs};
            let held = $crate::sql::typed::held(
                <Self as $crate::dialect::Connection>::NOW_US,
                lease.id,
                lease.fence.token,
                lease.fence.offset,
            );
            diesel::delete(
                signals::table
                    .filter(signals::run_id.eq(lease.id))
                    .filter(signals::name.eq(name))
                    .filter(diesel::dsl::exists(held.select(runs::id))),
            )
            .returning(signals::payload)
            .get_result(self)
            .await
            .optional()
        }

        /// `ON CONFLICT (run_id, state_key) DO UPDATE` with `excluded`.
        async fn upsert_state(
            &mut self,
            row: &$crate::rows::StateRow,
            fence: Option<$crate::dialect::Fence>,
        ) -> diesel::QueryResult<usize> {
            use diesel::prelude::*;
            use diesel_async::RunQueryDsl;
            use $crate::cached::CacheExt;
            use $crate::schema::flowstate_run_state as state;
            use $crate::sql::typed::{held, state_values, unsettled_run};
            let columns = (state::run_id, state::state_key, state::value);
            let target = (state::run_id, state::state_key);
            let value = state::value.eq(diesel::upsert::excluded(state::value));
            match fence {
                None => {
                    diesel::insert_into(state::table)
                        .values(unsettled_run(&row.run_id).select(state_values(row)))
                        .into_columns(columns)
                        .on_conflict(target)
                        .do_update()
                        .set(value)
                        .cached()
                        .execute(self)
                        .await
                }
                Some(fence) => {
                    let now_us = <Self as $crate::dialect::Connection>::NOW_US;
                    diesel::insert_into(state::table)
                        .values(
                            held(now_us, &row.run_id, fence.token, fence.offset)
                                .select(state_values(row)),
                        )
                        .into_columns(columns)
                        .on_conflict(target)
                        .do_update()
                        .set(value)
                        .cached()
                        .execute(self)
                        .await
                }
            }
        }

        /// `ON CONFLICT (persona) DO UPDATE`.
        async fn upsert_schedule(
            &mut self,
            row: &$crate::rows::virtual_users::ScheduleRow,
        ) -> diesel::QueryResult<()> {
            use diesel_async::RunQueryDsl;
            use $crate::schema::flowstate_virtual_user_schedules as schedules;
            diesel::insert_into(schedules::table)
                .values(row)
                .on_conflict(schedules::persona)
                .do_update()
                .set($crate::rows::virtual_users::schedule_replaced(row))
                .execute(self)
                .await
                .map(|_| ())
        }

        /// The guarded `UPDATE ... RETURNING` the run.
        async fn move_run(
            &mut self,
            run_move: &$crate::dialect::RunMove<'_>,
        ) -> diesel::QueryResult<Option<$crate::rows::RunRow>> {
            use diesel::prelude::*;
            use diesel_async::RunQueryDsl;
            use $crate::cached::CacheExt;
            use $crate::rows::RunRow;
            use $crate::sql::typed::{move_run, move_run_fenced};
            let $crate::dialect::RunMove {
                id,
                to,
                now,
                output,
                fence,
            } = *run_move;
            match fence {
                None => move_run(id, to, now, output)
                    .returning(RunRow::as_returning())
                    .cached()
                    .get_result(self)
                    .await
                    .optional(),
                Some(fence) => {
                    let now_us = <Self as $crate::dialect::Connection>::NOW_US;
                    move_run_fenced(now_us, id, to, now, output, fence.token, fence.offset)
                        .returning(RunRow::as_returning())
                        .cached()
                        .get_result(self)
                        .await
                        .optional()
                }
            }
        }

        /// The lease-guarded `UPDATE ... RETURNING status, failures`.
        async fn release_lease(
            &mut self,
            lease: $crate::dialect::Held<'_>,
            release: $crate::dialect::LeaseRelease<'_>,
        ) -> diesel::QueryResult<Option<(String, i64)>> {
            use diesel::prelude::*;
            use diesel_async::RunQueryDsl;
            use $crate::cached::CacheExt;
            use $crate::schema::flowstate_runs as runs;
            use $crate::sql::typed::{failure_release, held, yield_release};
            let held = held(
                <Self as $crate::dialect::Connection>::NOW_US,
                lease.id,
                lease.fence.token,
                lease.fence.offset,
            );
            match release {
                $crate::dialect::LeaseRelease::Failure { reason, limit, now } => {
                    diesel::update(held)
                        .set(failure_release(reason, limit, now))
                        .returning((runs::status, runs::failures))
                        .cached()
                        .get_result(self)
                        .await
                        .optional()
                }
                $crate::dialect::LeaseRelease::Yield => diesel::update(held)
                    .set(yield_release())
                    .returning((runs::status, runs::failures))
                    .cached()
                    .get_result(self)
                    .await
                    .optional(),
            }
        }

        /// One guarded `UPDATE ... RETURNING`: of concurrent calls, the
        /// first takes the row lock (SQLite: the write lock) and every
        /// later one re-reads the row it wrote, finds its lease taken and
        /// matches nothing.
        async fn lease_run(
            &mut self,
            lease: $crate::dialect::RunLeasing<'_>,
        ) -> diesel::QueryResult<$crate::rows::leases::Leased> {
            use diesel::prelude::*;
            use diesel_async::RunQueryDsl;
            use $crate::cached::CacheExt;
            use $crate::rows::leases::{Leased, LeasedRunRow};
            use $crate::schema::flowstate_runs as runs;
            let now_us = <Self as $crate::dialect::Connection>::NOW_US;
            let row: Option<LeasedRunRow> = diesel::update(
                runs::table
                    .filter(runs::id.eq(lease.id))
                    .filter($crate::sql::typed::runnable(now_us, lease.offset)),
            )
            .set($crate::sql::typed::lease_set(
                now_us,
                lease.now,
                lease.worker,
                lease.until,
            ))
            .returning(LeasedRunRow::as_select())
            .cached()
            .get_result(self)
            .await
            .optional()?;
            Ok(match row {
                None => Leased::Refused,
                Some(row) if row.run.status == flowstate_core::RunStatus::Cancelled.as_str() => {
                    Leased::Cancelled
                }
                Some(row) => Leased::Won(Box::new(row)),
            })
        }

        /// The guarded `UPDATE ... RETURNING claimed_until`.
        async fn renew_step_claim(
            &mut self,
            id: &str,
            attempt: i64,
            offset: i64,
            default_us: i64,
        ) -> diesel::QueryResult<Option<Option<i64>>> {
            use diesel::prelude::*;
            use diesel_async::RunQueryDsl;
            use $crate::cached::CacheExt;
            use $crate::schema::flowstate_steps as steps;
            let now_us = <Self as $crate::dialect::Connection>::NOW_US;
            diesel::update(
                steps::table
                    .find(id)
                    .filter(steps::current_attempt.eq(attempt))
                    .filter(steps::status.eq(flowstate_core::StepStatus::Running.as_str())),
            )
            .set(steps::claimed_until.eq($crate::sql::typed::claim_deadline(
                now_us, offset, default_us,
            )))
            .returning(steps::claimed_until)
            .cached()
            .get_result(self)
            .await
            .optional()
        }

        /// The guarded `UPDATE ... RETURNING` the counters.
        async fn add_to_tally(
            &mut self,
            id: &str,
            add: $crate::dialect::TallyAdd,
            now: i64,
        ) -> diesel::QueryResult<Option<(i64, i64, i64)>> {
            use diesel::prelude::*;
            use diesel_async::RunQueryDsl;
            use $crate::schema::flowstate_virtual_user_runs as runs;
            $crate::rows::virtual_users::tally_add(id, add.turns, add.tokens, add.cost, now)
                .returning((runs::tally_turns, runs::tally_tokens, runs::tally_cost))
                .get_result(self)
                .await
                .optional()
        }
    };
}
pub(crate) use returning_writes;
