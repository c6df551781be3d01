//! [`BatchStepStore`] for [`DieselStore`]: the checks and the per-item
//! answers, written once; the batch statements themselves are each
//! dialect's `batch.rs` (one statement on PostgreSQL, one transaction on
//! MySQL and SQLite).

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::batch::repeated_items;
use flowstate_core::limits::{Dismantle, checked};
use flowstate_core::ports::BatchStepStore;
use flowstate_core::ports::checks;
use flowstate_core::{BatchClaim, Completion, Error, Result, Step, StepClaim, StepId};

use crate::backend::{by_dialect, on_connection};
use crate::rows::BatchItem;
use crate::rows::{StepRow, convert};
use crate::schema::flowstate_steps as steps;
use crate::store::DieselStore;

impl DieselStore {
    /// Each of `ids` that exists, read after a batch left them unmoved (the
    /// error path only).
    async fn steps_of(&self, ids: &[StepId]) -> Result<HashMap<String, Step>> {
        let op = "complete_batch";
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let rows: Vec<StepRow> = on_connection!(self, op, |conn| steps::table
            .filter(steps::id.eq_any(&ids))
            .select(StepRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter()
            .map(|row| Ok((row.id.clone(), Step::try_from(row)?)))
            .collect()
    }
}

impl BatchStepStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(limit = claim.limit))]
    async fn claim_batch(&self, claim: &BatchClaim) -> Result<Vec<Step>> {
        checks::claim_batch(&self.config.limits, claim)?;
        let limit = claim.effective_limit();
        if limit == 0 {
            return Ok(Vec::new());
        }
        let function = claim.function.as_deref();
        let rows = by_dialect!(self, claim_batch(limit, function))?;
        let mut claimed: Vec<Step> = convert(rows)?;
        claimed.sort_by_key(|step| (step.created_at, step.id));
        tracing::debug!(claimed = claimed.len(), "batch claimed");
        Ok(claimed)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(items = completions.len()))]
    async fn complete_batch(
        &self,
        completions: Vec<(StepClaim, Completion)>,
    ) -> Result<Vec<Result<()>>> {
        let mut repeated = repeated_items(&completions);
        let mut outcomes: Vec<Option<Result<()>>> = Vec::with_capacity(completions.len());
        let mut items = Vec::new();
        for (index, (claim, completion)) in completions.into_iter().enumerate() {
            let (id, attempt) = (claim.step, claim.attempt);
            let to = completion.target();
            let transition = completion.into_transition();
            if let Some(error) = repeated.remove(&index) {
                transition.dismantle();
                outcomes.push(Some(Err(error)));
                continue;
            }
            match checked(transition, |t| {
                checks::complete_batch(&self.config.limits, t)
            }) {
                Ok((transition, payload)) => {
                    let payload = payload.unwrap_or_else(|| "null".to_owned());
                    let item = BatchItem {
                        id,
                        attempt,
                        to,
                        payload,
                    };
                    items.push((index, item, transition));
                    outcomes.push(None);
                }
                Err(err) => outcomes.push(Some(Err(err))),
            }
        }
        if !items.is_empty() {
            let batch: Vec<BatchItem> = items.iter().map(|(_, item, _)| item.clone()).collect();
            let moved: HashSet<String> = by_dialect!(self, complete_batch(&batch))?;
            let unmoved: Vec<StepId> = batch
                .iter()
                .filter(|item| !moved.contains(&item.id.to_string()))
                .map(|item| item.id)
                .collect();
            let found = if unmoved.is_empty() {
                HashMap::new()
            } else {
                self.steps_of(&unmoved).await?
            };
            for (index, item, transition) in items {
                let key = item.id.to_string();
                outcomes[index] = Some(if moved.contains(&key) {
                    Ok(())
                } else {
                    let claim = StepClaim {
                        step: item.id,
                        attempt: item.attempt,
                    };
                    match found.get(&key) {
                        Some(step) => claim.explain_refusal(step, &transition),
                        None => Err(Error::StepNotFound(item.id)),
                    }
                });
            }
        }
        Ok(outcomes
            .into_iter()
            .map(|outcome| outcome.unwrap_or_else(|| unreachable!("every item is answered")))
            .collect())
    }
}
