//! [`RunStore`] for [`MysqlStore`]: runs, their status, children and state.

use std::collections::BTreeMap;

use diesel::OptionalExtension;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use flowstate_core::ports::RunStore;
use flowstate_core::{
    Error, Inserted, NewRun, Page, Result, Run, RunCursor, RunId, RunQuery, RunStatus,
};

use super::tx::{Tx, begin, end, retry_conflicts};
use super::{Conn, MysqlStore, sql};
use crate::cached::CacheExt;
use crate::error::{backend, is_foreign_key_violation};
use crate::guard::{run_transition_refused, sql_list};
use crate::rows::{RunRow, StateRow, StatusCountRow, StatusRow, convert, parse_status};
use crate::rows::{joined_to_run, state_map};

/// What a status change found.
enum StatusChange {
    Moved(RunRow),
    Refused(Option<String>),
}

impl RunStore for MysqlStore {
    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %run.workflow))]
    async fn create_run(&self, run: NewRun) -> Result<Inserted<Run>> {
        let input = self.config.limits.encode_run(&run)?;
        let now = self.now();
        let id = RunId::generate();
        let record = run.into_run(id, flowstate_core::Timestamp::from_micros(now));
        let mut conn = self.pool.get("create_run").await?;
        let found = retry_conflicts!("create_run", insert_run(&mut conn, &record, &input).await);
        let found = found.map_err(|err| {
            if is_foreign_key_violation(&err) {
                Error::RunNotFound(record.parent.unwrap_or(record.id))
            } else {
                backend("create_run", err)
            }
        })?;
        match found {
            // No idempotency key: what was written is what we hold.
            None => Ok(Inserted {
                record,
                inserted: true,
            }),
            Some(row) => {
                let stored = Run::try_from(row)?;
                let inserted = stored.id == id;
                tracing::debug!(run = %stored.id, inserted, "run created");
                Ok(Inserted {
                    record: stored,
                    inserted,
                })
            }
        }
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn get_run(&self, id: RunId) -> Result<Run> {
        let mut conn = self.pool.get("get_run").await?;
        let row = diesel::sql_query(sql::SELECT_RUN)
            .bind::<Text, _>(id.to_string())
            .cached()
            .get_result::<RunRow>(&mut conn)
            .await
            .optional()
            .map_err(|err| backend("get_run", err))?;
        row.ok_or(Error::RunNotFound(id))?.try_into()
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_runs(&self, query: &RunQuery) -> Result<Page<Run>> {
        if let Some(workflow) = &query.workflow {
            self.config.limits.check_key("workflow", workflow)?;
        }
        let limit = query.effective_limit();
        let mut statement = diesel::sql_query(sql::LIST_RUNS).into_boxed::<Mysql>();
        if let Some(workflow) = &query.workflow {
            statement = statement
                .sql(" AND r.workflow = ?")
                .bind::<Text, _>(workflow.clone());
        }
        if let Some(status) = query.status {
            statement = statement
                .sql(" AND r.status = ?")
                .bind::<Text, _>(status.as_str());
        }
        if let Some(parent) = query.parent {
            statement = statement
                .sql(" AND r.parent_id = ?")
                .bind::<Text, _>(parent.to_string());
        }
        if let Some(cursor) = query.cursor {
            // Spelled out rather than `(created_at, id) < (?, ?)`, which
            // MariaDB does not turn into an index range.
            let at = cursor.created_at.as_micros();
            statement = statement
                .sql(" AND (r.created_at < ? OR (r.created_at = ? AND r.id < ?))")
                .bind::<BigInt, _>(at)
                .bind::<BigInt, _>(at)
                .bind::<Text, _>(cursor.id.to_string());
        }
        let statement = statement
            .sql(" ORDER BY r.created_at DESC, r.id DESC LIMIT ?")
            .bind::<BigInt, _>(i64::from(limit));
        let mut conn = self.pool.get("list_runs").await?;
        let rows = statement
            .cached()
            .load::<RunRow>(&mut conn)
            .await
            .map_err(|err| backend("list_runs", err))?;
        let items: Vec<Run> = convert(rows)?;
        let next = (items.len() == limit as usize)
            .then(|| items.last().map(RunCursor::after))
            .flatten();
        Ok(Page { items, next })
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn set_run_status(&self, id: RunId, to: RunStatus) -> Result<Run> {
        let sources = RunStatus::sources_of(to);
        let now = self.now();
        let mut conn = self.pool.get("set_run_status").await?;
        let change = retry_conflicts!(
            "set_run_status",
            change_status(&mut conn, id, to, &sources, now).await
        )
        .map_err(|err| backend("set_run_status", err))?;
        match change {
            StatusChange::Moved(row) => row.try_into(),
            StatusChange::Refused(current) => {
                Err(run_transition_refused(id, current.as_deref(), to))
            }
        }
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn delete_run(&self, id: RunId) -> Result<()> {
        let mut conn = self.pool.get("delete_run").await?;
        let deleted = retry_conflicts!(
            "delete_run",
            diesel::sql_query(sql::DELETE_RUN)
                .bind::<Text, _>(id.to_string())
                .cached()
                .execute(&mut conn)
                .await
        )
        .map_err(|err| backend("delete_run", err))?;
        if deleted == 0 {
            return Err(Error::RunNotFound(id));
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn count_children(&self, parent: RunId) -> Result<BTreeMap<RunStatus, u64>> {
        let mut conn = self.pool.get("count_children").await?;
        let rows = diesel::sql_query(sql::COUNT_CHILDREN)
            .bind::<Text, _>(parent.to_string())
            .cached()
            .load::<Option<StatusCountRow>>(&mut conn)
            .await
            .map_err(|err| backend("count_children", err))?;
        if rows.is_empty() {
            return Err(Error::RunNotFound(parent));
        }
        let row_name = parent.to_string();
        let mut counts = BTreeMap::new();
        for row in rows.into_iter().flatten() {
            let status = parse_status::<RunStatus>(&row_name, &row.status)?;
            counts.insert(status, row.n as u64);
        }
        Ok(counts)
    }

    #[tracing::instrument(level = "debug", skip(self, value))]
    async fn write_state(&self, run: RunId, key: &str, value: &Value) -> Result<()> {
        self.config.limits.check_key("state key", key)?;
        let value = self.config.limits.encode("state value", value)?;
        let mut conn = self.pool.get("write_state").await?;
        retry_conflicts!(
            "write_state",
            diesel::sql_query(sql::WRITE_STATE)
                .bind::<Text, _>(run.to_string())
                .bind::<Text, _>(key)
                .bind::<Text, _>(&value)
                .cached()
                .execute(&mut conn)
                .await
        )
        .map_err(|err| {
            if is_foreign_key_violation(&err) {
                Error::RunNotFound(run)
            } else {
                backend("write_state", err)
            }
        })?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn read_state(&self, run: RunId) -> Result<Map<String, Value>> {
        let mut conn = self.pool.get("read_state").await?;
        let rows = diesel::sql_query(sql::READ_STATE)
            .bind::<Text, _>(run.to_string())
            .cached()
            .load::<Option<StateRow>>(&mut conn)
            .await
            .map_err(|err| backend("read_state", err))?;
        state_map(run, joined_to_run(run, rows)?)
    }
}

/// Inserts `run`; with an idempotency key, answers the run that holds the
/// key afterwards (this one, or the one that was there first).
async fn insert_run(
    conn: &mut Conn,
    run: &Run,
    input: &str,
) -> diesel::QueryResult<Option<RunRow>> {
    let statement = if run.idempotency_key.is_some() {
        sql::INSERT_RUN_IDEMPOTENT
    } else {
        sql::INSERT_RUN
    };
    // The holder of the key may be deleted between the two statements; the
    // key is then free and the insert is run again.
    for _ in 0..3 {
        diesel::sql_query(statement)
            .bind::<Text, _>(run.id.to_string())
            .bind::<Text, _>(&run.workflow)
            .bind::<Text, _>(run.status.as_str())
            .bind::<Text, _>(input)
            .bind::<Nullable<Text>, _>(run.graph_hash.as_deref())
            .bind::<Nullable<Text>, _>(run.parent.map(|p| p.to_string()))
            .bind::<Nullable<Text>, _>(run.idempotency_key.as_deref())
            .bind::<BigInt, _>(run.created_at.as_micros())
            .bind::<BigInt, _>(run.updated_at.as_micros())
            .cached()
            .execute(&mut *conn)
            .await?;
        let Some(key) = &run.idempotency_key else {
            return Ok(None);
        };
        // Each statement commits on its own, so this reads whichever run
        // holds the key now, whoever inserted it.
        let holder = diesel::sql_query(sql::SELECT_RUN_BY_KEY)
            .bind::<Text, _>(key)
            .cached()
            .get_result::<RunRow>(&mut *conn)
            .await
            .optional()?;
        if holder.is_some() {
            return Ok(holder);
        }
    }
    Err(diesel::result::Error::NotFound)
}

/// One status change as a transaction: the guarded `UPDATE`, then the run
/// as written, or (matched nothing) its status, to say why.
async fn change_status(
    conn: &mut Conn,
    id: RunId,
    to: RunStatus,
    sources: &[RunStatus],
    now: i64,
) -> diesel::QueryResult<StatusChange> {
    begin(conn).await?;
    let body = async {
        let moved = if sources.is_empty() {
            0
        } else {
            diesel::sql_query(sql::set_run_status(&sql_list(sources)))
                .bind::<Text, _>(to.as_str())
                .bind::<BigInt, _>(now)
                .bind::<Text, _>(id.to_string())
                .cached()
                .execute(&mut *conn)
                .await?
        };
        if moved == 0 {
            let current = diesel::sql_query(sql::SELECT_RUN_STATUS)
                .bind::<Text, _>(id.to_string())
                .cached()
                .get_result::<StatusRow>(&mut *conn)
                .await
                .optional()?;
            return Ok(Tx::Rollback(StatusChange::Refused(
                current.map(|row| row.status),
            )));
        }
        let row = diesel::sql_query(sql::SELECT_RUN)
            .bind::<Text, _>(id.to_string())
            .cached()
            .get_result::<RunRow>(&mut *conn)
            .await?;
        Ok(Tx::Commit(StatusChange::Moved(row)))
    }
    .await;
    end(conn, body).await
}
