//! [`VersionStore`] for [`DieselStore`]: a workflow graph stored once per
//! (workflow, hash), in the diesel DSL for every dialect.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::limits::checked;
use flowstate_core::ports::VersionStore;
use flowstate_core::ports::checks;
use flowstate_core::{Error, Inserted, NewWorkflowVersion, Result, VersionId, WorkflowVersion};

use super::runs::IDEMPOTENT_TRIES;
use crate::backend::on_connection;
use crate::rows::VersionRow;
use crate::schema::{JsonText, flowstate_workflow_versions as versions};
use crate::store::DieselStore;

impl DieselStore {
    /// The stored version of (workflow, hash), if any.
    async fn version_row(&self, workflow: &str, graph_hash: &str) -> Result<Option<VersionRow>> {
        on_connection!(self, "get_version", |conn| versions::table
            .filter(versions::workflow.eq(workflow))
            .filter(versions::graph_hash.eq(graph_hash))
            .select(VersionRow::as_select())
            .first(conn)
            .await
            .optional())
    }
}

impl VersionStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %version.workflow, hash = %version.graph_hash))]
    async fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> Result<Inserted<WorkflowVersion>> {
        let (version, graph) =
            checked(version, |v| checks::upsert_version(&self.config.limits, v))?;
        for _ in 0..IDEMPOTENT_TRIES {
            let row = VersionRow {
                id: VersionId::generate().to_string(),
                workflow: version.workflow.clone(),
                graph_hash: version.graph_hash.clone(),
                graph: JsonText(graph.clone()),
                created_at: self.now(),
            };
            // The unique (workflow, graph_hash) decides. Whether this call
            // wrote the row is told by the affected rows, except on MySQL
            // ([`DieselStore::inserts_tell_skips`]): there the holder is
            // read, as for runs. No foreign key on this table, so MySQL's
            // `INSERT IGNORE` hides nothing.
            let written = on_connection!(self, "upsert_version", |conn| {
                diesel::insert_into(versions::table)
                    .values(&row)
                    .on_conflict_do_nothing()
                    .execute(conn)
                    .await
            })?;
            if self.inserts_tell_skips() && written == 1 {
                return Ok(Inserted {
                    record: WorkflowVersion::try_from(row)?,
                    inserted: true,
                });
            }
            // Read the version that holds the key, in a statement of its own
            // so it sees a racing upsert that committed meanwhile.
            if let Some(stored) = self.version_row(&row.workflow, &row.graph_hash).await? {
                let inserted = stored.id == row.id;
                return Ok(Inserted {
                    record: WorkflowVersion::try_from(stored)?,
                    inserted,
                });
            }
        }
        Err(Error::backend(
            "upsert_version",
            true,
            "the stored version kept disappearing",
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %workflow, hash = %graph_hash))]
    async fn get_version(
        &self,
        workflow: &str,
        graph_hash: &str,
    ) -> Result<Option<WorkflowVersion>> {
        let limits = &self.config.limits;
        checks::get_version(limits, workflow, graph_hash)?;
        self.version_row(workflow, graph_hash)
            .await?
            .map(WorkflowVersion::try_from)
            .transpose()
    }
}
