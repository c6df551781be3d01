//! [`ChildRunStore`] for [`DieselStore`]: the children inserted skipping
//! the keys already taken (`ON CONFLICT (idempotency_key) DO NOTHING`,
//! MySQL's `ON DUPLICATE KEY UPDATE id = id`; one multi-row `INSERT` on the
//! servers, one `BEGIN IMMEDIATE` write on SQLite: each dialect's
//! `children.rs`, through [`by_dialect!`]),
//! then one `SELECT` of the children by key, so any number of racing calls
//! create each child once and all answer the same runs.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::ports::ChildRunStore;
use flowstate_core::ports::checks;
use flowstate_core::{Error, Inserted, NewChild, Result, Run, RunId, Timestamp};

use crate::backend::{by_dialect, on_connection};
use crate::rows::RunRow;
use crate::schema::flowstate_runs as runs;
use crate::store::DieselStore;

impl ChildRunStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %parent, n = children.len()))]
    async fn create_children(
        &self,
        parent: RunId,
        children: Vec<NewChild>,
    ) -> Result<Vec<Inserted<Run>>> {
        let op = "create_children";
        let encoded = checks::create_children(&self.config.limits, parent, children)?;
        let now = Timestamp::from_micros(self.now());
        let records: Vec<Run> = encoded
            .iter()
            .map(|(run, _)| run.clone().into_run(RunId::generate(), now))
            .collect();
        let rows: Vec<RunRow> = records
            .iter()
            .zip(&encoded)
            .map(|(run, (_, input))| RunRow::new(run, input.clone()))
            .collect();
        let keys: Vec<String> = records
            .iter()
            .map(|run| run.idempotency_key.clone().expect("children are keyed"))
            .collect();
        let _inserted: usize = by_dialect!(self, insert_children(parent, rows))?;
        let stored: Vec<RunRow> = on_connection!(self, op, |conn| runs::table
            .filter(runs::idempotency_key.eq_any(&keys))
            .select(RunRow::as_select())
            .load(conn)
            .await)?;
        let mut by_key: HashMap<String, Run> = HashMap::with_capacity(stored.len());
        for row in stored {
            let run = Run::try_from(row)?;
            if let Some(key) = run.idempotency_key.clone() {
                by_key.insert(key, run);
            }
        }
        let mut answers = Vec::with_capacity(records.len());
        for (mine, key) in records.into_iter().zip(keys) {
            // A child deleted between the insert and the read is gone: the
            // caller sees it missing as a retryable failure.
            let stored = by_key.remove(&key).ok_or_else(|| {
                Error::backend(op, true, format!("child {key} disappeared while created"))
            })?;
            let inserted = stored.id == mine.id;
            answers.push(Inserted {
                record: if inserted { mine } else { stored },
                inserted,
            });
        }
        tracing::debug!(
            created = answers.iter().filter(|a| a.inserted).count(),
            "children created"
        );
        Ok(answers)
    }
}
