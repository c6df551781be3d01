//! Run state: a row per `(run_id, state_key)`, written by one upsert with
//! the key bound, so writers of different keys never touch the same row and
//! nothing is read, modified and written back.

use diesel::sql_query;
use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use flowstate_core::{Error, Result, RunId};

use super::PgStore;
use super::sql::cached;
use crate::error::{backend, is_foreign_key_violation};
use crate::rows::StateRow;
use crate::rows::{joined_to_run, state_map};

impl PgStore {
    /// [`RunStore::write_state`](flowstate_core::RunStore::write_state).
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    pub(super) async fn put_state(&self, run: RunId, key: &str, value: &Value) -> Result<()> {
        self.config.limits.check_key("state key", key)?;
        let value = self.config.limits.encode("state value", value)?;
        let mut conn = self.pool.get("write_state").await?;
        cached(
            sql_query(
                "INSERT INTO flowstate_run_state (run_id, state_key, value) VALUES ($1, $2, $3::jsonb) \
                 ON CONFLICT (run_id, state_key) DO UPDATE SET value = EXCLUDED.value",
            )
            .bind::<Text, _>(run.to_string())
            .bind::<Text, _>(key)
            .bind::<Text, _>(&value),
        )
        .execute(&mut *conn)
        .await
        .map_err(|err| {
            if is_foreign_key_violation(&err) {
                Error::RunNotFound(run)
            } else {
                backend("write_state", err)
            }
        })?;
        Ok(())
    }

    /// [`RunStore::read_state`](flowstate_core::RunStore::read_state), in
    /// one statement: no row is no run, one row with no state is no keys.
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    pub(super) async fn state_of(&self, run: RunId) -> Result<Map<String, Value>> {
        let mut conn = self.pool.get("read_state").await?;
        let rows: Vec<Option<StateRow>> = cached(
            sql_query(
                "SELECT st.state_key, st.value::text AS value FROM flowstate_runs AS r \
                 LEFT JOIN flowstate_run_state AS st ON st.run_id = r.id WHERE r.id = $1",
            )
            .bind::<Text, _>(run.to_string()),
        )
        .load(&mut *conn)
        .await
        .map_err(|err| backend("read_state", err))?;
        state_map(run, joined_to_run(run, rows)?)
    }
}
