//! [`VersionStore`] for [`DieselStore`]: a workflow graph stored once per
//! (workflow, hash), active or proposed as a draft with its source, in the
//! diesel DSL for every dialect. A draft is accepted or declined by one
//! `UPDATE` guarded on `status = 'draft'`, read back by id after; only
//! when it matched nothing is the row read to tell an unknown id from an
//! illegal move.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::limits::checked;
use flowstate_core::ports::VersionStore;
use flowstate_core::ports::checks;
use flowstate_core::{
    Error, Inserted, NewWorkflowVersion, Result, VersionId, VersionStatus, WorkflowVersion,
};

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

    /// Version `id`'s row, if any.
    async fn version_by_id(&self, id: &str) -> Result<Option<VersionRow>> {
        on_connection!(self, "set_version_status", |conn| versions::table
            .find(id)
            .select(VersionRow::as_select())
            .first(conn)
            .await
            .optional())
    }

    /// Stores `version` (its graph checked, as JSON text) as `status` with
    /// `source`, unless its key is taken: then answers the holder.
    async fn store_version(
        &self,
        op: &'static str,
        version: NewWorkflowVersion,
        graph: String,
        source: Option<&str>,
        status: VersionStatus,
    ) -> Result<Inserted<WorkflowVersion>> {
        for _ in 0..IDEMPOTENT_TRIES {
            let row = VersionRow {
                id: VersionId::generate().to_string(),
                workflow: version.workflow.clone(),
                graph_hash: version.graph_hash.clone(),
                graph: JsonText(graph.clone()),
                created_at: self.now(),
                source: source.map(str::to_owned),
                status: status.as_str().to_owned(),
            };
            // The unique (workflow, graph_hash) decides. Whether this call
            // wrote the row is told by the affected rows, except on MySQL
            // ([`DieselStore::inserts_tell_skips`]): there the holder is
            // read, as for runs. No foreign key on this table, so MySQL's
            // `INSERT IGNORE` hides nothing.
            let written = on_connection!(self, op, |conn| {
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
            op,
            true,
            "the stored version kept disappearing",
        ))
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
        let active = VersionStatus::Active;
        self.store_version("upsert_version", version, graph, None, active)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %version.workflow, hash = %version.graph_hash))]
    async fn propose_version(
        &self,
        version: NewWorkflowVersion,
        source: Option<&str>,
    ) -> Result<Inserted<WorkflowVersion>> {
        let (version, graph) = checked(version, |v| {
            checks::propose_version(&self.config.limits, v, source)
        })?;
        let draft = VersionStatus::Draft;
        self.store_version("propose_version", version, graph, source, draft)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(version = %id, to = %to))]
    async fn set_version_status(
        &self,
        id: VersionId,
        to: VersionStatus,
    ) -> Result<WorkflowVersion> {
        let id_text = id.to_string();
        let draft = VersionStatus::Draft;
        // A move the machine refuses from a draft is never sent: it matches
        // nothing whatever the row holds.
        let moved = if draft.can_transition_to(to) {
            on_connection!(self, "set_version_status", |conn| diesel::update(
                versions::table
                    .filter(versions::id.eq(&id_text))
                    .filter(versions::status.eq(draft.as_str()))
            )
            .set(versions::status.eq(to.as_str()))
            .execute(conn)
            .await)?
        } else {
            0
        };
        let row = self
            .version_by_id(&id_text)
            .await?
            .ok_or(Error::VersionNotFound(id))?;
        let version = WorkflowVersion::try_from(row)?;
        if moved == 1 {
            return Ok(version);
        }
        Err(Error::IllegalVersionTransition {
            version: id,
            from: version.status,
            to,
        })
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
