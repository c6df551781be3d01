//! [`VersionStore`]: workflow versions, a graph stored once per
//! (workflow, hash).

use std::future::Future;

use crate::error::Result;
use crate::records::{Inserted, NewWorkflowVersion, WorkflowVersion};

/// Workflow versions: a graph stored once per (workflow, hash).
pub trait VersionStore: Send + Sync {
    /// Stores a version; a second upsert of the same (workflow, graph hash)
    /// changes nothing and returns the first, `inserted: false`.
    fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> impl Future<Output = Result<Inserted<WorkflowVersion>>> + Send;

    /// Reads a version; `None` if the pair was never stored.
    fn get_version(
        &self,
        workflow: &str,
        graph_hash: &str,
    ) -> impl Future<Output = Result<Option<WorkflowVersion>>> + Send;
}
