//! [`RunWaitStore`] for [`DieselStore`], in the diesel DSL: a wait is the
//! lease-guarded `UPDATE` of `leases.rs` setting `wake_at`/`waiting_on`, a
//! signal one upsert into `flowstate_run_signals`, taking a signal one
//! `DELETE` guarded by the lease. Whether a run is awake is decided in the
//! claim's SQL alone ([`crate::sql::waits::awake`]).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::Value;

use flowstate_core::backend::decode_json;
use flowstate_core::lease::lease_micros;
use flowstate_core::ports::RunWaitStore;
use flowstate_core::ports::checks;
use flowstate_core::{Error, Result, RunId, Wait};

use super::leases::stored_token;
use crate::backend::on_connection;
use crate::cached::CacheExt;
use crate::dialect::{Connection, Fence, Held};
use crate::rows::signals::SignalRow;
use crate::schema::{JsonText, flowstate_runs as runs};
use crate::sql::typed::{db_time, held, now_sql, wake_sweep};
use crate::store::DieselStore;

impl RunWaitStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, token))]
    async fn wait(&self, run: RunId, token: u64, wait: Wait) -> Result<()> {
        checks::wait(&self.config.limits, &wait)?;
        let (id, offset) = (run.to_string(), self.lease_offset());
        let stored = stored_token(token);
        let name = wait.waiting_on().map(ToOwned::to_owned);
        let wake = wait
            .wake_after()
            .map(|after| offset.saturating_add(lease_micros(after)));
        let free = (
            runs::lease_owner.eq(None::<String>),
            runs::lease_expires_at.eq(None::<i64>),
            runs::waiting_on.eq(name.clone()),
        );
        let waited = on_connection!(self, "wait", |conn| match wake {
            Some(wake) => {
                diesel::update(held(now_sql(&*conn), &id, stored, offset))
                    .set((
                        free.clone(),
                        runs::wake_at.eq(db_time(now_sql(&*conn), wake)),
                    ))
                    .cached()
                    .execute(conn)
                    .await
            }
            None => {
                diesel::update(held(now_sql(&*conn), &id, stored, offset))
                    .set((free.clone(), runs::wake_at.eq(None::<i64>)))
                    .cached()
                    .execute(conn)
                    .await
            }
        })?;
        if waited == 0 {
            return self.lease_refused("wait", run, token).await;
        }
        tracing::debug!(?wait, "run waits");
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, name = %name))]
    async fn signal(&self, run: RunId, name: &str, payload: &Value) -> Result<()> {
        let payload = checks::signal(&self.config.limits, name, payload)?;
        let row = SignalRow {
            run_id: run.to_string(),
            name: name.to_owned(),
            payload: JsonText(payload),
            sent_at: self.now(),
        };
        // From a `SELECT` of the run's row, so a settled run takes no
        // signal, decided in the same statement.
        let written = on_connection!(self, "signal", parent: run, |conn| conn
            .upsert_signal(&row)
            .await)?;
        if written > 0 {
            return Ok(());
        }
        // Error path only: why the run refused the signal.
        Err(self.run_refusal(run, None).await?.unwrap_or_else(|| {
            Error::backend("signal", true, "the run refused a signal it now admits")
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, name = %name))]
    async fn take_signal(&self, run: RunId, token: u64, name: &str) -> Result<Option<Value>> {
        checks::take_signal(&self.config.limits, name)?;
        let (id, offset) = (run.to_string(), self.lease_offset());
        let stored = stored_token(token);
        let lease = Held {
            id: &id,
            fence: Fence {
                token: stored,
                offset,
            },
        };
        let payload: Option<JsonText> = on_connection!(self, "take_signal", |conn| conn
            .take_signal(lease, name)
            .await)?;
        if let Some(payload) = payload {
            return decode_json("signal payload", &id, &payload.0).map(Some);
        }
        // None: no signal, or no lease (error path only).
        let holds: i64 = on_connection!(self, "take_signal", |conn| held(
            now_sql(&*conn),
            &id,
            stored,
            offset
        )
        .count()
        .get_result(conn)
        .await)?;
        if holds == 0 {
            return self.lease_refused("take_signal", run, token).await;
        }
        Ok(None)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn wake_expired(&self) -> Result<u64> {
        let offset = self.lease_offset();
        // One statement that reads the waits due from an index of waiting
        // runs (migration 000022), spelt by dialect (`WakeSweep`).
        let woken = on_connection!(self, "wake_expired", |conn| diesel::sql_query(wake_sweep(
            &*conn
        ))
        .bind::<diesel::sql_types::BigInt, _>(offset)
        .execute(conn)
        .await)?;
        tracing::debug!(woken, "expired waits ended");
        Ok(woken as u64)
    }
}
