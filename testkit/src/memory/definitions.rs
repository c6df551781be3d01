//! [`DefinitionStore`] for [`MemoryStore`]: workflows once per (app,
//! scope, name), published versions once per (workflow, hash), the active
//! version, and activations.

use flowstate_core::limits::checked;
use flowstate_core::ports::DefinitionStore;
use flowstate_core::ports::checks;
use flowstate_core::{
    Activation, ActivationId, Error, Inserted, NewActivation, NewPublishedVersion, NewWorkflow,
    PublishedVersion, PublishedVersionId, Result, Workflow, WorkflowId,
};

use super::MemoryStore;

impl DefinitionStore for MemoryStore {
    async fn create_workflow(&self, workflow: NewWorkflow) -> Result<Inserted<Workflow>> {
        checks::create_workflow(&self.limits, &workflow)?;
        let now = self.now();
        let mut tables = self.lock();
        let t = &mut tables.events;
        let key = (workflow.app_id, workflow.scope_id, workflow.name);
        if let Some(id) = t.workflow_by_name.get(&key) {
            return Ok(Inserted {
                record: t.workflows[id].clone(),
                inserted: false,
            });
        }
        let record = Workflow {
            id: WorkflowId::generate(),
            app_id: key.0.clone(),
            scope_id: key.1.clone(),
            name: key.2.clone(),
            enabled: true,
            active_version: None,
            created_at: now,
        };
        t.workflow_by_name.insert(key, record.id);
        t.workflows.insert(record.id, record.clone());
        Ok(Inserted {
            record,
            inserted: true,
        })
    }

    async fn get_workflow(&self, id: WorkflowId) -> Result<Workflow> {
        self.lock().events.workflow_mut(id).map(|w| w.clone())
    }

    async fn list_workflows(&self, app_id: &str, scope_id: &str) -> Result<Vec<Workflow>> {
        checks::list_workflows(&self.limits, app_id, scope_id)?;
        let tables = self.lock();
        let mut out: Vec<Workflow> = tables
            .events
            .workflows
            .values()
            .filter(|w| w.app_id == app_id && w.scope_id == scope_id)
            .cloned()
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn set_workflow_enabled(&self, id: WorkflowId, enabled: bool) -> Result<Workflow> {
        let mut tables = self.lock();
        let workflow = tables.events.workflow_mut(id)?;
        workflow.enabled = enabled;
        Ok(workflow.clone())
    }

    async fn publish_version(
        &self,
        version: NewPublishedVersion,
    ) -> Result<Inserted<PublishedVersion>> {
        let (version, _) = checked(version, |v| checks::publish_version(&self.limits, v))?;
        let now = self.now();
        let mut tables = self.lock();
        let t = &mut tables.events;
        t.workflow_mut(version.workflow)?;
        let existing = t
            .versions
            .values()
            .find(|v| v.workflow == version.workflow && v.hash == version.hash)
            .cloned();
        let (record, inserted) = if let Some(record) = existing {
            (record, false)
        } else {
            let record = PublishedVersion {
                id: PublishedVersionId::generate(),
                workflow: version.workflow,
                hash: version.hash,
                definition: version.definition,
                created_at: now,
            };
            t.versions.insert(record.id, record.clone());
            (record, true)
        };
        t.workflow_mut(record.workflow)?.active_version = Some(record.id);
        Ok(Inserted { record, inserted })
    }

    async fn list_versions(&self, workflow: WorkflowId) -> Result<Vec<PublishedVersion>> {
        let tables = self.lock();
        let mut out: Vec<PublishedVersion> = tables
            .events
            .versions
            .values()
            .filter(|v| v.workflow == workflow)
            .cloned()
            .collect();
        out.sort_by_key(|v| (v.created_at, v.id));
        Ok(out)
    }

    async fn create_activation(&self, activation: NewActivation) -> Result<Activation> {
        let (activation, _) = checked(activation, |a| checks::create_activation(&self.limits, a))?;
        let now = self.now();
        let mut tables = self.lock();
        let t = &mut tables.events;
        t.workflow_mut(activation.workflow)?;
        if t.versions
            .get(&activation.version)
            .is_none_or(|v| v.workflow != activation.workflow)
        {
            return Err(Error::PublishedVersionNotFound {
                workflow: activation.workflow,
                version: activation.version,
            });
        }
        let record = Activation {
            id: ActivationId::generate(),
            workflow: activation.workflow,
            version: activation.version,
            event_type: activation.event_type,
            enabled: true,
            authorization: activation.authorization,
            created_at: now,
        };
        t.activations.insert(record.id, record.clone());
        Ok(record)
    }

    async fn set_activation_enabled(&self, id: ActivationId, enabled: bool) -> Result<Activation> {
        let mut tables = self.lock();
        let activation = tables
            .events
            .activations
            .get_mut(&id)
            .ok_or(Error::ActivationNotFound(id))?;
        activation.enabled = enabled;
        Ok(activation.clone())
    }

    async fn list_activations(&self, workflow: WorkflowId) -> Result<Vec<Activation>> {
        let tables = self.lock();
        let mut out: Vec<Activation> = tables
            .events
            .activations
            .values()
            .filter(|a| a.workflow == workflow)
            .cloned()
            .collect();
        out.sort_by_key(|a| (a.created_at, a.id));
        Ok(out)
    }
}
