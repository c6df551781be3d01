//! The demo's own record of what ran, kept apart from the store: every
//! execution of a step's attempt is counted here as it starts, so a double
//! execution is detected, never assumed away.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use flowstate_core::StepId;

/// Executions per `(step, attempt)`, and which steps have succeeded.
#[derive(Debug, Default)]
pub struct Ledger {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    executions: HashMap<(StepId, u32), u32>,
    succeeded: HashSet<StepId>,
    after_success: u64,
}

/// What the ledger saw, once the work is over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Attempts executed, counting every execution.
    pub executed: u64,
    /// Executions of an attempt after the first (retries).
    pub retries: u64,
    /// Executions of a `(step, attempt)` that had already been executed.
    pub double: u64,
    /// Executions of a step that had already succeeded.
    pub after_success: u64,
}

impl Ledger {
    /// Notes that this worker is about to execute `attempt` of `step`.
    pub fn begin(&self, step: StepId, attempt: u32) {
        let mut inner = self.lock();
        if inner.succeeded.contains(&step) {
            inner.after_success += 1;
        }
        *inner.executions.entry((step, attempt)).or_default() += 1;
    }

    /// Notes that `step` succeeded (its success is written).
    pub fn succeeded(&self, step: StepId) {
        self.lock().succeeded.insert(step);
    }

    /// What was seen so far.
    pub fn totals(&self) -> Totals {
        let inner = self.lock();
        let mut totals = Totals {
            after_success: inner.after_success,
            ..Totals::default()
        };
        for (&(_, attempt), &count) in &inner.executions {
            totals.executed += u64::from(count);
            totals.double += u64::from(count.saturating_sub(1));
            if attempt > 1 {
                totals.retries += u64::from(count);
            }
        }
        totals
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_execution_of_an_attempt_or_of_a_finished_step_is_counted() {
        let ledger = Ledger::default();
        let (a, b) = (StepId::generate(), StepId::generate());
        ledger.begin(a, 1);
        ledger.begin(b, 1);
        ledger.begin(b, 2);
        assert_eq!(
            ledger.totals(),
            Totals {
                executed: 3,
                retries: 1,
                double: 0,
                after_success: 0
            }
        );
        ledger.begin(a, 1);
        ledger.succeeded(b);
        ledger.begin(b, 3);
        let totals = ledger.totals();
        assert_eq!(
            (totals.double, totals.after_success, totals.retries),
            (1, 1, 2)
        );
    }
}
