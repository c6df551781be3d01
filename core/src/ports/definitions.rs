//! [`DefinitionStore`]: workflows, their published versions and their
//! activations, the definitions that events are matched against (the rules
//! are in [`events`](crate::events)).
//!
//! A trait of its own, so a backend without events keeps compiling. Like
//! every port, each method is one atomic unit of work, checks its input
//! with the backend's [`InputLimits`](crate::InputLimits) first (writing
//! nothing if it is refused), and answers unknown ids with typed errors.

use std::future::Future;

use crate::error::Result;
use crate::events::{
    Activation, NewActivation, NewPublishedVersion, NewWorkflow, PublishedVersion, Workflow,
};
use crate::ids::{ActivationId, WorkflowId};
use crate::records::Inserted;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::error::Error;

/// Workflow definitions, their published versions and their activations.
pub trait DefinitionStore: Send + Sync {
    /// Creates a workflow, enabled, with no active version. A second create
    /// of the same (app, scope, name), however many race, returns the first,
    /// `inserted: false`.
    fn create_workflow(
        &self,
        workflow: NewWorkflow,
    ) -> impl Future<Output = Result<Inserted<Workflow>>> + Send;

    /// Reads one workflow; an unknown id is [`Error::WorkflowNotFound`].
    fn get_workflow(&self, id: WorkflowId) -> impl Future<Output = Result<Workflow>> + Send;

    /// The workflows of an app and scope, by name.
    fn list_workflows(
        &self,
        app_id: &str,
        scope_id: &str,
    ) -> impl Future<Output = Result<Vec<Workflow>>> + Send;

    /// Enables or disables a workflow and answers it as written.
    fn set_workflow_enabled(
        &self,
        id: WorkflowId,
        enabled: bool,
    ) -> impl Future<Output = Result<Workflow>> + Send;

    /// Publishes a version and makes it the workflow's active one, in one
    /// transaction. Publishing a (workflow, hash) already published stores
    /// nothing new, answers the first with `inserted: false`, and makes it
    /// active again. An unknown workflow is [`Error::WorkflowNotFound`].
    fn publish_version(
        &self,
        version: NewPublishedVersion,
    ) -> impl Future<Output = Result<Inserted<PublishedVersion>>> + Send;

    /// The published versions of a workflow, oldest first.
    fn list_versions(
        &self,
        workflow: WorkflowId,
    ) -> impl Future<Output = Result<Vec<PublishedVersion>>> + Send;

    /// Creates an activation, enabled. A version that is not the workflow's
    /// is [`Error::PublishedVersionNotFound`].
    fn create_activation(
        &self,
        activation: NewActivation,
    ) -> impl Future<Output = Result<Activation>> + Send;

    /// Enables or disables an activation. Events already recorded keep the
    /// deliveries they pinned.
    fn set_activation_enabled(
        &self,
        id: ActivationId,
        enabled: bool,
    ) -> impl Future<Output = Result<Activation>> + Send;

    /// The activations of a workflow, oldest first.
    fn list_activations(
        &self,
        workflow: WorkflowId,
    ) -> impl Future<Output = Result<Vec<Activation>>> + Send;
}
