//! Run state for [`DieselStore`]: a row per `(run_id, state_key)`, written
//! by one upsert with the key bound, so writers of different keys never
//! touch the same row and nothing is read, modified and written back.
//!
//! diesel does not keep an upsert prepared (its `ON CONFLICT` clause says
//! it is unsafe to cache); the text here is fixed, so [`CacheExt::cached`]
//! does, and a write is one round trip.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use flowstate_core::{Result, RunId};

use super::{DieselStore, by_returning, on_connection};
use crate::cached::CacheExt;
use crate::rows::{StateRow, joined_to_run, state_map};
use crate::schema::{JsonText, flowstate_run_state as state, flowstate_runs as runs};

impl DieselStore {
    /// [`RunStore::write_state`](flowstate_core::RunStore::write_state).
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    pub(super) async fn put_state(&self, run: RunId, key: &str, value: &Value) -> Result<()> {
        self.config.limits.check_key("state key", key)?;
        let row = StateRow {
            run_id: run.to_string(),
            state_key: key.to_owned(),
            value: JsonText(self.config.limits.encode("state value", value)?),
        };
        let op = "write_state";
        by_returning!(self, op, parent: run, |conn| diesel::insert_into(state::table)
            .values(&row)
            .on_conflict((state::run_id, state::state_key))
            .do_update()
            .set(state::value.eq(diesel::upsert::excluded(state::value)))
            .cached()
            .execute(conn)
            .await,
        // MySQL has no conflict target and no `excluded`: `replace_into`
        // would delete and re-insert, so the same upsert is spelled
        // `ON DUPLICATE KEY UPDATE value = <the bound value>`.
        mysql: |conn| diesel::insert_into(state::table)
            .values(&row)
            .on_conflict(diesel::dsl::DuplicatedKeys)
            .do_update()
            .set(state::value.eq(&row.value))
            .cached()
            .execute(conn)
            .await)?;
        Ok(())
    }

    /// [`RunStore::read_state`](flowstate_core::RunStore::read_state), in
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
