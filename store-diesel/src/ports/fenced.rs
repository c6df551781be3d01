//! [`FencedWrites`] for [`DieselStore`]: the state write, the step insert
//! and the status move of `state.rs`, `steps.rs` and `runs.rs`, each with
//! the lease guard of `RunLeaseStore::renew` (token, holder, unsettled,
//! unexpired on the database's clock) in the same statement as the write,
//! so a holder whose lease was taken over writes nothing.

use serde_json::Value;

use flowstate_core::ports::FencedWrites;
use flowstate_core::{Inserted, NewStep, Result, Run, RunId, RunStatus, Step};

use crate::store::DieselStore;

impl FencedWrites for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, token))]
    async fn write_state_fenced(
        &self,
        run: RunId,
        token: u64,
        key: &str,
        value: &Value,
    ) -> Result<()> {
        self.put_state(run, key, value, Some(token)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %step.run, name = %step.name, token))]
    async fn insert_step_fenced(&self, token: u64, step: NewStep) -> Result<Inserted<Step>> {
        self.insert_step_under(step, Some(token)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, to = %to, token))]
    async fn set_run_status_fenced(&self, run: RunId, token: u64, to: RunStatus) -> Result<Run> {
        self.set_run_status_under(run, to, None, Some(token)).await
    }
}
