//! [`VersionStore`] for [`SqliteStore`]: a graph stored once per
//! (workflow, hash), riding on that unique key.

use diesel::sql_types::{BigInt, Text};
use diesel::{OptionalExtension, RunQueryDsl};
use flowstate_core::ports::VersionStore;
use flowstate_core::{Inserted, NewWorkflowVersion, Result, Timestamp, VersionId, WorkflowVersion};

use super::SqliteStore;
use super::query::Sql;
use super::sql;
use crate::rows::VersionRow;

impl VersionStore for SqliteStore {
    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %version.workflow, hash = %version.graph_hash))]
    async fn upsert_version(
        &self,
        version: NewWorkflowVersion,
    ) -> Result<Inserted<WorkflowVersion>> {
        let graph = self.config.limits.encode_version(&version)?;
        let now = self.now();
        let record = WorkflowVersion {
            id: VersionId::generate(),
            workflow: version.workflow,
            graph_hash: version.graph_hash,
            graph: version.graph,
            created_at: Timestamp::from_micros(now),
        };
        self.write("upsert_version", move |conn| {
            let inserted = Sql::new(sql::INSERT_VERSION)
                .bind::<Text, _>(record.id.to_string())
                .bind::<Text, _>(&record.workflow)
                .bind::<Text, _>(&record.graph_hash)
                .bind::<Text, _>(&graph)
                .bind::<BigInt, _>(now)
                .execute(conn)?;
            if inserted == 1 {
                return Ok(Inserted {
                    record,
                    inserted: true,
                });
            }
            let existing: VersionRow = Sql::new(sql::GET_VERSION)
                .bind::<Text, _>(&record.workflow)
                .bind::<Text, _>(&record.graph_hash)
                .get_result(conn)?;
            Ok(Inserted {
                record: WorkflowVersion::try_from(existing)?,
                inserted: false,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn get_version(
        &self,
        workflow: &str,
        graph_hash: &str,
    ) -> Result<Option<WorkflowVersion>> {
        let limits = &self.config.limits;
        limits.check_key("workflow", workflow)?;
        limits.check_key("graph hash", graph_hash)?;
        let (workflow, graph_hash) = (workflow.to_owned(), graph_hash.to_owned());
        self.read("get_version", move |conn| {
            let row: Option<VersionRow> = Sql::new(sql::GET_VERSION)
                .bind::<Text, _>(workflow)
                .bind::<Text, _>(graph_hash)
                .get_result(conn)
                .optional()?;
            Ok(row.map(WorkflowVersion::try_from).transpose()?)
        })
        .await
    }
}
