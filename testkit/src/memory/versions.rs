//! [`VersionStore`] for [`MemoryStore`]: workflow graphs stored once per
//! (workflow, hash).

use flowstate_core::limits::checked;
use flowstate_core::ports::VersionStore;
use flowstate_core::ports::checks;
use flowstate_core::{Inserted, NewWorkflowVersion, Result, VersionId, WorkflowVersion};

use super::MemoryStore;

impl VersionStore for MemoryStore {
    async fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> Result<Inserted<WorkflowVersion>> {
        let (version, _) = checked(version, |v| checks::upsert_version(&self.limits, v))?;
        let now = self.now();
        let mut tables = self.lock();
        let key = (version.workflow, version.graph_hash);
        if let Some(existing) = tables.versions.get(&key) {
            return Ok(Inserted {
                record: existing.clone(),
                inserted: false,
            });
        }
        let record = WorkflowVersion {
            id: VersionId::generate(),
            workflow: key.0.clone(),
            graph_hash: key.1.clone(),
            graph: version.graph,
            created_at: now,
        };
        tables.versions.insert(key, record.clone());
        Ok(Inserted {
            record,
            inserted: true,
        })
    }

    async fn get_version(
        &self,
        workflow: &str,
        graph_hash: &str,
    ) -> Result<Option<WorkflowVersion>> {
        checks::get_version(&self.limits, workflow, graph_hash)?;
        let tables = self.lock();
        Ok(tables
            .versions
            .get(&(workflow.to_owned(), graph_hash.to_owned()))
            .cloned())
    }
}
