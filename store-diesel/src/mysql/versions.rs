//! [`VersionStore`] for [`MysqlStore`]: workflow graphs stored once per
//! (workflow, hash).

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{
    Inserted, NewWorkflowVersion, Result, VersionId, VersionStore, WorkflowVersion,
};

use super::tx::retry_conflicts;
use super::{Conn, MysqlStore, sql};
use crate::cached::CacheExt;
use crate::error::backend;
use crate::rows::VersionRow;

impl VersionStore for MysqlStore {
    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %version.workflow, hash = %version.graph_hash))]
    async fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> Result<Inserted<WorkflowVersion>> {
        let graph = self.config.limits.encode_version(&version)?;
        let id = VersionId::generate();
        let now = self.now();
        let mut conn = self.pool.get("upsert_version").await?;
        let row = retry_conflicts!(
            "upsert_version",
            upsert(&mut conn, id, &version, &graph, now).await
        )
        .map_err(|err| backend("upsert_version", err))?;
        let record = WorkflowVersion::try_from(row)?;
        let inserted = record.id == id;
        Ok(Inserted { record, inserted })
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn get_version(
        &self,
        workflow: &str,
        graph_hash: &str,
    ) -> Result<Option<WorkflowVersion>> {
        self.config.limits.check_key("workflow", workflow)?;
        self.config.limits.check_key("graph hash", graph_hash)?;
        let mut conn = self.pool.get("get_version").await?;
        let row = select(&mut conn, workflow, graph_hash)
            .await
            .optional()
            .map_err(|err| backend("get_version", err))?;
        row.map(WorkflowVersion::try_from).transpose()
    }
}

/// Inserts the version unless (workflow, hash) is taken, then reads the one
/// that holds it (committed: each statement autocommits).
async fn upsert(
    conn: &mut Conn,
    id: VersionId,
    version: &NewWorkflowVersion,
    graph: &str,
    now: i64,
) -> diesel::QueryResult<VersionRow> {
    diesel::sql_query(sql::INSERT_VERSION)
        .bind::<Text, _>(id.to_string())
        .bind::<Text, _>(&version.workflow)
        .bind::<Text, _>(&version.graph_hash)
        .bind::<Text, _>(graph)
        .bind::<BigInt, _>(now)
        .cached()
        .execute(&mut *conn)
        .await?;
    select(conn, &version.workflow, &version.graph_hash).await
}

async fn select(
    conn: &mut Conn,
    workflow: &str,
    graph_hash: &str,
) -> diesel::QueryResult<VersionRow> {
    diesel::sql_query(sql::SELECT_VERSION)
        .bind::<Text, _>(workflow)
        .bind::<Text, _>(graph_hash)
        .cached()
        .get_result::<VersionRow>(conn)
        .await
}
