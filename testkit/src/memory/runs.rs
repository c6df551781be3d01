//! [`RunStore`] for [`MemoryStore`]: runs, their status, children and tables.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use flowstate_core::limits::checked;
use flowstate_core::ports::RunStore;
use flowstate_core::ports::checks;
use flowstate_core::{
    Error, Inserted, NewRun, Page, Result, Run, RunCursor, RunId, RunQuery, RunStatus, Timestamp,
};
use serde_json::{Map, Value};

use super::{MemoryStore, Tables};

impl MemoryStore {}

/// Moves run `id` to `to` if the status machine allows it.
pub(super) fn set_run_status_in(
    tables: &mut Tables,
    id: RunId,
    to: RunStatus,
    now: Timestamp,
) -> Result<Run> {
    let run = tables.runs.get_mut(&id).ok_or(Error::RunNotFound(id))?;
    if !run.status.can_transition_to(to) {
        return Err(Error::IllegalRunTransition {
            run: id,
            from: run.status,
            to,
        });
    }
    run.status = to;
    run.updated_at = now;
    Ok(run.clone())
}

/// Writes one state key of `run`, refused on a settled run.
pub(super) fn write_state_in(
    tables: &mut Tables,
    run: RunId,
    key: &str,
    value: &Value,
) -> Result<()> {
    MemoryStore::unsettled(tables, run)?;
    let map = tables
        .run_state
        .get_mut(&run)
        .ok_or(Error::RunNotFound(run))?;
    map.insert(key.to_owned(), value.clone());
    Ok(())
}

impl super::Tables {
    /// Stores a new run, its key and its empty state (the caller checked
    /// that the key is free).
    pub(super) fn insert_run(&mut self, record: Run) {
        if let Some(key) = &record.idempotency_key {
            self.run_by_key.insert(key.clone(), record.id);
        }
        self.run_state.insert(record.id, Map::new());
        self.runs.insert(record.id, record);
    }
}

impl RunStore for MemoryStore {
    async fn create_run(&self, run: NewRun) -> Result<Inserted<Run>> {
        let (run, ()) = checked(run, |run| checks::create_run(&self.limits, run).map(drop))?;
        let mut tables = self.lock();
        if let Some(existing) = run
            .idempotency_key
            .as_ref()
            .and_then(|key| tables.run_by_key.get(key))
        {
            return Ok(Inserted {
                record: tables.runs[existing].clone(),
                inserted: false,
            });
        }
        if let Some(parent) = run.parent {
            tables.run(parent)?;
        }
        let now = self.now();
        let record = run.into_run(RunId::generate(), now);
        tables.insert_run(record.clone());
        Ok(Inserted {
            record,
            inserted: true,
        })
    }

    async fn get_run(&self, id: RunId) -> Result<Run> {
        self.lock().run(id).cloned()
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<Page<Run>> {
        checks::list_runs(&self.limits, query)?;
        let limit = query.effective_limit() as usize;
        let tables = self.lock();
        let mut items: Vec<Run> = tables
            .runs
            .values()
            .filter(|run| query.workflow.as_ref().is_none_or(|w| *w == run.workflow))
            .filter(|run| query.status.is_none_or(|s| s == run.status))
            .filter(|run| query.parent.is_none_or(|p| Some(p) == run.parent))
            .filter(|run| {
                query
                    .cursor
                    .is_none_or(|c| (run.created_at, run.id) < (c.created_at, c.id))
            })
            .cloned()
            .collect();
        items.sort_by_key(|run| Reverse((run.created_at, run.id)));
        items.truncate(limit);
        let next = (items.len() == limit)
            .then(|| items.last().map(RunCursor::after))
            .flatten();
        Ok(Page { items, next })
    }

    async fn set_run_status(&self, id: RunId, to: RunStatus) -> Result<Run> {
        let now = self.now();
        set_run_status_in(&mut self.lock(), id, to, now)
    }

    async fn set_run_status_with_output(
        &self,
        id: RunId,
        to: RunStatus,
        output: &Value,
    ) -> Result<Run> {
        checks::run_output(&self.limits, output)?;
        let now = self.now();
        let mut tables = self.lock();
        set_run_status_in(&mut tables, id, to, now)?;
        let run = tables.runs.get_mut(&id).expect("moved above");
        run.output = Some(output.clone());
        Ok(run.clone())
    }

    async fn list_workflow_names(&self) -> Result<Vec<String>> {
        let tables = self.lock();
        let names: BTreeSet<&String> = tables.runs.values().map(|run| &run.workflow).collect();
        Ok(names.into_iter().cloned().collect())
    }

    async fn delete_run(&self, id: RunId) -> Result<()> {
        self.lock().remove_run(id).map(drop)
    }

    async fn count_children(&self, parent: RunId) -> Result<BTreeMap<RunStatus, u64>> {
        let tables = self.lock();
        tables.run(parent)?;
        let mut counts = BTreeMap::new();
        for run in tables.runs.values().filter(|r| r.parent == Some(parent)) {
            *counts.entry(run.status).or_default() += 1;
        }
        Ok(counts)
    }

    async fn write_state(&self, run: RunId, key: &str, value: &Value) -> Result<()> {
        checks::write_state(&self.limits, key, value)?;
        write_state_in(&mut self.lock(), run, key, value)
    }

    async fn read_state(&self, run: RunId) -> Result<Map<String, Value>> {
        let tables = self.lock();
        tables
            .run_state
            .get(&run)
            .cloned()
            .ok_or(Error::RunNotFound(run))
    }
}

impl Tables {
    /// Deletes run `id` with its steps, their history, its state, its
    /// lease, signals and effects; its children stay, with no parent.
    /// Answers the run deleted ([`Error::RunNotFound`] if there is none).
    pub(super) fn remove_run(&mut self, id: RunId) -> Result<Run> {
        let run = self.runs.remove(&id).ok_or(Error::RunNotFound(id))?;
        if let Some(key) = &run.idempotency_key {
            self.run_by_key.remove(key);
        }
        self.run_state.remove(&id);
        // The lease columns live on the run row in a database; signals and
        // effects are rows that cascade with it.
        self.leases.remove(&id);
        self.signals.retain(|(run, _), _| *run != id);
        self.effects.retain(|(run, _), _| *run != id);
        let steps: Vec<_> = self
            .steps
            .values()
            .filter(|step| step.run == id)
            .map(|step| (step.id, step.name.clone()))
            .collect();
        for (step, name) in steps {
            self.steps.remove(&step);
            self.step_by_name.remove(&(id, name));
            self.history.retain(|(of, _), _| *of != step);
        }
        for child in self.runs.values_mut() {
            if child.parent == Some(id) {
                child.parent = None;
            }
        }
        Ok(run)
    }
}
