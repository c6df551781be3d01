//! [`VersionStore`] for [`Metered`]: passed through, nothing counted.

use flowstate_core::ports::VersionStore;
use flowstate_core::{
    Inserted, NewWorkflowVersion, Result, VersionId, VersionStatus, WorkflowVersion,
};

use super::Metered;

impl<S: VersionStore> VersionStore for Metered<S> {
    async fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> Result<Inserted<WorkflowVersion>> {
        self.inner.upsert_version(version).await
    }

    async fn get_version(
        &self,
        workflow: &str,
        graph_hash: &str,
    ) -> Result<Option<WorkflowVersion>> {
        self.inner.get_version(workflow, graph_hash).await
    }

    async fn propose_version(
        &self,
        version: NewWorkflowVersion,
        source: Option<&str>,
    ) -> Result<Inserted<WorkflowVersion>> {
        self.inner.propose_version(version, source).await
    }

    async fn set_version_status(
        &self,
        id: VersionId,
        to: VersionStatus,
    ) -> Result<WorkflowVersion> {
        self.inner.set_version_status(id, to).await
    }
}
