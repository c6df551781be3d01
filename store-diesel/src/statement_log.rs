//! A record of the statements a store sends, for the statement-count tests
//! and the bench: budgets are counted, not timed.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use diesel::connection::{Instrumentation, InstrumentationEvent};

/// Every statement a store sent, in order, with its SQL (binds left out).
///
/// Attach one through [`StoreConfig::statement_log`](crate::StoreConfig);
/// each pooled connection then reports to it. Transaction control counts
/// too: `BEGIN` and `COMMIT` are statements the server answers.
#[derive(Debug, Default)]
pub struct StatementLog {
    statements: Mutex<Vec<String>>,
}

impl StatementLog {
    /// An empty log.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// How many statements have been sent so far.
    pub fn count(&self) -> u64 {
        self.logged().len() as u64
    }

    /// The SQL of every statement sent so far.
    pub fn statements(&self) -> Vec<String> {
        self.logged().clone()
    }

    /// Forgets everything recorded so far.
    pub fn clear(&self) {
        self.logged().clear();
    }

    /// Runs `op` and returns its output with the statements it sent.
    ///
    /// Meant for a store used by one task at a time: statements other tasks
    /// send meanwhile are counted too.
    pub async fn capture<F: Future>(&self, op: F) -> (F::Output, Vec<String>) {
        self.clear();
        let out = op.await;
        (out, self.statements())
    }

    /// The statements, locked; a panic elsewhere while it was held leaves
    /// them as they were.
    fn logged(&self) -> MutexGuard<'_, Vec<String>> {
        self.statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The instrumentation to install on a connection so it reports here.
    pub fn instrumentation(self: &Arc<Self>) -> LogInstrumentation {
        LogInstrumentation {
            log: Arc::clone(self),
        }
    }
}

/// A diesel [`Instrumentation`] that records each started query in a
/// [`StatementLog`].
#[derive(Debug)]
pub struct LogInstrumentation {
    log: Arc<StatementLog>,
}

impl Instrumentation for LogInstrumentation {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if let InstrumentationEvent::StartQuery { query, .. } = event {
            let text = query.to_string();
            // diesel appends the binds as `-- binds: [...]`; keep the SQL.
            let sql = text
                .split(" -- binds:")
                .next()
                .unwrap_or(&text)
                .trim()
                .to_owned();
            self.log.logged().push(sql);
        }
    }
}
