//! Statements per operation: each hot operation run once on a store with a
//! single connection and a [`StatementLog`], and what it sent counted.
//! `BEGIN` and `COMMIT` count: the server answers each.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use flowstate_core::ports::{RunLeaseStore, RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, RetryPolicy, RunId, RunOutcome, StepTransition};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog, StoreConfig};
use serde_json::json;

use super::workloads::LEASE_BATCH;

/// The counted leases' length: far longer than the count.
const LEASE: Duration = Duration::from_secs(300);

/// One operation's count, with the SQL it sent.
#[derive(Clone, Debug)]
pub struct Counted {
    /// The operation.
    pub operation: &'static str,
    /// The statements it sent, in order.
    pub statements: Vec<String>,
}

/// The operations measured, in the order they print. The lease rows give
/// a run's cost: `claim_run` + `finish`, or a batched claim of
/// [`LEASE_BATCH`] runs over that many, + `finish`.
pub const OPERATIONS: [&str; 12] = [
    "create_run",
    "insert_step",
    "claim (win)",
    "claim (lose)",
    "claim (retry win)",
    "transition",
    "get_step",
    "list_steps",
    "write_state",
    "claim_run",
    CLAIM_RUNS,
    "finish",
];

/// The batched lease claim's row, of [`LEASE_BATCH`] runs.
const CLAIM_RUNS: &str = "claim_runs (32 runs)";

/// What each of [`OPERATIONS`] sends on each dialect, as the store-diesel
/// budget tests hold it: `cargo xtask bench --smoke` (run by CI) fails on any
/// other count, so the table the bench prints cannot drift from the budgets.
pub fn expected(dialect: Dialect) -> [usize; 12] {
    match dialect {
        Dialect::Postgres => [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        Dialect::Mysql => [1, 5, 2, 2, 2, 1, 1, 1, 1, 6, 6, 1],
        Dialect::Sqlite => [1, 4, 4, 4, 4, 4, 1, 1, 1, 4, 4, 1],
    }
}

/// The operations of `counted` whose count is not [`expected`], one line
/// each.
pub fn unexpected(dialect: Dialect, counted: &[Counted]) -> Vec<String> {
    OPERATIONS
        .iter()
        .zip(expected(dialect))
        .filter_map(|(operation, want)| {
            let got = counted
                .iter()
                .find(|c| c.operation == *operation)
                .map_or(0, |c| c.statements.len());
            (got != want).then(|| {
                format!(
                    "{} {operation}: {got} statements, the budget is {want}",
                    dialect.name()
                )
            })
        })
        .collect()
}

/// Runs each of [`OPERATIONS`] once on `url` and counts what it sent.
pub async fn measure(url: &str) -> Result<Vec<Counted>> {
    const F: &str = "bench.work";
    let log = StatementLog::new();
    let config = StoreConfig::default()
        .pool_size(1)
        .statement_log(Arc::clone(&log));
    let store = DieselStore::open(url, config)
        .await
        .context("cannot open the store")?;
    // The connection is set up (pragmas, session settings) before counting.
    let _ = store.get_run(RunId::generate()).await;

    let mut counted = Vec::new();
    let mut count = |operation: &'static str, statements: Vec<String>| {
        counted.push(Counted {
            operation,
            statements,
        });
    };
    let (run, sql) = log
        .capture(store.create_run(NewRun::new("bench.count", json!({}))))
        .await;
    let run = run?.record.id;
    count("create_run", sql);
    let (step, sql) = log
        .capture(store.insert_step(NewStep::new(run, "a", F, json!({}))))
        .await;
    let step = step?.record.id;
    count("insert_step", sql);
    let flaky = NewStep::new(run, "b", F, json!({})).with_retry(RetryPolicy::with_retries(1));
    let flaky = store.insert_step(flaky).await?.record.id;
    for name in ["c", "d"] {
        store
            .insert_step(NewStep::new(run, name, F, json!({})))
            .await?;
    }
    let (won, sql) = log.capture(store.claim_step(run, "a", F)).await;
    let Some(won) = won? else {
        anyhow::bail!("the first claim of a pending step must win");
    };
    count("claim (win)", sql);
    let (lost, sql) = log.capture(store.claim_step(run, "a", F)).await;
    anyhow::ensure!(lost?.is_none(), "a claim of a running step must lose");
    count("claim (lose)", sql);
    store.claim_step(run, "b", F).await?;
    store
        .transition_step(flaky, StepTransition::Failed(json!("boom")))
        .await?;
    let (retry, sql) = log.capture(store.claim_step(run, "b", F)).await;
    anyhow::ensure!(
        retry?.is_some_and(|s| s.attempt == 2),
        "a failed step's claim must start attempt 2"
    );
    count("claim (retry win)", sql);
    let (done, sql) = log
        .capture(store.transition_claimed(won.claim(), StepTransition::Succeeded(json!(1))))
        .await;
    done?;
    count("transition", sql);
    let (got, sql) = log.capture(store.get_step(step)).await;
    got?;
    count("get_step", sql);
    let (all, sql) = log.capture(store.list_steps(run)).await;
    anyhow::ensure!(all?.len() == 4, "list_steps must return the run's 4 steps");
    count("list_steps", sql);
    let (wrote, sql) = log
        .capture(store.write_state(run, "cart.total", &json!({"cents": 1999})))
        .await;
    wrote?;
    count("write_state", sql);
    // Runs enough for a full batch after the one `claim_run` takes (the
    // bench database may hold more: the oldest are taken, same statements).
    for _ in 0..=LEASE_BATCH {
        store
            .create_run(NewRun::new("bench.count", json!({})))
            .await?;
    }
    let (lease, sql) = log.capture(store.claim_run("bench-count", LEASE)).await;
    let Some(lease) = lease? else {
        anyhow::bail!("a claim_run with runnable runs must lease one");
    };
    count("claim_run", sql);
    let (batch, sql) = log
        .capture(store.claim_runs("bench-count", LEASE_BATCH, LEASE))
        .await;
    anyhow::ensure!(
        batch?.len() == LEASE_BATCH as usize,
        "claim_runs must lease a full batch of {LEASE_BATCH}"
    );
    count(CLAIM_RUNS, sql);
    let (finished, sql) = log
        .capture(store.finish(lease.run.id, lease.token, RunOutcome::Completed))
        .await;
    finished?;
    count("finish", sql);
    debug_assert!(counted.iter().map(|c| c.operation).eq(OPERATIONS));
    Ok(counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batched_claim_row_names_its_batch() {
        assert!(CLAIM_RUNS.contains(&format!("({LEASE_BATCH} runs)")));
    }

    fn counted(counts: [usize; 12]) -> Vec<Counted> {
        OPERATIONS
            .iter()
            .zip(counts)
            .map(|(operation, n)| Counted {
                operation,
                statements: vec!["SELECT 1".to_owned(); n],
            })
            .collect()
    }

    #[test]
    fn a_count_off_its_budget_is_named() {
        for dialect in Dialect::ALL {
            assert!(unexpected(dialect, &counted(expected(dialect))).is_empty());
        }
        let mut counts = expected(Dialect::Postgres);
        counts[2] = 2;
        assert_eq!(
            unexpected(Dialect::Postgres, &counted(counts)),
            ["postgres claim (win): 2 statements, the budget is 1"]
        );
        let missing: Vec<Counted> = counted(expected(Dialect::Mysql))
            .into_iter()
            .filter(|c| c.operation != "transition")
            .collect();
        assert_eq!(
            unexpected(Dialect::Mysql, &missing),
            ["mysql transition: 0 statements, the budget is 1"]
        );
    }
}
