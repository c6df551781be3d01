//! [`DieselStore`]: one type a user opens from a URL, implementing every
//! port by handing the call to the dialect the URL named.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use flowstate_core::ports::{RunStore, StepStore, VersionStore};
use flowstate_core::{
    Inserted, NewRun, NewStep, NewWorkflowVersion, Page, Run, RunId, RunQuery, RunStatus, Step,
    StepAttempt, StepId, StepStatus, StepTransition, WorkflowVersion,
};

use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::url::{DatabaseUrl, Dialect};

/// A flowstate store on PostgreSQL, MySQL/MariaDB or SQLite.
///
/// Open it with [`DieselStore::open`]; apply the schema first with
/// [`crate::migrate::up`] (or [`DieselStore::open_migrated`]). A build
/// with only some of the `postgres`, `mysql` and `sqlite` features compiles
/// only those drivers, and a URL naming another is a typed error.
#[derive(Debug)]
#[non_exhaustive]
pub enum DieselStore {
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(crate::postgres::PgStore),
    /// MySQL or MariaDB.
    #[cfg(feature = "mysql")]
    Mysql(crate::mysql::MysqlStore),
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(crate::sqlite::SqliteStore),
}

/// Hands a call to the dialect's store.
macro_rules! dispatch {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            #[cfg(feature = "postgres")]
            DieselStore::Postgres($store) => $call,
            #[cfg(feature = "mysql")]
            DieselStore::Mysql($store) => $call,
            #[cfg(feature = "sqlite")]
            DieselStore::Sqlite($store) => $call,
        }
    };
}

impl DieselStore {
    /// Opens a store on `url` (see [`DatabaseUrl::parse`]) and checks that a
    /// connection can be made. It does not touch the schema.
    pub async fn open(url: &str, config: StoreConfig) -> Result<Self> {
        let parsed = DatabaseUrl::parse(url)?;
        let store = match parsed.dialect {
            #[cfg(feature = "postgres")]
            Dialect::Postgres => {
                Self::Postgres(crate::postgres::PgStore::connect(&parsed.target, config).await?)
            }
            #[cfg(feature = "mysql")]
            Dialect::Mysql => {
                Self::Mysql(crate::mysql::MysqlStore::connect(&parsed.target, config).await?)
            }
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => {
                Self::Sqlite(crate::sqlite::SqliteStore::connect(&parsed.target, config).await?)
            }
            #[allow(unreachable_patterns)]
            other => {
                return Err(Error::UnsupportedUrl {
                    url: format!("{other}://..."),
                    reason: "this build leaves that dialect out (enable its feature)",
                });
            }
        };
        tracing::debug!(dialect = %store.dialect(), "flowstate store opened");
        Ok(store)
    }

    /// Applies pending migrations on `url`, then opens a store on it.
    pub async fn open_migrated(url: &str, config: StoreConfig) -> Result<Self> {
        let applied = crate::migrate::up(url).await?;
        if !applied.is_empty() {
            tracing::info!(?applied, "flowstate migrations applied");
        }
        Self::open(url, config).await
    }

    /// The dialect this store speaks.
    pub fn dialect(&self) -> Dialect {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => Dialect::Postgres,
            #[cfg(feature = "mysql")]
            Self::Mysql(_) => Dialect::Mysql,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Runs SQL text with no binds on a pooled connection: an escape hatch for
    /// tests and operators (it bypasses every guarantee of the ports).
    pub async fn batch_execute(&self, sql: &str) -> flowstate_core::Result<()> {
        dispatch!(self, s => s.batch_execute(sql).await)
    }
}

impl RunStore for DieselStore {
    async fn create_run(&self, run: NewRun) -> flowstate_core::Result<Inserted<Run>> {
        dispatch!(self, s => s.create_run(run).await)
    }

    async fn get_run(&self, id: RunId) -> flowstate_core::Result<Run> {
        dispatch!(self, s => s.get_run(id).await)
    }

    async fn list_runs(&self, query: &RunQuery) -> flowstate_core::Result<Page<Run>> {
        dispatch!(self, s => s.list_runs(query).await)
    }

    async fn set_run_status(&self, id: RunId, to: RunStatus) -> flowstate_core::Result<Run> {
        dispatch!(self, s => s.set_run_status(id, to).await)
    }

    async fn delete_run(&self, id: RunId) -> flowstate_core::Result<()> {
        dispatch!(self, s => s.delete_run(id).await)
    }

    async fn count_children(
        &self,
        parent: RunId,
    ) -> flowstate_core::Result<BTreeMap<RunStatus, u64>> {
        dispatch!(self, s => s.count_children(parent).await)
    }

    async fn write_state(
        &self,
        run: RunId,
        key: &str,
        value: &Value,
    ) -> flowstate_core::Result<()> {
        dispatch!(self, s => s.write_state(run, key, value).await)
    }

    async fn read_state(&self, run: RunId) -> flowstate_core::Result<Map<String, Value>> {
        dispatch!(self, s => s.read_state(run).await)
    }
}

impl StepStore for DieselStore {
    async fn insert_step(&self, step: NewStep) -> flowstate_core::Result<Inserted<Step>> {
        dispatch!(self, s => s.insert_step(step).await)
    }

    async fn get_step(&self, id: StepId) -> flowstate_core::Result<Step> {
        dispatch!(self, s => s.get_step(id).await)
    }

    async fn find_step(&self, run: RunId, name: &str) -> flowstate_core::Result<Step> {
        dispatch!(self, s => s.find_step(run, name).await)
    }

    async fn list_steps(&self, run: RunId) -> flowstate_core::Result<Vec<Step>> {
        dispatch!(self, s => s.list_steps(run).await)
    }

    async fn transition_step(
        &self,
        id: StepId,
        transition: StepTransition,
    ) -> flowstate_core::Result<()> {
        dispatch!(self, s => s.transition_step(id, transition).await)
    }

    async fn create_retry_attempt(
        &self,
        id: StepId,
        start: StepStatus,
    ) -> flowstate_core::Result<()> {
        dispatch!(self, s => s.create_retry_attempt(id, start).await)
    }

    async fn claim_step(
        &self,
        run: RunId,
        name: &str,
        function: &str,
    ) -> flowstate_core::Result<Option<Step>> {
        dispatch!(self, s => s.claim_step(run, name, function).await)
    }

    async fn step_history(&self, run: RunId) -> flowstate_core::Result<Vec<StepAttempt>> {
        dispatch!(self, s => s.step_history(run).await)
    }

    async fn set_branch_taken(&self, id: StepId, branch: &str) -> flowstate_core::Result<()> {
        dispatch!(self, s => s.set_branch_taken(id, branch).await)
    }
}

impl VersionStore for DieselStore {
    async fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> flowstate_core::Result<Inserted<WorkflowVersion>> {
        dispatch!(self, s => s.upsert_version(version).await)
    }

    async fn get_version(
        &self,
        workflow: &str,
        graph_hash: &str,
    ) -> flowstate_core::Result<Option<WorkflowVersion>> {
        dispatch!(self, s => s.get_version(workflow, graph_hash).await)
    }
}
