//! [`VersionStore`]: workflow versions, a graph stored once per
//! (workflow, hash), with the source it was built from and its status
//! ([`VersionStatus`]: a draft proposed by tooling is accepted or declined
//! by a person).

use std::future::Future;

use crate::error::Result;
use crate::ids::VersionId;
use crate::records::{Inserted, NewWorkflowVersion, WorkflowVersion};
use crate::status::VersionStatus;
// Named by the docs' links only (see `ports::virtual_users`).
#[allow(unused_imports)]
use crate::error::Error;

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

    /// Proposes a version: stores it as a [`VersionStatus::Draft`] with
    /// `source` (what it was built from), checked like any text against
    /// the backend's limits. Keyed like [`Self::upsert_version`]: if the
    /// (workflow, graph hash) is already stored, whatever its status,
    /// nothing is written and the stored version is answered,
    /// `inserted: false`.
    fn propose_version(
        &self,
        version: NewWorkflowVersion,
        source: Option<&str>,
    ) -> impl Future<Output = Result<Inserted<WorkflowVersion>>> + Send;

    /// Moves version `id` to `to` along [`VersionStatus::TRANSITIONS`]
    /// (a draft is accepted, [`VersionStatus::Active`], or declined), as
    /// one status-guarded write: of racing moves one lands, and the others,
    /// like any move from a status other than draft, are
    /// [`Error::IllegalVersionTransition`]; an unknown id is
    /// [`Error::VersionNotFound`]. Answers the version as moved.
    fn set_version_status(
        &self,
        id: VersionId,
        to: VersionStatus,
    ) -> impl Future<Output = Result<WorkflowVersion>> + Send;
}
