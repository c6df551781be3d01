//! [`RunStore`] for [`PgStore`]: runs, their status, children and state.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use diesel::QueryableByName;
use diesel::sql_query;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use flowstate_core::{
    Error, Inserted, NewRun, Page, Result, Run, RunCursor, RunId, RunQuery, RunStatus, RunStore,
};

use super::sql::{RUN_COLUMNS, cached};
use super::{PgStore, sql};
use crate::error::{backend, is_foreign_key_violation};
use crate::guard::run_transition_refused;
use crate::rows::{RunRow, convert, parse_status};

/// How many times an idempotent create retries when the row its key
/// collided with is deleted before it can be read.
pub(super) const IDEMPOTENT_TRIES: usize = 3;

/// The answer of a run status change: the status before, and the run after
/// (absent when the guarded write matched nothing).
#[derive(QueryableByName)]
struct MovedRunRow {
    #[diesel(sql_type = Text)]
    prior_status: String,
    #[diesel(embed)]
    run: Option<RunRow>,
}

/// A child status and its count, NULL for a parent with no children.
#[derive(QueryableByName)]
struct ChildCountRow {
    #[diesel(sql_type = Nullable<Text>)]
    status: Option<String>,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// A run, or nothing if its idempotency key is taken.
static INSERT_RUN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO flowstate_runs AS r \
         (id, workflow, status, input, graph_hash, parent_id, idempotency_key, created_at, updated_at) \
         VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $8) \
         ON CONFLICT (idempotency_key) DO NOTHING RETURNING {RUN_COLUMNS}"
    )
});

static RUN_BY_KEY: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {RUN_COLUMNS} FROM flowstate_runs AS r WHERE r.idempotency_key = $1")
});

static GET_RUN: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {RUN_COLUMNS} FROM flowstate_runs AS r WHERE r.id = $1"));

impl PgStore {
    fn check_new_run(&self, run: &NewRun) -> Result<String> {
        self.config.limits.encode_run(run)
    }

    /// The run holding idempotency key `key`, if any (its own statement, so
    /// it sees a row a racing create committed after the insert began).
    async fn run_by_key(&self, key: &str) -> Result<Option<Run>> {
        let mut conn = self.pool.get("create_run").await?;
        let rows: Vec<RunRow> = cached(sql_query(RUN_BY_KEY.as_str()).bind::<Text, _>(key))
            .load(&mut *conn)
            .await
            .map_err(|err| backend("create_run", err))?;
        rows.into_iter().next().map(Run::try_from).transpose()
    }
}

impl RunStore for PgStore {
    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %run.workflow))]
    async fn create_run(&self, run: NewRun) -> Result<Inserted<Run>> {
        let input = self.check_new_run(&run)?;
        let parent = run.parent.map(|p| p.to_string());
        for _ in 0..IDEMPOTENT_TRIES {
            let id = RunId::generate();
            let now = self.now().as_micros();
            let mut conn = self.pool.get("create_run").await?;
            let rows: Vec<RunRow> = cached(
                sql_query(INSERT_RUN.as_str())
                    .bind::<Text, _>(id.to_string())
                    .bind::<Text, _>(&run.workflow)
                    .bind::<Text, _>(RunStatus::Running.as_str())
                    .bind::<Text, _>(&input)
                    .bind::<Nullable<Text>, _>(run.graph_hash.as_deref())
                    .bind::<Nullable<Text>, _>(parent.as_deref())
                    .bind::<Nullable<Text>, _>(run.idempotency_key.as_deref())
                    .bind::<BigInt, _>(now),
            )
            .load(&mut *conn)
            .await
            .map_err(|err| match (run.parent, is_foreign_key_violation(&err)) {
                (Some(parent), true) => Error::RunNotFound(parent),
                _ => backend("create_run", err),
            })?;
            drop(conn);
            if let Some(row) = rows.into_iter().next() {
                let record = Run::try_from(row)?;
                tracing::debug!(run = %record.id, "run created");
                return Ok(Inserted {
                    inserted: record.id == id,
                    record,
                });
            }
            // Only a key collision inserts nothing: read the run holding it.
            let key = run.idempotency_key.as_deref().unwrap_or_default();
            if let Some(record) = self.run_by_key(key).await? {
                return Ok(Inserted {
                    record,
                    inserted: false,
                });
            }
        }
        Err(Error::backend(
            "create_run",
            true,
            "the run holding this idempotency key kept disappearing",
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id))]
    async fn get_run(&self, id: RunId) -> Result<Run> {
        let mut conn = self.pool.get("get_run").await?;
        let rows: Vec<RunRow> = cached(sql_query(GET_RUN.as_str()).bind::<Text, _>(id.to_string()))
            .load(&mut *conn)
            .await
            .map_err(|err| backend("get_run", err))?;
        rows.into_iter()
            .next()
            .map_or(Err(Error::RunNotFound(id)), Run::try_from)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_runs(&self, query: &RunQuery) -> Result<Page<Run>> {
        if let Some(workflow) = &query.workflow {
            self.config.limits.check_key("workflow", workflow)?;
        }
        let limit = query.effective_limit();
        let text = list_runs_sql(query);
        let mut q = sql_query(text).into_boxed::<diesel::pg::Pg>();
        if let Some(workflow) = &query.workflow {
            q = q.bind::<Text, _>(workflow.clone());
        }
        if let Some(status) = query.status {
            q = q.bind::<Text, _>(status.as_str());
        }
        if let Some(parent) = query.parent {
            q = q.bind::<Text, _>(parent.to_string());
        }
        if let Some(cursor) = query.cursor {
            q = q
                .bind::<BigInt, _>(cursor.created_at.as_micros())
                .bind::<Text, _>(cursor.id.to_string());
        }
        q = q.bind::<Integer, _>(i32::try_from(limit).unwrap_or(i32::MAX));
        let mut conn = self.pool.get("list_runs").await?;
        let rows: Vec<RunRow> = cached(q)
            .load(&mut *conn)
            .await
            .map_err(|err| backend("list_runs", err))?;
        let items: Vec<Run> = convert(rows)?;
        let next = (items.len() == limit as usize)
            .then(|| items.last().map(RunCursor::after))
            .flatten();
        Ok(Page { items, next })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id, to = %to))]
    async fn set_run_status(&self, id: RunId, to: RunStatus) -> Result<Run> {
        let mut conn = self.pool.get("set_run_status").await?;
        let rows: Vec<MovedRunRow> = cached(
            sql_query(sql::run_status(to))
                .bind::<Text, _>(id.to_string())
                .bind::<BigInt, _>(self.now().as_micros()),
        )
        .load(&mut *conn)
        .await
        .map_err(|err| backend("set_run_status", err))?;
        let Some(row) = rows.into_iter().next() else {
            return Err(Error::RunNotFound(id));
        };
        if let Some(run) = row.run {
            return Run::try_from(run);
        }
        // Refused. If the snapshot's status could move, another writer moved
        // the run meanwhile: read what it is now (error path only).
        let legal = parse_status::<RunStatus>(&id.to_string(), &row.prior_status)
            .is_ok_and(|from| from.can_transition_to(to));
        if !legal {
            return Err(run_transition_refused(id, Some(&row.prior_status), to));
        }
        drop(conn);
        match self.get_run(id).await {
            Ok(now) => Err(run_transition_refused(id, Some(now.status.as_str()), to)),
            Err(err) => Err(err),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id))]
    async fn delete_run(&self, id: RunId) -> Result<()> {
        let mut conn = self.pool.get("delete_run").await?;
        let deleted = cached(
            sql_query("DELETE FROM flowstate_runs WHERE id = $1").bind::<Text, _>(id.to_string()),
        )
        .execute(&mut *conn)
        .await
        .map_err(|err| backend("delete_run", err))?;
        if deleted == 0 {
            return Err(Error::RunNotFound(id));
        }
        Ok(())
    }

    async fn write_state(&self, run: RunId, key: &str, value: &Value) -> Result<()> {
        self.put_state(run, key, value).await
    }

    async fn read_state(&self, run: RunId) -> Result<Map<String, Value>> {
        self.state_of(run).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %parent))]
    async fn count_children(&self, parent: RunId) -> Result<BTreeMap<RunStatus, u64>> {
        let mut conn = self.pool.get("count_children").await?;
        let rows: Vec<ChildCountRow> = cached(
            sql_query(
                "SELECT c.status, count(c.id) AS n FROM flowstate_runs AS p \
                 LEFT JOIN flowstate_runs AS c ON c.parent_id = p.id \
                 WHERE p.id = $1 GROUP BY c.status",
            )
            .bind::<Text, _>(parent.to_string()),
        )
        .load(&mut *conn)
        .await
        .map_err(|err| backend("count_children", err))?;
        if rows.is_empty() {
            return Err(Error::RunNotFound(parent));
        }
        let mut counts = BTreeMap::new();
        for row in rows {
            if let Some(status) = row.status {
                let status = parse_status::<RunStatus>(&format!("children of {parent}"), &status)?;
                counts.insert(status, row.n as u64);
            }
        }
        Ok(counts)
    }
}

/// The listing's SQL for the filters `query` sets, binds numbered in the
/// order `list_runs` binds them; newest first, keyset-paged.
pub(super) fn list_runs_sql(query: &RunQuery) -> String {
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM flowstate_runs AS r");
    let mut n = 0;
    let mut next = || {
        n += 1;
        n
    };
    let mut filters = Vec::new();
    if query.workflow.is_some() {
        filters.push(format!("r.workflow = ${}", next()));
    }
    if query.status.is_some() {
        filters.push(format!("r.status = ${}", next()));
    }
    if query.parent.is_some() {
        filters.push(format!("r.parent_id = ${}", next()));
    }
    if query.cursor.is_some() {
        let (at, id) = (next(), next());
        filters.push(format!("(r.created_at, r.id) < (${at}, ${id})"));
    }
    if !filters.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&filters.join(" AND "));
    }
    let limit = next();
    format!("{sql} ORDER BY r.created_at DESC, r.id DESC LIMIT ${limit}")
}
