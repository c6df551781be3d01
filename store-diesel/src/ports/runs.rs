//! [`RunStore`] for [`DieselStore`], written once in the diesel DSL: runs,
//! their status and their children. State is in `state.rs`.

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use flowstate_core::limits::checked;
use flowstate_core::ports::RunStore;
use flowstate_core::ports::checks;
use flowstate_core::{
    Error, Inserted, NewRun, Page, Result, Run, RunCursor, RunId, RunQuery, RunStatus, Timestamp,
};

use super::leases::stored_token;
use crate::backend::on_connection;
use crate::cached::CacheExt;
use crate::dialect::{Connection, Fence, RunMove};
use crate::guard::run_transition_refused;
use crate::rows::{RunRow, convert, parse_status};
use crate::schema::JsonText;
use crate::schema::flowstate_runs as runs;
use crate::store::DieselStore;

/// How many times an idempotent create tries again when the row its key
/// collided with is deleted before it can be read.
pub(crate) const IDEMPOTENT_TRIES: usize = 3;

/// A run's output checked against the input limits, as the column takes it.
pub(super) fn checked_output(
    limits: &flowstate_core::InputLimits,
    output: Option<&Value>,
) -> Result<Option<JsonText>> {
    output
        .map(|output| checks::run_output(limits, output).map(JsonText))
        .transpose()
}

impl DieselStore {
    /// [`RunStore::set_run_status`], fenced by lease `token` when given
    /// ([`FencedWrites::set_run_status_fenced`](flowstate_core::ports::FencedWrites::set_run_status_fenced)).
    pub(super) async fn set_run_status_under(
        &self,
        id: RunId,
        to: RunStatus,
        output: Option<&Value>,
        token: Option<u64>,
    ) -> Result<Run> {
        let op = "set_run_status";
        let output = checked_output(&self.config.limits, output)?;
        let output = output.as_ref();
        let id_text = id.to_string();
        let run_move = RunMove {
            id: &id_text,
            to,
            now: self.now(),
            output,
            fence: token.map(|token| Fence {
                token: stored_token(token),
                offset: self.lease_offset(),
            }),
        };
        // The guarded write answering the run as written.
        let moved = on_connection!(self, op, |conn| conn.move_run(&run_move).await)?;
        if let Some(row) = moved {
            return Run::try_from(row);
        }
        // Refused: read why (error path only). Fenced, the fence is told
        // first: a settled run, then a lease the token does not hold.
        if token.is_some()
            && let Some(refusal) = self.run_refusal(id, token).await?
        {
            return Err(refusal);
        }
        let now = self.get_run(id).await?;
        Err(run_transition_refused(id, Some(now.status.as_str()), to))
    }

    /// The run holding idempotency key `key`, if any (its own statement, so
    /// it sees a row a racing create committed after the insert began).
    async fn run_by_key(&self, key: &str) -> Result<Option<RunRow>> {
        on_connection!(self, "create_run", |conn| runs::table
            .filter(runs::idempotency_key.eq(key))
            .select(RunRow::as_select())
            .first(conn)
            .await
            .optional())
    }

    /// Inserts `row`, whose idempotency key may be taken: answers whether
    /// the insert itself says it wrote the row (`None`: it cannot tell, on
    /// MySQL, where a duplicate counts as a matched row).
    async fn insert_keyed_run(&self, row: &RunRow, parent: Option<RunId>) -> Result<Option<bool>> {
        on_connection!(self, "create_run", parent: parent, |conn| conn
            .insert_keyed_run(row)
            .await)
    }
}

impl RunStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %run.workflow))]
    async fn create_run(&self, run: NewRun) -> Result<Inserted<Run>> {
        let (run, input) = checked(run, |run| checks::create_run(&self.config.limits, run))?;
        let record = run.into_run(RunId::generate(), Timestamp::from_micros(self.now()));
        let row = RunRow::new(&record, input);
        let Some(key) = record.idempotency_key.as_deref() else {
            on_connection!(self, "create_run", parent: record.parent, |conn| {
                diesel::insert_into(runs::table)
                    .values(&row)
                    .execute(conn)
                    .await
            })?;
            tracing::debug!(run = %record.id, "run created");
            return Ok(Inserted {
                record,
                inserted: true,
            });
        };
        for _ in 0..IDEMPOTENT_TRIES {
            if self.insert_keyed_run(&row, record.parent).await? == Some(true) {
                tracing::debug!(run = %record.id, "run created");
                return Ok(Inserted {
                    record,
                    inserted: true,
                });
            }
            if let Some(holder) = self.run_by_key(key).await? {
                let holder = Run::try_from(holder)?;
                let inserted = holder.id == record.id;
                return Ok(Inserted {
                    record: if inserted { record } else { holder },
                    inserted,
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
        let id_text = id.to_string();
        let row = on_connection!(self, "get_run", |conn| runs::table
            .find(&id_text)
            .select(RunRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map_or(Err(Error::RunNotFound(id)), Run::try_from)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_runs(&self, query: &RunQuery) -> Result<Page<Run>> {
        checks::list_runs(&self.config.limits, query)?;
        let limit = query.effective_limit();
        let parent = query.parent.map(|p| p.to_string());
        let cursor = query
            .cursor
            .map(|c| (c.created_at.as_micros(), c.id.to_string()));
        let rows: Vec<RunRow> = on_connection!(self, "list_runs", |conn| {
            let mut listing = runs::table.select(RunRow::as_select()).into_boxed();
            if let Some(workflow) = &query.workflow {
                listing = listing.filter(runs::workflow.eq(workflow));
            }
            if let Some(status) = query.status {
                listing = listing.filter(runs::status.eq(status.as_str()));
            }
            if let Some(parent) = &parent {
                listing = listing.filter(runs::parent_id.eq(parent));
            }
            if let Some((at, id)) = &cursor {
                // `(created_at, id) < (at, id)` spelled out, with a plain
                // bound first: MariaDB turns no row comparison into an
                // index range, and every dialect does with `<=`.
                listing = listing.filter(runs::created_at.le(*at)).filter(
                    runs::created_at
                        .lt(*at)
                        .or(runs::created_at.eq(*at).and(runs::id.lt(id))),
                );
            }
            // A boxed query is never kept prepared by diesel; its text is one
            // of the few filter combinations, so it is cached here.
            listing
                .order((runs::created_at.desc(), runs::id.desc()))
                .limit(i64::from(limit))
                .cached()
                .load(conn)
                .await
        })?;
        let items: Vec<Run> = convert(rows)?;
        let next = (items.len() == limit as usize)
            .then(|| items.last().map(RunCursor::after))
            .flatten();
        Ok(Page { items, next })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id, to = %to))]
    async fn set_run_status(&self, id: RunId, to: RunStatus) -> Result<Run> {
        self.set_run_status_under(id, to, None, None).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id, to = %to))]
    async fn set_run_status_with_output(
        &self,
        id: RunId,
        to: RunStatus,
        output: &Value,
    ) -> Result<Run> {
        self.set_run_status_under(id, to, Some(output), None).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_workflow_names(&self) -> Result<Vec<String>> {
        // One read of the `(workflow, ...)` indexes' leading column; sorted
        // here, byte for byte, whatever the server's collation.
        let mut names: Vec<String> =
            on_connection!(self, "list_workflow_names", |conn| runs::table
                .select(runs::workflow)
                .distinct()
                .load(conn)
                .await)?;
        names.sort_unstable();
        Ok(names)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %id))]
    async fn delete_run(&self, id: RunId) -> Result<()> {
        let id_text = id.to_string();
        let deleted = on_connection!(self, "delete_run", |conn| diesel::delete(
            runs::table.find(&id_text)
        )
        .execute(conn)
        .await)?;
        if deleted == 0 {
            return Err(Error::RunNotFound(id));
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %parent))]
    async fn count_children(&self, parent: RunId) -> Result<BTreeMap<RunStatus, u64>> {
        let parent_text = parent.to_string();
        let children = diesel::alias!(runs as children);
        // One statement: no row means no parent; a NULL status, a parent
        // with no children.
        let rows: Vec<(Option<String>, i64)> = on_connection!(self, "count_children", |conn| {
            runs::table
                .left_join(children.on(children.field(runs::parent_id).eq(runs::id.nullable())))
                .filter(runs::id.eq(&parent_text))
                .group_by(children.field(runs::status))
                .select((
                    children.field(runs::status).nullable(),
                    diesel::dsl::count(children.field(runs::id).nullable()),
                ))
                .load(conn)
                .await
        })?;
        if rows.is_empty() {
            return Err(Error::RunNotFound(parent));
        }
        let mut counts = BTreeMap::new();
        for (status, n) in rows {
            if let Some(status) = status {
                let status = parse_status::<RunStatus>(&format!("children of {parent}"), &status)?;
                counts.insert(status, n as u64);
            }
        }
        Ok(counts)
    }

    async fn write_state(&self, run: RunId, key: &str, value: &Value) -> Result<()> {
        self.put_state(run, key, value, None).await
    }

    async fn read_state(&self, run: RunId) -> Result<Map<String, Value>> {
        self.state_of(run).await
    }
}
