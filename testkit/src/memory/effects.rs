//! [`EffectJournal`] for [`MemoryStore`]: one entry per (run, effect key).

use std::time::Duration;

use flowstate_core::ports::EffectJournal;
use flowstate_core::ports::checks;
use flowstate_core::{EffectBegin, Error, Result, RunId, StrandedEffect, Timestamp};
use serde_json::Value;

use super::MemoryStore;

/// An effect begun, and its outcome once settled.
#[derive(Clone, Debug)]
pub(super) struct EffectRow {
    began_at: Timestamp,
    outcome: Option<Value>,
}

impl EffectJournal for MemoryStore {
    async fn begin_effect(&self, run: RunId, key: &str) -> Result<EffectBegin> {
        checks::begin_effect(&self.limits, key)?;
        let now = self.now();
        let mut tables = self.lock();
        tables.run(run)?;
        if let Some(row) = tables.effects.get(&(run, key.to_owned())) {
            return Ok(match &row.outcome {
                Some(outcome) => EffectBegin::Settled(outcome.clone()),
                None => EffectBegin::InFlight {
                    began_at: row.began_at,
                },
            });
        }
        let row = EffectRow {
            began_at: now,
            outcome: None,
        };
        tables.effects.insert((run, key.to_owned()), row);
        Ok(EffectBegin::Started)
    }

    async fn settle_effect(&self, run: RunId, key: &str, outcome: &Value) -> Result<()> {
        checks::settle_effect(&self.limits, key, outcome)?;
        let mut tables = self.lock();
        let row = tables
            .effects
            .get_mut(&(run, key.to_owned()))
            .ok_or_else(|| Error::EffectNotFound {
                run,
                key: key.to_owned(),
            })?;
        if row.outcome.is_none() {
            row.outcome = Some(outcome.clone());
        }
        Ok(())
    }

    async fn stranded_effects(&self, older_than: Duration) -> Result<Vec<StrandedEffect>> {
        let cutoff = self.now().minus(older_than);
        let tables = self.lock();
        let mut stranded: Vec<StrandedEffect> = tables
            .effects
            .iter()
            .filter(|((run, _), row)| {
                row.outcome.is_none() && row.began_at <= cutoff && tables.runs.contains_key(run)
            })
            .map(|((run, key), row)| StrandedEffect {
                run: *run,
                key: key.clone(),
                began_at: row.began_at,
            })
            .collect();
        stranded.sort_by(|a, b| (a.began_at, a.run, &a.key).cmp(&(b.began_at, b.run, &b.key)));
        Ok(stranded)
    }
}
