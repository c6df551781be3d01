//! [`BatchStepStore`] for [`DieselStore`]: the checks and the per-item
//! answers, written once; the batch statements themselves are each
//! dialect's `batch.rs` (one statement on PostgreSQL, one transaction on
//! MySQL and SQLite).

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::batch::repeated_items;
use flowstate_core::{
    BatchClaim, BatchStepStore, Completion, Error, Result, Step, StepId, StepStatus,
};

use super::{DieselStore, by_dialect, on_connection};
use crate::rows::{convert, parse_status};
use crate::schema::flowstate_steps as steps;

/// One completion as a dialect writes it: checked, encoded, its step named
/// by no earlier item of the batch.
#[derive(Clone, Debug)]
pub(crate) struct BatchItem {
    /// The step.
    pub id: StepId,
    /// The status it moves to.
    pub to: StepStatus,
    /// The result or error, as JSON text.
    pub payload: String,
}

impl DieselStore {
    /// The status of each of `ids` that exists, read after a batch left
    /// them unmoved (the error path only).
    async fn statuses_of(&self, ids: &[StepId]) -> Result<HashMap<String, StepStatus>> {
        let op = "complete_batch";
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let rows: Vec<(String, String)> = on_connection!(self, op, |conn| steps::table
            .filter(steps::id.eq_any(&ids))
            .select((steps::id, steps::status))
            .load(conn)
            .await)?;
        rows.into_iter()
            .map(|(id, status)| Ok((id.clone(), parse_status::<StepStatus>(&id, &status)?)))
            .collect()
    }
}

impl BatchStepStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(limit = claim.limit))]
    async fn claim_batch(&self, claim: &BatchClaim) -> Result<Vec<Step>> {
        if let Some(function) = &claim.function {
            self.config.limits.check_key("function", function)?;
        }
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
        completions: Vec<(StepId, Completion)>,
    ) -> Result<Vec<Result<()>>> {
        let mut repeated = repeated_items(&completions);
        let mut outcomes: Vec<Option<Result<()>>> = Vec::with_capacity(completions.len());
        let mut items = Vec::new();
        for (index, (id, completion)) in completions.into_iter().enumerate() {
            let to = completion.target();
            if let Some(error) = repeated.remove(&index) {
                outcomes.push(Some(Err(error)));
                continue;
            }
            match self
                .config
                .limits
                .encode_transition(&completion.into_transition())
            {
                Ok(payload) => {
                    let payload = payload.unwrap_or_else(|| "null".to_owned());
                    items.push((index, BatchItem { id, to, payload }));
                    outcomes.push(None);
                }
                Err(err) => outcomes.push(Some(Err(err))),
            }
        }
        if !items.is_empty() {
            let batch: Vec<BatchItem> = items.iter().map(|(_, item)| item.clone()).collect();
            let moved: HashSet<String> = by_dialect!(self, complete_batch(&batch))?;
            let unmoved: Vec<StepId> = batch
                .iter()
                .filter(|item| !moved.contains(&item.id.to_string()))
                .map(|item| item.id)
                .collect();
            let statuses = if unmoved.is_empty() {
                HashMap::new()
            } else {
                self.statuses_of(&unmoved).await?
            };
            for (index, item) in items {
                let key = item.id.to_string();
                outcomes[index] = Some(if moved.contains(&key) {
                    Ok(())
                } else {
                    match statuses.get(&key) {
                        Some(&from) => Err(Error::IllegalStepTransition {
                            step: item.id,
                            from,
                            to: item.to,
                        }),
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
