//! [`RunStore`] for [`SqliteStore`]: runs, their status, children and state.
//!
//! Each method is one statement, except an idempotent create, which is one
//! `BEGIN IMMEDIATE` transaction (insert, and read the existing run only if
//! the key was taken: inside the transaction nothing can slip in between).

use std::collections::BTreeMap;

use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::{OptionalExtension, RunQueryDsl};
use flowstate_core::ports::RunStore;
use flowstate_core::{
    Error, Inserted, NewRun, Page, Result, Run, RunCursor, RunId, RunQuery, RunStatus, Timestamp,
};
use serde_json::{Map, Value};

use super::guards::set_run_status_sql;
use super::query::Sql;
use super::sql::{self, RUN_COLS};
use super::{Fail, SqliteStore};
use crate::guard::run_transition_refused;
use crate::rows::{RunRow, StateRow, StatusCountRow, StatusRow, convert, parse_status};
use crate::rows::{joined_to_run, state_map};

impl RunStore for SqliteStore {
    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %run.workflow))]
    async fn create_run(&self, run: NewRun) -> Result<Inserted<Run>> {
        let input = self.config.limits.encode_run(&run)?;
        let now = self.now();
        let record = run.into_run(RunId::generate(), Timestamp::from_micros(now));
        let new = record.clone();
        let insert =
            move |conn: &mut diesel::SqliteConnection| -> std::result::Result<usize, Fail> {
                Sql::new(sql::INSERT_RUN)
                    .bind::<Text, _>(new.id.to_string())
                    .bind::<Text, _>(&new.workflow)
                    .bind::<Text, _>(&input)
                    .bind::<Nullable<Text>, _>(new.graph_hash.as_deref())
                    .bind::<Nullable<Text>, _>(new.parent.map(|p| p.to_string()))
                    .bind::<Nullable<Text>, _>(new.idempotency_key.as_deref())
                    .bind::<BigInt, _>(now)
                    .execute(conn)
                    .map_err(|err| match new.parent {
                        Some(parent) => Fail::fk_as(err, Error::RunNotFound(parent)),
                        None => Fail::Db(err),
                    })
            };
        let Some(key) = record.idempotency_key.clone() else {
            self.read("create_run", insert).await?;
            return Ok(Inserted {
                record,
                inserted: true,
            });
        };
        self.write("create_run", move |conn| {
            if insert(conn)? == 1 {
                return Ok(Inserted {
                    record,
                    inserted: true,
                });
            }
            let existing: RunRow = Sql::new(sql::GET_RUN_BY_KEY)
                .bind::<Text, _>(key)
                .get_result(conn)?;
            Ok(Inserted {
                record: Run::try_from(existing)?,
                inserted: false,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn get_run(&self, id: RunId) -> Result<Run> {
        self.read("get_run", move |conn| {
            let row: Option<RunRow> = Sql::new(sql::GET_RUN)
                .bind::<Text, _>(id.to_string())
                .get_result(conn)
                .optional()?;
            Ok(Run::try_from(row.ok_or(Error::RunNotFound(id))?)?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_runs(&self, query: &RunQuery) -> Result<Page<Run>> {
        if let Some(workflow) = &query.workflow {
            self.config.limits.check_key("workflow", workflow)?;
        }
        let query = query.clone();
        let limit = query.effective_limit();
        let items: Vec<Run> = self
            .read("list_runs", move |conn| {
                let mut select =
                    Sql::new(format!("SELECT {RUN_COLS} FROM flowstate_runs WHERE 1 = 1"));
                if let Some(workflow) = query.workflow {
                    select = select.push(" AND workflow = ?").bind::<Text, _>(workflow);
                }
                if let Some(status) = query.status {
                    select = select
                        .push(" AND status = ?")
                        .bind::<Text, _>(status.as_str());
                }
                if let Some(parent) = query.parent {
                    select = select
                        .push(" AND parent_id = ?")
                        .bind::<Text, _>(parent.to_string());
                }
                if let Some(cursor) = query.cursor {
                    select = select
                        .push(" AND (created_at, id) < (?, ?)")
                        .bind::<BigInt, _>(cursor.created_at.as_micros())
                        .bind::<Text, _>(cursor.id.to_string());
                }
                let rows: Vec<RunRow> = select
                    .push(" ORDER BY created_at DESC, id DESC LIMIT ?")
                    .bind::<BigInt, _>(i64::from(limit))
                    .load(conn)?;
                Ok(convert(rows)?)
            })
            .await?;
        let full = items.len() == limit as usize;
        let next = if full {
            items.last().map(RunCursor::after)
        } else {
            None
        };
        Ok(Page { items, next })
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn set_run_status(&self, id: RunId, to: RunStatus) -> Result<Run> {
        let now = self.now();
        self.read("set_run_status", move |conn| {
            let moved: Option<RunRow> = Sql::new(set_run_status_sql(to))
                .bind::<BigInt, _>(now)
                .bind::<Text, _>(id.to_string())
                .get_result(conn)
                .optional()?;
            if let Some(row) = moved {
                return Ok(Run::try_from(row)?);
            }
            // Error path only: say why the guarded write matched nothing.
            let current: Option<StatusRow> = Sql::new(sql::RUN_STATUS)
                .bind::<Text, _>(id.to_string())
                .get_result(conn)
                .optional()?;
            Err(run_transition_refused(id, current.as_ref().map(|r| r.status.as_str()), to).into())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn delete_run(&self, id: RunId) -> Result<()> {
        self.read("delete_run", move |conn| {
            let deleted = Sql::new(sql::DELETE_RUN)
                .bind::<Text, _>(id.to_string())
                .execute(conn)?;
            if deleted == 0 {
                return Err(Error::RunNotFound(id).into());
            }
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn count_children(&self, parent: RunId) -> Result<BTreeMap<RunStatus, u64>> {
        self.read("count_children", move |conn| {
            let rows: Vec<Option<StatusCountRow>> = Sql::new(sql::COUNT_CHILDREN)
                .bind::<Text, _>(parent.to_string())
                .load(conn)?;
            if rows.is_empty() {
                return Err(Error::RunNotFound(parent).into());
            }
            let mut counts = BTreeMap::new();
            for row in rows.into_iter().flatten() {
                let status =
                    parse_status::<RunStatus>(&format!("children of {parent}"), &row.status)?;
                counts.insert(status, row.n.unsigned_abs());
            }
            Ok(counts)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self, value))]
    async fn write_state(&self, run: RunId, key: &str, value: &Value) -> Result<()> {
        self.config.limits.check_key("state key", key)?;
        let value = self.config.limits.encode("state value", value)?;
        let key = key.to_owned();
        self.read("write_state", move |conn| {
            Sql::new(sql::WRITE_STATE)
                .bind::<Text, _>(run.to_string())
                .bind::<Text, _>(key)
                .bind::<Text, _>(value)
                .execute(conn)
                .map_err(|err| Fail::fk_as(err, Error::RunNotFound(run)))?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn read_state(&self, run: RunId) -> Result<Map<String, Value>> {
        self.read("read_state", move |conn| {
            let rows: Vec<Option<StateRow>> = Sql::new(sql::READ_STATE)
                .bind::<Text, _>(run.to_string())
                .load(conn)?;
            Ok(state_map(run, joined_to_run(run, rows)?)?)
        })
        .await
    }
}
