//! [`Verdict`]: how a scenario that ran steps is judged, read with plain
//! SQL from its database afterwards (never from what the workers say).
//!
//! - **lost**: steps not succeeded at the end (whatever their status);
//! - **doubled**: executions of a `(step, attempt)` after its first (the
//!   ledger's key refused them: `fault_ledger_refused`), plus any
//!   `(step, attempt)` holding more than one ledger row (none while the
//!   key is there), plus succeeded attempts of a step beyond its first
//!   (its history holds one succeeded attempt at most);
//! - **stuck**: steps still pending or running after the recovery pass;
//! - **unexecuted**: succeeded steps with no ledger row for the attempt that
//!   succeeded (a completion that no execution wrote: the ledger or the
//!   store is lying);
//! - **misattributed**: succeeded steps whose result does not name the
//!   worker whose ledger row holds the succeeded attempt (a late write of
//!   another attempt's holder overwrote it).

use anyhow::Result;
use diesel::sql_types::{Nullable, Text};
use diesel_async::RunQueryDsl as _;
use flowstate_store_diesel::Dialect;

use crate::load::CrewReport;
use crate::recovery::Recovery;
use crate::report::Scenario;
use crate::sql::{RawConn, each_conn};

/// A succeeded step's result (as JSON text) and its ledger's worker.
#[derive(diesel::QueryableByName)]
struct Attributed {
    #[diesel(sql_type = Nullable<Text>)]
    result: Option<String>,
    #[diesel(sql_type = Text)]
    worker: String,
}

/// One ledger row of a step.
#[derive(diesel::QueryableByName)]
struct Execution {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    attempt: i64,
    #[diesel(sql_type = Text)]
    worker: String,
}

/// What the database says about a scenario's steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Steps in the database.
    pub steps: u64,
    /// Steps not succeeded.
    pub lost: u64,
    /// Executions of an attempt after its first.
    pub doubled: u64,
    /// Steps pending or running.
    pub stuck: u64,
    /// Succeeded steps whose succeeded attempt has no ledger row.
    pub unexecuted: u64,
    /// Succeeded steps whose result names another worker than the one
    /// whose ledger row holds the succeeded attempt.
    pub misattributed: u64,
    /// Succeeded attempts beyond one per step, in the history (counted in
    /// `doubled` too).
    pub extra_successes: u64,
    /// Ledger rows: executions of an attempt, first ones.
    pub executions: u64,
}

impl Verdict {
    /// Reads the verdict from the database at `url` (over a connection of
    /// its own, so a store that is broken cannot hide anything).
    pub async fn read(url: &str) -> Result<Self> {
        let mut conn = RawConn::connect(url).await?;
        let steps = conn
            .count("SELECT COUNT(*) AS n FROM flowstate_steps")
            .await?;
        let lost = conn
            .count("SELECT COUNT(*) AS n FROM flowstate_steps WHERE status <> 'succeeded'")
            .await?;
        let stuck = conn
            .count(
                "SELECT COUNT(*) AS n FROM flowstate_steps \
                 WHERE status IN ('pending', 'running')",
            )
            .await?;
        let refused = conn
            .count("SELECT COUNT(*) AS n FROM fault_ledger_refused")
            .await?;
        let repeated = conn
            .count(
                "SELECT COUNT(*) AS n FROM (SELECT step_id, attempt FROM fault_ledger \
                 GROUP BY step_id, attempt HAVING COUNT(*) > 1) repeated",
            )
            .await?;
        let unexecuted = conn
            .count(
                "SELECT COUNT(*) AS n FROM flowstate_steps s WHERE s.status = 'succeeded' \
                 AND NOT EXISTS (SELECT 1 FROM fault_ledger l \
                 WHERE l.step_id = s.id AND l.attempt = s.current_attempt)",
            )
            .await?;
        let executions = conn.count("SELECT COUNT(*) AS n FROM fault_ledger").await?;
        let successes = conn
            .count("SELECT COUNT(*) AS n FROM flowstate_step_history WHERE status = 'succeeded'")
            .await?;
        let succeeded_steps = conn
            .count(
                "SELECT COUNT(DISTINCT step_id) AS n FROM flowstate_step_history \
                 WHERE status = 'succeeded'",
            )
            .await?;
        let extra_successes = successes.saturating_sub(succeeded_steps);
        let misattributed = Self::misattributed(&mut conn).await?;
        Ok(Self {
            steps,
            lost,
            doubled: refused + repeated + extra_successes,
            stuck,
            unexecuted,
            misattributed,
            extra_successes,
            executions,
        })
    }

    /// Succeeded steps whose result's `worker` is not the ledger's worker
    /// of the succeeded attempt (steps without a ledger row are
    /// `unexecuted`, not counted here).
    async fn misattributed(conn: &mut RawConn) -> Result<u64> {
        let result = match conn.dialect() {
            Dialect::Postgres => "s.result::text",
            Dialect::Mysql => "CAST(s.result AS CHAR)",
            Dialect::Sqlite => "s.result",
        };
        let query = diesel::sql_query(format!(
            "SELECT {result} AS result, l.worker AS worker FROM flowstate_steps s \
             JOIN fault_ledger l ON l.step_id = s.id AND l.attempt = s.current_attempt \
             WHERE s.status = 'succeeded'"
        ));
        let rows: Vec<Attributed> = each_conn!(conn, |c| query.load(c).await)?;
        let wrong = rows
            .iter()
            .filter(|row| {
                let named = row
                    .result
                    .as_deref()
                    .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
                    .and_then(|value| value.get("worker")?.as_str().map(str::to_owned));
                named.as_deref() != Some(row.worker.as_str())
            })
            .count();
        Ok(wrong as u64)
    }

    /// The ledger of one step: `(attempt, worker)` of each execution, by
    /// attempt.
    pub async fn ledger_of(url: &str, step: flowstate_core::StepId) -> Result<Vec<(i64, String)>> {
        let mut conn = RawConn::connect(url).await?;
        let placeholder = match conn.dialect() {
            Dialect::Postgres => "$1",
            Dialect::Mysql | Dialect::Sqlite => "?",
        };
        let query = diesel::sql_query(format!(
            "SELECT attempt, worker FROM fault_ledger WHERE step_id = {placeholder} \
             ORDER BY attempt"
        ))
        .bind::<Text, _>(step.to_string());
        let rows: Vec<Execution> = each_conn!(&mut conn, |c| query.load(c).await)?;
        Ok(rows
            .into_iter()
            .map(|row| (row.attempt, row.worker))
            .collect())
    }

    /// The steps in each status, for a report's note (`"succeeded 398,
    /// running 2"`).
    pub async fn statuses(url: &str) -> Result<String> {
        let mut conn = RawConn::connect(url).await?;
        let mut parts = Vec::new();
        for status in ["succeeded", "pending", "running", "failed", "scheduled"] {
            let n = conn
                .count(&format!(
                    "SELECT COUNT(*) AS n FROM flowstate_steps WHERE status = '{status}'"
                ))
                .await?;
            if n > 0 {
                parts.push(format!("{status} {n}"));
            }
        }
        Ok(parts.join(", "))
    }

    /// Reads the verdict of a step scenario at `url` and writes it into
    /// `scenario`: lost, doubled and stuck from the database; as wrong, the
    /// succeeded steps no execution wrote, and the in-process crew's errors
    /// that an outage must not cause (backend errors marked not retryable,
    /// calls that hung); its time to heal; the statuses, the crew's and the
    /// recovery's accounts in the note.
    pub async fn judge(
        scenario: &mut Scenario,
        url: &str,
        crew: Option<&CrewReport>,
        recovery: &Recovery,
    ) -> Result<Self> {
        let verdict = Self::read(url).await?;
        scenario.lost = verdict.lost;
        scenario.doubled = verdict.doubled;
        scenario.stuck = verdict.stuck;
        scenario.wrong = verdict.unexecuted + verdict.misattributed;
        if let Some(crew) = crew {
            scenario.wrong += crew.total.not_retryable + crew.total.hung + crew.total.claims_lost;
            scenario.heal = crew.heal();
        }
        scenario.note(format!(
            "{} steps: {}",
            verdict.steps,
            Self::statuses(url).await?
        ));
        if verdict.unexecuted > 0 {
            scenario.note(format!(
                "{} succeeded without a ledger row",
                verdict.unexecuted
            ));
        }
        if verdict.misattributed > 0 {
            scenario.note(format!(
                "{} succeeded with another worker's result than the ledger's",
                verdict.misattributed
            ));
        }
        if verdict.extra_successes > 0 {
            scenario.note(format!(
                "{} attempts succeeded beyond one per step",
                verdict.extra_successes
            ));
        }
        if verdict.executions > verdict.steps {
            scenario.note(format!(
                "{} executions of {} steps (attempts taken back after a claim ran out ran again)",
                verdict.executions, verdict.steps
            ));
        }
        if let Some(crew) = crew {
            scenario.note(crew.summary());
        }
        scenario.note(recovery.summary());
        Ok(verdict)
    }
}
