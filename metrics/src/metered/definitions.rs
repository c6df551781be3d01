//! [`DefinitionStore`] for [`Metered`]: passed through, nothing counted.

use flowstate_core::ports::DefinitionStore;
use flowstate_core::{
    Activation, ActivationId, Inserted, NewActivation, NewPublishedVersion, NewWorkflow,
    PublishedVersion, Result, Workflow, WorkflowId,
};

use super::Metered;

impl<S: DefinitionStore> DefinitionStore for Metered<S> {
    async fn create_workflow(&self, workflow: NewWorkflow) -> Result<Inserted<Workflow>> {
        self.inner.create_workflow(workflow).await
    }

    async fn get_workflow(&self, id: WorkflowId) -> Result<Workflow> {
        self.inner.get_workflow(id).await
    }

    async fn list_workflows(&self, app_id: &str, scope_id: &str) -> Result<Vec<Workflow>> {
        self.inner.list_workflows(app_id, scope_id).await
    }

    async fn set_workflow_enabled(&self, id: WorkflowId, enabled: bool) -> Result<Workflow> {
        self.inner.set_workflow_enabled(id, enabled).await
    }

    async fn publish_version(
        &self,
        version: NewPublishedVersion,
    ) -> Result<Inserted<PublishedVersion>> {
        self.inner.publish_version(version).await
    }

    async fn list_versions(&self, workflow: WorkflowId) -> Result<Vec<PublishedVersion>> {
        self.inner.list_versions(workflow).await
    }

    async fn create_activation(&self, activation: NewActivation) -> Result<Activation> {
        self.inner.create_activation(activation).await
    }

    async fn set_activation_enabled(&self, id: ActivationId, enabled: bool) -> Result<Activation> {
        self.inner.set_activation_enabled(id, enabled).await
    }

    async fn list_activations(&self, workflow: WorkflowId) -> Result<Vec<Activation>> {
        self.inner.list_activations(workflow).await
    }
}
