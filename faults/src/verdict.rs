//! [`Verdict`]: how a scenario that ran steps is judged, read with plain
//! SQL from its database afterwards (never from what the workers say).
//!
//! - **lost**: steps not succeeded at the end (whatever their status);
//! - **doubled**: executions of a `(step, attempt)` after its first (the
//!   ledger's key refused them: `fault_ledger_refused`), plus any
//!   `(step, attempt)` holding more than one ledger row (none while the
//!   key is there);
//! - **stuck**: steps still pending or running after the recovery pass;
//! - **unexecuted**: succeeded steps with no ledger row for the attempt that
//!   succeeded (a completion that no execution wrote: the ledger or the
//!   store is lying).

use anyhow::Result;

use crate::load::CrewReport;
use crate::recovery::Recovery;
use crate::report::Scenario;
use crate::sql::RawConn;

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
        Ok(Self {
            steps,
            lost,
            doubled: refused + repeated,
            stuck,
            unexecuted,
            executions,
        })
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
        scenario.wrong = verdict.unexecuted;
        if let Some(crew) = crew {
            scenario.wrong += crew.total.not_retryable + crew.total.hung;
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
        if let Some(crew) = crew {
            scenario.note(crew.summary());
        }
        scenario.note(recovery.summary());
        Ok(verdict)
    }
}
