//! Run state for [`DieselStore`]: a row per `(run_id, state_key)`, written
//! by one upsert with the key bound, so writers of different keys never
//! touch the same row and nothing is read, modified and written back.
//!
//! The upsert inserts from a `SELECT` of the run's row guarded as a write
//! into a run is ([`crate::sql::RunGuard`]: not settled; fenced, under the
//! token's lease), so a settled run or a lost lease writes nothing in the
//! same statement; only then is the run read, to say why.
//!
//! The upsert is the dialect's ([`Connection::upsert_state`]): `ON
//! CONFLICT ... DO UPDATE` with `excluded` on PostgreSQL and SQLite, `ON
//! DUPLICATE KEY UPDATE` with the value bound on MySQL. diesel does not
//! keep an upsert prepared (its `ON CONFLICT` clause says it is unsafe to
//! cache); the text is fixed, so `.cached()` does, and a write is one
//! round trip.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use flowstate_core::ports::checks;
use flowstate_core::{Error, Result, RunId};

use super::leases::stored_token;
use crate::backend::on_connection;
use crate::dialect::{Connection, Fence};
use crate::rows::{StateRow, joined_to_run, state_map};
use crate::schema::{JsonText, flowstate_run_state as state, flowstate_runs as runs};
use crate::store::DieselStore;

impl DieselStore {
    /// [`RunStore::write_state`](flowstate_core::ports::RunStore::write_state),
    /// fenced by lease `token` when given
    /// ([`FencedWrites::write_state_fenced`](flowstate_core::ports::FencedWrites::write_state_fenced)).
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    pub(super) async fn put_state(
        &self,
        run: RunId,
        key: &str,
        value: &Value,
        token: Option<u64>,
    ) -> Result<()> {
        let value = checks::write_state(&self.config.limits, key, value)?;
        let row = StateRow {
            run_id: run.to_string(),
            state_key: key.to_owned(),
            value: JsonText(value),
        };
        let op = "write_state";
        let fence = token.map(|token| Fence {
            token: stored_token(token),
            offset: self.lease_offset(),
        });
        let written = on_connection!(self, op, parent: run, |conn| conn
            .upsert_state(&row, fence)
            .await)?;
        if written > 0 {
            return Ok(());
        }
        // Error path only: why the run refused the write.
        Err(self.run_refusal(run, token).await?.unwrap_or_else(|| {
            Error::backend(op, true, "the run refused a state write it now admits")
        }))
    }

    /// [`RunStore::read_state`](flowstate_core::ports::RunStore::read_state), in
    /// one statement: no row is no run, one row with no state is no keys.
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    pub(super) async fn state_of(&self, run: RunId) -> Result<Map<String, Value>> {
        let run_text = run.to_string();
        let rows: Vec<Option<(String, JsonText)>> =
            on_connection!(self, "read_state", |conn| runs::table
                .left_join(state::table)
                .filter(runs::id.eq(&run_text))
                .select((state::state_key, state::value).nullable())
                .load(conn)
                .await)?;
        state_map(run, joined_to_run(run, rows)?)
    }
}
