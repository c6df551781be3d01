//! [`VersionStore`] for [`MemoryStore`]: workflow graphs stored once per
//! (workflow, hash), active or proposed as drafts.

use flowstate_core::limits::checked;
use flowstate_core::ports::VersionStore;
use flowstate_core::ports::checks;
use flowstate_core::{
    Error, Inserted, NewWorkflowVersion, Result, VersionId, VersionStatus, WorkflowVersion,
};

use super::MemoryStore;

impl MemoryStore {
    /// Stores `version` as `status` with `source`, unless its key is taken.
    fn store_version(
        &self,
        version: NewWorkflowVersion,
        source: Option<&str>,
        status: VersionStatus,
    ) -> Inserted<WorkflowVersion> {
        let now = self.now();
        let mut tables = self.lock();
        let key = (version.workflow, version.graph_hash);
        if let Some(existing) = tables.versions.get(&key) {
            return Inserted {
                record: existing.clone(),
                inserted: false,
            };
        }
        let record = WorkflowVersion {
            id: VersionId::generate(),
            workflow: key.0.clone(),
            graph_hash: key.1.clone(),
            graph: version.graph,
            source: source.map(str::to_owned),
            status,
            created_at: now,
        };
        tables.versions.insert(key, record.clone());
        Inserted {
            record,
            inserted: true,
        }
    }
}

impl VersionStore for MemoryStore {
    async fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> Result<Inserted<WorkflowVersion>> {
        let (version, _) = checked(version, |v| checks::upsert_version(&self.limits, v))?;
        Ok(self.store_version(version, None, VersionStatus::Active))
    }

    async fn propose_version(
        &self,
        version: NewWorkflowVersion,
        source: Option<&str>,
    ) -> Result<Inserted<WorkflowVersion>> {
        let (version, _) = checked(version, |v| {
            checks::propose_version(&self.limits, v, source)
        })?;
        Ok(self.store_version(version, source, VersionStatus::Draft))
    }

    async fn set_version_status(
        &self,
        id: VersionId,
        to: VersionStatus,
    ) -> Result<WorkflowVersion> {
        let mut tables = self.lock();
        let version = tables
            .versions
            .values_mut()
            .find(|v| v.id == id)
            .ok_or(Error::VersionNotFound(id))?;
        if !version.status.can_transition_to(to) {
            return Err(Error::IllegalVersionTransition {
                version: id,
                from: version.status,
                to,
            });
        }
        version.status = to;
        Ok(version.clone())
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
