//! [`VersionStore`] for [`PgStore`]: a workflow graph stored once per
//! (workflow, hash).

use std::sync::LazyLock;

use diesel::sql_query;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{
    Error, Inserted, NewWorkflowVersion, Result, VersionId, VersionStore, WorkflowVersion,
};

use super::PgStore;
use super::runs::IDEMPOTENT_TRIES;
use super::sql::{VERSION_COLUMNS, cached};
use crate::error::backend;
use crate::rows::VersionRow;

static INSERT_VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO flowstate_workflow_versions AS v (id, workflow, graph_hash, graph, created_at) \
         VALUES ($1, $2, $3, $4::jsonb, $5) \
         ON CONFLICT (workflow, graph_hash) DO NOTHING RETURNING {VERSION_COLUMNS}"
    )
});

static GET_VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {VERSION_COLUMNS} FROM flowstate_workflow_versions AS v \
         WHERE v.workflow = $1 AND v.graph_hash = $2"
    )
});

impl VersionStore for PgStore {
    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %version.workflow, hash = %version.graph_hash))]
    async fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> Result<Inserted<WorkflowVersion>> {
        let graph = self.config.limits.encode_version(&version)?;
        for _ in 0..IDEMPOTENT_TRIES {
            let id = VersionId::generate();
            let mut conn = self.pool.get("upsert_version").await?;
            let rows: Vec<VersionRow> = cached(
                sql_query(INSERT_VERSION.as_str())
                    .bind::<Text, _>(id.to_string())
                    .bind::<Text, _>(&version.workflow)
                    .bind::<Text, _>(&version.graph_hash)
                    .bind::<Text, _>(&graph)
                    .bind::<BigInt, _>(self.now().as_micros()),
            )
            .load(&mut *conn)
            .await
            .map_err(|err| backend("upsert_version", err))?;
            drop(conn);
            if let Some(row) = rows.into_iter().next() {
                let record = WorkflowVersion::try_from(row)?;
                return Ok(Inserted {
                    inserted: record.id == id,
                    record,
                });
            }
            // Taken: read the first version, in a statement of its own so it
            // sees a racing upsert that committed meanwhile.
            if let Some(record) = self
                .get_version(&version.workflow, &version.graph_hash)
                .await?
            {
                return Ok(Inserted {
                    record,
                    inserted: false,
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
        limits.check_key("workflow", workflow)?;
        limits.check_key("graph hash", graph_hash)?;
        let mut conn = self.pool.get("get_version").await?;
        let rows: Vec<VersionRow> = cached(
            sql_query(GET_VERSION.as_str())
                .bind::<Text, _>(workflow)
                .bind::<Text, _>(graph_hash),
        )
        .load(&mut *conn)
        .await
        .map_err(|err| backend("get_version", err))?;
        rows.into_iter()
            .next()
            .map(WorkflowVersion::try_from)
            .transpose()
    }
}
