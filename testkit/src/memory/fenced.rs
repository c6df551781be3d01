//! [`FencedWrites`] for [`MemoryStore`]: the unfenced writes, under the
//! one lock, after the lease of the token is checked on the lease clock.

use flowstate_core::limits::checked;
use flowstate_core::ports::FencedWrites;
use flowstate_core::ports::checks;
use flowstate_core::{Error, Inserted, NewStep, Result, Run, RunId, RunStatus, Step, Timestamp};

use super::runs::{set_run_status_in, write_state_in};
use super::steps::insert_step_in;
use super::{MemoryStore, Tables};
use serde_json::Value;

impl MemoryStore {
    /// Refuses a write under `token` on `run`: an unknown run
    /// ([`Error::RunNotFound`]), a settled one ([`Error::RunSettled`]), or a
    /// lease `token` no longer holds at lease-clock `now` ([`Error::LeaseLost`]).
    fn fence(tables: &Tables, run: RunId, token: u64, now: Timestamp) -> Result<()> {
        Self::unsettled(tables, run)?;
        let holds = tables.leases.get(&run).is_some_and(|row| {
            row.state.token == token
                && row.state.worker.is_some()
                && row.state.expires_at.is_some_and(|at| at > now)
        });
        if holds {
            Ok(())
        } else {
            Err(Error::LeaseLost { run, token })
        }
    }
}

impl FencedWrites for MemoryStore {
    async fn write_state_fenced(
        &self,
        run: RunId,
        token: u64,
        key: &str,
        value: &Value,
    ) -> Result<()> {
        checks::write_state(&self.limits, key, value)?;
        let now = self.lease_clock.now();
        let mut tables = self.lock();
        Self::fence(&tables, run, token, now)?;
        write_state_in(&mut tables, run, key, value)
    }

    async fn insert_step_fenced(&self, token: u64, step: NewStep) -> Result<Inserted<Step>> {
        let (step, _) = checked(step, |step| checks::insert_step(&self.limits, step))?;
        let (now, lease_now) = (self.now(), self.lease_clock.now());
        let mut tables = self.lock();
        Self::fence(&tables, step.run, token, lease_now)?;
        insert_step_in(&mut tables, step, now)
    }

    async fn set_run_status_fenced(&self, run: RunId, token: u64, to: RunStatus) -> Result<Run> {
        let (now, lease_now) = (self.now(), self.lease_clock.now());
        let mut tables = self.lock();
        Self::fence(&tables, run, token, lease_now)?;
        set_run_status_in(&mut tables, run, to, now)
    }
}
