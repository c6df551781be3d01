//! [`RunStore`]: runs, their status, their children and their state.
//!
//! One of the three ports of every backend (with
//! [`StepStore`](crate::ports::StepStore) and
//! [`VersionStore`](crate::ports::VersionStore): [`Store`](crate::ports::Store)
//! is all three).

use std::collections::BTreeMap;
use std::future::Future;

use serde_json::{Map, Value};

use crate::error::Result;
use crate::ids::RunId;
use crate::records::{Inserted, NewRun, Page, Run, RunQuery};
use crate::status::RunStatus;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::error::Error;

/// Runs, their status, their children and their state.
pub trait RunStore: Send + Sync {
    /// Creates a run in status `running`.
    ///
    /// With an idempotency key, a second create with the same key (however
    /// many race) returns the first run with `inserted: false`, whatever its
    /// other fields. A parent that does not exist is
    /// [`Error::RunNotFound`]. A key protects for as long as its run is
    /// kept: once the run is deleted (`delete_run`, or a prune of settled
    /// runs past the retention window,
    /// [`RetentionStore`](crate::ports::RetentionStore)) the key is free
    /// and a create with it inserts a new run.
    fn create_run(&self, run: NewRun) -> impl Future<Output = Result<Inserted<Run>>> + Send;

    /// Reads one run.
    fn get_run(&self, id: RunId) -> impl Future<Output = Result<Run>> + Send;

    /// Lists runs matching `query`, newest first by `(created_at, id)`, one
    /// page at a time; `next` is set when the page is full.
    fn list_runs(&self, query: &RunQuery) -> impl Future<Output = Result<Page<Run>>> + Send;

    /// Moves a run to `to` if [`RunStatus::TRANSITIONS`] allows it from its
    /// current status, as one status-guarded write: of two racing moves out
    /// of the same status, at most one succeeds. An illegal move is
    /// [`Error::IllegalRunTransition`] and writes nothing.
    fn set_run_status(&self, id: RunId, to: RunStatus) -> impl Future<Output = Result<Run>> + Send;

    /// [`set_run_status`](Self::set_run_status) that also records the
    /// run's [`output`](Run::output), in the same status-guarded write: an
    /// illegal move is [`Error::IllegalRunTransition`] and writes neither.
    /// A second call replaces the output; a move without one
    /// (`set_run_status`) keeps it. The output is checked like any JSON
    /// input ([`InputLimits`](crate::InputLimits), field `run output`).
    fn set_run_status_with_output(
        &self,
        id: RunId,
        to: RunStatus,
        output: &Value,
    ) -> impl Future<Output = Result<Run>> + Send;

    /// The distinct workflow names that have at least one run, sorted
    /// byte for byte ascending (a dashboard's filter): one read, never a
    /// page through the runs. A name whose runs were all deleted is gone.
    fn list_workflow_names(&self) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Deletes a run with its steps, their history and its state. Its child
    /// runs stay, with no parent.
    fn delete_run(&self, id: RunId) -> impl Future<Output = Result<()>> + Send;

    /// How many children `parent` has in each status (statuses with none are
    /// left out).
    fn count_children(
        &self,
        parent: RunId,
    ) -> impl Future<Output = Result<BTreeMap<RunStatus, u64>>> + Send;

    /// Writes one key of a run's state, in one statement with no
    /// read-modify-write: concurrent writes of different keys never clobber
    /// each other, and a second write of a key replaces the first. The key is
    /// one key whatever it holds (dots, quotes, SQL); the value's JSON type
    /// survives exactly (`[]`, `0`, `false`, `null`, nested). A settled run
    /// is [`Error::RunSettled`] and nothing is written, decided in the same
    /// statement as the write.
    fn write_state(
        &self,
        run: RunId,
        key: &str,
        value: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Reads every key of a run's state.
    fn read_state(&self, run: RunId) -> impl Future<Output = Result<Map<String, Value>>> + Send;
}
