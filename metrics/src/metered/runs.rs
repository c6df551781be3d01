//! [`RunStore`] for [`Metered`]: run status moves counted by the status
//! moved to ([`RUN_TRANSITIONS`](names::RUN_TRANSITIONS)); reads and other
//! writes pass through.

use std::collections::BTreeMap;

use flowstate_core::ports::RunStore;
use flowstate_core::{Inserted, NewRun, Page, Result, Run, RunId, RunQuery, RunStatus};
use serde_json::{Map, Value};

use super::Metered;
use crate::names;
use crate::record::count_as;

/// Counts a run status move that `answer` says was written.
pub(super) fn moved<T>(answer: &Result<T>, to: RunStatus) {
    if answer.is_ok() {
        count_as(names::RUN_TRANSITIONS, names::STATUS, to.as_str(), 1);
    }
}

impl<S: RunStore> RunStore for Metered<S> {
    async fn create_run(&self, run: NewRun) -> Result<Inserted<Run>> {
        self.inner.create_run(run).await
    }

    async fn get_run(&self, id: RunId) -> Result<Run> {
        self.inner.get_run(id).await
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<Page<Run>> {
        self.inner.list_runs(query).await
    }

    async fn set_run_status(&self, id: RunId, to: RunStatus) -> Result<Run> {
        let answer = self.inner.set_run_status(id, to).await;
        moved(&answer, to);
        answer
    }

    async fn set_run_status_with_output(
        &self,
        id: RunId,
        to: RunStatus,
        output: &Value,
    ) -> Result<Run> {
        let answer = self.inner.set_run_status_with_output(id, to, output).await;
        moved(&answer, to);
        answer
    }

    async fn list_workflow_names(&self) -> Result<Vec<String>> {
        self.inner.list_workflow_names().await
    }

    async fn delete_run(&self, id: RunId) -> Result<()> {
        self.inner.delete_run(id).await
    }

    async fn count_children(&self, parent: RunId) -> Result<BTreeMap<RunStatus, u64>> {
        self.inner.count_children(parent).await
    }

    async fn write_state(&self, run: RunId, key: &str, value: &Value) -> Result<()> {
        self.inner.write_state(run, key, value).await
    }

    async fn read_state(&self, run: RunId) -> Result<Map<String, Value>> {
        self.inner.read_state(run).await
    }
}
