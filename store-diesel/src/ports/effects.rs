//! [`EffectJournal`] for [`DieselStore`], in the diesel DSL: a begin is an
//! insert that skips a key already taken, then one read of the row; the
//! begin whose id the row holds started the effect. A settle is one
//! `UPDATE` guarded by `outcome IS NULL`.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::Value;

use flowstate_core::backend::decode_json;
use flowstate_core::ports::EffectJournal;
use flowstate_core::ports::checks;
use flowstate_core::{EffectBegin, Error, Result, RunId, StrandedEffect, Timestamp};

use crate::backend::on_connection;
use crate::dialect::Connection;
use crate::rows::effects::EffectRow;
use crate::rows::parse_id;
use crate::schema::{JsonText, flowstate_effects as effects};
use crate::store::DieselStore;

impl EffectJournal for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, key = %key))]
    async fn begin_effect(&self, run: RunId, key: &str) -> Result<EffectBegin> {
        checks::begin_effect(&self.config.limits, key)?;
        let op = "begin_effect";
        let mine = uuid::Uuid::now_v7().to_string();
        let row = EffectRow {
            run_id: run.to_string(),
            effect_key: key.to_owned(),
            began_by: mine.clone(),
            outcome: None,
            began_at: self.now(),
            settled_at: None,
        };
        on_connection!(self, op, parent: run, |conn| conn.insert_effect(&row).await)?;
        let stored: EffectRow = on_connection!(self, op, |conn| effects::table
            .find((&row.run_id, &row.effect_key))
            .select(EffectRow::as_select())
            .first(conn)
            .await)?;
        Ok(match stored.outcome {
            _ if stored.began_by == mine => EffectBegin::Started,
            Some(outcome) => {
                EffectBegin::Settled(decode_json("effect outcome", &row.run_id, &outcome.0)?)
            }
            None => EffectBegin::InFlight {
                began_at: Timestamp::from_micros(stored.began_at),
            },
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, key = %key))]
    async fn settle_effect(&self, run: RunId, key: &str, outcome: &Value) -> Result<()> {
        let op = "settle_effect";
        let outcome = JsonText(checks::settle_effect(&self.config.limits, key, outcome)?);
        let (id, now) = (run.to_string(), self.now());
        let settled = on_connection!(self, op, |conn| diesel::update(
            effects::table
                .filter(effects::run_id.eq(&id))
                .filter(effects::effect_key.eq(key))
                .filter(effects::outcome.is_null())
        )
        .set((
            effects::outcome.eq(Some(&outcome)),
            effects::settled_at.eq(Some(now)),
        ))
        .execute(conn)
        .await)?;
        if settled == 1 {
            return Ok(());
        }
        // Settled already (a no-op), or never begun (error path only).
        let found: Option<String> = on_connection!(self, op, |conn| effects::table
            .find((&id, key))
            .select(effects::run_id)
            .first(conn)
            .await
            .optional())?;
        match found {
            Some(_) => Ok(()),
            None => Err(Error::EffectNotFound {
                run,
                key: key.to_owned(),
            }),
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn stranded_effects(&self, older_than: Duration) -> Result<Vec<StrandedEffect>> {
        let op = "stranded_effects";
        let cutoff = Timestamp::from_micros(self.now())
            .minus(older_than)
            .as_micros();
        let rows: Vec<(String, String, i64)> = on_connection!(self, op, |conn| effects::table
            .filter(effects::settled_at.is_null())
            .filter(effects::began_at.le(cutoff))
            .order((effects::began_at, effects::run_id, effects::effect_key))
            .select((effects::run_id, effects::effect_key, effects::began_at))
            .load(conn)
            .await)?;
        rows.into_iter()
            .map(|(run, key, began_at)| {
                Ok(StrandedEffect {
                    run: parse_id("effect run id", &run, &run)?,
                    key,
                    began_at: Timestamp::from_micros(began_at),
                })
            })
            .collect()
    }
}
