//! A record of the statements a store sends, for the statement-count tests
//! and the bench: budgets are counted, not timed.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use diesel::connection::{Instrumentation, InstrumentationEvent};

/// Every statement a store sent, in order, with its SQL (binds left out).
///
/// Attach one through [`StoreConfig::statement_log`](crate::StoreConfig);
/// each pooled connection then reports to it. Transaction control counts
/// too: `BEGIN` and `COMMIT` are statements the server answers.
#[derive(Debug, Default)]
pub struct StatementLog {
    count: AtomicU64,
    statements: Mutex<Vec<String>>,
}

impl StatementLog {
    /// An empty log.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// How many statements have been sent so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The SQL of every statement sent so far.
    pub fn statements(&self) -> Vec<String> {
        self.statements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Forgets everything recorded so far.
    pub fn clear(&self) {
        self.statements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        self.count.store(0, Ordering::Relaxed);
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

    fn record(&self, sql: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.statements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(sql);
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
            self.log.record(sql);
        }
    }
}
