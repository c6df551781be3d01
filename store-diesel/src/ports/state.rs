//! Run state for [`DieselStore`]: a row per `(run_id, state_key)`, written
//! by one upsert with the key bound, so writers of different keys never
//! touch the same row and nothing is read, modified and written back.
//!
//! The upsert inserts from a `SELECT` of the run's row guarded as a write
//! into a run is ([`crate::sql::RunGuard`]: not settled; fenced, under the
//! token's lease), so a settled run or a lost lease writes nothing in the
//! same statement; only then is the run read, to say why.
//!
//! diesel does not keep an upsert prepared (its `ON CONFLICT` clause says
//! it is unsafe to cache); the text here is fixed, so [`CacheExt::cached`]
//! does, and a write is one round trip.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use flowstate_core::ports::checks;
use flowstate_core::{Error, Result, RunId};

use super::leases::stored_token;
use crate::backend::{by_returning, on_connection};
use crate::cached::CacheExt;
use crate::rows::{StateRow, joined_to_run, state_map};
use crate::schema::{JsonText, flowstate_run_state as state, flowstate_runs as runs};
use crate::sql::leasable_texts;
use crate::sql::typed::{held, now_sql};
use crate::store::DieselStore;

/// The state upsert of `$row` from `$source` (a `SELECT` of the run's id
/// from the guarded run row): on PostgreSQL and SQLite `ON CONFLICT ... DO
/// UPDATE` with `excluded`; MySQL has no conflict target and no `excluded`
/// (and `replace_into` would delete and re-insert), so the same upsert is
/// spelled `ON DUPLICATE KEY UPDATE value = <the bound value>`. Evaluates
/// to the affected rows (none: the guard refused).
macro_rules! upsert_state {
    (returning: $conn:expr, $row:expr, $source:expr) => {
        diesel::insert_into(state::table)
            .values(
                $source.select((
                    runs::id,
                    $row.state_key
                        .as_str()
                        .into_sql::<diesel::sql_types::Text>(),
                    (&$row.value).into_sql::<$crate::schema::Json>(),
                )),
            )
            .into_columns((state::run_id, state::state_key, state::value))
            .on_conflict((state::run_id, state::state_key))
            .do_update()
            .set(state::value.eq(diesel::upsert::excluded(state::value)))
            .cached()
            .execute($conn)
            .await
    };
    (mysql: $conn:expr, $row:expr, $source:expr) => {
        diesel::insert_into(state::table)
            .values(
                $source.select((
                    runs::id,
                    $row.state_key
                        .as_str()
                        .into_sql::<diesel::sql_types::Text>(),
                    (&$row.value).into_sql::<$crate::schema::Json>(),
                )),
            )
            .into_columns((state::run_id, state::state_key, state::value))
            .on_conflict(diesel::dsl::DuplicatedKeys)
            .do_update()
            .set(state::value.eq(&$row.value))
            .cached()
            .execute($conn)
            .await
    };
}

/// The run `$id`'s row if it takes a write: not settled.
macro_rules! unsettled_run {
    ($id:expr) => {
        runs::table
            .filter(runs::id.eq($id))
            .filter(runs::status.eq_any(leasable_texts()))
    };
}

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
        let (id, offset) = (&row.run_id, self.lease_offset());
        let written = match token.map(stored_token) {
            None => by_returning!(self, op, parent: run,
                |conn| upsert_state!(returning: conn, row, unsettled_run!(id)),
                mysql: |conn| upsert_state!(mysql: conn, row, unsettled_run!(id)))?,
            Some(token) => by_returning!(self, op, parent: run,
                |conn| upsert_state!(returning: conn, row, held(now_sql(&*conn), id, token, offset)),
                mysql: |conn| upsert_state!(mysql: conn, row, held(now_sql(&*conn), id, token, offset)))?,
        };
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
